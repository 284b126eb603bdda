"""Re-run the committed golden against model/tinystories.onnx in onnxruntime (CPU, 1 thread).

Checks the model sha256 from golden/manifest.json, then for every prompt: the prompt-pass logits,
each greedy step's logits (through the KV cache) and the generated ids. Prints max |delta| and exits
non-zero on a mismatch (ids must be equal; logits within --tol, default 1e-4).
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    from export_onnx import greedy, session  # noqa: E402
    from model import GPTConfig  # noqa: E402
    man = json.loads((ROOT / "golden/manifest.json").read_text())
    onnx_path = ROOT / man["model"]
    sha = hashlib.sha256(onnx_path.read_bytes()).hexdigest()
    if sha != man["model_sha256"]:
        sys.exit(f"model sha256 {sha} != manifest {man['model_sha256']}")
    g = np.load(ROOT / man["npz"])
    cfg = GPTConfig(**json.loads((HERE / "export_report.json").read_text())["config"])
    sess = session(onnx_path)
    worst, bad = 0.0, []
    for p in man["prompts"]:
        i = p["index"]
        pids = g[f"p{i}_prompt_ids"].tolist()
        steps = len(g[f"p{i}_generated_ids"])
        plog, slog, gen = greedy(sess, cfg, pids, steps)
        d = max(float(np.abs(plog - g[f"p{i}_prompt_logits"]).max()),
                float(np.abs(slog - g[f"p{i}_step_logits"]).max()))
        worst = max(worst, d)
        if gen != g[f"p{i}_generated_ids"].tolist() or d > a.tol:
            bad.append(i)
        print(f"prompt {i} {p['prompt']!r}: ids {'equal' if gen == g[f'p{i}_generated_ids'].tolist() else 'DIFFER'}, "
              f"max |d| {d:.3g}")
    print(f"worst max |d| {worst:.3g}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
