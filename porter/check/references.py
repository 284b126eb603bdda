"""The reference runtimes goldens come from: LiteRT for .tflite, onnxruntime for .onnx, one thread.

- LiteRT (ai-edge-litert) mode `builtin`: OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
  TFLite's own kernels, the arithmetic porter reproduces; mode `xnnpack`: the default resolver,
  which applies the XNNPACK delegate (CPU-dependent, reported, not reproduced).
- onnxruntime, mode `ort`: CPUExecutionProvider, intra- and inter-op threads 1, sequential
  execution, ORT_ENABLE_ALL (its default optimisation level, under which porter's kernels were
  read from it).

An encoder's inputs are found from its signature by role, not by name alone: the token ids are
the integer input that indexes the largest constant table (the word embeddings' gather, through
any Reshape / Cast in between), token-type inputs index a smaller one and are fed the windows'
token types (zeros for windows without a segment B), and the attention mask is the remaining
integer input. Its output is the only one, or the one named
"logits"; an output without a sequence axis (a pooled / sequence-classification head) gives one
row per window.

golden/make_litert_goldens.py and make_ort_goldens.py run the repository's fixtures through
these same classes, so porter's goldens and a user's come from one implementation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

from porter.errors import PorterError
from porter.recover.canonical.window import position_table_rows

NUM_THREADS = 1
# mode -> (what the manifest says, the OpResolverType member)
LITERT_MODES = {
    "xnnpack": ("OpResolverType.AUTO (default; XNNPACK delegate applied)", "AUTO"),
    "builtin": ("OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (TFLite builtin kernels)",
                "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
}
ORT_MODE = "ort"
ORT_DTYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32,
              "tensor(bool)": np.bool_, "tensor(float16)": np.float16}  # a float16 output is widened exactly
# op type -> (position of the indices, position of the table) of each embedding lookup it does
# (onnxruntime's EmbedLayerNormalization looks up the ids in the word table and the segment ids
# in the segment table itself)
LOOKUPS = {"GATHER": ((1, 0),), "EMBEDDING_LOOKUP": ((0, 1),), "Gather": ((1, 0),),
           "com.microsoft.EmbedLayerNormalization": ((0, 2), (1, 4))}
# Ops whose output carries the ids on to the lookup: reshapes and casts (first input), the
# branches of a select, and a constant offset (Keras wraps negative ids: where(ids < 0, ids + vocab, ids)).
PASS_THROUGH = {"RESHAPE", "CAST", "SQUEEZE", "EXPAND_DIMS", "Reshape", "Cast", "Squeeze", "Unsqueeze",
                "Flatten"}
SELECTS = {"SELECT", "SELECT_V2", "Where"}  # (condition, then, else)
OFFSETS = {"ADD", "SUB", "Add", "Sub"}
TABLE_PRODUCERS = {"DEQUANTIZE", "DequantizeLinear"}  # a quantised table dequantised before the gather
LOGITS_NAME = "logits"


@dataclass(frozen=True)
class EncoderSignature:
    """The encoder's inputs by role, and the sizes windows need."""

    ids: str
    mask: str | None
    token_types: tuple[str, ...]
    seq: int
    vocab: int  # rows of the word-embedding table: ids past it are not the model's
    type_vocab: int = 1  # rows of the token-type table (1: no token-type input)


def default_mode(model: Path) -> str:
    return "builtin" if Path(model).suffix == ".tflite" else ORT_MODE


def require_mode(model: Path, mode: str) -> None:
    modes = tuple(LITERT_MODES) if Path(model).suffix == ".tflite" else (ORT_MODE,)
    if mode not in modes:
        raise PorterError(f"--mode {mode}: {Path(model).name} runs in {' or '.join(modes)}")


# --- the signature ------------------------------------------------------------------------------


DYNAMIC_WINDOW = -1  # a signature's seq, or a reference's rows, set by the windows it is run on


def encoder_signature(graph) -> EncoderSignature:
    """Roles of a porter.frontends Graph's inputs (see the module docstring)."""
    tables = {name: _lookup_rows(graph, t) for name, t in graph.inputs.items()}
    for name, t in graph.inputs.items():
        if not graph.tensor(t).dtype.startswith(("int", "uint")):
            raise PorterError(f"{graph.path}: input '{name}' is {graph.tensor(t).dtype}; an encoder "
                              "takes integer token ids and an attention mask")
    looked_up = {name: rows for name, rows in tables.items() if rows}
    if not looked_up:
        raise PorterError(f"{graph.path}: no input indexes a constant embedding table, so none "
                          f"of {sorted(graph.inputs)} is the token ids")
    ids = max(looked_up, key=looked_up.get)
    others = [name for name in graph.inputs if name not in looked_up]
    if len(others) > 1:
        masks = [name for name in others if "mask" in name.lower()]
        if len(masks) != 1:
            raise PorterError(f"{graph.path}: inputs {others} index no embedding table; expected "
                              "one of them, the attention mask")
        others = masks
    seq = graph.tensor(graph.inputs[ids]).shape[-1]
    if seq <= 0:  # dynamic axes: the position table's rows, else the length of each window run
        seq = position_table_rows(graph) or DYNAMIC_WINDOW
    types = tuple(name for name in looked_up if name != ids)
    return EncoderSignature(ids, others[0] if others else None, types, seq, looked_up[ids],
                            min((looked_up[name] for name in types), default=1))


def _lookup_rows(graph, tensor: int) -> int:
    """Rows of the largest constant table this input indexes, through the ops that carry ids
    (PASS_THROUGH, SELECTS, OFFSETS); 0 when it indexes none."""
    rows, frontier, seen = 0, [tensor], set()
    while frontier:
        t = frontier.pop()
        for op in graph.users(t):
            tables = [table for index, table in LOOKUPS.get(op.type, ()) if len(op.inputs) > table
                      and op.inputs[index] == t]
            if tables:
                rows = max(rows, *(_table_rows(graph, op.inputs[table]) for table in tables))
            elif _carries_ids(graph, op, t) and op.outputs[0] not in seen:
                seen.add(op.outputs[0])
                frontier.append(op.outputs[0])
    return rows


def _carries_ids(graph, op, t: int) -> bool:
    if op.type in PASS_THROUGH:
        return op.inputs[0] == t
    if op.type in SELECTS:
        return t in op.inputs[1:3]
    if op.type in OFFSETS:
        return any(i != t and i >= 0 and graph.tensor(i).is_const for i in op.inputs)
    return False


def _table_rows(graph, t: int) -> int:
    producer = graph.producer(t)
    if producer is not None and producer.type in TABLE_PRODUCERS:
        t = producer.inputs[0]
    table = graph.tensor(t)
    return table.shape[0] if table.is_const and len(table.shape) == 2 else 0


def _output_name(names: list[str], model: Path) -> str:
    if len(names) == 1:
        return names[0]
    if LOGITS_NAME in names:
        return LOGITS_NAME
    raise PorterError(f"{Path(model).name} has outputs {names} and none is named '{LOGITS_NAME}'; "
                      "porter compares one logits output")


def _window_rows(shape, seq: int, name: str, model: Path) -> int:
    """Logit rows per window: seq for a token head [1, seq, width], 1 for a pooled one [1, width]."""
    dims = list(shape)
    if len(dims) == 3 and not (isinstance(dims[1], int) and dims[1] > 0):
        return DYNAMIC_WINDOW  # symbolic: as many rows as the window run has tokens
    if len(dims) == 3 and dims[1] == seq:
        return seq
    if len(dims) == 2:
        return 1
    raise PorterError(f"{Path(model).name}: output '{name}' has shape {dims}; expected [1, {seq}, labels] "
                      "or [1, labels]")


def _feeds(signature: EncoderSignature, ids: np.ndarray, mask: np.ndarray,
           types: np.ndarray | None = None) -> dict[str, np.ndarray]:
    feeds = {signature.ids: ids[None]}
    if signature.mask is not None:
        feeds[signature.mask] = mask[None]
    for name in signature.token_types:
        feeds[name] = (np.zeros_like(ids) if types is None else types)[None]
    return feeds


# --- the runtimes -------------------------------------------------------------------------------


class LiteRTEncoder:
    """The model's signature runner in ai-edge-litert, one thread, in one of LITERT_MODES."""

    def __init__(self, model: Path, mode: str, signature: EncoderSignature):
        try:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType
        except ImportError:
            raise PorterError("goldens of .tflite models need the ai-edge-litert package "
                              "(pip install ai-edge-litert)") from None
        self.mode, self.signature, self.model = mode, signature, Path(model)
        self.resolver_doc, member = LITERT_MODES[mode]
        interpreter = Interpreter(model_path=str(model), num_threads=NUM_THREADS,
                                  experimental_op_resolver_type=getattr(OpResolverType, member))
        signatures = interpreter.get_signature_list()
        if len(signatures) != 1:
            raise PorterError(f"{self.model.name}: expected one signature, got {list(signatures)}")
        self.signature_key = next(iter(signatures))
        self.runner = interpreter.get_signature_runner(self.signature_key)
        self.inputs, outputs = self.runner.get_input_details(), self.runner.get_output_details()
        self.output = _output_name(list(outputs), model)
        self.outputs = {self.output: outputs[self.output]}
        self.rows = _window_rows(outputs[self.output]["shape"], signature.seq, self.output, model)

    def run(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray | None = None) -> np.ndarray:
        feeds = {name: value.astype(self.inputs[name]["dtype"])
                 for name, value in _feeds(self.signature, ids, mask, types).items()}
        return dequantized_output(self.runner(**feeds)[self.output], self.outputs[self.output])[0]

    def facts(self) -> dict:
        """The manifest's record of the runtime, its kernels and the signature it ran."""
        def described(details: dict) -> dict:
            return {k: [np.dtype(v["dtype"]).name, [int(d) for d in v["shape"]]] for k, v in details.items()}

        return {"runtime": "ai-edge-litert", "runtime_version": version("ai-edge-litert"),
                "api": "Interpreter(model_path, num_threads=1, experimental_op_resolver_type=...)"
                       ".get_signature_runner(signature_key)",
                "op_resolver": self.resolver_doc, "num_threads": NUM_THREADS,
                "signature_key": self.signature_key, "inputs": described(self.inputs),
                "outputs": described(self.outputs)}


def integer_output(reference) -> tuple[str, float, int] | None:
    """A full-integer graph's output type, scale and zero point (None for a float output)."""
    if not isinstance(reference, LiteRTEncoder):
        return None  # only LiteRT's signature runner reports an output's quantisation
    details = reference.outputs[reference.output]
    if np.issubdtype(np.dtype(details["dtype"]), np.floating):
        return None
    scale, zero_point = details["quantization"]
    return np.dtype(details["dtype"]).name, float(scale), int(zero_point)


def quantized_logits(logits: np.ndarray, quantization: tuple[str, float, int]) -> np.ndarray:
    """The integer output values behind dequantised logits: (q - zero_point) is an integer of at
    most 16 bits, so dividing by the scale and rounding recovers it; checked by dequantising back."""
    dtype, scale, zero_point = quantization
    q = (np.rint(logits.astype(np.float64) / scale) + zero_point).astype(dtype)
    back = dequantized_output(q, {"quantization": (scale, zero_point)})
    if not np.array_equal(back.view(np.uint32), np.asarray(logits, np.float32).view(np.uint32)):
        raise PorterError("internal: dequantised logits do not come back from their integer values")
    return q


def dequantized_output(out: np.ndarray, detail: dict) -> np.ndarray:
    """A full-integer graph's int8 / uint8 output as the real values it stands for, as porter's
    runner and the zoo's goldens (graphs/zoo/make_goldens.py) both report it: (q - zero_point) in
    float32, times the scale. (That is LiteRT's scalar DEQUANTIZE; its vector loop computes
    q * s - z * s and rounds differently, so this is a reporting convention, not an op's bits.)"""
    if np.issubdtype(out.dtype, np.floating):
        return np.asarray(out, np.float32)
    scale, zero_point = detail["quantization"]
    return ((out.astype(np.int32) - zero_point).astype(np.float32) * np.float32(scale)).astype(np.float32)


def ort_session(model: Path | bytes):
    """onnxruntime's CPU session as every porter golden of an ONNX model is made."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise PorterError("goldens of .onnx models need the onnxruntime package "
                          "(pip install onnxruntime)") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = NUM_THREADS
    options.inter_op_num_threads = NUM_THREADS
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    source = model if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own exception types carry the reason in the message
        name = "the model" if isinstance(model, bytes) else Path(model).name
        raise PorterError(f"onnxruntime cannot load {name}: {str(e).splitlines()[0]}") from None


def ort_facts() -> dict:
    import onnxruntime as ort

    return {"runtime": "onnxruntime", "runtime_version": ort.__version__,
            "api": "InferenceSession(path, sess_options, providers=['CPUExecutionProvider'])",
            "execution_provider": "CPUExecutionProvider", "graph_optimization_level": "ORT_ENABLE_ALL",
            "execution_mode": "ORT_SEQUENTIAL", "num_threads": NUM_THREADS,
            "intra_op_num_threads": NUM_THREADS, "inter_op_num_threads": NUM_THREADS}


class OrtEncoder:
    def __init__(self, model: Path, signature: EncoderSignature):
        self.mode, self.signature, self.model = ORT_MODE, signature, Path(model)
        self.session = ort_session(model)
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = {o.name: o for o in self.session.get_outputs()}
        self.output = _output_name(list(outputs), model)
        self.outputs = {self.output: outputs[self.output]}
        self.rows = _window_rows(outputs[self.output].shape, signature.seq, self.output, model)

    def run(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray | None = None) -> np.ndarray:
        feeds = {name: value.astype(ORT_DTYPES[self.inputs[name].type])
                 for name, value in _feeds(self.signature, ids, mask, types).items()}
        (out,) = self.session.run([self.output], feeds)
        return np.asarray(out, np.float32)[0]

    def facts(self) -> dict:
        def described(specs: dict) -> dict:
            return {k: [np.dtype(ORT_DTYPES[v.type]).name, list(v.shape)] for k, v in specs.items()}

        return {**ort_facts(), "inputs": described(self.inputs), "outputs": described(self.outputs)}


def encoder_reference(model: Path, graph, mode: str | None = None) -> LiteRTEncoder | OrtEncoder:
    """The runtime for `model` (its porter.frontends Graph `graph`) in `mode` (default: builtin
    for .tflite, ort for .onnx)."""
    mode = mode or default_mode(model)
    require_mode(model, mode)
    signature = encoder_signature(graph)
    if Path(model).suffix == ".tflite":
        return LiteRTEncoder(model, mode, signature)
    return OrtEncoder(model, signature)


def run_windows(reference, ids: np.ndarray, mask: np.ndarray,
                types: np.ndarray | None = None) -> tuple[np.ndarray, list[float]]:
    """Every window, one call each: logits [N, rows, width] float32 and seconds per call."""
    logits, seconds = [], []
    types = np.zeros_like(ids) if types is None else types
    for window_ids, window_mask, window_types in zip(ids, mask, types):
        started = time.perf_counter()
        out = reference.run(window_ids, window_mask, window_types)
        seconds.append(time.perf_counter() - started)
        logits.append(out.reshape(len(window_ids) if reference.rows == DYNAMIC_WINDOW else reference.rows, -1))
    return np.stack(logits), seconds
