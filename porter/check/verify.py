"""`porter verify`: run a built eval module on every window of some goldens and compare logits.

The module runs under wasmtime with epoch interruption on (porter.runtime.wasm), one process per golden
with all its windows in one request (porter.runtime.evalproto), so each golden also yields one model
load time. Only live tokens are compared; the report gives, per window and overall, label
agreement and max / mean |dlogit|, and the module's own forward-pass timing split into
matmul / attention / other.

Goldens given with `--golden` are gated by the thresholds and by the baseline; goldens given
with `--compare` are reported only (e.g. LiteRT's XNNPACK mode, whose kernels porter does not
reproduce). A baseline is an .npz of the module's own logits, one array per (golden, window):
the bar every optimisation must keep is bit-identity with it.

Every set of windows also runs twice: once computing only the rows up to each window's last
kept token (what the service does, where the model's padding is inert) and once computing the
whole window (what the reference runtime does). The two must agree bit for bit; the report
gives the rows computed and both forward times.

A generation module (a decoder) is verified prompt by prompt against decoder goldens instead:
greedy tokens and logits (porter.check.verify_decoder), in the same report format.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from porter.check import verify_decoder
from porter.check.compare import Agreement, agreement
from porter.check.golden import (Golden, check_model_matches, check_token_types, cpu_choices, load_golden,
                                 ort_path_of)
from porter.check.modules import DECODER, Module, locate_module
from porter.check.plot import write_plot
from porter.errors import PorterError
from porter.reference.litert import floats as LF
from porter.reference.ort import cpu as ort_cpus
from porter.fsutil import reproducible_npz, write_atomic
from porter.runtime import evalproto, wasm

REPORT_FORMAT = "porter.verify/1"
BASELINE_FORMAT = "porter.baseline/1"
BASELINE_META = "__meta__"
DEFAULT_TIMEOUT_PER_WINDOW_S = 60.0
REPORT_NAME = "verify-report.json"
PLOT_NAME = "verify-dlogit.png"


@dataclass(frozen=True)
class Thresholds:
    min_label_agreement: float = 1.0
    max_abs: float = 0.05


@dataclass
class GoldenRun:
    """One golden's windows through the module, compared with the golden's logits."""

    golden: Golden
    gated: bool
    results: list[evalproto.WindowResult]
    load_ms: float
    windows: list[Agreement]
    overall: Agreement
    abs_diffs: np.ndarray  # every live logit's |dlogit|, float64, for the histogram
    failures: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.golden.path.name.removesuffix(".npz")


@dataclass
class BitComparison:
    """Logits compared bit for bit (so -0 vs 0 and NaN payloads count)."""

    differing_logits: int = 0
    max_abs: float = 0.0
    first_difference: dict | None = None

    @property
    def identical(self) -> bool:
        return self.first_difference is None


@dataclass
class BaselineCheck(BitComparison):
    path: Path = Path()
    written: bool = False


@dataclass
class LiveRowsCheck(BitComparison):
    """The live-rows run of some windows against their whole-window run."""

    seq: int = 0
    rows: list[int] = field(default_factory=list)  # rows computed per window by the live run
    live_ms: list[float] = field(default_factory=list)  # forward ms per window, live run
    whole_ms: list[float] = field(default_factory=list)  # forward ms per window, whole window


def load_matching_golden(module: Module, path: Path, gated: bool = True) -> Golden:
    golden = load_golden(path)
    if gated:
        check_same_cpu(module, golden)
        check_same_blocking(module, golden)
    seq, labels = golden.ids.shape[1], golden.logits.shape[2]  # logits [N, seq or 1 (pooled), labels]
    if seq != module.seq:
        raise PorterError(f"golden {golden.path.name} has windows of {seq} tokens; the module's "
                          f"window is {module.seq}")
    if labels != module.labels:
        raise PorterError(f"golden {golden.path.name} has {labels} values per output row; the module "
                          f"has {module.labels}")
    check_model_matches(golden, module.model)
    check_token_types(golden, module.type_vocab, module.model.name)
    return golden


def check_same_cpu(module: Module, golden: Golden) -> None:
    """A module that reproduces one CPU's onnxruntime arithmetic cannot be gated by a golden
    made on a CPU that takes other kernels (their logits differ by design)."""
    if module.ort_cpu is None:
        return  # LiteRT's kernels: the golden's flags do not matter
    made_on = ort_cpus.target(cpu_choices(module.model, golden.manifest, golden.path.name, model_kind="onnx")[0])
    if made_on.name == module.ort_cpu:
        return
    raise PorterError(f"golden {golden.path.name} was made where onnxruntime takes its {made_on.name} "
                      f"path ({golden.manifest.get('cpu_model', 'unknown')} CPU), but "
                      f"{module.compiled_dir.name} reproduces its {module.ort_cpu} path: compile it with "
                      f"--ort-cpu {made_on.name} to gate it by this golden, or give the golden with --compare")


def check_same_blocking(module: Module, golden: Golden) -> None:
    """A module whose float products follow Eigen's blocking for one L1 data cache size cannot be
    gated by a golden made where LiteRT blocks one of them otherwise (CPUs with 32 and 48 KiB L1s)."""
    if module.eigen_l1d is None:
        return
    made_with = int(cpu_choices(module.model, golden.manifest, golden.path.name,
                                float_linears=module.float_linears, model_kind="tflite")[1])
    differ = [(k, n) for k, n in module.float_linears
              if LF.blocks_differ(k, n, module.seq, made_with, module.eigen_l1d)]
    if not differ:
        return
    raise PorterError(f"golden {golden.path.name} was made on a CPU with a {made_with // 1024} KiB L1 data cache, "
                      f"where LiteRT sums a float layer of depth {differ[0][0]} in other blocks than "
                      f"{module.compiled_dir.name}, compiled for {module.eigen_l1d // 1024} KiB: compile it with "
                      f"--l1d {made_with // 1024}K to gate it by this golden, or give the golden with --compare")


# --- running and comparing ------------------------------------------------------------------


def _windows_key(golden: Golden) -> bytes:
    digest = hashlib.sha256()
    for array in (golden.ids, golden.attention_mask, golden.live, golden.token_type_ids):
        digest.update(np.ascontiguousarray(array, dtype="<i4").tobytes())
    return digest.digest()


def run_module(module: Module, golden: Golden, timeout_per_window_s: float,
               extent: int = evalproto.LIVE_ROWS) -> tuple[list[evalproto.WindowResult], float]:
    request = evalproto.encode_request(golden.ids, golden.attention_mask, golden.live, extent, golden.token_type_ids)
    timeout_s = timeout_per_window_s * max(1, golden.windows)
    try:
        done = wasm.run_command(module.wasm, stdin=request, timeout_s=timeout_s)
    except PorterError as e:
        raise PorterError(f"on golden {golden.path.name}: {_one_line(str(e))}") from None
    if done.exit_code != 0:
        raise PorterError(f"{module.wasm.name} exited with code {done.exit_code} on golden "
                          f"{golden.path.name}: {_one_line(done.stderr.decode(errors='replace'))}")
    results, load_ms = evalproto.decode_reply(done.stdout)
    _check_reply_shape(module, golden, results)
    return results, load_ms


def _check_reply_shape(module: Module, golden: Golden, results: list[evalproto.WindowResult]) -> None:
    if len(results) != golden.windows:
        raise PorterError(f"{module.wasm.name} answered {len(results)} windows of golden "
                          f"{golden.path.name}'s {golden.windows}")
    for w, result in enumerate(results):
        want = (golden.output_rows(w), golden.logits.shape[2])
        if result.logits.shape != want:
            raise PorterError(f"{module.wasm.name} answered window {w} of golden {golden.path.name} "
                              f"with logits {list(result.logits.shape)}, expected {list(want)} "
                              f"({'one pooled row' if golden.pooled else 'live tokens'} x width)")


def compare_golden(golden: Golden, results: list[evalproto.WindowResult], load_ms: float,
                   gated: bool) -> GoldenRun:
    windows, diffs = [], []
    for w, result in enumerate(results):
        rows = golden.output_rows(w)
        windows.append(agreement(result.logits, golden.logits[w], rows))
        diffs.append(np.abs(result.logits.astype(np.float64) - golden.logits[w, :rows]).ravel())
    overall = Agreement(0, 0, 0.0, 0.0)
    for a in windows:
        overall = overall.merge(a)
    return GoldenRun(golden, gated, results, load_ms, windows, overall, np.concatenate(diffs))


def threshold_failures(run: GoldenRun, thresholds: Thresholds) -> list[str]:
    # Written as "not (ok)" so that a NaN logit fails instead of slipping through a comparison.
    a, failures = run.overall, []
    if not a.label_rate >= thresholds.min_label_agreement:
        failures.append(f"label agreement {100 * a.label_rate:.2f}% < "
                        f"{100 * thresholds.min_label_agreement:.2f}% vs {run.name}")
    if not a.max_abs <= thresholds.max_abs:
        failures.append(f"max |dlogit| {a.max_abs:.3g} > {thresholds.max_abs:g} vs {run.name}")
    return failures


# --- timing ---------------------------------------------------------------------------------


def _stats(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "median": statistics.median(values)} if values else \
        {"mean": 0.0, "median": 0.0}


def timing(runs: list[GoldenRun]) -> dict:
    """Per forward pass (one window): mean and median of each part; model load once per run.

    Goldens that shared a run of the module count once."""
    distinct = list({id(run.results): run for run in runs}.values())
    results = [r for run in distinct for r in run.results]
    parts = {f"{part}_ms": _stats([getattr(r, f"{part}_ms") for r in results])
             for part in ("forward", "matmul", "attention", "other")}
    return {"windows": len(results), **parts,
            "model_load_ms": {**_stats([run.load_ms for run in distinct]), "runs": len(distinct)}}


# --- baseline -------------------------------------------------------------------------------


def _baseline_key(run: GoldenRun, window: int) -> str:
    return f"{run.name}#w{window:03d}"


def write_baseline(path: Path, module: Module, runs: list[GoldenRun]) -> BaselineCheck:
    arrays = {_baseline_key(run, w): r.logits for run in runs for w, r in enumerate(run.results)}
    meta = {"format": BASELINE_FORMAT, "model": module.model.name, "model_sha256": module.model_sha256,
            "goldens": {run.name: run.golden.windows for run in runs}}
    arrays[BASELINE_META] = np.array(json.dumps(meta, sort_keys=True))
    write_atomic(path, reproducible_npz(arrays))
    return BaselineCheck(path=path, written=True)


def check_baseline(path: Path, module: Module, runs: list[GoldenRun]) -> BaselineCheck:
    stored = _load_baseline(path, module)
    check = BaselineCheck(path=path, written=False)
    for run in runs:
        for w, result in enumerate(run.results):
            key = _baseline_key(run, w)
            if key not in stored:
                raise PorterError(f"baseline {path.name} has no logits for window {w} of golden "
                                  f"{run.name}; write one with --write-baseline")
            _compare_window(check, run.golden, w, result.logits, stored[key])
    return check


def _load_baseline(path: Path, module: Module) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as archive:
            stored = {k: archive[k] for k in archive.files}
        meta = json.loads(stored.pop(BASELINE_META).item())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise PorterError(f"baseline {path}: not a porter baseline ({e})") from None
    if meta.get("format") != BASELINE_FORMAT:
        raise PorterError(f"baseline {path}: format {meta.get('format')!r}, expected {BASELINE_FORMAT!r}")
    if meta.get("model_sha256") != module.model_sha256:
        raise PorterError(f"baseline {path.name} was written for a model with sha256 "
                          f"{str(meta.get('model_sha256'))[:12]}…, but the module's model "
                          f"{module.model.name} has {module.model_sha256[:12]}…")
    return stored


def _compare_window(check: BitComparison, golden: Golden, window: int, ours: np.ndarray,
                    base: np.ndarray) -> None:
    """Bit comparison (so -0 vs 0 and NaN payloads count); records the first difference."""
    name = golden.path.name.removesuffix(".npz")
    if ours.shape != base.shape:
        check.differing_logits += ours.size
        if check.first_difference is None:
            check.first_difference = {"golden": name, "window": window,
                                      "text_index": int(golden.text_index[window]),
                                      "shape": list(ours.shape), "baseline_shape": list(base.shape)}
        return
    differs = ours.view(np.uint32) != base.astype(np.float32).view(np.uint32)
    if not differs.any():
        return
    check.differing_logits += int(differs.sum())
    delta = np.abs(ours.astype(np.float64) - base)[differs]
    check.max_abs = float(np.append(delta, check.max_abs).max())  # a NaN on either side stays NaN
    if check.first_difference is None:
        token, label = (int(i) for i in np.argwhere(differs)[0])
        check.first_difference = {"golden": name, "window": window,
                                  "text_index": int(golden.text_index[window]),
                                  "token": token, "label": label,
                                  "ours": float(ours[token, label]), "baseline": float(base[token, label])}


def baseline_line(check: BaselineCheck) -> str:
    if check.written:
        return f"baseline written: {check.path}"
    if check.identical:
        return f"baseline {check.path.name}: bit-identical (max |dlogit| = 0)"
    return f"baseline {check.path.name}: {describe_difference(check)}"


def describe_difference(check: BitComparison) -> str:
    d = check.first_difference
    where = f"golden {d['golden']} window {d['window']} (text {d['text_index']})"
    if "token" not in d:
        return f"differs at {where}: logits {d['shape']} vs {d['baseline_shape']}"
    return (f"differs at {where} token {d['token']} label {d['label']}: {d['ours']!r} vs "
            f"{d['baseline']!r}; {check.differing_logits} logits differ, max |dlogit| {check.max_abs:.3g}")


# --- live rows against the whole window -----------------------------------------------------


def compare_extents(check: LiveRowsCheck, golden: Golden, live: list[evalproto.WindowResult],
                    whole: list[evalproto.WindowResult]) -> None:
    for w, (a, b) in enumerate(zip(live, whole)):
        check.rows.append(a.rows)
        check.live_ms.append(a.forward_ms)
        check.whole_ms.append(b.forward_ms)
        _compare_window(check, golden, w, a.logits, b.logits)


def live_rows_line(check: LiveRowsCheck) -> str:
    times = (f"forward {statistics.fmean(check.live_ms):.2f} ms vs {statistics.fmean(check.whole_ms):.2f} ms "
             f"mean")
    if all(rows == check.seq for rows in check.rows):
        return (f"live rows: every window computed all {check.seq} rows (the model's padding is "
                f"load-bearing, or the windows are full); {times}")
    verdict = "bit-identical to" if check.identical else "DIFFERENT from"
    return (f"live rows: {statistics.fmean(check.rows):.1f} of {check.seq} rows computed on average, "
            f"{verdict} the whole-window run; {times}")


def live_rows_report(check: LiveRowsCheck) -> dict:
    return {"seq": check.seq, "windows": len(check.rows), "rows": check.rows,
            "rows_mean": statistics.fmean(check.rows) if check.rows else 0.0,
            "identical": check.identical, "differing_logits": check.differing_logits,
            "max_abs": check.max_abs, "first_difference": check.first_difference,
            "live_forward_ms": _stats(check.live_ms), "whole_window_forward_ms": _stats(check.whole_ms)}


# --- report and plot ------------------------------------------------------------------------


def golden_report(run: GoldenRun, module: Module) -> dict:
    golden = run.golden
    sequences = []
    for w, (a, r) in enumerate(zip(run.windows, run.results)):
        sequences.append({"window": w, "text_index": int(golden.text_index[w]), "live": int(golden.live[w]),
                          **a.as_dict(), "matmul_ms": r.matmul_ms, "attention_ms": r.attention_ms,
                          "other_ms": r.other_ms, "forward_ms": r.forward_ms})
    return {"name": run.name, "path": str(golden.path), "reference": golden.label,
            "ort_cpu": ort_path_of(golden.manifest) if module.ort_cpu else None, "gated": run.gated,
            "windows": golden.windows, "overall": run.overall.as_dict(),
            "logits_compared": int(run.abs_diffs.size),
            "logits_identical": int((run.abs_diffs == 0).sum()),
            "sequences": sequences, "timing": timing([run]), "failures": run.failures}


def _thresholds_report(thresholds: Thresholds) -> dict:
    return {"min_label_agreement": thresholds.min_label_agreement, "max_abs": thresholds.max_abs}


def build_report(module: Module, thresholds: Thresholds, runs: list[GoldenRun],
                 baseline: BaselineCheck | None, live_rows: LiveRowsCheck, plot: Path,
                 failures: list[str]) -> dict:
    baseline_part = None
    if baseline is not None:
        baseline_part = {"path": str(baseline.path), "written": baseline.written,
                         "identical": baseline.identical, "differing_logits": baseline.differing_logits,
                         "max_abs": baseline.max_abs, "first_difference": baseline.first_difference}
    return {"format": REPORT_FORMAT, "kind": module.kind, **module.facts(),
            "thresholds": _thresholds_report(thresholds),
            "goldens": [golden_report(run, module) for run in runs], "timing": timing(runs),
            "baseline": baseline_part, "live_rows": live_rows_report(live_rows), "plot": str(plot),
            "passed": not failures, "failures": failures}


# --- the command ----------------------------------------------------------------------------


def _timing_line(t: dict) -> str:
    return (f"forward pass {t['forward_ms']['mean']:.2f} ms mean, {t['forward_ms']['median']:.2f} ms "
            f"median (matmul {t['matmul_ms']['mean']:.2f} / attention {t['attention_ms']['mean']:.2f} / "
            f"other {t['other_ms']['mean']:.2f} ms mean); model load {t['model_load_ms']['mean']:.3f} ms")


def _echo_run(run: GoldenRun, module: Module, echo) -> None:
    role = "gated" if run.gated else "informative, not gated"
    made_on = ort_path_of(run.golden.manifest) if module.ort_cpu else None
    cpu = f", CPU path {made_on}" if made_on else ""
    echo(f"golden {run.name} ({run.golden.label}{cpu}; {run.golden.windows} windows; {role}):")
    for w, a in enumerate(run.windows):
        echo(f"  window {w:3d} (text {int(run.golden.text_index[w])}): {a.line()}")
    echo(f"  overall: {run.overall.line()}")
    echo(f"  {_timing_line(timing([run]))}")


def _verdict(parts: list[str], failures: list[str]) -> str:
    if failures:
        return "porter verify: FAIL: " + "; ".join(failures)
    return "porter verify: PASS: " + "; ".join(parts)


def _encoder_verdict_parts(runs: list[GoldenRun], baseline: BaselineCheck | None) -> list[str]:
    parts = [f"labels {100 * r.overall.label_rate:.2f}%, max |dlogit| {r.overall.max_abs:.3g} vs {r.name}"
             for r in runs if r.gated]
    if baseline is not None and not baseline.written:
        parts.append("bit-identical to the baseline")
    return parts


def verify(target: Path, goldens: list[Path], compares: list[Path] = (),
           baseline: Path | None = None, write_baseline_to: Path | None = None,
           thresholds: Thresholds = Thresholds(), report_path: Path | None = None,
           plot_path: Path | None = None, timeout_per_window_s: float = DEFAULT_TIMEOUT_PER_WINDOW_S,
           echo=print, model: Path | None = None) -> dict:
    """Runs, compares, writes the report and plot, echoes a summary; returns the report.

    An eval module (encoder) is compared window by window with encoder goldens; a generation
    module (decoder) prompt by prompt with decoder goldens (porter.check.verify_decoder).
    `model` is the file the module was compiled from, when ir.json's path does not lead to it.
    Problems with the inputs raise PorterError; falling below a threshold or differing from the
    baseline does not, it is the report's `passed` and `failures`.
    """
    if not goldens:
        raise PorterError("give at least one --golden FILE")
    if baseline is not None and write_baseline_to is not None:
        raise PorterError("give --baseline or --write-baseline, not both")
    module = locate_module(target, model)
    requested = [(Path(path), True) for path in goldens] + [(Path(path), False) for path in compares]
    report_path = Path(report_path or module.compiled_dir / REPORT_NAME)
    plot_path = Path(plot_path or module.compiled_dir / PLOT_NAME)
    if module.kind == DECODER:
        if baseline is not None or write_baseline_to is not None:
            raise PorterError("--baseline and --write-baseline are for eval modules (encoders), "
                              f"not the generation module {module.wasm.name}")
        runs, failures = verify_decoder.verify_decoder_goldens(module, requested, thresholds,
                                                               timeout_per_window_s, echo)
        report = {"format": REPORT_FORMAT, "kind": module.kind, **module.facts(),
                  "thresholds": _thresholds_report(thresholds),
                  "goldens": [verify_decoder.golden_report(run) for run in runs],
                  "timing": verify_decoder.timing(runs), "plot": str(plot_path),
                  "passed": not failures, "failures": failures}
        parts = verify_decoder.verdict_parts(runs)
    else:
        runs, check, live_rows, failures = _verify_encoder(module, requested, baseline, write_baseline_to,
                                                           thresholds, timeout_per_window_s, echo)
        report = build_report(module, thresholds, runs, check, live_rows, plot_path, failures)
        parts = _encoder_verdict_parts(runs, check)
    write_plot(plot_path, runs)
    write_atomic(report_path, (json.dumps(report, indent=1) + "\n").encode())
    echo(f"report {report_path}, |dlogit| histogram {plot_path}")
    echo(_verdict(parts, failures))
    return report


def _verify_encoder(module: Module, requested: list[tuple[Path, bool]], baseline: Path | None,
                    write_baseline_to: Path | None, thresholds: Thresholds, timeout_per_window_s: float,
                    echo) -> tuple[list[GoldenRun], BaselineCheck | None, LiveRowsCheck, list[str]]:
    loaded = [(load_matching_golden(module, path, gated), gated) for path, gated in requested]
    arithmetic = f", onnxruntime on {ort_cpus.target(module.ort_cpu).describe()}" if module.ort_cpu else ""
    echo(f"eval module {module.wasm} (model {module.model.name}, window {module.seq}, "
         f"{module.labels} labels{arithmetic})")
    runs, replies, live_rows = [], {}, LiveRowsCheck(seq=module.seq)
    for golden, gated in loaded:
        # Goldens of the same windows (LiteRT's two kernel modes) share one run of the module.
        key = _windows_key(golden)
        if key not in replies:
            replies[key] = run_module(module, golden, timeout_per_window_s)
            whole, _ = run_module(module, golden, timeout_per_window_s, evalproto.WHOLE_WINDOW)
            compare_extents(live_rows, golden, replies[key][0], whole)
        runs.append(compare_golden(golden, *replies[key], gated))
    failures = []
    echo(live_rows_line(live_rows))
    if not live_rows.identical:
        failures.append(f"the live-rows run {describe_difference(live_rows)} (whole-window run)")
    for run in runs:
        if run.gated:
            run.failures = threshold_failures(run, thresholds)
            failures += run.failures
        _echo_run(run, module, echo)
    gated_runs = [run for run in runs if run.gated]
    check = None
    if baseline is not None:
        check = check_baseline(baseline, module, gated_runs)
        if not check.identical:
            failures.append(f"baseline {baseline.name} {describe_difference(check)}")
    elif write_baseline_to is not None:
        if failures:
            failures.append(f"baseline {write_baseline_to} not written: the module fails its goldens")
        else:
            check = write_baseline(write_baseline_to, module, gated_runs)
    if check is not None:
        echo(baseline_line(check))
    all_timing = timing(runs)
    echo(f"all runs, {all_timing['windows']} windows: {_timing_line(all_timing)}")
    return runs, check, live_rows, failures


def _one_line(text: str) -> str:
    """Error text from a module (stderr, a panic message) as one line: CLI errors are one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines) if lines else "(no output on stderr)"
