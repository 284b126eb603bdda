"""The zoo's onnxruntime goldens as this machine's CPU computes them: golden/zoo/<target>/.

    .venv/bin/python graphs/zoo/cpu_goldens.py [NAME ...]

onnxruntime picks its kernels by CPUID (porter/reference/ort/cpu.py), so its logits depend on
the CPU: golden/zoo/*.ort.npz were made on an AVX2 CPU. This script re-runs each of them here
on the same windows or prompts (read from the committed golden, not drawn again) with the zoo's
own runners (make_goldens.run_ort, make_goldens.decoder_greedy), and writes the result under
golden/zoo/<this CPU's target>/ with the committed manifest, this CPU's model and flags, and how
far it is from the AVX2 golden. On an AVX2 machine there is nothing to do: its goldens are the
committed ones. Needs only numpy and onnxruntime (porter's .venv has both).
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

ZOO = Path(__file__).resolve().parent
sys.path.insert(0, str(ZOO))
sys.path.insert(0, str(ZOO.parent.parent))

import make_goldens as mg  # noqa: E402
import members as zm  # noqa: E402
from porter.reference.ort.cpu import host_target  # noqa: E402

BASE_TARGET = "avx2"  # the CPU of golden/zoo/ itself


def committed_ort_goldens(names: set[str]) -> list[Path]:
    goldens = sorted(zm.GOLDEN_DIR.glob("*.onnx.ort.npz"))
    return [g for g in goldens if not names or g.name.split(".")[0] in names
            or g.name.removesuffix(".ort.npz") in names]


def rerun_encoder(model: Path, member, arrays: dict) -> dict:
    windows = {"input_ids": arrays["ids"], "attention_mask": arrays["attention_mask"]}
    if "token_type_ids" in arrays:
        windows["token_type_ids"] = arrays["token_type_ids"]
    out = mg.run_ort(model, windows, member.input_roles)
    logits = mg.as_golden_logits(member, out)
    return {**arrays, "logits": logits}


def rerun_decoder(model: Path, member, arrays: dict) -> dict:
    session = mg.ort_session(model)
    out = dict(arrays)
    for i in range(zm.DECODER_PROMPTS):
        steps = len(arrays[f"p{i}_generated_ids"])
        prompt_logits, step_logits, generated = mg.decoder_greedy(
            model, member, arrays[f"p{i}_prompt_ids"], steps, session)
        out[f"p{i}_prompt_logits"] = prompt_logits.astype(np.float32)
        out[f"p{i}_step_logits"] = step_logits.astype(np.float32)
        out[f"p{i}_generated_ids"] = generated
    return out


def largest_difference(ours: dict, committed: dict) -> float:
    return max(float(np.abs(ours[k].astype(np.float64) - committed[k]).max())
               for k in committed if k.endswith("logits"))


def main() -> None:
    target = host_target().name
    if target == BASE_TARGET:
        print(f"this CPU is an {BASE_TARGET} one: golden/zoo/ already holds its goldens")
        return
    out_dir = zm.GOLDEN_DIR / target
    out_dir.mkdir(exist_ok=True)
    for golden in committed_ort_goldens(set(sys.argv[1:])):
        model = ZOO / golden.name.removesuffix(".ort.npz")
        member, _ = zm.member_of(model)
        with np.load(golden) as data:
            committed = {k: data[k] for k in data.files}
        rerun = rerun_decoder if member.kind == "decoder" else rerun_encoder
        ours = rerun(model, member, committed)
        manifest = json.loads(golden.with_suffix(".json").read_text(encoding="utf-8"))
        manifest.pop("kernel_note", None)  # the AVX2 saturation note; see ort_cpu for this target
        manifest.pop("cpu_masked", None)  # the committed golden's masked CPU; this run sees the real one
        manifest.update({
            "runtime_version": version("onnxruntime"),
            "ort_cpu": target,
            "windows_from": f"golden/zoo/{golden.name}",
            "max_abs_vs_avx2_golden": largest_difference(ours, committed),
            **mg.cpu_facts(),
        })
        mg.write_npz(out_dir / golden.name, ours)
        mg.write_json(out_dir / golden.with_suffix(".json").name, manifest)
        print(f"{golden.name}: max |Δ| vs the {BASE_TARGET} golden {manifest['max_abs_vs_avx2_golden']:.3g}",
              flush=True)


if __name__ == "__main__":
    main()
