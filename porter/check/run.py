"""`porter run`: the numpy executor on token ids or a golden, and divergence location.

`locate` runs the reference runtime on the same window (LiteRT's builtin kernels with every
intermediate preserved; onnxruntime with the step outputs added as graph outputs) and walks the
program's steps in order, comparing each step's output buffer with the graph tensor it stands for:
the first difference names the step (and the file's ops behind it) where the two computations
part.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from porter.reference import execute
from porter.check.compare import Agreement, agreement
from porter.codegen.compile import recover
from porter.errors import PorterError
from porter.check.golden import (Golden, check_model_matches, check_token_types, cpu_choices, golden_window,
                                 load_golden)
from porter.frontends import load_graph
from porter.ir.encoder import INPUT_MASK, EncoderProgram
from porter.reference.ort import cpu as ort_cpus

PAD_ID = 0


def window_from_ids(ir: EncoderProgram, text: str) -> tuple[np.ndarray, np.ndarray, int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise PorterError(f"--ids: expected comma-separated integers, got {text!r}") from None
    if not values or len(values) > ir.seq:
        raise PorterError(f"--ids: expected 1 to {ir.seq} ids, got {len(values)}")
    bad = [v for v in values if not 0 <= v < ir.vocab]
    if bad:
        raise PorterError(f"--ids: token id {bad[0]} is outside the vocabulary [0, {ir.vocab})")
    ids = np.full(ir.seq, PAD_ID, np.int32)
    ids[: len(values)] = values
    mask = (np.arange(ir.seq) < len(values)).astype(np.int32)
    return ids, mask, len(values)


def executor_agreement(ir: EncoderProgram, golden: Golden, echo=None, windows=None) -> Agreement:
    """The numpy executor against a golden's windows (all of them unless `windows` names some);
    `echo` gets one line per window."""
    total = Agreement(0, 0, 0.0, 0.0)
    for w in range(golden.windows) if windows is None else windows:
        ours = execute.run(ir, golden.ids[w], golden.attention_mask[w], types=golden.token_type_ids[w])
        a = agreement(ours, golden.logits[w], golden.output_rows(w))
        if echo is not None:
            echo(f"  window {w:3d} (text {int(golden.text_index[w])}): {a.line()}")
        total = total.merge(a)
    return total


def run_golden(ir: EncoderProgram, golden_path: Path, echo) -> Agreement:
    golden = load_golden(golden_path)
    if golden.ids.shape[1] != ir.seq:
        raise PorterError(f"golden {golden.path.name} has windows of {golden.ids.shape[1]} "
                          f"tokens; the model's window is {ir.seq}")
    check_model_matches(golden, ir.source)
    check_token_types(golden, ir.type_vocab, Path(ir.source).name)
    total = executor_agreement(ir, golden, echo)
    echo(f"overall vs {golden.label} ({golden.windows} windows): {total.line()}")
    return total


def locate(ir: EncoderProgram, ids: np.ndarray, mask: np.ndarray, echo, types=None) -> str | None:
    """The first step (in program order) whose output differs from the reference's tensor."""
    trace: dict = {}
    execute.run(ir, ids, mask, trace, types)
    wanted = {}
    for step in ir.steps:
        for buffer in step.outputs:
            if buffer != INPUT_MASK and buffer.startswith("t"):
                wanted[buffer] = int(buffer[1:])
    reference = _reference_tensors(ir, ids, mask, types, sorted(set(wanted.values())))
    checked = 0
    for step in ir.steps:
        for buffer in step.outputs:
            ref = reference.get(wanted.get(buffer, -1))
            if ref is None:
                continue  # a tensor porter made (a fused activation's input)
            ref = ref.reshape(-1)
            ours = trace[buffer].reshape(-1)
            rows = ir.seq if ir.buffers[buffer].tokens else 1
            diff = float(np.abs(ours.astype(np.float64) - ref).max()) if ours.size == ref.size else np.inf
            checked += 1
            if diff > 0:
                ops = ", ".join(str(i) for i in step.source_ops[:6])
                where = f"{step.name} (graph ops {ops}{' ...' if len(step.source_ops) > 6 else ''}, {rows} rows)"
                echo(f"first difference: {where}: max |d| {diff:.3g}")
                return where
    echo(f"no difference: every step's output is bit-identical ({checked} tensors checked)")
    return None


def _reference_tensors(ir: EncoderProgram, ids, mask, types, tensors: list[int]) -> dict[int, np.ndarray]:
    """The reference runtime's values of graph tensors on one window."""

    g = load_graph(ir.source)
    feeds = {ir.ids_input: ids[None]}
    if ir.mask_input:
        feeds[ir.mask_input] = mask[None]
    if ir.types_input:
        feeds[ir.types_input] = (np.zeros_like(ids) if types is None else np.asarray(types))[None]
    tensors = [t for t in tensors if t < len(g.tensors)]
    if ir.format == "tflite":
        return _litert_tensors(ir, g, feeds, tensors)
    return _onnxruntime_tensors(ir, g, feeds, tensors)


def _litert_tensors(ir, g, feeds, tensors) -> dict[int, np.ndarray]:
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        raise PorterError("--locate needs the ai-edge-litert package") from None
    interp = Interpreter(model_path=ir.source, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                         experimental_preserve_all_tensors=True)
    interp.allocate_tensors()
    for name, value in feeds.items():
        interp.set_tensor(g.inputs[name], value.astype(np.int32))
    interp.invoke()
    return {t: interp.get_tensor(t) for t in tensors}


def _onnxruntime_tensors(ir, g, feeds, tensors) -> dict[int, np.ndarray]:
    """onnxruntime's values, with its own graph optimisations: the graph it optimises (fusions
    and all) is saved, the wanted tensors are added to that graph's outputs, and it runs with
    optimisation off, so the arithmetic is the optimised session's and no fusion is undone by
    an output in its middle."""
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        raise PorterError("--locate needs the onnx and onnxruntime packages") from None
    import tempfile

    with tempfile.TemporaryDirectory(prefix="porter-locate-") as tmp:
        optimised = Path(tmp) / "optimised.onnx"
        options = _ort_options(ort)
        options.optimized_model_filepath = str(optimised)
        ort.InferenceSession(str(ir.source), options, providers=["CPUExecutionProvider"])
        model = onnx.load(str(optimised))
    known = {v for n in model.graph.node for v in n.output} | {o.name for o in model.graph.output}
    present = {o.name for o in model.graph.output}
    names = {t: g.tensors[t].name for t in tensors if g.tensors[t].name in known}
    for name in names.values():
        if name not in present:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    options = _ort_options(ort)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    types = {i.name: i.type for i in session.get_inputs()}
    feed = {name: value.astype(np.int64 if "int64" in types[name] else np.int32) for name, value in feeds.items()}
    values = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    return {t: values[name] for t, name in names.items()}


def _ort_options(ort):
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return options


def run_command(model: Path, golden_path: Path | None, ids_text: str | None,
                dump: Path | None, do_locate: bool, echo, ort_cpu: str = ort_cpus.AUTO,
                l1d: str = ort_cpus.AUTO) -> None:
    """ort_cpu and l1d auto take the golden's CPU where a golden is given."""
    window = None
    if golden_path is not None:
        golden = load_golden(golden_path)
        ort_cpu, l1d = cpu_choices(model, golden.manifest, golden.path.name, ort_cpu, l1d)
        window = golden_window(golden_path)
    ir = recover(model, ort_cpu, l1d, window)
    if ir.output_quant is not None:
        scale, zero_point = ir.output_quant
        echo(f"full-integer int8: LiteRT's integer kernels, every window whole; output {ir.output}: int8, "
             f"reported dequantised (scale {scale:.6g}, zero point {zero_point})")
    if any(str(getattr(getattr(s, "op", None), "value", "")).startswith("ort_") for s in ir.steps):
        echo("onnxruntime QDQ: its quantised kernels and float ops, op by op, every window whole")
    if ir.ort_cpu is not None:
        echo(f"onnxruntime arithmetic of {ort_cpus.target(ir.ort_cpu).describe()}")
    if golden_path is not None:
        run_golden(ir, golden_path, echo)
        if dump is None and not do_locate:
            return
        golden = load_golden(golden_path)
        ids, mask, types = golden.ids[0], golden.attention_mask[0], golden.token_type_ids[0]
    elif ids_text is not None:
        ids, mask, live = window_from_ids(ir, ids_text)
        types = None
        logits = execute.run(ir, ids, mask)
        for i in range(live):
            row = " ".join(f"{v:8.4f}" for v in logits[i])
            echo(f"{i:4d} id {int(ids[i]):6d} label {int(logits[i].argmax()):3d}  {row}")
    else:
        raise PorterError("give --golden FILE or --ids 101,2023,102")
    if dump is not None:
        trace: dict = {}
        execute.run(ir, ids, mask, trace, types)
        np.savez(dump, **trace)
        echo(f"wrote {len(trace)} intermediates to {dump}")
    if do_locate:
        locate(ir, ids, mask, echo, types)
