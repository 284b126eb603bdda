"""onnxruntime goldens: every graphs/*.onnx fixture, mode `ort`.

For each .onnx fixture that exists, the texts of golden/texts.json are cut into the network's
windows (tokenize_windows.py) and run one window per call with onnxruntime's
CPUExecutionProvider, intra_op_num_threads=1, inter_op_num_threads=1, sequential execution and
the default graph optimisation level (ORT_ENABLE_ALL, recorded in the manifest).

onnxruntime's kernels depend on the CPU (porter/reference/ort_cpu.py), so the manifest records
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
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import fixture_info  # noqa: E402
import tokenize_windows  # noqa: E402
from porter.reference import ort_cpu  # noqa: E402

ORT_DTYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32}


def run(fixture: Path, w: "tokenize_windows.Windows"):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(fixture), so, providers=["CPUExecutionProvider"])
    ins = {i.name: i for i in sess.get_inputs()}
    outs = sess.get_outputs()
    assert set(ins) == {"input_ids", "attention_mask"}, f"{fixture.name}: inputs {list(ins)}"
    assert len(outs) == 1, f"{fixture.name}: outputs {[o.name for o in outs]}"
    logits, seconds = [], []
    for ids, mask in zip(w.ids, w.attention_mask):
        feed = {"input_ids": ids[None].astype(ORT_DTYPES[ins["input_ids"].type]),
                "attention_mask": mask[None].astype(ORT_DTYPES[ins["attention_mask"].type])}
        t0 = time.perf_counter()
        (out,) = sess.run([outs[0].name], feed)
        seconds.append(time.perf_counter() - t0)
        logits.append(np.asarray(out, dtype=np.float32)[0])
    io = {
        "inputs": {k: [np.dtype(ORT_DTYPES[v.type]).name, list(v.shape)] for k, v in ins.items()},
        "outputs": {o.name: [np.dtype(ORT_DTYPES[o.type]).name, list(o.shape)] for o in outs},
    }
    return np.stack(logits), io, float(np.median(seconds)), ort.__version__


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
        logits, io, median_s, ort_version = run(fixture, w)
        common.save_golden(fixture, "ort", w, logits, {
            "runtime": "onnxruntime",
            "runtime_version": ort_version,
            "api": "InferenceSession(path, sess_options, providers=['CPUExecutionProvider'])",
            "execution_provider": "CPUExecutionProvider",
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "execution_mode": "ORT_SEQUENTIAL",
            "num_threads": 1,
            "intra_op_num_threads": 1,
            "inter_op_num_threads": 1,
            **io,
        }, directory, {"cpu_model": cpu.model, "cpu_flags": cpu.flags})
        print(f"{fixture.name} [ort]: {len(w.ids)} windows, {1000 * median_s:.2f} ms per window")
    if directory == common.GOLDEN_DIR:
        common.update_summary({p.name for p in todo})


if __name__ == "__main__":
    main()
