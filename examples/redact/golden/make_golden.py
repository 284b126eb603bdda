"""LiteRT goldens for the trained redact model (examples/redact/model/redact-minilm.litert-dq8.tflite).

The texts of examples/redact/golden/texts.json (PII-rich, 11 languages' worth of formats) are cut
into 256-token windows with the repo's golden rule (golden/tokenize_windows.windows_for: MiniLM
WordPiece without special tokens, chunks of <= 254, [CLS] chunk [SEP], right-padded with 0,
attention_mask 1 on live tokens) and run one window per call through ai-edge-litert
`Interpreter(model_path, num_threads=1)` with golden/make_litert_goldens.run, in both modes:

- `builtin`: OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (TFLite's builtin hybrid kernels);
- `xnnpack`: the default resolver (XNNPACK delegate applied).

Writes, with golden/common.py's reproducible writers, the same layout as golden/*.npz:

    redact-minilm.litert-dq8.tflite.<mode>.npz   ids, attention_mask [N, 256] int32, live [N] int32,
                                                 text_index [N] int32, logits [N, 256, 81] float32
    redact-minilm.litert-dq8.tflite.<mode>.json  manifest (model sha256, runtime, kernels, io, windowing,
                                                 xnnpack-vs-builtin statistics, decoded entities)

    python examples/redact/golden/make_golden.py
"""

import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "golden"))
sys.path.insert(0, str(REPO / "examples" / "redact" / "train"))

import common  # noqa: E402  (golden/common.py)
import fixture_info  # noqa: E402
import make_litert_goldens  # noqa: E402
import tokenize_windows  # noqa: E402
import redact_common as rc  # noqa: E402
from export import NET  # noqa: E402

TEXTS = HERE / "texts.json"


def entities(tok, texts, w, logits):
    """Decoded BIOES entities per text: [label, start, end, text] in characters."""
    out = [[] for _ in texts]
    body = NET.seq - 2
    seen = {}
    for k, t_i in enumerate(w.text_index):
        t_i = int(t_i)
        chunk_no = seen.get(t_i, 0)
        seen[t_i] = chunk_no + 1
        offs = tok.encode(texts[t_i], add_special_tokens=False).offsets[chunk_no * body:(chunk_no + 1) * body]
        n = int(w.live[k])
        tags = logits[k, 1:n - 1].argmax(-1).tolist()
        for cat, a, b in sorted(rc.chunks(tags), key=lambda x: x[1]):
            s, e = offs[a][0], offs[b][1]
            out[t_i].append([cat, s, e, texts[t_i][s:e]])
    return out


def main():
    texts = json.loads(TEXTS.read_text(encoding="utf-8"))["texts"]
    tok = tokenize_windows.load_tokenizer()
    w = tokenize_windows.windows_for(NET, texts, tok)
    model = rc.TFLITE_PATH
    results = {}
    for mode, (resolver_doc, resolver) in make_litert_goldens.modes().items():
        logits, io, median_s = make_litert_goldens.run(model, resolver, w)
        results[mode] = (logits, io, median_s, resolver_doc)
    gs = {m: {"ids": w.ids, "attention_mask": w.attention_mask, "logits": r[0]} for m, r in results.items()}
    cmp = common.compare(gs["xnnpack"], gs["builtin"])
    for mode, (logits, io, median_s, resolver_doc) in results.items():
        stem = HERE / f"{model.name}.{mode}"
        common.write_npz(stem.with_name(stem.name + ".npz"), {
            "ids": w.ids, "attention_mask": w.attention_mask, "live": w.live,
            "text_index": w.text_index, "logits": logits.astype(np.float32),
        })
        common.write_json(stem.with_name(stem.name + ".json"), {
            "golden": stem.name + ".npz",
            "model_file": "examples/redact/model/" + model.name,
            "model_sha256": fixture_info.sha256(model),
            "mode": mode,
            "runtime": "ai-edge-litert",
            "runtime_version": version("ai-edge-litert"),
            "api": "Interpreter(model_path, num_threads=1, experimental_op_resolver_type=...)"
                   ".get_signature_runner(signature_key)",
            "op_resolver": resolver_doc,
            "num_threads": make_litert_goldens.NUM_THREADS,
            **io,
            "seq": NET.seq, "labels": NET.labels, "vocab": NET.vocab,
            "labels_file": "examples/redact/labels.json",
            "pad_id": rc.PAD_ID, "cls_id": rc.CLS_ID, "sep_id": rc.SEP_ID,
            "windowing": tokenize_windows.WINDOW_RULE,
            "tokenizer": "examples/redact/model/tokenizer.json (MiniLM BERT-uncased WordPiece, truncation "
                         "and padding off)",
            "texts_file": "examples/redact/golden/texts.json",
            "texts_sha256": fixture_info.sha256(TEXTS),
            "windows": int(len(w.ids)),
            "live_tokens": int(w.live.sum()),
            "median_ms_per_window": round(1000 * median_s, 2),
            "xnnpack_vs_builtin": cmp,
            "arrays": {
                "ids": ["int32", list(w.ids.shape)],
                "attention_mask": ["int32", list(w.attention_mask.shape)],
                "live": ["int32", list(w.live.shape)],
                "text_index": ["int32", list(w.text_index.shape)],
                "logits": ["float32", list(logits.shape)],
            },
            "entities": entities(tok, texts, w, logits),
        })
        print(f"{stem.name}: {len(w.ids)} windows, {int(w.live.sum())} live tokens, "
              f"{1000 * median_s:.1f} ms per window")
    print(f"xnnpack vs builtin: max |d| {cmp['max_abs']:.3g}, mean |d| {cmp['mean_abs']:.3g}, "
          f"labels agree {100 * cmp['label_agreement']:.2f}% ({cmp['label_disagreements']} differ)")


if __name__ == "__main__":
    main()
