"""porter's Python API, for scripts that convert models: every function here is importable
from `porter` itself (lazily: `import porter` stays cheap) and documented in docs/api.md.

    import porter

    built = porter.compile_model("model.tflite", "out")            # crate + built .wasm
    golden = porter.make_golden("model.tflite", "golden/mine", random=8)
    report = porter.verify("out", [golden])                        # porter.verify/1 dict
    result = porter.check("model.tflite", texts="texts.txt", tokenizer="tokenizer.json")
    result.exit_code                                               # 0 / 1 / 2, as the CLI

Bad input raises porter.errors.PorterError with a one-line message naming the file, op or
tensor at fault; a failed comparison is not an exception but the report's "passed": false
(`verify`) or the result's exit_code 1 (`check`). `echo`, where a function takes it, receives
each progress line (default: silent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from porter.check import ci
from porter.check import make_golden as golden_maker
from porter.check import verify as verifier


@dataclass(frozen=True)
class Compiled:
    """What compile_model made: the crate directory, its built module and the architecture."""

    out_dir: Path
    wasm: Path | None  # None when compile_model(..., build=False)
    architecture: dict  # kind ("encoder" | "decoder"), layers, heads, vocab, window + labels or context, …


def _quiet(line: str) -> None:
    """The default echo: the API prints nothing unless asked to."""


def compile_model(model: str | Path, out_dir: str | Path, *, quant: str | None = None,
                  ort_cpu: str = "auto", l1d: str = "auto", build: bool = True, echo=None) -> Compiled:
    """Recover `model` (.tflite or .onnx) into porter's IR, write the Rust crate with model.bin,
    layout.json and ir.json into `out_dir` (which appears whole or not at all), and with
    `build` compile it to the wasm32-wasip1 module `out_dir/*.wasm`.

    quant: decoders only: "float32" (default), "q8_0" or "q8_0_int8" (see `porter compile`).
    ort_cpu: .onnx only: the CPU whose onnxruntime arithmetic the module reproduces ("auto":
    this machine's; or avx2, avxvnni, avx512, avx512vnni, as `porter compile --ort-cpu`).
    l1d: .tflite only: the L1 data cache size ("48K") whose Eigen blocking LiteRT's float products
    follow on the golden's CPU ("auto": this machine's), as `porter compile --l1d`.
    Raises PorterError naming the op at fault when porter cannot place part of the graph."""
    from porter.codegen.compile import compile_model as compile_graph
    from porter.codegen.encoder import build_forward_crate
    from porter.toolchain.discover import require_toolchain

    echo = echo or _quiet
    out_dir = Path(out_dir)
    architecture = ci.architecture(compile_graph(Path(model).resolve(), out_dir, quant, ort_cpu, l1d=l1d))
    echo(f"compiled {model} -> {out_dir}")
    wasm = build_forward_crate(out_dir, require_toolchain()) if build else None
    if wasm is not None:
        echo(f"built {wasm}")
    return Compiled(out_dir, wasm, architecture)


def make_golden(model: str | Path, golden: str | Path, *, texts: str | Path | None = None,
                tokenizer: str | Path | None = None, random: int | None = None, seed: int = 0,
                prompts: str | Path | None = None, steps: int | None = None, mode: str | None = None,
                pad_id: int | None = None, echo=None) -> Path:
    """Run the reference runtime on `model` and write the golden `golden`.npz + .json; returns
    the .npz path. Exactly one source:

    - texts (one per line, or a JSON list) with tokenizer (tokenizer.json): windowed exactly as
      the redaction service windows them (pad_id overrides the tokenizer's padding id);
    - random=N: N seeded windows of random ids, live lengths from a full window down;
    - prompts (decoders; one per line, or a JSON list of texts or id lists) with steps=N greedy
      tokens (tokenizer encodes text prompts).

    mode: "builtin" (default) or "xnnpack" for .tflite (LiteRT), "ort" for .onnx (onnxruntime)."""
    return golden_maker.make_golden(
        Path(model), Path(golden), texts=_path(texts), tokenizer=_path(tokenizer), random=random,
        seed=seed, prompts=_path(prompts), steps=steps, mode=mode, pad_id=pad_id, echo=echo or _quiet)


def verify(target: str | Path, goldens: list[str | Path], *, compare: list[str | Path] = (),
           baseline: str | Path | None = None, write_baseline: str | Path | None = None,
           min_label_agreement: float = 1.0, max_abs: float = 0.05, model: str | Path | None = None,
           report: str | Path | None = None, plot: str | Path | None = None, timeout: float = 60.0,
           echo=None) -> dict:
    """Run the module built in `target` (a compiled directory or its .wasm) on every window of
    each golden (a decoder's: every prompt, greedy) and return the porter.verify/1 report, also
    written to `report` (default target/verify-report.json) beside a |dlogit| histogram `plot`.

    goldens are gated by min_label_agreement (decoders: greedy tokens) and max_abs, and by
    `baseline` (bit-identity with an earlier module's logits; write one with write_baseline);
    `compare` goldens are reported only. report["passed"] says whether the module passed.
    model: the file the module was compiled from, if ir.json's path does not lead there."""
    return verifier.verify(Path(target), [Path(g) for g in goldens], [Path(g) for g in compare],
                           _path(baseline), _path(write_baseline),
                           verifier.Thresholds(min_label_agreement, max_abs), _path(report), _path(plot),
                           timeout, echo or _quiet, _path(model))


def check(model: str | Path, *, golden: str | Path | list[str | Path] | None = None,
          texts: str | Path | None = None, tokenizer: str | Path | None = None, pad_id: int | None = None,
          random: int | None = None, seed: int = 0, prompts: str | Path | None = None,
          steps: int | None = None, mode: str | None = None, out_dir: str | Path = "porter-check",
          quant: str | None = None, min_label_agreement: float = 1.0, max_abs: float = 0.05,
          timeout: float = 60.0, echo=None) -> ci.CheckResult:
    """`porter check`: compile, build and verify `model` in `out_dir`, against `golden` (one or
    more) or a golden made here from texts + tokenizer, random, or prompts + steps (as in
    make_golden); writes out_dir/report.json, junit.xml and summary.md. Returns a CheckResult:
    exit_code 0 (passed), 1 (verification failed) or 2 (the model cannot be compiled, built or
    checked: .error has the reason), .report (porter.check/1) and the three files' paths."""
    goldens = [] if golden is None else [golden] if isinstance(golden, (str, Path)) else list(golden)
    source = ci.GoldenSource(_path(texts), _path(tokenizer), pad_id, random, seed, _path(prompts), steps, mode)
    return ci.check(Path(model), Path(out_dir), [Path(g) for g in goldens], source,
                    verifier.Thresholds(min_label_agreement, max_abs), quant, timeout, echo or _quiet)


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)
