"""Trim multilingual-e5-small's XLM-R Unigram vocabulary (250,002 pieces) to the pieces the
redact model's languages use, and write the trimmed tokenizer.json.

    python make_vocab.py --train out/train-s1-n32000.jsonl --out out/me5/tokenizer.json

The word-embedding table is most of a small encoder: 250,002 rows of 384 would be 96 MB in int8,
twice Spin's component limit. The service only ever sees the languages it was trained for, so it
keeps:

1. the special pieces <s> <pad> </s> <unk> at their ids 0-3 (the post-processor and the model
   rely on them);
2. every piece the full tokenizer uses at least MIN_CATALOG_COUNT times on natural text in the
   eleven languages of the training data (en, de, fr, es, it, nl, pt, pl, sv, da, fi): the
   gettext message catalogs installed under /usr/share/locale (every msgstr of those languages,
   and the English msgids), a few MB of real interface text per language;
3. every piece the full tokenizer uses on the synthetic training texts (names, streets, cities
   and formats of the Faker locales);
4. every single-character piece of a letter in the Latin, Greek or Cyrillic scripts and of every
   digit, punctuation mark and symbol, so that no text in those scripts falls back to <unk>
   (other scripts, CJK for instance, become <unk>: the model was not trained on them).

The kept pieces stay in their original order with their original scores; the normaliser,
pre-tokenizer, post-processor and decoder are the full tokenizer's. With fewer pieces the
Unigram segmentation of a word can change (a removed piece is spelled with shorter ones); the
model is trained and served with the trimmed tokenizer only, so that is what it learns.
`keep_ids` maps a new id to the old one (the row of the e5 embedding table): it is the position
of the piece in the full vocabulary, recovered from the piece itself.
"""

from __future__ import annotations

import argparse
import collections
import gettext
import glob
import json
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import redact_common as rc  # noqa: E402

FULL_TOKENIZER = Path("/work/shared/data/tokenizers/xlmr-unigram-250k.tokenizer.json")
CATALOG_LANGUAGES = ["de", "fr", "es", "it", "nl", "pt", "pl", "sv", "da", "fi"]
CATALOG_GLOB = "/usr/share/locale/{lang}/LC_MESSAGES/*.mo"
MIN_CATALOG_COUNT = 2
SPECIAL_IDS = range(4)
KEPT_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")


def catalog_texts() -> list[str]:
    """Every translated message of the catalogs of CATALOG_LANGUAGES, and their English ids."""
    texts = set()
    for lang in CATALOG_LANGUAGES:
        for path in sorted(glob.glob(CATALOG_GLOB.format(lang=lang))):
            try:
                with open(path, "rb") as fh:
                    catalog = gettext.GNUTranslations(fh)._catalog
            except (OSError, UnicodeDecodeError):
                continue  # a catalog in a legacy charset: the others are plenty
            for msgid, msgstr in catalog.items():
                msgid = msgid[0] if isinstance(msgid, tuple) else msgid
                texts.update(t for t in (msgid, msgstr) if t)
    return sorted(texts)


def piece_counts(tokenizer, texts: list[str]) -> collections.Counter:
    counts = collections.Counter()
    for encoding in tokenizer.encode_batch(texts, add_special_tokens=False):
        counts.update(encoding.ids)
    return counts


def kept_character(piece: str) -> bool:
    """A one-character piece worth keeping: a Latin/Greek/Cyrillic letter, a digit, a mark of
    punctuation or a symbol (the metaspace marker on its own included)."""
    text = piece.removeprefix("▁") or piece
    if len(text) != 1:
        return False
    category = unicodedata.category(text)
    if category[0] in "NPSZ" or text == "▁":
        return True
    if category[0] in "LM":
        return unicodedata.name(text, "").startswith(KEPT_SCRIPTS)
    return False


def select(vocab: list[list], catalog: collections.Counter, training: collections.Counter) -> list[int]:
    keep = set(SPECIAL_IDS)
    keep.update(i for i, n in catalog.items() if n >= MIN_CATALOG_COUNT)
    keep.update(training)
    keep.update(i for i, (piece, _) in enumerate(vocab) if kept_character(piece))
    return sorted(keep)


def trimmed_tokenizer(full: dict, keep: list[int]) -> dict:
    out = json.loads(json.dumps(full))
    vocab = full["model"]["vocab"]
    out["model"]["vocab"] = [vocab[i] for i in keep]
    if keep[:4] != list(SPECIAL_IDS):
        raise SystemExit("the special pieces must keep ids 0-3")
    out["model"]["unk_id"] = full["model"]["unk_id"]  # 3, unchanged
    # <mask> (250001) is not kept: the model never sees it.
    out["added_tokens"] = [t for t in full["added_tokens"] if t["id"] in SPECIAL_IDS]
    out["truncation"] = None
    out["padding"] = None
    return out


def keep_ids(tokenizer_json: Path) -> list[int]:
    """New id -> old id (row of the full embedding table), from the pieces of a trimmed file."""
    full = {piece: i for i, (piece, _) in enumerate(json.loads(FULL_TOKENIZER.read_text(encoding="utf-8"))["model"]["vocab"])}
    pieces = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    return [full[piece] for piece, _ in pieces]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=Path, required=True, help="the synthetic training JSONL")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(FULL_TOKENIZER))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    texts = catalog_texts()
    catalog = piece_counts(tokenizer, texts)
    training = piece_counts(tokenizer, [row["text"] for row in rc.read_jsonl(args.train)])
    full = json.loads(FULL_TOKENIZER.read_text(encoding="utf-8"))
    keep = select(full["model"]["vocab"], catalog, training)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(trimmed_tokenizer(full, keep), ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(keep)} of {len(full['model']['vocab'])} pieces "
          f"({len(texts)} catalog messages: {len(catalog)} pieces, {sum(n >= MIN_CATALOG_COUNT for n in catalog.values())} "
          f"used {MIN_CATALOG_COUNT}+ times; training texts: {len(training)} pieces)")


if __name__ == "__main__":
    main()
