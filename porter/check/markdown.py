"""`porter check`'s Markdown summary, written for a CI job summary ($GITHUB_STEP_SUMMARY): the
verdict, the model, each golden's bars and results, the module, and the seconds of every step."""

from __future__ import annotations

import math
from pathlib import Path

WORST_SHOWN = 5  # failing windows / prompts listed by name


def render(report: dict) -> str:
    model = Path(report["model"]).name
    lines = [f"## porter check: {_verdict(report)}", "", f"Model `{model}` (sha256 `{report['model_sha256'][:12]}…`)"
             + (f": {_architecture(report['architecture'])}" if report["architecture"] else ""), ""]
    if report["error"]:
        lines += [f"**{report['error']['step']} failed:** {_one_line(report['error']['message'])}", ""]
    verify = report["verify"]
    if verify is not None:
        for golden in verify["goldens"]:
            lines += _golden_section(golden, verify)
        if report["wasm"]:
            lines += [_module_line(report["wasm"], verify), ""]
    lines += _steps_table(report["steps"], report["total_seconds"])
    return "\n".join(lines) + "\n"


def _verdict(report: dict) -> str:
    return {0: "PASS", 1: "FAIL (verification failed)"}.get(report["exit_code"], f"ERROR ({report['outcome']})")


def _architecture(a: dict) -> str:
    if a["kind"] == "decoder":
        return (f"decoder, {a['layers']} layers, hidden {a['hidden']}, {a['heads']} heads, vocabulary "
                f"{a['vocab']}, context {a['context']}")
    rows = "per token" if a["output_rows"] == "tokens" else "per window (pooled)"
    return (f"encoder, {a['layers']} attention layers, {a['heads']} heads, window {a['window']}, "
            f"{a['labels']} outputs {rows}, mask {a['mask']}, {a['reference']} arithmetic")


def _golden_section(golden: dict, verify: dict) -> list[str]:
    bars, overall = verify["thresholds"], golden["overall"]
    if verify["kind"] == "decoder":
        what = f"{golden['prompts']} prompts x {golden['steps']} greedy steps"
        agreement = ("greedy tokens agree", f"{100 * overall['token_rate']:.2f}% "
                                            f"({overall['tokens_agree']}/{overall['tokens']})")
    else:
        what = f"{golden['windows']} windows, {overall['tokens']} live tokens"
        agreement = ("labels agree", f"{100 * overall['label_rate']:.2f}% "
                                     f"({overall['labels_agree']}/{overall['tokens']})")
    rows = [("check", "result", "passes at"), ("---", "---", "---"),
            (agreement[0], agreement[1], f">= {100 * bars['min_label_agreement']:.2f}%"),
            ("max \\|Δlogit\\|", f"{overall['max_abs']:.3g}", f"<= {bars['max_abs']:g}"),
            ("logits identical", f"{golden['logits_identical']} of {golden['logits_compared']}", "")]
    if verify["kind"] == "encoder":
        live = verify["live_rows"]
        rows.append(("live rows vs whole window", "bit-identical" if live["identical"] else "DIFFERENT",
                     "bit-identical"))
    lines = [f"**vs `{golden['name']}`** ({golden['reference']}; {what})", ""]
    lines += ["| " + " | ".join(row) + " |" for row in rows] + [""]
    lines += _worst(golden, bars["max_abs"], verify["kind"])
    return lines


def _worst(golden: dict, max_abs: float, kind: str) -> list[str]:
    failing = [s for s in golden["sequences"] if not s["max_abs"] <= max_abs]
    if not failing:
        return []
    failing.sort(key=lambda s: (not math.isnan(s["max_abs"]), -s["max_abs"]))  # NaN first, then largest
    name = (lambda s: f"prompt {s['prompt']}") if kind == "decoder" else \
        (lambda s: f"window {s['window']} (text {s['text_index']})")
    shown = ", ".join(f"{name(s)}: {s['max_abs']:.3g}" for s in failing[:WORST_SHOWN])
    more = f" and {len(failing) - WORST_SHOWN} more" if len(failing) > WORST_SHOWN else ""
    return [f"Beyond max \\|Δlogit\\|: {shown}{more}.", ""]


def _module_line(wasm: dict, verify: dict) -> str:
    t = verify["timing"]
    if verify["kind"] == "decoder":
        speed = (f"prompt pass {t['prompt_ms']['median']:.2f} ms, {t['tokens_per_s']:.1f} tokens/s (median)"
                 if t["tokens_per_s"] else f"prompt pass {t['prompt_ms']['median']:.2f} ms (median)")
    else:
        speed = (f"forward pass {t['forward_ms']['mean']:.2f} ms mean (matmul {t['matmul_ms']['mean']:.2f} / "
                 f"attention {t['attention_ms']['mean']:.2f} / other {t['other_ms']['mean']:.2f})")
    return (f"Module `{Path(wasm['path']).name}`: {wasm['bytes'] / 1e6:.1f} MB, sha256 `{wasm['sha256'][:12]}…`; "
            f"{speed} under wasmtime")


def _steps_table(steps: list[dict], total: float) -> list[str]:
    lines = ["| step | seconds |", "| --- | ---: |"]
    lines += [f"| {s['name']}{'' if s['ok'] else ' (failed)'} | {s['seconds']:.1f} |" for s in steps]
    return lines + [f"| **total** | **{total:.1f}** |"]


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())
