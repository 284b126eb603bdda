"""Goldens with a segment B for the zoo members that take token_type_ids: golden/zoo/pairs/.

    ~/.cache/porter/export-venv/bin/python graphs/zoo/pair_goldens.py [NAME ...]

The committed goldens (make_goldens.py) feed token type 0 everywhere, so they cannot show that a
module reads its token types. These are the same 6 seeded windows of each member
(make_goldens.windows_for) made into sentence pairs the way the family's tokenizer post-processor
makes them: a window of n >= 4 live tokens is `CLS A SEP B SEP` with segment B starting at
(n + 1) // 2 (the token before it becomes the SEP-like id) and token type 1 from there to the
last live token; RoBERTa / XLM-R pairs are `<s> A </s></s> B </s>` with every token type 0, as
their post-processor writes them (their type table has one row). Windows of fewer than 4 tokens
stay one segment.

Each file runs in its real runtime on this machine (LiteRT builtin, 1 thread, for .tflite;
onnxruntime CPUExecutionProvider, 1 thread, ORT_ENABLE_ALL, for .onnx: its kernels depend on the
CPU, so the manifest's cpu_flags and ort_cpu say which path made it) and once more with every
token type 0: `segment_b.max_abs_vs_type_zero` records how far segment B moves the logits. The
torch module on the same pairs is `vs_torch`. Goldens are byte-stable: an unchanged file gives
the same npz and json.
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

ZOO = Path(__file__).resolve().parent
sys.path.insert(0, str(ZOO))
sys.path.insert(0, str(ZOO.parent))
sys.path.insert(0, str(ZOO.parent.parent))

import fixture_info  # noqa: E402
import make_goldens as mg  # noqa: E402
import members as zm  # noqa: E402
from porter.reference.litert.floats import host_l1d_bytes  # noqa: E402
from porter.reference.ort.cpu import host_target  # noqa: E402

PAIR_DIR = zm.GOLDEN_DIR / "pairs"
MIN_PAIR_TOKENS = 4
PAIR_RULE = (
    mg.WINDOW_RULE.removesuffix("token_type_ids all zero")
    + "then made sentence pairs: a window of n >= 4 live tokens gets the SEP-like id at "
    "(n + 1) // 2 - 1 (RoBERTa / XLM-R: at -2 and -1) and token type 1 from (n + 1) // 2 to n - 1 "
    "(RoBERTa / XLM-R: every token type 0, their type table has one row); shorter windows stay one "
    "segment"
)


def type_rows(m: zm.Encoder) -> int:
    """Rows of the member's token-type table (its transformers config's type_vocab_size)."""
    import zoo_torch as zt

    return zt._config(m).type_vocab_size


def pair_windows(m: zm.Encoder) -> dict[str, np.ndarray]:
    w = mg.windows_for(m)
    sep = m.ids[2]
    two_types = type_rows(m) >= 2
    for i, n in enumerate(w["live"]):
        if n < MIN_PAIR_TOKENS:
            continue
        b = (int(n) + 1) // 2
        w["input_ids"][i, b - 1] = sep
        if not two_types:
            w["input_ids"][i, b - 2] = sep
        else:
            w["token_type_ids"][i, b:n] = 1
    return w


def run(m: zm.Encoder, flavour: str, mode: str, w: dict):
    path = m.path(flavour)
    if mode == "ort":
        out, io = mg.run_ort(path, w, m.input_roles, with_io=True)
        runtime = {"runtime": "onnxruntime", "runtime_version": version("onnxruntime"), **mg.ORT_FACTS,
                   "ort_cpu": host_target().name}
    else:
        out, io = mg.run_litert(path, w, m.input_roles, mode=mode, with_io=True)
        runtime = {"runtime": "ai-edge-litert", "runtime_version": version("ai-edge-litert"),
                   "api": "Interpreter(model_path, num_threads=1, experimental_op_resolver_type=...)"
                          ".get_signature_runner(signature_key)",
                   "op_resolver": mg.litert_resolver(mode)[0]}
    return mg.as_golden_logits(m, out), io, runtime


def pair_golden(m: zm.Encoder, flavour: str, w: dict, torch_logits: np.ndarray, directory: Path = PAIR_DIR) -> dict:
    mode = "ort" if flavour.endswith(".onnx") else "builtin"
    logits, io, runtime = run(m, flavour, mode, w)
    zeros = {**w, "token_type_ids": np.zeros_like(w["token_type_ids"])}
    type_zero, _, _ = run(m, flavour, mode, zeros)
    moved = mg.versus(m, w, logits, type_zero)
    path = m.path(flavour)
    stem = directory / f"{path.name}.{mode}"
    mg.write_npz(stem.with_name(stem.name + ".npz"), mg.encoder_arrays(m, w, logits))
    vs = mg.versus(m, w, logits, torch_logits)
    mg.write_json(stem.with_name(stem.name + ".json"), {
        "golden": stem.name + ".npz",
        "model_file": str(path.relative_to(zm.REPO)),
        "model_sha256": fixture_info.sha256(path),
        "flavour": flavour,
        "mode": mode,
        **runtime,
        "threads": mg.NUM_THREADS,
        **io,
        **mg.manifest_base(m, w, logits),
        "windowing": PAIR_RULE,
        "segment_b_windows": int((w["token_type_ids"].any(axis=1) if type_rows(m) >= 2
                                  else w["live"] >= MIN_PAIR_TOKENS).sum()),
        "segment_b": {"max_abs_vs_type_zero": moved["max_abs"],
                      "label_agreement_vs_type_zero": moved.get("label_agreement")},
        "cpu_l1d_bytes": host_l1d_bytes(),
        "vs_torch": vs,
    })
    return {"file": stem.name, "vs_torch": vs["max_abs"], "moved_by_segment_b": moved["max_abs"]}


def main() -> None:
    names = set(sys.argv[1:])
    PAIR_DIR.mkdir(exist_ok=True)
    for m in zm.ENCODERS:
        if not m.token_type_input or (names and m.name not in names):
            continue
        w = pair_windows(m)
        torch_logits = mg.as_golden_logits(m, mg.run_torch(m, w))
        for flavour in m.flavours:
            if m.path(flavour).is_file():
                print(pair_golden(m, flavour, w, torch_logits), flush=True)


if __name__ == "__main__":
    main()
