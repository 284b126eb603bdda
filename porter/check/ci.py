"""`porter check`: compile, build and verify one model the way CI runs it, and report.

Steps, each timed and announced with its elapsed seconds (a line every PROGRESS_INTERVAL_S
while it runs, so a CI log never goes quiet for minutes):

    compile   recover the IR and render the crate (a refused model stops here)
    golden    only when the golden is made on the fly (--texts/--tokenizer, --random, --prompts)
    build     cargo build of the module (the first build on a machine compiles std: minutes)
    verify    porter verify against every golden, with the thresholds given

Whatever happens, three files are written into the output directory: report.json
(porter.check/1, with the porter.verify/1 report inside and the seconds of every step),
junit.xml (one test case per window or prompt; a model that cannot be compiled is one failing
test case with the reason) and summary.md (Markdown for a CI job summary). The outcome is the
exit code: 0 passed, 1 verification failed, 2 the model cannot be compiled, built or checked
(with the one-line reason, which names the op at fault when recovery refuses the graph).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from porter import __version__
from porter.check import junit, markdown
from porter.check.golden import cpu_choices, golden_window, npz_path, read_manifest, sha256_of
from porter.check.make_golden import cpu_facts, make_golden
from porter.check.references import ORT_MODE, default_mode
from porter.check.verify import Thresholds, verify
from porter.errors import PorterError
from porter.reference.ort import cpu as ort_cpus
from porter.fsutil import write_atomic

REPORT_FORMAT = "porter.check/1"
PROGRESS_INTERVAL_S = 15.0
COMPILED_DIR = "compiled"
REPORT_NAME, JUNIT_NAME, SUMMARY_NAME = "report.json", "junit.xml", "summary.md"
VERIFY_REPORT_NAME, PLOT_NAME = "verify-report.json", "verify-dlogit.png"
PASSED, FAILED = 0, 1
CANNOT = {"compile": "cannot compile", "golden": "cannot make the golden", "build": "cannot build",
          "verify": "cannot verify"}


@dataclass(frozen=True)
class GoldenSource:
    """What to make the golden from when none is given: texts, random windows or prompts."""

    texts: Path | None = None
    tokenizer: Path | None = None
    pad_id: int | None = None
    random: int | None = None
    seed: int = 0
    prompts: Path | None = None
    steps: int | None = None
    mode: str | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.texts, self.random, self.prompts))

    def describe(self) -> str:
        if self.texts is not None:
            return f"--texts {self.texts} --tokenizer {self.tokenizer}"
        if self.random is not None:
            return f"--random {self.random} --seed {self.seed}"
        return f"--prompts {self.prompts} --steps {self.steps}"


@dataclass
class Step:
    name: str
    seconds: float = 0.0
    ok: bool = False


@dataclass
class CheckResult:
    """What `porter check` did: the porter.check/1 report and where its files are."""

    exit_code: int
    report: dict
    report_path: Path
    junit_path: Path
    summary_path: Path

    @property
    def passed(self) -> bool:
        return self.exit_code == PASSED

    @property
    def error(self) -> str | None:
        return (self.report.get("error") or {}).get("message")


@dataclass
class Steps:
    """Runs named steps with progress lines and records how long each took."""

    echo: Callable[[str], None]
    done: list[Step] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, what: str):
        self.echo(f"porter check: {name}: {what}")
        record, started, finished = Step(name), time.monotonic(), threading.Event()

        def tick():
            while not finished.wait(PROGRESS_INTERVAL_S):
                self.echo(f"porter check: {name}: {time.monotonic() - started:.0f} s so far")

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        self.done.append(record)
        try:
            yield record
            record.ok = True
        finally:
            finished.set()
            ticker.join()
            record.seconds = time.monotonic() - started
            self.echo(f"porter check: {name}: {'done' if record.ok else 'failed'} in {record.seconds:.1f} s")


def architecture(ir) -> dict:
    """The few facts of a recovered IR a report shows, read from its summary (what ir.json
    holds), which stays stable while the IR's classes change."""
    s = ir.summary()
    if s.get("kind") == "decoder":
        return {"kind": "decoder", "layers": s["num_layers"], "heads": s["heads"], "hidden": s["hidden"],
                "vocab": s["vocab"], "context": s["n_ctx"]}
    return {"kind": "encoder", "layers": s["layers"], "heads": s["heads"], "vocab": s["vocab"],
            "window": s["seq"], "labels": s["labels"], "output_rows": s["output_rows"], "mask": s["mask"],
            "reference": s["reference"]}


def check(model: Path, out_dir: Path, goldens: list[Path] = (), source: GoldenSource = GoldenSource(),
          thresholds: Thresholds = Thresholds(), quant: str | None = None, timeout_s: float = 60.0,
          echo=print) -> CheckResult:
    """Compile, (make the golden,) build and verify `model` in out_dir; write report.json,
    junit.xml and summary.md there. Raises PorterError only for contradictory arguments; what
    goes wrong with the model itself is the result's exit code and error."""
    from porter.codegen.compile import compile_model
    from porter.codegen.encoder import build_forward_crate, standard_library_is_cold
    from porter.toolchain.discover import require_toolchain

    model, out_dir = Path(model), Path(out_dir)
    if bool(goldens) == source.given:
        raise PorterError("give --golden FILE, or what to make one from (--texts with --tokenizer, "
                          "--random N, or --prompts with --steps), not both or neither")
    if goldens and source.mode is not None:
        raise PorterError("--mode chooses the kernels of a golden made here; a --golden file has its own")
    for path in [model, *map(npz_path, goldens)]:
        if not path.is_file():  # before minutes of building, not after
            raise PorterError(f"{path}: no such file")
    steps, facts, error = Steps(echo), {"architecture": None, "wasm": None, "verify": None}, None
    compiled, made_golden = out_dir / COMPILED_DIR, out_dir / golden_name(model, source)
    clear_previous_outputs(out_dir, made_golden if source.given else None)
    try:
        with steps.step("compile", f"{model} -> {compiled}"):
            # The absolute path goes into ir.json, so verify finds the model from anywhere.
            ort_cpu, l1d = (cpu_choices(model, read_manifest(goldens[0]), npz_path(goldens[0]).name)
                            if goldens else (ort_cpus.AUTO, ort_cpus.AUTO))  # a golden made here: this machine's
            window = golden_window(goldens[0]) if goldens else None
            facts["architecture"] = architecture(compile_model(model.resolve(), compiled, quant, ort_cpu, l1d=l1d,
                                                               window=window))
        if source.given:
            with steps.step("golden", f"reference outputs from {source.describe()}"):
                goldens = [make_golden(model, made_golden, texts=source.texts,
                                       tokenizer=source.tokenizer, random=source.random, seed=source.seed,
                                       prompts=source.prompts, steps=source.steps, mode=source.mode,
                                       pad_id=source.pad_id, echo=echo)]
        with steps.step("build", f"cargo build of {compiled}"):
            toolchain = require_toolchain()
            if standard_library_is_cold(toolchain):
                echo("porter check: build: the first build on this machine compiles std too (minutes)")
            wasm = build_forward_crate(compiled, toolchain)
            facts["wasm"] = {"path": str(wasm), "bytes": wasm.stat().st_size, "sha256": sha256_of(wasm)}
        with steps.step("verify", f"against {', '.join(str(g) for g in goldens)}"):
            facts["verify"] = verify(compiled, list(goldens), thresholds=thresholds,
                                     report_path=out_dir / VERIFY_REPORT_NAME, plot_path=out_dir / PLOT_NAME,
                                     timeout_per_window_s=timeout_s, echo=echo, model=model)
        exit_code = PASSED if facts["verify"]["passed"] else FAILED
    except PorterError as e:
        message = str(e) if model.name in str(e) else f"{model.name}: {e}"
        exit_code, error = e.exit_code, {"step": steps.done[-1].name, "message": message}
    report = _report(model, out_dir, list(goldens), source, thresholds, steps.done, facts, exit_code, error)
    return _write_outputs(out_dir, report)


def golden_name(model: Path, source: GoldenSource) -> str:
    """<model file>.<mode>, as the repository names its goldens (golden/<fixture>.builtin.npz)."""
    mode = source.mode or (ORT_MODE if source.prompts is not None else default_mode(model))
    return f"{model.name}.{mode}.npz"


def clear_previous_outputs(out_dir: Path, golden: Path | None) -> None:
    """A rerun into the same directory (a CI cache) must not leave an earlier run's module or
    report beside this run's: everything check writes goes first (the cargo target directory,
    which holds the reusable build, lives elsewhere)."""
    shutil.rmtree(out_dir / COMPILED_DIR, ignore_errors=True)
    for name in (REPORT_NAME, JUNIT_NAME, SUMMARY_NAME, VERIFY_REPORT_NAME, PLOT_NAME):
        (out_dir / name).unlink(missing_ok=True)
    if golden is not None:
        golden.unlink(missing_ok=True)
        golden.with_suffix(".json").unlink(missing_ok=True)


def _report(model, out_dir, goldens, source, thresholds, steps, facts, exit_code, error) -> dict:
    outcome = {PASSED: "passed", FAILED: "verification failed"}.get(exit_code) or CANNOT[error["step"]]
    return {"format": REPORT_FORMAT, "porter_version": __version__, "model": str(model),
            "model_sha256": sha256_of(model), **facts, "out_dir": str(out_dir),
            "goldens": [str(g) for g in goldens],
            "golden_made_from": source.describe() if source.given else None,
            "thresholds": {"min_label_agreement": thresholds.min_label_agreement,
                           "max_abs": thresholds.max_abs},
            "steps": [{"name": s.name, "seconds": round(s.seconds, 3), "ok": s.ok} for s in steps],
            "total_seconds": round(sum(s.seconds for s in steps), 3),
            "cpu": cpu_facts(), "outcome": outcome, "exit_code": exit_code, "error": error}


def _write_outputs(out_dir: Path, report: dict) -> CheckResult:
    paths = {name: out_dir / name for name in (REPORT_NAME, JUNIT_NAME, SUMMARY_NAME)}
    report["files"] = {name.split(".")[0]: str(path) for name, path in paths.items()}
    write_atomic(paths[JUNIT_NAME], junit.render(report))
    write_atomic(paths[SUMMARY_NAME], markdown.render(report).encode())
    write_atomic(paths[REPORT_NAME], (json.dumps(report, indent=1) + "\n").encode())
    return CheckResult(report["exit_code"], report, paths[REPORT_NAME], paths[JUNIT_NAME], paths[SUMMARY_NAME])
