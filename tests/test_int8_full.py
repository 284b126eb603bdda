"""Full-integer int8 TFLite: porter's numpy reference of LiteRT's integer kernels
(porter/reference/litert/int8.py, run op by op by full_integer.py) against LiteRT itself.

- the zoo's full-integer members reproduce their builtin goldens bit for bit, and every op of
  them matches LiteRT's preserved tensor on other windows;
- each kernel matches LiteRT's on single-op models with seeded scales, zero points and inputs
  other than the zoo's (per-channel and per-tensor FULLY_CONNECTED, BATCH_MATMUL, ADD, SUB,
  MUL, SQUARED_DIFFERENCE, MEAN over power-of-two and other counts, SOFTMAX, QUANTIZE);
- every one-input kernel (RSQRT, GELU, LOGISTIC, TANH, int8 requantize) on all 256 inputs;
- deliberate mutations of the arithmetic (a rounding direction, the multiplier's form) fail;
- porter run reproduces each golden through the recovered integer program (porter.ir.integer),
  and bad input to that recovery is one line naming the op and tensor.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest

from fixtures import run_porter
from porter.frontends import load_graph
from porter.reference.litert import full_integer as FI
from porter.reference.litert import int8 as K

ROOT = Path(__file__).resolve().parents[1]
# ai-edge-quantizer's static_wi8_ai8 and TFLiteConverter's full-integer files
GOLDENS = sorted(glob.glob(str(ROOT / "golden" / "zoo" / "*.aeq-si8.tflite.builtin.npz"))
                 + glob.glob(str(ROOT / "golden" / "zoo" / "*.tf-si8.tflite.builtin.npz")))

litert = pytest.importorskip("ai_edge_litert.interpreter")
S = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")


def _model_of(golden: str) -> Path:
    return ROOT / "graphs" / "zoo" / Path(golden).name.removesuffix(".builtin.npz")


def _id(golden: str) -> str:
    return ".".join(Path(golden).name.split(".")[:2])


def _feeds(golden: str, z, w: int) -> dict:
    """Window w of a golden, by the signature's input names (the manifest's roles)."""
    roles = json.loads(Path(golden).with_suffix(".json").read_text())["input_roles"]
    arrays = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "token_type_ids"}
    return {name: z[arrays[role]][w:w + 1] for name, role in roles.items()}


# --- the zoo's members -------------------------------------------------------------------------

@pytest.mark.parametrize("golden", GOLDENS, ids=_id)
def test_reference_reproduces_the_builtin_golden(golden):
    g = load_graph(_model_of(golden))
    z = np.load(golden)
    (name, out), = g.outputs.items()
    q = g.tensor(out).quant
    for w in range(z["ids"].shape[0]):
        ours = K.dequantize_output(FI.run(g, _feeds(golden, z, w))[name], (float(q.scale[0]), int(q.zero_point[0])))
        want = z["logits"][w]
        assert np.array_equal(ours.reshape(want.shape).view(np.uint32), want.view(np.uint32)), w


def _litert(model, preserve=False):
    it = litert.Interpreter(model_path=str(model), num_threads=1, experimental_preserve_all_tensors=preserve,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    return it


@pytest.mark.parametrize("golden", GOLDENS, ids=_id)
def test_every_op_matches_litert_on_a_random_window(golden):
    """Each op's kernel on LiteRT's own inputs to it gives LiteRT's output, on a window of random
    ids and a random live length (not a golden's)."""
    path = _model_of(golden)
    g = load_graph(path)
    it = _litert(path, preserve=True)
    runner = it.get_signature_runner(next(iter(it.get_signature_list())))
    rng = np.random.default_rng(29)
    z = np.load(golden)
    feeds = _feeds(golden, z, 0)
    roles = json.loads(Path(golden).with_suffix(".json").read_text())["input_roles"]
    seq = z["ids"].shape[1]
    live = int(rng.integers(2, seq))
    vocab = int(z["ids"].max()) + 1  # ids the golden itself uses are in the table
    for name, role in roles.items():
        feeds[name] = {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int32),
                       "attention_mask": (np.arange(seq) < live).astype(np.int32)[None]}.get(role, feeds[name])
    runner(**feeds)
    for op in g.ops:
        ins = [it.get_tensor(t) if t >= 0 else None for t in op.inputs]
        ref = it.get_tensor(op.outputs[0])
        assert np.array_equal(FI.run_op(g, op, ins), ref), f"op {op.index} {op.type}"


@pytest.mark.parametrize("golden", GOLDENS, ids=_id)
def test_every_integer_step_matches_litert_on_a_random_window(golden):
    """The recovered program's steps (porter.ir.integer, run by the numpy executor) against the
    tensors LiteRT preserves on a window of random ids and a random live length: every step that
    writes a tensor of the file writes LiteRT's values (the index arithmetic of RoBERTa's
    positions, its buffered token types, every int8 kernel)."""
    from porter.codegen.compile import recover
    from porter.reference import execute

    path = _model_of(golden)
    program = recover(path)
    it = _litert(path, preserve=True)
    runner = it.get_signature_runner(next(iter(it.get_signature_list())))
    rng = np.random.default_rng(31)
    seq = program.seq
    live = int(rng.integers(2, seq))
    ids = rng.integers(0, program.vocab, seq)
    mask = (np.arange(seq) < live).astype(np.int32)
    types = (np.arange(seq) >= live // 2).astype(np.int32) if program.types_input else None
    roles = json.loads(Path(golden).with_suffix(".json").read_text())["input_roles"]
    runner(**{name: {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}[role][None].astype(np.int32)
              for name, role in roles.items()})
    trace: dict = {}
    execute.run(program, ids, mask, trace=trace, types=types)
    checked = 0
    for step in program.steps:
        for name in step.outputs:
            if name.startswith("t") and name[1:].isdigit():
                want = it.get_tensor(int(name[1:]))
                assert np.array_equal(trace[name].reshape(want.shape), want), f"{step.name} {step.op.value}"
                checked += 1
    assert checked == sum(len(s.outputs) for s in program.steps if s.outputs[0] != "output")


@pytest.mark.parametrize("golden", [pytest.param(g, marks=pytest.mark.slow) if i else g
                                    for i, g in enumerate(GOLDENS)], ids=_id)
def test_porter_run_reproduces_the_golden(golden):
    """porter run: the recovered integer program (porter.ir.integer) in the numpy executor."""
    result = run_porter("run", _model_of(golden), "--golden", golden)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].endswith("max |dlogit| 0, mean |dlogit| 0"), result.stdout


def test_porter_golden_writes_the_int8_output_beside_the_dequantised_logits(tmp_path):
    model = ROOT / "graphs" / "zoo" / "bert-tok.aeq-si8.tflite"
    result = run_porter("golden", model, "-o", tmp_path / "g", "--random", "2")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "g.json").read_text())
    q = load_graph(model).tensor(load_graph(model).outputs["logits"]).quant
    assert manifest["output_quantization"]["scale"] == float(q.scale[0])
    assert manifest["output_quantization"]["zero_point"] == int(q.zero_point[0])
    z = np.load(tmp_path / "g.npz")
    assert z["logits_quantized"].dtype == np.int8
    back = K.dequantize_output(z["logits_quantized"], (float(q.scale[0]), int(q.zero_point[0])))
    assert np.array_equal(back.view(np.uint32), z["logits"].view(np.uint32))
    result = run_porter("run", model, "--golden", tmp_path / "g.npz")
    assert result.returncode == 0 and "reported dequantised (scale" in result.stdout, result.stdout


@pytest.mark.parametrize("golden", GOLDENS[:1], ids=_id)
def test_inspect_reports_every_layers_activation_scales(golden):
    """Each static-int8 layer names its input and output scale and zero point, as the file has them."""
    path = _model_of(golden)
    g = load_graph(path)
    result = run_porter("inspect", "--json", path)
    assert result.returncode == 0, result.stderr
    layers = [la for la in json.loads(result.stdout)["schemes"]["layers"] if la["activations"] == "static int8"]
    assert layers
    for layer in layers:
        op = g.ops[layer["op"]]
        x, out = g.tensor(op.inputs[0]).quant, g.tensor(op.outputs[0]).quant
        assert layer["activation_quant"] == (f"in scale {float(x.scale[0]):.3g} zero point {int(x.zero_point[0])}, "
                                             f"out scale {float(out.scale[0]):.3g} zero point {int(out.zero_point[0])}")


def _padding_changes_live_rows(golden: str) -> bool:
    """Whether other ids under a window's padding change its live rows' output (LiteRT's, which
    the reference reproduces)."""
    path = _model_of(golden)
    g = load_graph(path)
    z = np.load(golden)
    w = int(np.argmin(z["live"]))  # the window with the most padding
    feeds = _feeds(golden, z, w)
    roles = json.loads(Path(golden).with_suffix(".json").read_text())["input_roles"]
    ids = next(name for name, role in roles.items() if role == "input_ids")
    live = int(z["live"][w])
    other = {**feeds, ids: feeds[ids].copy()}
    other[ids][0, live:] = 200
    (name, _), = g.outputs.items()
    a, b = FI.run(g, feeds)[name], FI.run(g, other)[name]
    assert np.array_equal(_litert(path).get_signature_runner()(**other)[name], b)  # LiteRT agrees
    return not np.array_equal(a[0, :live], b[0, :live])


def test_ai_edge_quantizer_loses_the_mask():
    """ai-edge-quantizer calibrates the mask's additive term to one int8 range for both of its
    values: the live keys' 0 and the masked keys' large negative both quantise to -128 at scale
    ~4e-12, so SELECT_V2 chooses between equal values and every key, padded or not, enters the
    int8 softmax: a padded key's id changes the live rows' output."""
    golden = str(ROOT / "golden" / "zoo" / "bert-tok.aeq-si8.tflite.builtin.npz")
    g = load_graph(_model_of(golden))
    selects = [op for op in g.ops if op.type == "SELECT_V2"]
    assert selects
    for op in selects:
        a, b = (g.tensor(t) for t in op.inputs[1:])
        assert K.dequantize_output(a.data, (float(a.quant.scale[0]), int(a.quant.zero_point[0]))) == \
            K.dequantize_output(b.data, (float(b.quant.scale[0]), int(b.quant.zero_point[0])))
    assert _padding_changes_live_rows(golden)


def test_tflite_converter_loses_the_scores_and_the_mask():
    """TFLiteConverter's (1 - mask) * -1e9 calibrates the scaled scores' int8 range to ~1e9 per
    step: every live score quantises to one value and the masked ones saturate to the same -128,
    so the int8 softmax is uniform over every key of the window, padded or not."""
    golden = str(ROOT / "golden" / "zoo" / "bert-tok.tf-si8.tflite.builtin.npz")
    g = load_graph(_model_of(golden))
    softmax_inputs = [g.tensor(op.inputs[0]).quant for op in g.ops if op.type == "SOFTMAX"]
    assert softmax_inputs and all(float(q.scale[0]) > 1e8 for q in softmax_inputs)
    assert _padding_changes_live_rows(golden)


# --- single-op models --------------------------------------------------------------------------

_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 2, np.dtype(np.int8): 9}


class T:
    """A tensor of a single-op model: an input (value None) or a constant, int8 ones with a
    quantisation (one scale, or one per channel along axis 0)."""

    def __init__(self, shape, dtype, scale=None, zero_point=0, value=None):
        self.shape, self.dtype, self.value = tuple(shape), np.dtype(dtype), value
        self.scale = None if scale is None else np.atleast_1d(np.asarray(scale, np.float32))
        self.zero_point = np.broadcast_to(np.asarray(zero_point, np.int64), self.scale.shape) if scale is not None else None

    @property
    def q(self):
        return float(self.scale[0]), int(self.zero_point[0])


def single_op(op: int, inputs: list, output: T, options=None, options_type=0) -> bytes:
    model = S.ModelT()
    model.version, model.buffers = 3, [S.BufferT()]
    sub = S.SubGraphT()
    sub.tensors, sub.inputs = [], []
    for i, spec in enumerate([*inputs, output]):
        t = S.TensorT()
        t.name, t.shape, t.type, t.buffer = f"t{i}", list(spec.shape), _TYPES[spec.dtype], 0
        if spec.scale is not None:
            t.quantization = S.QuantizationParametersT()
            t.quantization.scale, t.quantization.zeroPoint = list(map(float, spec.scale)), list(map(int, spec.zero_point))
            t.quantization.quantizedDimension = 0
        if spec.value is not None:
            b = S.BufferT()
            b.data = list(np.ascontiguousarray(spec.value, spec.dtype).tobytes())
            model.buffers.append(b)
            t.buffer = len(model.buffers) - 1
        elif spec is not output:
            sub.inputs.append(i)
        sub.tensors.append(t)
    sub.outputs = [len(inputs)]
    code = S.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = op, min(op, 127), 1
    o = S.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, list(range(len(inputs))), [len(inputs)]
    o.builtinOptionsType, o.builtinOptions = options_type, options
    sub.operators = [o]
    model.operatorCodes, model.subgraphs = [code], [sub]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def run_litert(model: bytes, feeds: list) -> np.ndarray:
    it = litert.Interpreter(model_content=model, num_threads=1,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for detail, value in zip(it.get_input_details(), feeds):
        it.set_tensor(detail["index"], value)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _scale(rng, lo=1e-3, hi=0.1) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _int8(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, shape).astype(np.int8)


SEEDS = range(4)


def check_fully_connected(seed: int, per_channel: bool):
    rng = np.random.default_rng(seed)
    rows, k, n = 64, int(rng.integers(8, 80)), int(rng.integers(3, 40))
    x = T((rows, k), np.int8, _scale(rng), int(rng.integers(-20, 20)))
    w_scale = [_scale(rng, 1e-3, 5e-3) for _ in range(n if per_channel else 1)]
    w = T((n, k), np.int8, w_scale, 0, _int8(rng, (n, k)))
    b = T((n,), np.int32, [x.q[0] * s for s in w_scale], 0, rng.integers(-5000, 5000, n).astype(np.int32))
    out = T((rows, n), np.int8, _scale(rng, 0.01, 0.1), int(rng.integers(-20, 20)))
    model = single_op(S.BuiltinOperator.FULLY_CONNECTED, [x, w, b], out, S.FullyConnectedOptionsT(),
                      S.BuiltinOptions.FullyConnectedOptions)
    xv = _int8(rng, (rows, k))
    mults = K.fully_connected_multipliers(x.q[0], w.scale, out.q[0])
    ours = K.fully_connected(xv, x.q[1], w.value, b.value, mults * (1 if per_channel else n), out.q[1])
    assert np.array_equal(ours, run_litert(model, [xv]))


def check_batch_matmul(seed: int):
    rng = np.random.default_rng(100 + seed)
    batch, m, k, n = 3, 24, int(rng.integers(4, 64)), int(rng.integers(4, 64))
    a = T((batch, m, k), np.int8, _scale(rng), int(rng.integers(-128, 128)))
    b = T((batch, k, n), np.int8, _scale(rng), int(rng.integers(-128, 128)))
    out = T((batch, m, n), np.int8, _scale(rng, 0.05, 2.0), int(rng.integers(-30, 30)))
    model = single_op(S.BuiltinOperator.BATCH_MATMUL, [a, b], out, S.BatchMatMulOptionsT(),
                      S.BuiltinOptions.BatchMatMulOptions)
    av, bv = _int8(rng, a.shape), _int8(rng, b.shape)
    mult = K.batch_matmul_multiplier(a.q[0], b.q[0], out.q[0])
    assert np.array_equal(K.batch_matmul(av, a.q[1], bv, b.q[1], mult, out.q[1]), run_litert(model, [av, bv]))


BINARY = {  # op -> (options, options type, kernel)
    "ADD": (S.AddOptionsT, S.BuiltinOptions.AddOptions, K.add),
    "SUB": (S.SubOptionsT, S.BuiltinOptions.SubOptions, K.sub),
    "MUL": (S.MulOptionsT, S.BuiltinOptions.MulOptions, K.mul),
    "SQUARED_DIFFERENCE": (S.SquaredDifferenceOptionsT, S.BuiltinOptions.SquaredDifferenceOptions,
                           K.squared_difference),
}


def check_binary(op: str, seed: int, broadcast: bool):
    """Scales an order of magnitude apart either way, every zero point range, a broadcast
    operand as the layer norms' [rows, 1] ones, and sizes that leave vector loops a tail."""
    rng = np.random.default_rng(200 + seed)
    options, options_type, kernel = BINARY[op]
    width = 32 if seed % 2 else 29
    xshape, yshape = (4, 15, width), ((4, 15, 1) if broadcast else (4, 15, width))
    x = T(xshape, np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    y = T(yshape, np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    out = T(xshape, np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    model = single_op(getattr(S.BuiltinOperator, op), [x, y], out, options(), options_type)
    xv, yv = _int8(rng, xshape), _int8(rng, yshape)
    assert np.array_equal(kernel(xv, x.q, yv, y.q, out.q), run_litert(model, [xv, yv])), op


def check_mean(seed: int, axes: tuple[int, ...]):
    """Counts that are powers of two and counts that are not (the multiplier's integer division)."""
    rng = np.random.default_rng(300 + seed)
    shape = (3, int(rng.integers(5, 70)), int(rng.integers(5, 70)))
    out_shape = tuple(d for i, d in enumerate(shape) if i not in axes)
    x = T(shape, np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    axis = T((len(axes),), np.int32, value=np.asarray(axes, np.int32))
    out = T(out_shape, np.int8, _scale(rng, 1e-4, 0.3), int(rng.integers(-128, 128)))
    model = single_op(S.BuiltinOperator.MEAN, [x, axis, ], out, S.ReducerOptionsT(), S.BuiltinOptions.ReducerOptions)
    offsets = rng.integers(-100, 100, (shape[0], shape[1], 1))  # means spread over the range
    xv = np.clip(rng.integers(-28, 28, shape) + offsets, -128, 127).astype(np.int8)
    assert np.array_equal(K.mean(xv, x.q, axes, out.q, False), run_litert(model, [xv]))


def check_sum(seed: int):
    """SUM as the mean pooling's: over the token axis, counts up to a few hundred."""
    rng = np.random.default_rng(350 + seed)
    shape = (2, int(rng.integers(5, 250)), int(rng.integers(5, 40)))
    x = T(shape, np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    axis = T((1,), np.int32, value=np.asarray([1], np.int32))
    out = T((shape[0], shape[2]), np.int8, _scale(rng, 0.01, 3.0), int(rng.integers(-128, 128)))
    model = single_op(S.BuiltinOperator.SUM, [x, axis], out, S.ReducerOptionsT(), S.BuiltinOptions.ReducerOptions)
    offsets = rng.integers(-100, 100, (shape[0], 1, shape[2]))
    xv = np.clip(rng.integers(-28, 28, shape) + offsets, -128, 127).astype(np.int8)
    assert np.array_equal(K.reduce_sum(xv, x.q, (1,), out.q, False), run_litert(model, [xv]))


def check_divide(seed: int):
    """DIV by a broadcast divisor (the pooling's count, the norm), every dividend, divisors of
    both signs around the zero point (never at it: LiteRT refuses that)."""
    rng = np.random.default_rng(370 + seed)
    x = T((64, 256), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    y = T((64, 1), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-100, 100)))
    out = T((64, 256), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    model = single_op(S.BuiltinOperator.DIV, [x, y], out, S.DivOptionsT(), S.BuiltinOptions.DivOptions)
    xv = np.tile(np.arange(-128, 128, dtype=np.int8), (64, 1))
    yv = rng.integers(-128, 128, (64, 1))
    yv[yv == y.q[1]] = y.q[1] + 1
    yv = yv.astype(np.int8)
    assert np.array_equal(K.divide(xv, x.q, yv, y.q, out.q), run_litert(model, [xv, yv]))


def check_dequantize(seed: int, size: int):
    """int8 -> float32, sizes with and without a tail past the vector loop's blocks."""
    rng = np.random.default_rng(380 + seed)
    x = T((size,), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    model = single_op(S.BuiltinOperator.DEQUANTIZE, [x], T((size,), np.float32))
    xv = _int8(rng, (size,))
    assert np.array_equal(K.dequantize(xv, x.q).view(np.uint32), run_litert(model, [xv]).view(np.uint32))


def check_softmax(seed: int, beta: float):
    """Rows whose maxima sit anywhere in the int8 range, some rows constant (a masked window's
    equal scores), beta other than 1; the output at 1/256 and zero point -128 as converters write it."""
    rng = np.random.default_rng(400 + seed)
    shape = (2, 4, 33, 64)
    x = T(shape, np.int8, _scale(rng, 1e-3, 0.5), int(rng.integers(-128, 128)))
    out = T(shape, np.int8, 1 / 256, -128)
    opts = S.SoftmaxOptionsT()
    opts.beta = beta
    model = single_op(S.BuiltinOperator.SOFTMAX, [x], out, opts, S.BuiltinOptions.SoftmaxOptions)
    xv = _int8(rng, shape)
    xv[0, 0, :4] = rng.integers(-128, 128)
    assert np.array_equal(K.softmax(xv, x.q[0], beta, out.q), run_litert(model, [xv]))


def check_quantize(seed: int):
    """float32 -> int8 on values straddling every rounding tie and both saturation ends."""
    rng = np.random.default_rng(500 + seed)
    scale, zp = _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128))
    steps = np.arange(-300, 300, 0.5, dtype=np.float32)
    xv = np.concatenate([steps * np.float32(scale), rng.standard_normal(999).astype(np.float32)])
    x, out = T(xv.shape, np.float32), T(xv.shape, np.int8, scale, zp)
    model = single_op(S.BuiltinOperator.QUANTIZE, [x], out)
    assert np.array_equal(K.quantize(xv, out.q), run_litert(model, [xv]))


# op -> (options, options type, our table for (input q, output q), the output quantisation LiteRT
# requires, or None for any)
ONE_INPUT = {
    "RSQRT": (None, 0, K.rsqrt_table, None),
    "GELU": (S.GeluOptionsT, S.BuiltinOptions.GeluOptions, lambda xq, oq: K.lookup_table(xq, oq, K.gelu_exact), None),
    "LOGISTIC": (None, 0, lambda xq, oq: K.lookup_table(xq, oq, K.logistic), (1 / 256, -128)),
    "TANH": (None, 0, lambda xq, oq: K.lookup_table(xq, oq, K.libm("tanhf")), (1 / 128, 0)),
    "SQRT": (None, 0, lambda xq, oq: K.sqrt_table(xq, oq), None),
}


def check_one_input(op: str, seed: int):
    """All 256 int8 inputs at a seeded input and output quantisation."""
    rng = np.random.default_rng(600 + seed)
    options, options_type, table, fixed = ONE_INPUT[op]
    low = op in ("RSQRT", "SQRT")  # defined on inputs at or above the zero point only
    x = T((256,), np.int8, _scale(rng, 1e-3, 0.3), -128 if low else int(rng.integers(-128, 128)))
    out = T((256,), np.int8, *(fixed or (_scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))))
    model = single_op(getattr(S.BuiltinOperator, op), [x], out, options() if options else None, options_type)
    xv = np.arange(-128, 128, dtype=np.int8)
    assert np.array_equal(table(x.q, out.q), run_litert(model, [xv])), op


def check_requantize(seed: int, vector: bool):
    """int8 -> int8 QUANTIZE on all 256 inputs, once all in the vector loop (a multiple of 16
    values) and once each value in the scalar tail (15 values a model run)."""
    rng = np.random.default_rng(800 + seed)
    n = 256 if vector else K.REQUANTIZE_BLOCK - 1
    x = T((n,), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    out = T((n,), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    model = single_op(S.BuiltinOperator.QUANTIZE, [x], out)
    values = np.arange(-128, 128 + n, dtype=np.int64)
    for start in range(0, 256, n):
        xv = np.clip(values[start:start + n], -128, 127).astype(np.int8)
        assert np.array_equal(K.requantize(xv, x.q, out.q), run_litert(model, [xv])), start


def check_gelu_tanh(seed: int):
    rng = np.random.default_rng(700 + seed)
    x = T((256,), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    out = T((256,), np.int8, _scale(rng, 1e-3, 0.3), int(rng.integers(-128, 128)))
    opts = S.GeluOptionsT()
    opts.approximate = True
    model = single_op(S.BuiltinOperator.GELU, [x], out, opts, S.BuiltinOptions.GeluOptions)
    xv = np.arange(-128, 128, dtype=np.int8)
    assert np.array_equal(K.lookup_table(x.q, out.q, K.gelu_tanh), run_litert(model, [xv]))


CHECKS = [
    *[(check_fully_connected, s, pc) for s in SEEDS for pc in (True, False)],
    *[(check_batch_matmul, s) for s in SEEDS],
    *[(check_binary, op, s, b) for op in BINARY for s in SEEDS for b in (False, True)],
    *[(check_mean, s, axes) for s in SEEDS for axes in ((2,), (0, 2), (1,))],
    *[(check_softmax, s, beta) for s in SEEDS for beta in (1.0, 0.5)],
    *[(check_sum, s) for s in SEEDS],
    *[(check_divide, s) for s in SEEDS],
    *[(check_dequantize, s, n) for s in range(2) for n in (7, 64, 333)],
    *[(check_quantize, s) for s in SEEDS],
    *[(check_one_input, op, s) for op in ONE_INPUT for s in range(8)],
    *[(check_gelu_tanh, s) for s in range(4)],
    *[(check_requantize, s, v) for s in range(4) for v in (True, False)],
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: "-".join(map(str, [c[0].__name__[6:], *c[1:]])))
def test_kernel_matches_litert(check):
    check[0](*check[1:])


def _gemmlowp_products(x, m, shift):
    return K.multiply_double_rounding(x, m, shift)


def _half_up_division(x, exponent):
    x = np.asarray(x, np.int64)
    return (x + ((1 << exponent) >> 1)) >> exponent if exponent else x


def _float_mean(x, x_q, axes, out_q, keep_dims):
    (xs, xz), (os_, oz) = x_q, out_q
    count = np.float32(np.prod([x.shape[a] for a in axes]))
    scale = np.float32(xs) / np.float32(os_)
    v = np.sum(np.asarray(x, np.int64), axis=axes).astype(np.float32) / count * scale + np.float32(-xz) * scale
    return np.clip(np.round(v) + oz, -128, 127).astype(np.int8)


def _quantize_by_division(values, scale):
    return np.rint(values / scale)


# Each mutation replaces one piece of the arithmetic with a plausible other reading of the source;
# the checks above must catch every one.
MUTATIONS = {
    "products by gemmlowp's rounding": ("multiply_ruy", _gemmlowp_products),
    "elementwise division rounding half up": ("rounding_divide_by_pot", _half_up_division),
    "mean divided in float": ("mean", _float_mean),
    "gelu by its tanh form": ("gelu_exact", K.gelu_tanh),
    "quantize's vector loop dividing": ("_quantize_vector", _quantize_by_division),
    "requantize's vector loop as the tail": ("_requantize_vector", K.multiply_double_rounding),
    "division's reciprocal with one Newton step": ("RECIPROCAL_NEWTON_STEPS", 1),
    "dequantize's vector loop as the tail": ("DEQUANTIZE_BLOCK", 1 << 30),
    "sqrt rounded instead of truncated": ("sqrt_table", lambda xq, oq: K.lookup_table(xq, oq, np.sqrt)),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutated_kernel_fails_a_check(monkeypatch, name):
    attr, replacement = MUTATIONS[name]
    monkeypatch.setattr(K, attr, replacement)
    for check in CHECKS:
        try:
            check[0](*check[1:])
        except AssertionError:
            return
    pytest.fail(f"mutation {name!r} passed every check")


def test_bad_full_integer_input_is_one_line_naming_op_and_tensor():
    """An op with no integer kernel, or an activation scale porter cannot represent, is refused
    by recovery naming the op and tensor (the file's own ops, altered in memory)."""
    from dataclasses import replace

    from porter.errors import PorterError
    from porter.frontends.graph import Quantization
    from porter.recover.integer import recover_integer

    g = load_graph(_model_of(GOLDENS[0]))
    softmax = next(op for op in g.ops if op.type == "SOFTMAX")
    g.ops[g.ops.index(softmax)] = replace(softmax, type="HARD_SWISH")
    with pytest.raises(PorterError, match=rf"op {softmax.index} HARD_SWISH: no integer kernel .* tensor {softmax.inputs[0]}"):
        recover_integer(g)
    g = load_graph(_model_of(GOLDENS[0]))
    fc = next(op for op in g.ops if op.type == "FULLY_CONNECTED")
    x = g.tensors[fc.inputs[0]]
    g.tensors[x.index] = replace(x, quant=Quantization(np.array([0.0], np.float32), np.array([0]), None))
    with pytest.raises(PorterError, match=rf"^op \d+ [A-Z_]+: tensor {x.index} .* has scale 0.0"):
        recover_integer(g)
