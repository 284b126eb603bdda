"""Export the trained classifier to LiteRT dynamic int8 and measure it on the held-out set.

    python export.py [--checkpoint out/model.pt] [--limit N]

1. Rebuilds graphs/torch_model.py's TokenClassifier with the fine-tuned weights (out/model.pt),
   wraps it in torch_model.LogitsDict and converts it with litert-torch on a fixed [1, 256]
   window (inputs input_ids, attention_mask int32; output logits float32 [1, 256, 81]) into a
   temporary float file (out/redact-minilm.f32.tflite, ~91 MB, not committed);
2. quantises it with graphs/export_litert.quantize_dq8 (ai-edge-quantizer,
   recipe.dynamic_wi8_afp32(), weights as external buffers) into
   examples/redact/model/redact-minilm.litert-dq8.tflite (+ .json sidecar by
   graphs/fixture_info.write_sidecar: versions, size, sha256, op histogram);
3. runs every held-out window through it in ai-edge-litert (Interpreter(num_threads=1),
   OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, and the default XNNPACK mode), computes the
   same entity-level metrics as train.py, the argmax agreement with the float torch model over
   live word pieces, and writes the "int8_builtin" / "int8_xnnpack" / "agreement" sections of
   metrics.json;
4. writes examples/redact/model/tokenizer.json: MiniLM's WordPiece tokenizer.json with its
   built-in truncation and padding (to 128) removed.
"""

import argparse
import json
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import redact_common as rc  # noqa: E402

sys.path.insert(0, str(rc.REPO / "graphs"))
import spec  # noqa: E402

NET = spec.Network("redact-minilm", 6, 384, 12, 1536, 30522, rc.SEQ, len(rc.LABELS), "minilm")


def export(checkpoint: Path) -> dict:
    import litert_torch
    import torch

    import export_litert
    import fixture_info
    import torch_model
    import train

    torch.set_num_threads(2)
    model = train.build_model(init_head=False)
    model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
    wrapped = torch_model.LogitsDict(model.eval()).eval()
    ids, mask = torch_model.sample_inputs(NET, torch.int32)
    f32 = rc.OUT_DIR / "redact-minilm.f32.tflite"
    t0 = time.perf_counter()
    with torch.no_grad():
        edge = litert_torch.convert(wrapped, sample_kwargs={"input_ids": ids, "attention_mask": mask})
    edge.export(str(f32))
    f32_s = time.perf_counter() - t0
    rc.MODEL_DIR.mkdir(exist_ok=True)
    q_s = export_litert.quantize_dq8(f32, rc.TFLITE_PATH)
    info = fixture_info.write_sidecar(
        rc.TFLITE_PATH,
        exporter="litert-torch + ai-edge-quantizer",
        recipe="recipe.dynamic_wi8_afp32()",
        command="python examples/redact/train/export.py",
        checkpoint="examples/redact/train/out/model.pt (train.py)",
        network_shape={k: getattr(NET, k) for k in NET.__dataclass_fields__ if k not in ("weights", "seed")},
        labels="examples/redact/labels.json",
        tokenizer="examples/redact/model/tokenizer.json",
        versions={p: version(p) for p in ("litert-torch", "ai-edge-quantizer", "torch", "transformers")},
        float_export_seconds=round(f32_s, 2),
        export_seconds=round(q_s, 2),
        io=export_litert._io(rc.TFLITE_PATH),
    )
    print(f"{rc.TFLITE_PATH.name}: {info['size_bytes'] / 2**20:.2f} MiB (float {f32.stat().st_size / 2**20:.1f} MiB, "
          f"convert {f32_s:.1f} s, quantise {q_s:.1f} s)", flush=True)
    return info


def write_tokenizer() -> None:
    obj = json.loads((rc.minilm_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    obj["truncation"] = None
    obj["padding"] = None
    (rc.MODEL_DIR / "tokenizer.json").write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n",
                                                 encoding="utf-8")


def litert_logits(path: Path, resolver, windows_ids):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path), num_threads=1, experimental_op_resolver_type=resolver)
    runner = it.get_signature_runner(next(iter(it.get_signature_list())))
    preds, secs = [], []
    for w_ids in windows_ids:
        ids, mask = rc.pad_window(w_ids)
        t0 = time.perf_counter()
        out = runner(input_ids=ids[None], attention_mask=mask[None])["logits"]
        secs.append(time.perf_counter() - t0)
        preds.append(np.asarray(out[0]).argmax(-1)[1:len(w_ids) - 1].tolist())
    return preds, float(np.median(secs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, default=rc.OUT_DIR / "model.pt")
    ap.add_argument("--limit", type=int, default=0, help="evaluate only the first N test windows")
    ap.add_argument("--skip-export", action="store_true")
    ap.add_argument("--builtin-limit", type=int, default=0,
                    help="run the (slow) builtin-kernel mode on the first N test windows only")
    ap.add_argument("--test", type=Path, default=None,
                    help="held-out JSONL (default: the test file train.py evaluated, from metrics.json)")
    args = ap.parse_args()
    import torch
    from ai_edge_litert.interpreter import OpResolverType

    import train

    if not args.skip_export:
        export(args.checkpoint)
    write_tokenizer()

    metrics = json.loads(rc.METRICS_PATH.read_text())
    test_path = args.test or rc.OUT_DIR / metrics["data"]["test"]["file"]
    tok = rc.load_tokenizer()
    test_ex = train.encode_rows(tok, rc.read_jsonl(test_path), rc.SEQ)
    if args.limit:
        test_ex = test_ex[: args.limit]
    gold = train.gold(test_ex)

    torch.set_num_threads(2)
    model = train.build_model(init_head=False)
    model.load_state_dict(torch.load(args.checkpoint, map_location="cpu"))
    float_pred = train.predict(model, test_ex)
    out = {"float_torch_on_same_windows": rc.evaluate(gold, float_pred)}
    limits = {"int8_builtin": args.builtin_limit or len(test_ex), "int8_xnnpack": len(test_ex)}
    for mode, resolver in (("int8_xnnpack", OpResolverType.AUTO),
                           ("int8_builtin", OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)):
        n = limits[mode]
        t0 = time.perf_counter()
        pred, med = litert_logits(rc.TFLITE_PATH, resolver, [w for w, _ in test_ex[:n]])
        m = rc.evaluate(gold[:n], pred)
        flat = np.concatenate([np.asarray(p, np.int64) for p in pred])
        flat_f = np.concatenate([np.asarray(p, np.int64) for p in float_pred[:n]])
        m["windows"] = n
        m["median_ms_per_window"] = round(1000 * med, 2)
        m["argmax_agreement_with_float"] = round(float((flat == flat_f).mean()), 5)
        m["argmax_disagreements_with_float"] = int((flat != flat_f).sum())
        if n < len(test_ex):
            m["float_torch_on_these_windows"] = rc.evaluate(gold[:n], float_pred[:n])
        out[mode] = m
        print(f"{mode}: {n} windows, micro F1 {m['micro']['f1']:.4f}, token acc {m['token_accuracy']:.4f}, "
              f"agreement with float {m['argmax_agreement_with_float']:.5f} "
              f"({m['argmax_disagreements_with_float']} of {len(flat)} pieces differ), "
              f"{1000 * med:.1f} ms/window, {time.perf_counter() - t0:.0f} s", flush=True)
    print(rc.table({"float": out["float_torch_on_same_windows"], "int8 xnnpack": out["int8_xnnpack"]}))
    metrics = json.loads(rc.METRICS_PATH.read_text())
    metrics["int8"] = {
        "model_file": "examples/redact/model/redact-minilm.litert-dq8.tflite",
        "size_bytes": rc.TFLITE_PATH.stat().st_size,
        "runtime": f"ai-edge-litert {version('ai-edge-litert')}, Interpreter(num_threads=1)",
        "test_file": test_path.name,
        "windows_evaluated": len(test_ex),
        **out,
    }
    rc.METRICS_PATH.write_text(json.dumps(metrics, indent=1) + "\n")


if __name__ == "__main__":
    main()
