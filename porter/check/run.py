"""`porter run`: the numpy executor on token ids or a golden, and divergence location.

`locate` runs LiteRT's builtin kernels on the same window with every intermediate preserved and
walks the IR's Linear layers in execution order, comparing each one's input and output with
the graph tensors they came from: the first difference names the block (the LayerNorm,
attention or FFN step before that Linear) where the two computations part.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from porter.reference import execute
from porter.check.compare import Agreement, agreement
from porter.codegen.compile import recover
from porter.errors import PorterError
from porter.check.golden import Golden, check_model_matches, load_golden
from porter.ir.encoder import EncoderIR
from porter.reference import ort_cpu as ort_cpus

PAD_ID = 0


def window_from_ids(ir: EncoderIR, text: str) -> tuple[np.ndarray, np.ndarray, int]:
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


def executor_agreement(ir: EncoderIR, golden: Golden, echo=None, windows=None) -> Agreement:
    """The numpy executor against a golden's windows (all of them unless `windows` names some);
    `echo` gets one line per window."""
    total = Agreement(0, 0, 0.0, 0.0)
    for w in range(golden.windows) if windows is None else windows:
        ours = execute.run(ir, golden.ids[w], golden.attention_mask[w])
        a = agreement(ours, golden.logits[w], int(golden.live[w]))
        if echo is not None:
            echo(f"  window {w:3d} (text {int(golden.text_index[w])}): {a.line()}")
        total = total.merge(a)
    return total


def golden_choice(choice: str, golden: Golden) -> str:
    """--ort-cpu CHOICE for a run against this golden: auto becomes the golden's CPU's target
    where its manifest records the CPU (ONNX goldens), and stays auto otherwise."""
    if choice != ort_cpus.AUTO:
        return choice
    made_on = ort_cpus.golden_target(golden.manifest, golden.path.name)
    return choice if made_on is None else made_on.name


def run_golden(ir: EncoderIR, golden_path: Path, echo) -> Agreement:
    golden = load_golden(golden_path)
    if golden.ids.shape[1] != ir.seq:
        raise PorterError(f"golden {golden.path.name} has windows of {golden.ids.shape[1]} "
                          f"tokens; the model's window is {ir.seq}")
    check_model_matches(golden, ir.source)
    total = executor_agreement(ir, golden, echo)
    echo(f"overall vs {golden.label} ({golden.windows} windows): {total.line()}")
    return total


def locate(ir: EncoderIR, ids: np.ndarray, mask: np.ndarray, echo) -> str | None:
    """The first Linear (in execution order) whose input or output differs from LiteRT's."""
    if ir.format != "tflite":
        raise PorterError(f"--locate compares with LiteRT's intermediates: TFLite models only, "
                          f"not {ir.format}")
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        raise PorterError("--locate needs the ai-edge-litert package") from None
    from porter.frontends import load_graph

    g = load_graph(ir.source)
    interp = Interpreter(model_path=ir.source, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                         experimental_preserve_all_tensors=True)
    interp.allocate_tensors()
    interp.set_tensor(g.inputs[ir.ids_input], ids[None].astype(np.int32))
    if ir.mask_input:
        interp.set_tensor(g.inputs[ir.mask_input], mask[None].astype(np.int32))
    interp.invoke()
    trace: dict = {}
    execute.run(ir, ids, mask, trace)
    for lin in ir.linears():
        op = g.ops[lin.source_op]
        for side, t in (("in", op.inputs[0]), ("out", op.outputs[0])):
            ref = interp.get_tensor(t).reshape(ir.seq, -1)
            ours = trace[f"{lin.name}.{side}"]
            diff = float(np.abs(ours.astype(np.float64) - ref).max())
            if diff > 0:
                where = f"{lin.name} {side}put (graph {op.describe()})"
                echo(f"first difference: {where}: max |d| {diff:.3g}")
                return where
    echo(f"no difference: every Linear's input and output is bit-identical "
         f"({len(ir.linears())} layers checked)")
    return None


def run_command(model: Path, golden_path: Path | None, ids_text: str | None,
                dump: Path | None, do_locate: bool, echo, ort_cpu: str = ort_cpus.AUTO) -> None:
    """ort_cpu auto takes the golden's CPU where the golden records one."""
    if golden_path is not None:
        ort_cpu = golden_choice(ort_cpu, load_golden(golden_path))
    ir = recover(model, ort_cpu)
    if ir.ort_cpu is not None:
        echo(f"onnxruntime arithmetic of {ort_cpus.target(ir.ort_cpu).describe()}")
    if golden_path is not None:
        run_golden(ir, golden_path, echo)
        if dump is None and not do_locate:
            return
        golden = load_golden(golden_path)
        ids, mask = golden.ids[0], golden.attention_mask[0]
    elif ids_text is not None:
        ids, mask, live = window_from_ids(ir, ids_text)
        logits = execute.run(ir, ids, mask)
        for i in range(live):
            row = " ".join(f"{v:8.4f}" for v in logits[i])
            echo(f"{i:4d} id {int(ids[i]):6d} label {int(logits[i].argmax()):3d}  {row}")
    else:
        raise PorterError("give --golden FILE or --ids 101,2023,102")
    if dump is not None:
        trace: dict = {}
        execute.run(ir, ids, mask, trace)
        np.savez(dump, **trace)
        echo(f"wrote {len(trace)} intermediates to {dump}")
    if do_locate:
        locate(ir, ids, mask, echo)
