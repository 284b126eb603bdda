"""Measure an exported redact model the way a caller of the service sees it.

    python evaluate.py --base me5 [--model TFLITE] [--tokenizer JSON] [--sets handwritten,synthetic]
                       [--modes builtin,xnnpack] [--out out/<base>/eval.json] [--predictions FILE]

For every text of the evaluation sets the model's logits come from ai-edge-litert
(`Interpreter(num_threads=1)`, one [1, 256] window per call, the golden windowing rule) in the
modes asked for: `builtin` (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, TFLite's builtin
kernels, which porter's wasm module reproduces bit for bit) and `xnnpack` (the default
delegate). Per-token argmax labels then go through pipeline.redact_spans, the service's own
decoding (lenient BIOES, whitespace trimmed, checks that veto, recognisers), so the spans
measured are the items /redact returns.

Sets: `handwritten` (../eval/handwritten.jsonl: 10 languages, texts written by hand) and
`synthetic` (the held-out generator split, out/test-s2-n1000.jsonl: other templates, other seed).

Figures, per set and mode:
- span-level precision / recall / F1 per label and micro: a predicted item is right when label,
  start and end all equal a gold span's (code points);
- per language (handwritten);
- the false-positive rate: the share of texts without personal data that get any item;
- on the synthetic set also the model alone, as train.py measures it (strict BIOES chunks over
  pieces), for comparison with earlier runs;
- xnnpack vs builtin: argmax agreement over live tokens, max |delta logit|, and how many texts'
  items differ.

--predictions writes the builtin items of every hand-written text (what the service must
return for it; tests/test_redact_service.py checks the served component against this file).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline  # noqa: E402
import redact_common as rc  # noqa: E402

HANDWRITTEN = rc.REDACT_DIR / "eval" / "handwritten.jsonl"
SYNTHETIC = rc.OUT_DIR / "test-s2-n1000.jsonl"


def interpreter(model: Path, mode: str):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = {"builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, "xnnpack": OpResolverType.AUTO}[mode]
    it = Interpreter(model_path=str(model), num_threads=1, experimental_op_resolver_type=resolver)
    return it.get_signature_runner(next(iter(it.get_signature_list())))


def encode_text(base: rc.Base, tok, text: str):
    """(piece ids, code-point offsets, windows) for one text, by the golden windowing rule."""
    enc = tok.encode(text, add_special_tokens=False)
    ids = list(enc.ids)
    return ids, [tuple(o) for o in enc.offsets], [w for w, _ in rc.windows(base, ids)]


def run_windows(runner, base: rc.Base, windows: list[list[int]]) -> np.ndarray:
    """Logits of the text's pieces (CLS/SEP dropped), windows concatenated: [pieces, labels]."""
    rows = []
    for w_ids in windows:
        ids, mask = rc.pad_window(base, w_ids)
        out = runner(input_ids=ids[None], attention_mask=mask[None])["logits"]
        rows.append(np.asarray(out[0], np.float32)[1:len(w_ids) - 1])
    return np.concatenate(rows) if rows else np.zeros((0, len(rc.LABELS)), np.float32)


def token_labels(logits: np.ndarray) -> tuple[list[str], list[float]]:
    """Argmax label and its softmax probability per piece, in float32 as the service computes it."""
    best = logits.argmax(-1)
    top = logits[np.arange(len(best)), best]
    scores = 1.0 / np.exp(logits - top[:, None]).astype(np.float32).sum(-1)
    return [rc.LABELS[i] for i in best], scores.tolist()


def prf(tp: int, predicted: int, gold: int) -> dict:
    p = tp / predicted if predicted else 0.0
    r = tp / gold if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "support": gold, "predicted": predicted}


def span_metrics(rows: list[dict], predicted: list[list[tuple]]) -> dict:
    """Exact-match span metrics per label and micro, per language, and the false-positive rate."""
    counts = defaultdict(lambda: [0, 0, 0])  # label -> tp, predicted, gold
    by_lang = defaultdict(lambda: [0, 0, 0])
    nopii = nopii_hit = 0
    lang_nopii = defaultdict(lambda: [0, 0])  # language -> texts without personal data, those with items
    for row, items in zip(rows, predicted):
        gold = {(l, s, e) for s, e, l in row["spans"]}
        pred = set(items)
        lang = row.get("lang")
        for slot, spans in ((2, gold), (1, pred), (0, gold & pred)):
            for label, _, _ in spans:
                counts[label][slot] += 1
                if lang:
                    by_lang[lang][slot] += 1
        if not row["spans"]:
            nopii += 1
            nopii_hit += bool(items)
            if lang:
                lang_nopii[lang][0] += 1
                lang_nopii[lang][1] += bool(items)
    per_label = {c: prf(*counts[c]) for c in rc.CATEGORIES if counts[c][2] or counts[c][1]}
    micro = prf(*(sum(v[i] for v in counts.values()) for i in range(3)))
    out = {"micro": micro, "per_label": per_label,
           "no_pii_texts": nopii, "no_pii_texts_with_items": nopii_hit,
           "false_positive_rate": round(nopii_hit / nopii, 4) if nopii else None}
    if by_lang:
        out["per_language"] = {lang: {**prf(*by_lang[lang]), "no_pii_texts": lang_nopii[lang][0],
                                      "no_pii_texts_with_items": lang_nopii[lang][1]} for lang in sorted(by_lang)}
    return out


def evaluate_set(name: str, rows: list[dict], base: rc.Base, tok, model: Path, modes: list[str]) -> dict:
    encoded = [encode_text(base, tok, row["text"]) for row in rows]
    result, logits_by_mode, items_by_mode = {"texts": len(rows), "windows": sum(len(e[2]) for e in encoded)}, {}, {}
    for mode in modes:
        runner = interpreter(model, mode)
        t0 = time.perf_counter()
        logits = [run_windows(runner, base, windows) for _, _, windows in encoded]
        seconds = time.perf_counter() - t0
        items, vetoed = [], []
        for row, (_, offsets, _), lg in zip(rows, encoded, logits):
            labels, scores = token_labels(lg)
            spans, refused = pipeline.redact_spans(row["text"], offsets, labels, scores)
            items.append([(s.label, s.start, s.end) for s in spans])
            vetoed.append([(s.label, s.start, s.end) for s in refused])
        m = span_metrics(rows, items)
        m["vetoed_spans"] = sum(map(len, vetoed))
        m["seconds_per_window"] = round(seconds / max(1, result["windows"]), 4)
        if name == "synthetic":
            gold = [rc.piece_tags(offs, row["spans"]) for row, (_, offs, _) in zip(rows, encoded)]
            pred = [lg.argmax(-1).tolist() for lg in logits]
            m["model_alone_strict_bioes"] = {k: v for k, v in rc.evaluate(gold, pred).items() if k != "per_label"}
        result[mode] = m
        logits_by_mode[mode], items_by_mode[mode] = logits, (items, vetoed)
        print(f"{name} {mode}: micro F1 {m['micro']['f1']:.4f} (P {m['micro']['precision']:.3f}, R {m['micro']['recall']:.3f}), "
              f"false positives {m['no_pii_texts_with_items']}/{m['no_pii_texts']}, {seconds:.0f} s", flush=True)
    if {"builtin", "xnnpack"} <= set(modes):
        a = np.concatenate(logits_by_mode["builtin"])
        b = np.concatenate(logits_by_mode["xnnpack"])
        result["xnnpack_vs_builtin"] = {
            "live_tokens": int(len(a)),
            "label_agreement": round(float((a.argmax(-1) == b.argmax(-1)).mean()), 5),
            "label_disagreements": int((a.argmax(-1) != b.argmax(-1)).sum()),
            "max_abs_logit_difference": round(float(np.abs(a.astype(np.float64) - b).max()), 4),
            "texts_whose_items_differ": sum(x != y for x, y in zip(items_by_mode["builtin"][0], items_by_mode["xnnpack"][0])),
        }
    result["_items"] = items_by_mode
    return result


def write_predictions(path: Path, model: Path, rows: list[dict], items_vetoed) -> None:
    items, vetoed = items_vetoed
    obj = {
        "about": "What /redact returns for every hand-written text with the model below (LiteRT builtin kernels, "
                 "which the wasm module reproduces bit for bit): items and vetoed spans as [label, start, end] in "
                 "code points. Written by examples/redact/train/evaluate.py --predictions.",
        "model_file": str(model.relative_to(rc.REPO)) if model.is_relative_to(rc.REPO) else model.name,
        "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
        "texts": [{"id": row["id"], "items": [list(i) for i in it], "vetoed": [list(v) for v in ve]}
                  for row, it, ve in zip(rows, items, vetoed)],
    }
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", choices=sorted(rc.BASES), required=True)
    ap.add_argument("--model", type=Path, default=None, help="default: out/<base>/redact-<base>.litert-dq8.tflite")
    ap.add_argument("--tokenizer", type=Path, default=None, help="default: the base's training tokenizer")
    ap.add_argument("--sets", default="handwritten,synthetic")
    ap.add_argument("--modes", default="builtin,xnnpack")
    ap.add_argument("--out", type=Path, default=None, help="default: out/<base>/eval.json")
    ap.add_argument("--predictions", type=Path, default=None)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    base = rc.BASES[args.base]
    model = args.model or base.out_dir / f"redact-{base.name}.litert-dq8.tflite"
    tok = Tokenizer.from_file(str(args.tokenizer or base.tokenizer_json))
    tok.no_truncation()
    tok.no_padding()
    modes = args.modes.split(",")
    report = {"model_file": model.name, "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
              "runtime": "ai-edge-litert Interpreter(num_threads=1), one [1, 256] window per call",
              "metric": "items of the service's decoding (train/pipeline.py) against the gold spans: exact "
                        "label, start and end in code points"}
    sets = {"handwritten": HANDWRITTEN, "synthetic": SYNTHETIC}
    for name in args.sets.split(","):
        rows = rc.read_jsonl(sets[name])
        result = evaluate_set(name, rows, base, tok, model, modes)
        items = result.pop("_items")
        if name == "handwritten" and args.predictions and "builtin" in items:
            write_predictions(args.predictions, model, rows, items["builtin"])
        report[name] = result
    out = args.out or base.out_dir / "eval.json"
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
