"""onnxruntime goldens: every graphs/*.onnx fixture, mode `ort`.

For each .onnx fixture that exists, the texts of golden/texts.json are cut into the network's
windows (tokenize_windows.py) and run one window per call with onnxruntime's
CPUExecutionProvider, intra_op_num_threads=1, inter_op_num_threads=1, sequential execution and
the default graph optimisation level (ORT_ENABLE_ALL, recorded in the manifest), by porter's own
reference runner (porter.check.references.OrtEncoder, which `porter golden` uses for a user's
model).

onnxruntime's kernels depend on the CPU (porter/reference/ort/cpu.py), so the manifest records
this machine's CPU model and the flags MLAS's dispatch reads. On a CPU that takes onnxruntime's
AVX2 path (porter's target avx2) it writes golden/<fixture>.ort.npz and .json (see common.py),
prints per fixture the max / mean |Δlogit| and argmax agreement against the torch float module
(golden/<network>.torch.npz, if present), and recomputes golden/summary.json from every golden
present; on another CPU it writes golden/<target>/<fixture>.ort.npz and .json instead (e.g.
golden/avx512vnni/), and leaves the summary alone.

    python golden/make_ort_goldens.py [fixture file names ...]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import fixture_info  # noqa: E402
import tokenize_windows  # noqa: E402
from porter.check.references import OrtEncoder, encoder_signature, run_windows  # noqa: E402
from porter.frontends import load_graph  # noqa: E402
from porter.reference import ort_cpu  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixtures", nargs="*", help="fixture file names (default: every .onnx)")
    args = ap.parse_args()
    cpu = ort_cpu.host_cpu()
    target = ort_cpu.target_for_flags(cpu.all_flags, f"this machine's CPU ({cpu.model})")
    directory = common.GOLDEN_DIR if target.name == "avx2" else common.GOLDEN_DIR / target.name
    print(f"{cpu.model}: onnxruntime's {target.describe()} path -> {directory}")
    todo = [p for p in common.fixtures(".onnx") if not args.fixtures or p.name in args.fixtures]
    tok, texts = tokenize_windows.load_tokenizer(), tokenize_windows.load_texts()
    for fixture in todo:
        net = fixture_info.network_of(fixture)
        w = tokenize_windows.windows_for(net, texts, tok)
        reference = OrtEncoder(fixture, encoder_signature(load_graph(fixture)))
        logits, seconds = run_windows(reference, w.ids, w.attention_mask)
        common.save_golden(fixture, "ort", w, logits, reference.facts(), directory,
                           {"cpu_model": cpu.model, "cpu_flags": cpu.flags})
        print(f"{fixture.name} [ort]: {len(w.ids)} windows, {1000 * float(np.median(seconds)):.2f} ms per window")
    if directory == common.GOLDEN_DIR:
        common.update_summary({p.name for p in todo})


if __name__ == "__main__":
    main()
