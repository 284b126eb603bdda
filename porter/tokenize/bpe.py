"""Byte-level BPE tokenizers (GPT-2 style) compiled into bpe.bin for the generation service.

porter's tokenizer compiler (porter.tokenize.compile) has no BPE model, so the byte-level BPE that
GPT-2-style tokenizers use is compiled here into a flat blob the Rust side reads in place (no JSON
parsing per request; the platform starts a fresh instance for every request).

bpe.bin (little-endian u32 throughout; each section starts on an 8-byte boundary, porter.tokenize.blob):

    header     magic b"PBPE" | version | vocab_size | flags (bit 0: add_prefix_space)
               | section_count | section_count x (offset, length in bytes), indexed by Section
    BYTE_IDS       256 x id of the single-byte token (MISSING if the vocabulary lacks it)
    TOKEN_OFFSETS  (vocab_size + 1) x offset into TOKEN_BYTES: id -> the raw bytes it decodes to
    TOKEN_BYTES    the bytes
    SPECIAL        vocab_size x (1 = a special added token, skipped when decoding)
    ADDED          n x (id, offset into ADDED_TEXT, length) of the added tokens matched in the
                   raw text, longest content first
    ADDED_TEXT     their contents, UTF-8
    MERGES         n x (left id, right id, rank, merged id), sorted by (left, right)
    CLASSES        n x (first code point, class), sorted; a range runs to the next. Class 1 =
                   \\p{L}, 2 = \\p{N}, 0 = anything else (whitespace is Rust's char::is_whitespace,
                   Unicode White_Space, as the reference regex's \\s)
"""

from __future__ import annotations

import enum
import json
import unicodedata
from pathlib import Path

from porter.errors import PorterError
from porter.tokenize.blob import sectioned_blob, u32s

END_OF_TEXT = "<|endoftext|>"
BPE_MAGIC = b"PBPE"
BPE_VERSION = 1
MISSING = 0xFFFF_FFFF


class Section(enum.IntEnum):
    BYTE_IDS = 0
    TOKEN_OFFSETS = 1
    TOKEN_BYTES = 2
    SPECIAL = 3
    ADDED = 4
    MERGES = 5
    CLASSES = 6
    ADDED_TEXT = 7


# --- the byte-level BPE blob -------------------------------------------------------------------


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (bytes that print stand for
    themselves, the rest are shifted past U+0100)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(shifted)}}


def _refuse(path: Path, what: str) -> PorterError:
    return PorterError(f"{path}: {what}; generate-build compiles byte-level BPE tokenizers "
                       "(GPT-2 style) only")


def _check_pipeline(spec: dict, path: Path) -> None:
    model = spec.get("model") or {}
    if model.get("type") != "BPE":
        raise _refuse(path, f"model {model.get('type')!r} is not BPE")
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise _refuse(path, f"BPE {key} is set")
    if model.get("byte_fallback") or model.get("ignore_merges"):
        raise _refuse(path, "BPE byte_fallback or ignore_merges is on")
    if spec.get("normalizer") is not None:
        raise _refuse(path, "it has a normalizer")
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        raise _refuse(path, "the pre-tokenizer is not ByteLevel with the GPT-2 split regex (use_regex)")
    if (spec.get("decoder") or {}).get("type") != "ByteLevel":
        raise _refuse(path, "the decoder is not ByteLevel")
    # A ByteLevel post-processor only trims offsets; the ids stay as the model made them.
    if (spec.get("post_processor") or {}).get("type", "ByteLevel") != "ByteLevel":
        raise _refuse(path, "its post-processor adds tokens")


def _token_bytes(token: str, to_byte: dict[str, int]) -> bytes:
    """What the ByteLevel decoder makes of one token: its characters mapped back to bytes, or,
    when one of them is not in the map (an added token's own text), the token's UTF-8."""
    if all(c in to_byte for c in token):
        return bytes(to_byte[c] for c in token)
    return token.encode()


def _merge_pairs(merges: list, vocab: dict[str, int], path: Path) -> list[tuple[int, int, int, int]]:
    rows = []
    for rank, merge in enumerate(merges):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        ids = (vocab.get(left), vocab.get(right), vocab.get(left + right))
        if None in ids:
            raise PorterError(f"{path}: merge {rank} ({left!r}, {right!r}) names a token not in the vocabulary")
        rows.append((ids[0], ids[1], rank, ids[2]))
    return sorted(rows)


def _character_classes() -> list[tuple[int, int]]:
    """(first code point, class) ranges of \\p{L} (1), \\p{N} (2) and the rest (0), from Python's
    Unicode database (the reference's regex engine may be a Unicode version apart on code points
    assigned lately)."""
    ranges: list[tuple[int, int]] = []
    for cp in range(0x110000):
        major = unicodedata.category(chr(cp))[0]
        cls = 1 if major == "L" else 2 if major == "N" else 0
        if not ranges or ranges[-1][1] != cls:
            ranges.append((cp, cls))
    return ranges


def bpe_blob(tokenizer_json: Path) -> tuple[bytes, int, int]:
    """(bpe.bin, vocabulary size, id of <|endoftext|>) for a byte-level BPE tokenizer.json."""
    try:
        spec = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PorterError(f"cannot read tokenizer {tokenizer_json}: {e}") from None
    _check_pipeline(spec, tokenizer_json)
    if not isinstance(spec["model"].get("vocab"), dict) or not isinstance(spec["model"].get("merges", []), list):
        raise PorterError(f"{tokenizer_json}: the BPE model has no vocab object or merges list")
    vocab: dict[str, int] = dict(spec["model"]["vocab"])
    added = spec.get("added_tokens") or []
    for token in added:
        if token.get("normalized") or token.get("single_word") or token.get("lstrip") or token.get("rstrip"):
            raise _refuse(tokenizer_json, f"added token {token['content']!r} is normalized, single_word or stripped")
        vocab[token["content"]] = token["id"]
    size = max(vocab.values()) + 1
    by_id = {i: t for t, i in vocab.items()}
    if len(by_id) != size:
        raise PorterError(f"{tokenizer_json}: token ids are not 0..{size - 1} without gaps")
    if END_OF_TEXT not in vocab:
        raise PorterError(f"{tokenizer_json}: has no {END_OF_TEXT} token to stop generation at")
    to_unicode = byte_to_unicode()
    to_byte = {c: b for b, c in to_unicode.items()}
    token_bytes = [_token_bytes(by_id[i], to_byte) for i in range(size)]
    added_contents = {t["content"]: t for t in added}
    offsets = [0]
    for data in token_bytes:
        offsets.append(offsets[-1] + len(data))
    special = [int(bool(added_contents.get(by_id[i], {}).get("special"))) for i in range(size)]
    longest_first = sorted(added_contents, key=lambda c: (-len(c.encode()), c))
    added_rows, added_text = [], b""
    for content in longest_first:
        added_rows += [vocab[content], len(added_text), len(content.encode())]
        added_text += content.encode()
    sections = {
        Section.BYTE_IDS: u32s(vocab.get(to_unicode[b], MISSING) for b in range(256)),
        Section.TOKEN_OFFSETS: u32s(offsets),
        Section.TOKEN_BYTES: b"".join(token_bytes),
        Section.SPECIAL: u32s(special),
        Section.ADDED: u32s(added_rows),
        Section.MERGES: u32s(v for row in _merge_pairs(spec["model"].get("merges") or [], vocab,
                                                        tokenizer_json) for v in row),
        Section.CLASSES: u32s(v for row in _character_classes() for v in row),
        Section.ADDED_TEXT: added_text,
    }
    add_prefix_space = int(bool(spec["pre_tokenizer"].get("add_prefix_space")))
    blob = sectioned_blob(BPE_MAGIC, [BPE_VERSION, size, add_prefix_space], [sections[s] for s in Section])
    return blob, size, vocab[END_OF_TEXT]
