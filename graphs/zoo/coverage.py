"""What porter makes of every zoo file: recovered or refused, and how close to its golden.

    python graphs/zoo/coverage.py            # rewrites docs/coverage.md
    python graphs/zoo/coverage.py bert-tok   # prints the rows of the files whose name has it

Each encoder file is recovered (porter.recover) and its program run by the numpy executor on
every window of its golden (LiteRT's builtin kernels for TFLite, onnxruntime for ONNX); the
architecture porter reads from the graph is compared with the member's spec. tests/test_zoo.py
computes the same rows and checks that each is exact and is the one docs/coverage.md shows.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ZOO_DIR = Path(__file__).resolve().parent
REPO = ZOO_DIR.parent.parent
GOLDEN_DIR = REPO / "golden" / "zoo"
COVERAGE_MD = REPO / "docs" / "coverage.md"

sys.path.insert(0, str(REPO))


def model_files() -> list[Path]:
    return sorted(p for p in ZOO_DIR.iterdir() if p.suffix in (".tflite", ".onnx"))


def is_decoder(path: Path) -> bool:
    return _manifest(path)["member_spec"].get("kind") == "decoder" or "-lm." in path.name


def _manifest(path: Path) -> dict:
    return json.loads(path.with_name(path.name + ".json").read_text())


# golden/zoo/ holds the goldens of an AVX2 CPU; golden/zoo/<target>/ onnxruntime's on another
# CPU kind (graphs/zoo/cpu_goldens.py). LiteRT's builtin kernels give the same bits on every CPU.
BASE_ORT_CPU = "avx2"


def golden_path(path: Path, ort_cpu: str = BASE_ORT_CPU) -> Path:
    if path.suffix != ".onnx":
        return GOLDEN_DIR / f"{path.name}.builtin.npz"
    directory = GOLDEN_DIR if ort_cpu == BASE_ORT_CPU else GOLDEN_DIR / ort_cpu
    return directory / f"{path.name}.ort.npz"


@dataclass
class Row:
    """The bar every encoder file must meet (issue 16) is "exact": bit for bit with its reference,
    LiteRT's float kernels included."""

    file: str
    outcome: str  # "exact", "differs" or "refused" ("recovered" for a decoder)
    detail: str  # blocks, or the refusal line
    max_abs: float | None = None
    labels: str = ""

    def markdown(self) -> str:
        delta = "" if self.max_abs is None else f"{self.max_abs:.3g}"
        detail = self.detail.replace("|", "\\|")
        return f"| {self.file} | {self.outcome} | {delta} | {self.labels} | {detail} |"


def encoder_row(path: Path, ort_cpu: str = BASE_ORT_CPU) -> Row:
    """The file against its golden; an ONNX file's program reproduces onnxruntime on `ort_cpu`."""
    from porter.check.golden import load_golden
    from porter.errors import PorterError
    from porter.frontends import load_graph
    from porter.recover.encoder import recover_encoder
    from porter.reference import execute
    from porter.reference.litert import floats as LF

    try:
        golden = load_golden(golden_path(path, ort_cpu))
        cpu = ({"ort_cpu": ort_cpu} if path.suffix == ".onnx"
               else {"l1d": LF.golden_l1d(golden.manifest)})  # the golden's CPU's float blocking
        program = recover_encoder(load_graph(path), **cpu, window=golden.ids.shape[1])  # dynamic axes: the golden's
    except PorterError as e:
        return Row(path.name, "refused", str(e).splitlines()[0])
    _check_architecture(path, program)
    worst, agree, total = 0.0, 0, 0
    for w in range(golden.windows):
        rows = golden.output_rows(w)
        ours = execute.run(program, golden.ids[w], golden.attention_mask[w])[:rows]
        ref = golden.logits[w][:rows]
        worst = max(worst, float(np.abs(ours.astype(np.float64) - ref).max()))
        agree += int((ours.argmax(-1) == ref.argmax(-1)).sum())
        total += rows
    outcome = "exact" if worst == 0 else "differs"
    return Row(path.name, outcome, _blocks(program), worst, f"{agree}/{total}")


def _check_architecture(path: Path, program) -> None:
    """The shapes porter read from the graph are the member's (no shape is assumed)."""
    from porter.ir.integer import IntegerOp

    spec = _manifest(path)["member_spec"]
    attentions = program.attentions()
    softmaxes = [s for s in program.steps if getattr(s, "op", None) in (IntegerOp.SOFTMAX, IntegerOp.ORT_QLINEAR_SOFTMAX)
                 or getattr(s, "kind", None) == "softmax"]
    if softmaxes:  # a program of typed steps: one softmax a layer over [batch, heads, seq, seq]
        heads = softmaxes[0].shape[-3]
        got = (len(softmaxes), heads, heads * _head_width(program, softmaxes[0]), program.vocab, program.seq)
    else:
        got = (len(attentions), attentions[0].heads, attentions[0].heads * attentions[0].head_dim,
               program.vocab, program.seq)
    want = (spec["layers"], spec["heads"], spec["hidden"], spec["vocab"], spec["seq"])
    if got != want:
        raise AssertionError(f"{path.name}: recovered (layers, heads, hidden, vocab, seq) {got}, spec {want}")


def _head_width(program, softmax) -> int:
    """The width of one head's values: the last axis of the first product that reads the
    probabilities (P·V), followed through the steps between (requantisations, views)."""
    from porter.ir.integer import IntegerOp

    products = {IntegerOp.BATCH_MATMUL, IntegerOp.ORT_QGEMM}
    frontier = set(softmax.outputs)
    for step in program.steps:  # in order: one pass follows the data
        if not frontier & set(step.inputs):
            continue
        if step.op in products or getattr(step, "kind", "") == "ort_matmul":
            return step.shape[-1]
        frontier |= set(step.outputs)
    raise AssertionError(f"no product reads the probabilities of {softmax.name}")


def _blocks(program) -> str:
    counts: dict[str, int] = {}
    for step in program.steps:
        kind = type(step).__name__.removesuffix("Step")
        name = {"Elementwise": getattr(step, "op", None), "Reduce": getattr(step, "op", None),
                "Integer": getattr(step, "op", None), "Tensor": getattr(step, "op", None)}.get(kind)
        label = f"{kind.lower()} {name.value}" if name is not None else kind.lower()
        if kind == "Integer" and getattr(step, "kind", ""):  # "float softmax", "integer compare not_equal"
            label = f"float {step.kind}" if step.op.value == "float" else f"{label} {step.kind}"
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def decoder_row(path: Path) -> Row:
    from porter.errors import PorterError
    from porter.frontends import load_graph
    from porter.recover.decoder import recover_decoder

    try:
        # the member's context: a rotary graph does not bound it
        recover_decoder(load_graph(path), str(path), context=_manifest(path)["member_spec"].get("n_ctx"))
    except PorterError as e:
        return Row(path.name, "refused", str(e).splitlines()[0])
    return Row(path.name, "recovered", "decoder (greedy tokens: tests/test_decoder_zoo.py)")


def row(path: Path) -> Row:
    return decoder_row(path) if is_decoder(path) else encoder_row(path)


def render(rows: list[Row]) -> str:
    exact = sum(r.outcome == "exact" for r in rows)
    refused = [r for r in rows if r.outcome == "refused"]
    lines = [
        "# Coverage: the model zoo through porter",
        "",
        "Made by `python graphs/zoo/coverage.py` from the files in graphs/zoo/ (how they were exported:",
        "graphs/zoo/README.md) and their goldens in golden/zoo/; tests/test_zoo.py recomputes every row",
        "and fails when one no longer matches this page or is not exact. Each encoder file is",
        "recovered, its architecture compared with the member's spec, and its program run by porter's",
        "numpy executor on every golden window (LiteRT's builtin kernels for TFLite, onnxruntime's CPU",
        "provider for ONNX, on its AVX2 path). The wasm modules reproduce the executor bit for bit",
        "(tests/test_zoo.py builds a subset by default and every file under `-m slow`). Every ONNX",
        "encoder is also exact against onnxruntime on an AVX-512 VNNI CPU (golden/zoo/avx512vnni/, made",
        "by graphs/zoo/cpu_goldens.py on an Intel Xeon with AMX), compiled for that target.",
        "",
        "Full-integer int8 TFLite files (`*.aeq-si8.tflite`, `*.tf-si8.tflite`) are recovered op by op",
        "into integer steps, LiteRT's integer kernels on int8 activations with the file's scales and zero",
        "points (porter/recover/integer.py; the blocks column counts them by kernel). Their int8 softmax",
        "weighs every key of the window, padding included (the mask's term is lost in calibration:",
        "docs/arithmetic.md), so the whole window is computed, never only the live rows; the int8 output",
        "is reported dequantised, (q - zero point) x scale, as the golden records it.",
        "",
        "onnxruntime QDQ files (`*.qdq8pc.onnx` per channel, `*.qdq8pt.onnx` per tensor: quantize_static's",
        "QuantFormat.QDQ) are first rewritten as onnxruntime's QDQ transformers rewrite them, by their",
        "selector rules (porter/recover/canonical/ort_qdq.py: QLinearMatMul, QGemm, QLinearAdd, QLinearMul,",
        "QLinearSoftmax, the DQ and Q around data movement dropped), then recovered op by op the same",
        "way (porter/recover/qdq.py): its quantised kernels on uint8 activations (`integer ort_*`) and",
        "the ops it runs in float between a DequantizeLinear and a QuantizeLinear (`float *`), the whole",
        "window computed. A unit onnxruntime fuses into a kernel porter has not reproduced",
        "(MatMulIntegerToFloat, MatMulNBits, QLinearConcat, QLinearSigmoid, ...) is refused naming it.",
        "",
        f"{len(rows)} files: {exact} exact, {len(refused)} refused.",
        "",
        "Refused: a quantisation scheme porter does not reproduce is refused before recovery, by one",
        "line that names the scheme (porter/frontends/schemes.py); each has one real fixture",
        "(graphs/zoo/members.py REFUSED_SCHEMES):",
        "",
        *[f"- {scheme} (`*.{flavour}`): {why}." for flavour, (scheme, why) in _members().REFUSED_SCHEMES.items()],
        "",
        "float16 ONNX graphs (`*.f16.onnx`: onnxconverter-common's convert_float_to_float16, float32 inputs",
        "and outputs kept; `*.dyn-f16.onnx` the same on a dynamic-axes export; `*.half.onnx` torch's .half()",
        "export, whose float16 output is reported widened) run as onnxruntime's CPU provider runs them: float32",
        "ops between the Casts it places and a rounding to float16 where a value enters an op it runs in float16",
        "(data movement, LayerNormalization), decided by its transformers' rules",
        "(porter/frontends/ort_float16.py; the `round_half` steps), Softmax as its function body with MLAS's",
        "Exp kernel, float16 LayerNormalization as the float32 kernel between the widening and a rounding;",
        "the weights stay float16 in model.bin (docs/arithmetic.md).",
        "",
        "onnxruntime.transformers' optimizer (`*.ortopt-f32.onnx` at its default opt_level, `*.ortopt2-f32.onnx`",
        "at 2, `*.ortopt-dyn-f32.onnx` the defaults on a dynamic-axes export): its com.microsoft",
        "SkipLayerNormalization (with and without the bias), EmbedLayerNormalization, Attention (with its",
        "1-D mask_index: the first count(mask == 1) keys kept), Gelu and BiasGelu are translated into",
        "canonical ops in onnxruntime's CPU arithmetic (docs/arithmetic.md).",
        "",
        "Relative-position attention: MPNet's bias depends on positions only and folds to a constant",
        "term (`mpnet-tok`); DeBERTa's content-to-position and position-to-content terms (`deberta-tok`,",
        "`deberta-seq`: the queries and keys times the projected relative embeddings, gathered at the",
        "log-bucketed relative positions) are computed per window by tensor steps (products, gathers,",
        "moves: the `tensor ...` counts), over the rows live-row execution needs,",
        "and added by the attention step, whose mask drops every key of a padded query (mask[i] * mask[j]).",
        "`relpos-tok` (zoo_torch.RelPosEncoder) computes its two terms from the mask input by integer tensor",
        "steps: a learned bias per head gathered at the clipped relative positions of the live tokens and",
        "an ALiBi distance penalty.",
        "",
        *(["Refused forms: a model porter does not take yet is refused by one line naming the cause",
           "(graphs/zoo/members.py REFUSED_FORMS):", "",
           *[f"- `{member}.*` ({says}): {why}." for member, (says, why) in _members().REFUSED_FORMS.items()], ""]
          if _members().REFUSED_FORMS else []),
        "| file | outcome | max \\|Δ\\| | labels | program / refusal |",
        "|---|---|---|---|---|",
    ]
    lines += [r.markdown() for r in rows]
    return "\n".join(lines) + "\n"


def _members():
    sys.path.insert(0, str(ZOO_DIR))
    import members

    return members


def refused_scheme(path: Path) -> str | None:
    """The scheme a zoo file's refusal must name first, if its flavour is one porter refuses."""
    return next((scheme for flavour, (scheme, _) in _members().REFUSED_SCHEMES.items()
                 if path.name.endswith("." + flavour)), None)


def refused_form(path: Path) -> str | None:
    """What a zoo file's refusal must say, if its member is of a form porter refuses."""
    form = _members().REFUSED_FORMS.get(path.name.split(".")[0])
    return form[0] if form else None


def main(argv: list[str]) -> int:
    wanted = argv[0] if argv else None
    paths = [p for p in model_files() if wanted is None or wanted in p.name]
    rows = []
    for path in paths:
        r = row(path)
        rows.append(r)
        print(r.markdown(), flush=True)
    if wanted is None:
        COVERAGE_MD.parent.mkdir(exist_ok=True)
        COVERAGE_MD.write_text(render(rows))
        print(f"wrote {COVERAGE_MD.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
