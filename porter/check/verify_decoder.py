"""`porter verify` for a generation module: greedy tokens and logits against decoder goldens.

The module runs every prompt of a golden in one request (porter.runtime.decoder_proto: one
prompt pass, then one token per call, greedy) with its logits returned. Per prompt the report
gives how many generated tokens equal the golden's before the first difference, and |dlogit|
over the logits computed from the same context as the golden's: the prompt pass, and every
step up to and including the first differing token (after it the contexts differ, and so must
the logits). Token agreement is gated by --min-label-agreement (a greedy token is the label
of a decoder), |dlogit| by --max-abs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from porter.check.golden import DecoderGolden, check_model_matches, load_decoder_golden
from porter.errors import PorterError
from porter.runtime import decoder_proto


@dataclass
class PromptComparison:
    prompt: int
    length: int
    steps: int
    tokens_agree: int  # generated tokens equal to the golden's before the first difference
    compared_rows: int  # prompt rows + step rows from the same context as the golden's
    max_abs: float
    mean_abs: float
    prompt_ms: float
    decode_ms: float  # the steps - 1 one-token calls

    @property
    def first_difference(self) -> int | None:
        return None if self.tokens_agree == self.steps else self.tokens_agree

    @property
    def token_rate(self) -> float:
        return self.tokens_agree / self.steps

    def as_dict(self) -> dict:
        decode_tokens = self.steps - 1
        return {"prompt": self.prompt, "length": self.length, "steps": self.steps,
                "tokens_agree": self.tokens_agree, "token_rate": self.token_rate,
                "first_difference": self.first_difference, "compared_rows": self.compared_rows,
                "max_abs": self.max_abs, "mean_abs": self.mean_abs, "prompt_ms": self.prompt_ms,
                "decode_ms": self.decode_ms,
                "ms_per_token": self.decode_ms / decode_tokens if decode_tokens else 0.0}

    def line(self) -> str:
        tokens = (f"all {self.steps} tokens equal" if self.first_difference is None else
                  f"tokens equal up to step {self.first_difference} of {self.steps}")
        return f"{tokens}, max |dlogit| {self.max_abs:.3g} over {self.compared_rows} rows"


@dataclass
class DecoderRun:
    golden: DecoderGolden
    gated: bool
    prompts: list[PromptComparison]
    load_ms: float
    abs_diffs: np.ndarray  # every compared logit's |dlogit|, float64, for the histogram
    failures: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.golden.path.name.removesuffix(".npz")

    @property
    def token_rate(self) -> float:
        return sum(p.tokens_agree for p in self.prompts) / sum(p.steps for p in self.prompts)

    @property
    def max_abs(self) -> float:
        return float(self.abs_diffs.max()) if self.abs_diffs.size else 0.0


def load_matching_decoder_golden(module, path) -> DecoderGolden:
    golden = load_decoder_golden(path)
    vocab = golden.step_logits[0].shape[1]
    if vocab != module.labels:
        raise PorterError(f"golden {golden.path.name} has a vocabulary of {vocab}; the module's is {module.labels}")
    for i, ids in enumerate(golden.prompt_ids):
        if len(ids) + golden.steps - 1 > module.seq:
            raise PorterError(f"golden {golden.path.name}: prompt {i} ({len(ids)} tokens) and "
                              f"{golden.steps} steps do not fit the module's context of {module.seq}")
    check_model_matches(golden, module.model)
    return golden


def compare_prompt(golden: DecoderGolden, i: int, generation: decoder_proto.Generation) -> tuple[PromptComparison, np.ndarray]:
    want = golden.generated_ids[i].tolist()
    agree = next((k for k, (a, b) in enumerate(zip(generation.generated, want)) if a != b), len(want))
    same_context = min(agree + 1, golden.steps)  # the first differing step still shared the context
    ours = np.concatenate([generation.prompt_logits, generation.step_logits[:same_context]])
    theirs = np.concatenate([golden.prompt_logits[i], golden.step_logits[i][:same_context]])
    diffs = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    comparison = PromptComparison(i, len(golden.prompt_ids[i]), golden.steps, agree, len(ours),
                                  float(diffs.max()), float(diffs.mean()), generation.prompt_ms,
                                  generation.decode_ms)
    return comparison, diffs.ravel()


def run_golden(module, golden: DecoderGolden, gated: bool, timeout_per_prompt_s: float) -> DecoderRun:
    prompts = [ids.tolist() for ids in golden.prompt_ids]
    try:
        generations, load_ms = decoder_proto.generate(module.wasm, prompts, golden.steps, with_logits=True,
                                                      timeout_s=timeout_per_prompt_s * len(prompts))
    except PorterError as e:
        raise PorterError(f"on golden {golden.path.name}: {' | '.join(str(e).splitlines())}") from None
    compared = [compare_prompt(golden, i, g) for i, g in enumerate(generations)]
    return DecoderRun(golden, gated, [c for c, _ in compared], load_ms,
                      np.concatenate([d for _, d in compared]))


def threshold_failures(run: DecoderRun, thresholds) -> list[str]:
    # Written as "not (ok)" so that a NaN logit fails instead of slipping through a comparison.
    failures = []
    if not run.token_rate >= thresholds.min_label_agreement:
        failures.append(f"greedy tokens agree {100 * run.token_rate:.2f}% < "
                        f"{100 * thresholds.min_label_agreement:.2f}% vs {run.name}")
    if not run.max_abs <= thresholds.max_abs:
        failures.append(f"max |dlogit| {run.max_abs:.3g} > {thresholds.max_abs:g} vs {run.name}")
    return failures


def _stats(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "median": statistics.median(values)}


def timing(runs: list[DecoderRun]) -> dict:
    prompts = [p for run in runs for p in run.prompts]
    per_token = [p.decode_ms / (p.steps - 1) for p in prompts if p.steps > 1]
    return {"prompts": len(prompts), "prompt_ms": _stats([p.prompt_ms for p in prompts]),
            "ms_per_token": _stats(per_token) if per_token else None,
            "tokens_per_s": 1000 / statistics.median(per_token) if per_token else None,
            "model_load_ms": _stats([run.load_ms for run in runs])}


def golden_report(run: DecoderRun) -> dict:
    tokens = sum(p.steps for p in run.prompts)
    return {"name": run.name, "path": str(run.golden.path), "reference": run.golden.label,
            "gated": run.gated, "prompts": run.golden.prompts, "steps": run.golden.steps,
            "overall": {"tokens": tokens, "tokens_agree": sum(p.tokens_agree for p in run.prompts),
                        "token_rate": run.token_rate, "max_abs": run.max_abs,
                        "mean_abs": float(run.abs_diffs.mean()) if run.abs_diffs.size else 0.0},
            "logits_compared": int(run.abs_diffs.size),
            "logits_identical": int((run.abs_diffs == 0).sum()),
            "sequences": [p.as_dict() for p in run.prompts], "timing": timing([run]),
            "failures": run.failures}


def verify_decoder_goldens(module, requested: list, thresholds, timeout_per_prompt_s: float,
                           echo) -> tuple[list[DecoderRun], list[str]]:
    """Runs and compares every (golden path, gated) pair; returns the runs and the gated failures."""
    loaded = [(load_matching_decoder_golden(module, path), gated) for path, gated in requested]
    echo(f"generation module {module.wasm} (model {module.model.name}, context {module.seq}, "
         f"vocabulary {module.labels})")
    runs, failures = [], []
    for golden, gated in loaded:
        run = run_golden(module, golden, gated, timeout_per_prompt_s)
        if gated:
            run.failures = threshold_failures(run, thresholds)
            failures += run.failures
        _echo_run(run, echo)
        runs.append(run)
    all_timing = timing(runs)
    if all_timing["tokens_per_s"]:
        echo(f"prompt pass {all_timing['prompt_ms']['median']:.2f} ms median, "
             f"{all_timing['tokens_per_s']:.1f} tokens/s median")
    return runs, failures


def _echo_run(run: DecoderRun, echo) -> None:
    role = "gated" if run.gated else "informative, not gated"
    echo(f"golden {run.name} ({run.golden.label}; {run.golden.prompts} prompts x {run.golden.steps} "
         f"steps; {role}):")
    for p in run.prompts:
        echo(f"  prompt {p.prompt:3d} ({p.length} tokens): {p.line()}")
    echo(f"  overall: greedy tokens agree {100 * run.token_rate:.2f}%, max |dlogit| {run.max_abs:.3g}")


def verdict_parts(runs: list[DecoderRun]) -> list[str]:
    return [f"greedy tokens {100 * r.token_rate:.2f}%, max |dlogit| {r.max_abs:.3g} vs {r.name}"
            for r in runs if r.gated]
