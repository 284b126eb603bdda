"""LiteRT goldens for the trained redact model (the one examples/redact/model/ holds).

The texts of examples/redact/golden/texts.json (PII-rich, 11 languages' worth of formats) are cut
into 256-token windows with the repo's golden rule and the model's own tokenizer and special
tokens (redact_common.windows: pieces of model/tokenizer.json without special tokens, chunks of
<= 254, CLS chunk SEP, right-padded with the padding id, attention_mask 1 on live tokens) and
run one window per call through ai-edge-litert
`Interpreter(model_path, num_threads=1)` by porter's own reference runner
(porter.check.references.LiteRTEncoder, as golden/make_litert_goldens.py), in both modes:

- `builtin`: OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES (TFLite's builtin hybrid kernels);
- `xnnpack`: the default resolver (XNNPACK delegate applied).

Writes, with golden/common.py's reproducible writers, the same layout as golden/*.npz:

    <model>.<mode>.npz   ids, attention_mask [N, 256] int32, live [N] int32,
                         text_index [N] int32, logits [N, 256, 81] float32
    <model>.<mode>.json  manifest (model sha256, runtime, kernels, io, windowing,
                         xnnpack-vs-builtin statistics, decoded entities)

    python examples/redact/golden/make_golden.py
"""

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "golden"))
sys.path.insert(0, str(REPO / "examples" / "redact" / "train"))

import common  # noqa: E402  (golden/common.py)
import fixture_info  # noqa: E402
import tokenize_windows  # noqa: E402
import redact_common as rc  # noqa: E402
from porter.check.references import LITERT_MODES, LiteRTEncoder, encoder_signature, run_windows  # noqa: E402
from porter.frontends import load_graph  # noqa: E402

TEXTS = HERE / "texts.json"
WINDOW_RULE = ("pieces of model/tokenizer.json without special tokens (truncation/padding off), cut into "
               "consecutive chunks of at most seq-2; each window = CLS + chunk + SEP, right-padded with the "
               "padding id to seq; attention_mask 1 on CLS/pieces/SEP, 0 on padding; empty text -> one window CLS SEP")


def installed() -> tuple[rc.Base, Path]:
    """The base and file of the one model in examples/redact/model/."""
    models = sorted(rc.MODEL_DIR.glob("redact-*.litert-dq8.tflite"))
    if len(models) != 1:
        raise SystemExit(f"expected one redact-*.litert-dq8.tflite in {rc.MODEL_DIR}, found {len(models)}")
    name = models[0].name.removeprefix("redact-").removesuffix(".litert-dq8.tflite")
    return rc.BASES[name], models[0]


def windows_for(base: rc.Base, tok, texts: list[str]) -> "tokenize_windows.Windows":
    ids_rows, mask_rows, live, text_index = [], [], [], []
    for t_i, text in enumerate(texts):
        pieces = tok.encode(text, add_special_tokens=False).ids
        for w_ids, _ in rc.windows(base, list(pieces)):
            ids, mask = rc.pad_window(base, w_ids)
            ids_rows.append(ids)
            mask_rows.append(mask)
            live.append(len(w_ids))
            text_index.append(t_i)
    return tokenize_windows.Windows(np.asarray(ids_rows, np.int32), np.asarray(mask_rows, np.int32),
                                    np.asarray(live, np.int32), np.asarray(text_index, np.int32))


def entities(tok, texts, w, logits):
    """Decoded BIOES entities per text: [label, start, end, text] in characters."""
    out = [[] for _ in texts]
    body = rc.SEQ - 2
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
    base, model = installed()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(rc.MODEL_DIR / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    w = windows_for(base, tok, texts)
    for stale in HERE.glob("redact-*.tflite.*"):  # goldens of a model that is no longer installed
        if not stale.name.startswith(model.name + "."):
            stale.unlink()
    signature = encoder_signature(load_graph(model))
    results = {}
    for mode in LITERT_MODES:
        reference = LiteRTEncoder(model, mode, signature)
        logits, seconds = run_windows(reference, w.ids, w.attention_mask)
        results[mode] = (logits, reference.facts(), float(np.median(seconds)))
    gs = {m: {"ids": w.ids, "attention_mask": w.attention_mask, "logits": r[0]} for m, r in results.items()}
    cmp = common.compare(gs["xnnpack"], gs["builtin"])
    for mode, (logits, facts, median_s) in results.items():
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
            **facts,
            "seq": rc.SEQ, "labels": len(rc.LABELS), "vocab": tok.get_vocab_size(),
            "labels_file": "examples/redact/labels.json",
            "pad_id": base.pad_id, "cls_id": base.cls_id, "sep_id": base.sep_id,
            "windowing": WINDOW_RULE,
            "tokenizer": f"examples/redact/model/tokenizer.json ({base.about}; truncation and padding off)",
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
