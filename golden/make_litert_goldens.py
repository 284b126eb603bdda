"""LiteRT goldens: every graphs/*.tflite fixture, in both of LiteRT's CPU kernel modes.

For each .tflite fixture that exists (litert-torch, ai-edge-quantizer and TensorFlow exports
alike), the texts of golden/texts.json are cut into the network's windows
(tokenize_windows.py) and run one window per call through the model's signature runner with
ai-edge-litert `Interpreter(model_path, num_threads=1)`:

- mode `xnnpack`: the default op resolver, which applies the XNNPACK delegate;
- mode `builtin`: `experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES`,
  TFLite's own builtin kernels (for int8 weights: its hybrid kernels).

Writes golden/<fixture>.<mode>.npz and .json (see common.py), prints per fixture the max / mean
|Δlogit| and the argmax agreement between the two modes over live tokens, and recomputes
golden/summary.json from every golden present.

    python golden/make_litert_goldens.py [fixture file names ...]
"""

import argparse
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import fixture_info  # noqa: E402
import tokenize_windows  # noqa: E402

NUM_THREADS = 1


def modes():
    from ai_edge_litert.interpreter import OpResolverType

    return {
        "xnnpack": ("OpResolverType.AUTO (default; XNNPACK delegate applied)", OpResolverType.AUTO),
        "builtin": ("OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (TFLite builtin kernels)",
                    OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
    }


def run(fixture: Path, resolver, w: "tokenize_windows.Windows"):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(fixture), num_threads=NUM_THREADS,
                     experimental_op_resolver_type=resolver)
    sigs = it.get_signature_list()
    assert len(sigs) == 1, f"{fixture.name}: expected one signature, got {list(sigs)}"
    key = next(iter(sigs))
    runner = it.get_signature_runner(key)
    ins, outs = runner.get_input_details(), runner.get_output_details()
    assert set(ins) == {"input_ids", "attention_mask"}, f"{fixture.name}: inputs {list(ins)}"
    assert len(outs) == 1, f"{fixture.name}: outputs {list(outs)}"
    out_name = next(iter(outs))
    logits, seconds = [], []
    for ids, mask in zip(w.ids, w.attention_mask):
        feed = {"input_ids": ids[None].astype(ins["input_ids"]["dtype"]),
                "attention_mask": mask[None].astype(ins["attention_mask"]["dtype"])}
        t0 = time.perf_counter()
        out = runner(**feed)[out_name]
        seconds.append(time.perf_counter() - t0)
        logits.append(np.asarray(out, dtype=np.float32)[0])
    io = {
        "signature_key": key,
        "inputs": {k: [np.dtype(v["dtype"]).name, [int(d) for d in v["shape"]]] for k, v in ins.items()},
        "outputs": {k: [np.dtype(v["dtype"]).name, [int(d) for d in v["shape"]]] for k, v in outs.items()},
    }
    return np.stack(logits), io, float(np.median(seconds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixtures", nargs="*", help="fixture file names (default: every .tflite)")
    args = ap.parse_args()
    todo = [p for p in common.fixtures(".tflite") if not args.fixtures or p.name in args.fixtures]
    tok, texts = tokenize_windows.load_tokenizer(), tokenize_windows.load_texts()
    litert_version = version("ai-edge-litert")
    for fixture in todo:
        net = fixture_info.network_of(fixture)
        w = tokenize_windows.windows_for(net, texts, tok)
        for mode, (resolver_doc, resolver) in modes().items():
            logits, io, median_s = run(fixture, resolver, w)
            common.save_golden(fixture, mode, w, logits, {
                "runtime": "ai-edge-litert",
                "runtime_version": litert_version,
                "api": "Interpreter(model_path, num_threads=1, experimental_op_resolver_type=...)"
                       ".get_signature_runner(signature_key)",
                "op_resolver": resolver_doc,
                "num_threads": NUM_THREADS,
                **io,
            })
            print(f"{fixture.name} [{mode}]: {len(w.ids)} windows, {1000 * median_s:.2f} ms per window")
    common.update_summary({p.name for p in todo})


if __name__ == "__main__":
    main()
