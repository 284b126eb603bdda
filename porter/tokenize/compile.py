"""Compile a Hugging Face tokenizer.json into tokenizer.bin, a flat blob that Rust reads in place.

A WebAssembly sandbox that starts a fresh instance per request cannot afford to parse a
multi-megabyte JSON vocabulary and build hash maps on every request, so everything the encoder
needs is laid out here, at compile time, as sorted arrays and a breadth-first byte trie. The Rust
side (templates/tokenizer, its blob.rs) checks the header and then only indexes into the blob.

Supported (anything else is refused with a one-line PorterError naming the component):
  normalizers     BertNormalizer, NFD, Lowercase, StripAccents, Precompiled, Replace (a literal, or
                  a regex that repeats one literal character `c{n,}` / `c+`), Sequence of these
  pre-tokenizers  BertPreTokenizer, WhitespaceSplit, Metaspace, Sequence of these
  models          WordPiece, Unigram (byte_fallback off)
  post-processor  TemplateProcessing (its single and pair templates), BertProcessing, none
  added tokens    matched in the original text (normalized=false, single_word=false), lstrip/rstrip
Truncation and padding in the file are ignored: the caller decides how to window the ids.

Character data. The reference is the `tokenizers` library, whose Unicode tables come from three
places of different ages: Rust's std (whitespace, lowercase), the `unicode_categories` crate
(control, punctuation, "non-spacing mark") and `unicode-normalization-alignments` (NFD). They
disagree with Python's `unicodedata` on hundreds of code points (measured with tokenizers
0.23.3: 667 mark classifications, 55 lowercase mappings, 13 controls, 1 decomposition), so the
tables are read from the reference library itself, one normalizer or pre-tokenizer applied to
every code point, and stored per code point in the blob. Grapheme cluster properties (used by
the Precompiled normalizer, which looks up whole graphemes shorter than 6 bytes) come from the
`regex` module's Unicode database, newer than the reference's segmenter, so which characters
extend a grapheme is checked against the reference too. Reading all this takes seconds, so the
tables are cached per library version (see cached_tables). Unigram scores, too, are the reference's
own f64 values, which are not always the ones Python parses from the same digits.

Blob layout (little-endian; every section starts on an 8-byte boundary):

    header   magic b"PTOK" | version u32 | total_size u32 | model u32 (1 WordPiece, 2 Unigram)
             | section_count u32 | section_count x (offset u32, length u32), indexed by Section
    PARAMS         u32 x len(Param)
    NORMALIZER     n x (op u32, arg u32)                   applied in order
    PRE_TOKENIZER  n x (op u32, a u32, b u32, c u32)       applied in order
    POST_TEMPLATE  the single template, then the pair template, each: n u32 | n x (item u32,
                   type id u32), an item a token id or SEQUENCE_A / SEQUENCE_B for the encoded
                   texts (n 0: the file has no pair template)
    ADDED_TOKENS   n x (string offset u32, length u32, id u32, flags u32), longest first
    STRINGS        UTF-8 bytes referenced by (offset, length) pairs from other sections
    TRIE           node_count u32 | first_child u32 x (node_count + 1) | token_id i32 x node_count
                   | label u8 x node_count.  Breadth-first, children contiguous and sorted, so a
                   child is a binary search over labels[first_child[j]..first_child[j + 1]].
                   Node 0 is the root; token_id -1 = no piece ends here.
    SCORES         f64 x vocab_size (Unigram)
    CHAR_PROPS     n u32 | n x (first code point u32, properties u32), sorted; a range runs to
                   the next. Properties: CharProp bits, combining class << CCC_SHIFT,
                   GraphemeBreak << GCB_SHIFT, IndicConjunctBreak << INCB_SHIFT
    CHAR_MAPS      two maps (NFD, lowercase), each: n u32 | keys u32 x n (sorted code points) |
                   (string offset u32, length u32) x n
    CHARSMAP       the Precompiled normalizer's double-array trie units u32 x n, kept as it is:
                   240 KB, and walked by the same XOR steps as sentencepiece (its 225k keys
                   re-encoded as a byte trie like TRIE would take megabytes)
    CHARSMAP_TEXT  its NUL-terminated replacement strings
    REPLACE_RULES  n x (pattern offset u32, length u32, min_repeat u32, content offset u32, length u32)
"""

from __future__ import annotations

import base64
import binascii
import enum
import io
import json
import math
import struct
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from porter.errors import PorterError
from porter.fsutil import cache_dir, write_atomic
from porter.tokenize.blob import TOTAL_SIZE, sectioned_blob, u32s

MAGIC = b"PTOK"
VERSION = 2
BLOB_NAME = "tokenizer.bin"
SEQUENCE_A = 0xFFFF_FFFF  # in POST_TEMPLATE: where the encoded text goes
SEQUENCE_B = 0xFFFF_FFFE  # in a pair template: where the second text goes
UNICODE_SIZE = 0x110000
SURROGATES = range(0xD800, 0xE000)


class Model(enum.IntEnum):
    WORDPIECE = 1
    UNIGRAM = 2


class Section(enum.IntEnum):
    PARAMS = 0
    NORMALIZER = 1
    PRE_TOKENIZER = 2
    POST_TEMPLATE = 3
    ADDED_TOKENS = 4
    STRINGS = 5
    TRIE = 6
    SCORES = 7
    CHAR_PROPS = 8
    CHAR_MAPS = 9
    CHARSMAP = 10
    CHARSMAP_TEXT = 11
    REPLACE_RULES = 12


class Param(enum.IntEnum):
    VOCAB_SIZE = 0
    UNK_ID = 1
    MAX_INPUT_CHARS_PER_WORD = 2  # WordPiece
    CONTINUING_PREFIX_OFFSET = 3  # WordPiece "##", in STRINGS
    CONTINUING_PREFIX_LENGTH = 4
    MIN_SCORE_LOW = 5  # Unigram: the lowest score's f64 bits, so loading needs no scan
    MIN_SCORE_HIGH = 6


class NormalizerOp(enum.IntEnum):
    CLEAN_TEXT = 1  # BertNormalizer: drop controls, map whitespace to " "
    CHINESE_SPACING = 2  # BertNormalizer: " c " around CJK ideographs
    NFD = 3
    STRIP_NONSPACING_MARKS = 4  # BertNormalizer's accent stripping (after NFD)
    LOWERCASE = 5
    PRECOMPILED = 6
    REPLACE = 7  # arg: index into REPLACE_RULES
    STRIP_COMBINING_MARKS = 8  # the StripAccents normalizer (a different, wider set of marks)


class PreTokenizerOp(enum.IntEnum):
    SPLIT_WHITESPACE_REMOVED = 1
    SPLIT_BERT_PUNCTUATION_ISOLATED = 2
    METASPACE = 3  # a: replacement char, b: PrependScheme, c: split (0/1)


class PrependScheme(enum.IntEnum):
    ALWAYS = 0
    FIRST = 1
    NEVER = 2


class AddedTokenFlag(enum.IntFlag):
    LSTRIP = 1
    RSTRIP = 2


class CharProp(enum.IntFlag):
    """Per code point properties (CHAR_PROPS). Bits 8-15: canonical combining class,
    bits 16-19: Grapheme_Cluster_Break (GraphemeBreak), bits 20-21: Indic_Conjunct_Break."""

    CLEAN_REMOVE = 1 << 0
    CLEAN_WHITESPACE = 1 << 1
    CHINESE = 1 << 2
    NONSPACING_MARK = 1 << 3
    WHITESPACE = 1 << 4
    BERT_PUNCTUATION = 1 << 5
    EXTENDED_PICTOGRAPHIC = 1 << 6
    COMBINING_MARK = 1 << 7


CCC_SHIFT = 8
GCB_SHIFT = 16
INCB_SHIFT = 20


class GraphemeBreak(enum.IntEnum):
    OTHER = 0
    CR = 1
    LF = 2
    CONTROL = 3
    EXTEND = 4
    ZWJ = 5
    REGIONAL_INDICATOR = 6
    PREPEND = 7
    SPACING_MARK = 8
    L = 9
    V = 10
    T = 11
    LV = 12
    LVT = 13


class IndicConjunctBreak(enum.IntEnum):
    NONE = 0
    LINKER = 1
    CONSONANT = 2
    EXTEND = 3


# --------------------------------------------------------------------------------------------
# Entry points


def render_tokenizer_crate(blob: bytes, crate_dir: Path, toolchain, crate_name: str = "porter-tokenizer") -> Path:
    """Render templates/tokenizer into crate_dir with `blob` as its tokenizer.bin (not built)."""
    from porter import TEMPLATES_DIR
    from porter.codegen.render import cargo_config_file, render_crate
    from porter.toolchain.discover import CrateKind

    variables = {"crate_name": crate_name}
    files = {BLOB_NAME: blob, **cargo_config_file(toolchain, CrateKind.COMMAND)}
    return render_crate(TEMPLATES_DIR / "tokenizer", crate_dir, variables, files)


def compile_tokenizer(tokenizer_json: Path, out_dir: Path) -> Path:
    """Read and validate tokenizer_json; write out_dir/tokenizer.bin atomically; return its path."""
    blob = build_blob(read_tokenizer_json(tokenizer_json), tokenizer_json.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    destination = out_dir / BLOB_NAME
    write_atomic(destination, blob)
    return destination


def read_tokenizer_json(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PorterError(f"cannot read {path}: {e}") from e


def build_blob(tokenizer_json: str, name: str = "tokenizer.json") -> bytes:
    """The tokenizer.bin bytes for the text of a tokenizer.json (validated on the way)."""
    builder = _BlobBuilder(name)
    try:
        spec = json.loads(tokenizer_json)
    except json.JSONDecodeError as e:
        raise builder.fail(f"not valid JSON: {e}") from e
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
        raise builder.fail("not a tokenizer.json: no \"model\" object")
    model = _model_section(spec["model"], builder)
    builder.normalizer_ops = _normalizer_ops(spec.get("normalizer"), builder)
    builder.pre_tokenizer_ops = _pre_tokenizer_ops(spec.get("pre_tokenizer"), builder)
    builder.post_template = _post_template(spec.get("post_processor"), builder)
    builder.added_tokens = _added_tokens(spec.get("added_tokens") or [], builder)
    builder.char_props, builder.char_maps = _character_tables(builder)
    if model is Model.UNIGRAM:
        _unigram_scores(tokenizer_json, builder)
    return builder.pack(model)


# --------------------------------------------------------------------------------------------
# Reading the components


@dataclass
class _BlobBuilder:
    name: str
    params: list[int] = field(default_factory=lambda: [0] * len(Param))
    strings: bytearray = field(default_factory=bytearray)
    normalizer_ops: list[tuple[int, int]] = field(default_factory=list)
    pre_tokenizer_ops: list[tuple[int, int, int, int]] = field(default_factory=list)
    post_template: list[int] = field(default_factory=list)  # the section's words
    added_tokens: list[tuple[int, int, int, int]] = field(default_factory=list)
    trie: bytes = b""
    scores: bytes = b""
    char_props: bytes = b""
    char_maps: bytes = b""
    charsmap: bytes = b""
    charsmap_text: bytes = b""
    replace_rules: list[tuple[int, int, int, int, int]] = field(default_factory=list)

    def fail(self, message: str) -> PorterError:
        return PorterError(f"{self.name}: {message}")

    def add_string(self, text: str) -> tuple[int, int]:
        data = text.encode("utf-8")
        offset = len(self.strings)
        self.strings += data
        return offset, len(data)

    def pack(self, model: Model) -> bytes:
        sections = {
            Section.PARAMS: u32s(self.params),
            Section.NORMALIZER: u32s(v for op in self.normalizer_ops for v in op),
            Section.PRE_TOKENIZER: u32s(v for op in self.pre_tokenizer_ops for v in op),
            Section.POST_TEMPLATE: u32s(self.post_template),
            Section.ADDED_TOKENS: u32s(v for token in self.added_tokens for v in token),
            Section.STRINGS: bytes(self.strings),
            Section.TRIE: self.trie,
            Section.SCORES: self.scores,
            Section.CHAR_PROPS: self.char_props,
            Section.CHAR_MAPS: self.char_maps,
            Section.CHARSMAP: self.charsmap,
            Section.CHARSMAP_TEXT: self.charsmap_text,
            Section.REPLACE_RULES: u32s(v for rule in self.replace_rules for v in rule),
        }
        return sectioned_blob(MAGIC, [VERSION, TOTAL_SIZE, model], [sections[section] for section in Section])


def _model_section(model: dict, builder: _BlobBuilder) -> Model:
    kind = model.get("type")
    if kind == "WordPiece":
        _wordpiece(model, builder)
        return Model.WORDPIECE
    if kind == "Unigram":
        _unigram(model, builder)
        return Model.UNIGRAM
    raise builder.fail(f"unsupported model {kind!r} (supported: WordPiece, Unigram)")


def _wordpiece(model: dict, builder: _BlobBuilder) -> None:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise builder.fail("WordPiece model has no vocab object")
    pieces = []
    for piece, token_id in vocab.items():
        if not isinstance(token_id, int) or token_id < 0:
            raise builder.fail(f"WordPiece vocab entry {piece!r} has id {token_id!r}")
        pieces.append((piece, token_id))
    unk = model.get("unk_token")
    if unk not in vocab:
        raise builder.fail(f"WordPiece unk_token {unk!r} is not in the vocab")
    prefix = model.get("continuing_subword_prefix")
    max_chars = model.get("max_input_chars_per_word")
    if not isinstance(prefix, str) or not isinstance(max_chars, int) or max_chars < 0:
        raise builder.fail("WordPiece needs continuing_subword_prefix and max_input_chars_per_word")
    builder.params[Param.VOCAB_SIZE] = max(vocab.values()) + 1
    builder.params[Param.UNK_ID] = vocab[unk]
    builder.params[Param.MAX_INPUT_CHARS_PER_WORD] = max_chars
    offset, length = builder.add_string(prefix)
    builder.params[Param.CONTINUING_PREFIX_OFFSET] = offset
    builder.params[Param.CONTINUING_PREFIX_LENGTH] = length
    builder.trie = _trie(pieces)


def _unigram(model: dict, builder: _BlobBuilder) -> None:
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not vocab:
        raise builder.fail("Unigram model has no vocab list")
    if model.get("byte_fallback"):
        raise builder.fail("unsupported Unigram option byte_fallback=true")
    unk_id = model.get("unk_id")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
        raise builder.fail(f"Unigram unk_id {unk_id!r} is not an index into the vocab")
    for token_id, entry in enumerate(vocab):
        if (
            not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str)
            or not isinstance(entry[1], (int, float)) or not math.isfinite(entry[1])
        ):
            raise builder.fail(f"Unigram vocab entry {token_id} is not [piece, finite score]")
    builder.params[Param.VOCAB_SIZE] = len(vocab)
    builder.params[Param.UNK_ID] = unk_id
    builder.trie = _trie((piece, token_id) for token_id, (piece, _) in enumerate(vocab))


def _unigram_scores(tokenizer_json: str, builder: _BlobBuilder) -> None:
    """The scores exactly as the reference holds them. Its JSON parser (serde_json without
    float_roundtrip) reads about a quarter of sentencepiece's scores one ulp away from the
    correctly rounded value Python reads (12,599 of 47,284 in the 47k XLM-R file), and Viterbi
    compares sums of scores exactly, so they are taken from the reference's own serialisation
    (shortest round-trip digits, which Python reads back to the same bits)."""
    tokenizers = _reference_library(builder)
    try:
        loaded = tokenizers.Tokenizer.from_str(tokenizer_json)
    except Exception as e:  # the binding raises plain Exception subclasses with Rust messages
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise builder.fail(f"the tokenizers library cannot load it: {reason}") from e
    scores = [float(score) for _, score in json.loads(loaded.to_str())["model"]["vocab"]]
    builder.scores = np.asarray(scores, dtype="<f8").tobytes()
    (min_bits,) = struct.unpack("<Q", struct.pack("<d", min(scores)))
    builder.params[Param.MIN_SCORE_LOW] = min_bits & 0xFFFF_FFFF
    builder.params[Param.MIN_SCORE_HIGH] = min_bits >> 32


def _reference_library(builder: _BlobBuilder):
    try:
        import tokenizers
    except ImportError as e:
        raise builder.fail("compiling a tokenizer needs the `tokenizers` package, the reference "
                           "whose tables and scores it reads (pip install tokenizers)") from e
    return tokenizers


def _normalizer_ops(normalizer: dict | None, builder: _BlobBuilder) -> list[tuple[int, int]]:
    if normalizer is None:
        return []
    kind = normalizer.get("type")
    if kind == "Sequence":
        return [op for step in normalizer.get("normalizers", []) for op in _normalizer_ops(step, builder)]
    if kind == "BertNormalizer":
        lowercase = bool(normalizer.get("lowercase", True))
        strip_accents = normalizer.get("strip_accents")
        strip_accents = lowercase if strip_accents is None else bool(strip_accents)
        ops = []
        if normalizer.get("clean_text", True):
            ops.append((NormalizerOp.CLEAN_TEXT, 0))
        if normalizer.get("handle_chinese_chars", True):
            ops.append((NormalizerOp.CHINESE_SPACING, 0))
        if strip_accents:
            ops += [(NormalizerOp.NFD, 0), (NormalizerOp.STRIP_NONSPACING_MARKS, 0)]
        if lowercase:
            ops.append((NormalizerOp.LOWERCASE, 0))
        return ops
    simple = {"NFD": NormalizerOp.NFD, "Lowercase": NormalizerOp.LOWERCASE,
              "StripAccents": NormalizerOp.STRIP_COMBINING_MARKS}
    if kind in simple:
        return [(simple[kind], 0)]
    if kind == "Precompiled":
        _precompiled_charsmap(normalizer.get("precompiled_charsmap"), builder)
        return [(NormalizerOp.PRECOMPILED, 0)]
    if kind == "Replace":
        builder.replace_rules.append(_replace_rule(normalizer, builder))
        return [(NormalizerOp.REPLACE, len(builder.replace_rules) - 1)]
    raise builder.fail(f"unsupported normalizer {kind!r}")


def _replace_rule(normalizer: dict, builder: _BlobBuilder) -> tuple[int, int, int, int, int]:
    """(pattern, min_repeat, content): min_repeat 0 means the pattern is a literal string."""
    pattern, content = normalizer.get("pattern") or {}, normalizer.get("content")
    if not isinstance(content, str):
        raise builder.fail("Replace normalizer has no content string")
    if isinstance(pattern.get("String"), str) and pattern["String"]:
        literal, min_repeat = pattern["String"], 0
    elif isinstance(pattern.get("Regex"), str):
        literal, min_repeat = _repeated_character(pattern["Regex"], builder)
    else:
        raise builder.fail(f"unsupported Replace pattern {pattern!r}")
    return (*builder.add_string(literal), min_repeat, *builder.add_string(content))


def _repeated_character(regex: str, builder: _BlobBuilder) -> tuple[str, int]:
    """`c{n,}` or `c+` with c a character that needs no escaping; nothing else is supported."""
    if len(regex) >= 2 and regex[1:] == "+" and not _is_regex_syntax(regex[0]):
        return regex[0], 1
    if len(regex) >= 5 and regex[1] == "{" and regex.endswith(",}") and regex[2:-2].isdigit():
        if not _is_regex_syntax(regex[0]) and int(regex[2:-2]) >= 1:
            return regex[0], int(regex[2:-2])
    raise builder.fail(f"unsupported Replace regex {regex!r} (only c{{n,}} and c+ are)")


def _is_regex_syntax(c: str) -> bool:
    return c in "\\^$.|?*+()[]{}"


def _precompiled_charsmap(encoded: object, builder: _BlobBuilder) -> None:
    """Keep the double-array trie as it is, after checking that it fits its bytes and that its
    replacement strings are NUL-terminated UTF-8. (The Rust walk bounds-checks every step.)"""
    if not isinstance(encoded, str):
        raise builder.fail("Precompiled normalizer has no precompiled_charsmap")
    try:
        data = base64.b64decode(encoded, validate=True)
    except binascii.Error as e:
        raise builder.fail(f"precompiled_charsmap is not base64: {e}") from e
    if len(data) < 4:
        raise builder.fail("precompiled_charsmap is truncated")
    (trie_size,) = struct.unpack_from("<I", data)
    if trie_size % 4 or trie_size == 0 or 4 + trie_size > len(data):
        raise builder.fail(f"precompiled_charsmap trie size {trie_size} does not fit its {len(data)} bytes")
    text = data[4 + trie_size:]
    if text and not text.endswith(b"\0"):
        raise builder.fail("precompiled_charsmap replacement strings are not NUL-terminated")
    for replacement in text.split(b"\0"):
        try:
            replacement.decode("utf-8")
        except UnicodeDecodeError as e:
            raise builder.fail(f"precompiled_charsmap replacement {replacement!r} is not UTF-8") from e
    builder.charsmap = data[4:4 + trie_size]
    builder.charsmap_text = text


def _pre_tokenizer_ops(pre_tokenizer: dict | None, builder: _BlobBuilder) -> list[tuple[int, int, int, int]]:
    if pre_tokenizer is None:
        return []
    kind = pre_tokenizer.get("type")
    if kind == "Sequence":
        return [op for step in pre_tokenizer.get("pretokenizers", []) for op in _pre_tokenizer_ops(step, builder)]
    if kind == "BertPreTokenizer":
        return [(PreTokenizerOp.SPLIT_WHITESPACE_REMOVED, 0, 0, 0),
                (PreTokenizerOp.SPLIT_BERT_PUNCTUATION_ISOLATED, 0, 0, 0)]
    if kind == "WhitespaceSplit":
        return [(PreTokenizerOp.SPLIT_WHITESPACE_REMOVED, 0, 0, 0)]
    if kind == "Metaspace":
        return [_metaspace(pre_tokenizer, builder)]
    raise builder.fail(f"unsupported pre-tokenizer {kind!r}")


def _metaspace(pre_tokenizer: dict, builder: _BlobBuilder) -> tuple[int, int, int, int]:
    replacement = pre_tokenizer.get("replacement", "\u2581")
    if not isinstance(replacement, str) or len(replacement) != 1:
        raise builder.fail(f"Metaspace replacement {replacement!r} is not one character")
    scheme = pre_tokenizer.get("prepend_scheme", "always")
    if pre_tokenizer.get("add_prefix_space") is False:
        scheme = "never"
    schemes = {"always": PrependScheme.ALWAYS, "first": PrependScheme.FIRST, "never": PrependScheme.NEVER}
    if scheme not in schemes:
        raise builder.fail(f"unsupported Metaspace prepend_scheme {scheme!r}")
    split = pre_tokenizer.get("split", True)
    return (PreTokenizerOp.METASPACE, ord(replacement), schemes[scheme], int(bool(split)))


def _post_template(processor: dict | None, builder: _BlobBuilder) -> list[int]:
    """The POST_TEMPLATE section: the single and the pair template as tokenizers applies them,
    each item with its type id (a missing post-processor: the texts alone, the pair's second
    with type 1, as tokenizers encodes a pair without one)."""
    single, pair = _templates(processor, builder)
    return [v for template in (single, pair) for v in (len(template), *(x for item in template for x in item))]


def pair_type_ids(tokenizer_json: str, name: str = "tokenizer.json") -> set[int] | None:
    """The token types the tokenizer's pair template gives, None when it has no pair template."""
    builder = _BlobBuilder(name)
    _, pair = _templates(json.loads(tokenizer_json).get("post_processor"), builder)
    return {type_id for _, type_id in pair} if pair else None


def _templates(processor: dict | None, builder: _BlobBuilder) -> tuple[list, list]:
    if processor is None:
        return [(SEQUENCE_A, 0)], [(SEQUENCE_A, 0), (SEQUENCE_B, 1)]
    kind = processor.get("type")
    if kind == "BertProcessing":
        (_, cls_id), (_, sep_id) = processor["cls"], processor["sep"]
        single = [(cls_id, 0), (SEQUENCE_A, 0), (sep_id, 0)]
        return single, single + [(SEQUENCE_B, 1), (sep_id, 1)]
    if kind != "TemplateProcessing":
        raise builder.fail(f"unsupported post-processor {kind!r}")
    special = processor.get("special_tokens") or {}
    single = _template(processor.get("single") or [], "single", ("A",), special, builder)
    pair = _template(processor.get("pair") or [], "pair", ("A", "B"), special, builder)
    return single, pair


def _template(items: list, which: str, sequences: tuple[str, ...], special: dict, builder: _BlobBuilder) -> list:
    """[(token id or SEQUENCE_A / SEQUENCE_B, type id)] of one TemplateProcessing template."""
    marker = {"A": SEQUENCE_A, "B": SEQUENCE_B}
    template = []
    for item in items:
        if "Sequence" in item:
            name = item["Sequence"].get("id")
            if name not in sequences:
                raise builder.fail(f"post-processor {which} template names sequence {item['Sequence']!r}")
            template.append((marker[name], int(item["Sequence"].get("type_id", 0))))
            continue
        token = item.get("SpecialToken") or {}
        name = token.get("id")
        if name not in special:
            raise builder.fail(f"post-processor uses special token {name!r} that it does not define")
        template += [(int(i), int(token.get("type_id", 0))) for i in special[name]["ids"]]
    found = [value for value, _ in template if value in marker.values()]
    if which == "pair" and not items:
        return []  # no pair template: the service refuses pairs
    if sorted(found) != sorted(marker[name] for name in sequences):
        raise builder.fail(f"post-processor {which} template must contain "
                           + " and ".join(f"sequence {name}" for name in sequences) + " once")
    return template


def _added_tokens(tokens: list, builder: _BlobBuilder) -> list[tuple[int, int, int, int]]:
    entries = []
    for token in tokens:
        content = token.get("content")
        if not isinstance(content, str) or not content or not isinstance(token.get("id"), int):
            raise builder.fail(f"added token {token!r} has no content or id")
        if token.get("normalized", False):
            raise builder.fail(f"unsupported added token {content!r} with normalized=true")
        if token.get("single_word", False):
            raise builder.fail(f"unsupported added token {content!r} with single_word=true")
        flags = (AddedTokenFlag.LSTRIP if token.get("lstrip") else 0) | (
            AddedTokenFlag.RSTRIP if token.get("rstrip") else 0)
        entries.append((content, token["id"], int(flags)))
    # Longest first: the first token that matches at a position is the leftmost-longest match.
    entries.sort(key=lambda entry: -len(entry[0].encode("utf-8")))
    return [(*builder.add_string(content), token_id, flags) for content, token_id, flags in entries]


# --------------------------------------------------------------------------------------------
# The vocabulary trie


def _trie(pieces: Iterable[tuple[str, int]]) -> bytes:
    """Breadth-first byte trie. Sorting every prefix by (length, bytes) is exactly breadth-first
    order with sorted children, and puts the children of consecutive nodes next to each other,
    so one first_child array (plus its successor) delimits every node's children."""
    ids: dict[bytes, int] = {}
    for piece, token_id in pieces:
        ids[piece.encode("utf-8")] = token_id  # a repeated piece keeps its last id, as the reference's map does
    prefixes = {b""}
    for key in ids:
        prefixes.update(key[:end] for end in range(1, len(key) + 1))
    nodes = sorted(prefixes, key=lambda p: (len(p), p))
    index = {prefix: i for i, prefix in enumerate(nodes)}
    child_counts = np.zeros(len(nodes), dtype=np.int64)
    for prefix in nodes[1:]:
        child_counts[index[prefix[:-1]]] += 1
    first_child = np.concatenate([[1], 1 + np.cumsum(child_counts)]).astype("<u4")
    token_ids = np.array([ids.get(prefix, -1) for prefix in nodes], dtype="<i4")
    labels = np.array([prefix[-1] if prefix else 0 for prefix in nodes], dtype=np.uint8)
    return u32s([len(nodes)]) + first_child.tobytes() + token_ids.tobytes() + labels.tobytes()


# --------------------------------------------------------------------------------------------
# Character tables


def _character_tables(builder: _BlobBuilder) -> tuple[bytes, bytes]:
    normalizer_ops = {op for op, _ in builder.normalizer_ops}
    pre_tokenizer_ops = {op[0] for op in builder.pre_tokenizer_ops}
    probe = _ReferenceProbe(builder)
    # Whitespace is always needed: added tokens with lstrip/rstrip take the spaces beside them.
    props = cached_tables(probe.versions, "whitespace", lambda: (probe.whitespace(), {}, {}))[0]
    nfd, lowercase = {}, {}
    uses_bert_tables = normalizer_ops & {
        NormalizerOp.CLEAN_TEXT, NormalizerOp.CHINESE_SPACING, NormalizerOp.NFD,
        NormalizerOp.STRIP_NONSPACING_MARKS, NormalizerOp.STRIP_COMBINING_MARKS, NormalizerOp.LOWERCASE,
    } or PreTokenizerOp.SPLIT_BERT_PUNCTUATION_ISOLATED in pre_tokenizer_ops
    if uses_bert_tables:
        bert_props, nfd, lowercase = cached_tables(probe.versions, "bert", probe.bert_tables)
        props = props | bert_props
    if NormalizerOp.PRECOMPILED in normalizer_ops:
        grapheme_props = cached_tables(probe.versions + [_regex_version(builder)], "graphemes",
                                 lambda: (probe.correct_grapheme_extenders(_grapheme_properties()), {}, {}))[0]
        props = props | grapheme_props
    return _range_table(props), _char_map(nfd, builder) + _char_map(lowercase, builder)


Tables = tuple[np.ndarray, dict[int, str], dict[int, str]]


def cached_tables(versions: list[str], name: str, compute) -> Tables:
    """Character tables depend only on the libraries they are read from, and reading them takes
    seconds, so they are kept in PORTER_TOKENIZER_CACHE (else ~/.cache/porter/tokenizer-tables),
    one .npz per table set and library versions; a damaged entry is recomputed."""
    cache = cache_dir("tokenizer-tables", "PORTER_TOKENIZER_CACHE")
    path = cache / f"{name}-{'-'.join(versions)}-v{VERSION}.npz"
    try:
        with np.load(path, allow_pickle=False) as stored:
            return stored["props"], _decode_map(stored["first"]), _decode_map(stored["second"])
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        pass  # absent or damaged: compute it again
    props, first, second = compute()
    buffer = io.BytesIO()
    np.savez_compressed(buffer, props=props, first=_encode_map(first), second=_encode_map(second))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    return props, first, second


def _encode_map(mapping: dict[int, str]) -> np.ndarray:
    return np.frombuffer(json.dumps({str(k): v for k, v in mapping.items()}).encode(), dtype=np.uint8)


def _decode_map(stored: np.ndarray) -> dict[int, str]:
    return {int(k): v for k, v in json.loads(stored.tobytes().decode()).items()}


def _regex_version(builder: _BlobBuilder) -> str:
    try:
        import regex
    except ImportError as e:
        raise builder.fail("compiling a Precompiled normalizer needs the `regex` package for "
                           "grapheme cluster data (pip install regex)") from e
    return f"regex{regex.__version__}"


class _ReferenceProbe:
    """Applies one `tokenizers` normalizer or pre-tokenizer to every code point at once: the code
    points are joined with a separator the component leaves alone, and the output split on it."""

    CHUNKS = 16

    def __init__(self, builder: _BlobBuilder):
        tokenizers = _reference_library(builder)
        self.normalizers, self.pre_tokenizers = tokenizers.normalizers, tokenizers.pre_tokenizers
        self.versions = [f"tokenizers{tokenizers.__version__}"]
        self.code_points = [c for c in range(UNICODE_SIZE) if c not in SURROGATES]

    def _chunks(self, separator: str) -> Iterable[list[int]]:
        size, skipped = -(-len(self.code_points) // self.CHUNKS), ord(separator)
        for start in range(0, len(self.code_points), size):
            chunk = self.code_points[start:start + size]
            if chunk[0] <= skipped <= chunk[-1]:
                chunk.remove(skipped)
            yield chunk

    def per_code_point(self, normalizer, separator: str) -> dict[int, str]:
        out = {ord(separator): normalizer.normalize_str(separator)}
        for chunk in self._chunks(separator):
            results = normalizer.normalize_str(separator.join(map(chr, chunk))).split(separator)
            if len(results) != len(chunk):
                raise PorterError(f"reading tables from the tokenizers library: {normalizer} altered "
                                  f"the separator {separator!r}")
            out.update(zip(chunk, results))
        return out

    def mapping(self, normalizer, separator: str = "\0") -> dict[int, str]:
        """Code points the normalizer changes, and what into. The separator must be a character
        that the normalizer leaves alone and that no character's output contains: NUL, except
        for clean_text, which drops NUL ("x" is safe there, as nothing is decomposed)."""
        return {c: s for c, s in self.per_code_point(normalizer, separator).items() if s != chr(c)}

    def bert_tables(self) -> Tables:
        """BertNormalizer's and BertPreTokenizer's character classes, NFD and lowercase maps."""
        nfd = self.mapping(self.normalizers.NFD())
        props = self.bert_properties(nfd) | (self.combining_classes(nfd) << CCC_SHIFT)
        return props, nfd, self.mapping(self.normalizers.Lowercase())

    def bert_properties(self, nfd: dict[int, str]) -> np.ndarray:
        n = self.normalizers
        props = np.zeros(UNICODE_SIZE, dtype=np.uint32)
        clean = self.mapping(n.BertNormalizer(True, False, False, False), "x")
        props[[c for c, s in clean.items() if s == ""]] |= np.uint32(CharProp.CLEAN_REMOVE)
        props[[c for c, s in clean.items() if s == " "]] |= np.uint32(CharProp.CLEAN_WHITESPACE)
        chinese = self.mapping(n.BertNormalizer(False, True, False, False), "x")
        props[list(chinese)] |= np.uint32(CharProp.CHINESE)
        # BertNormalizer strips "non-spacing marks" after NFD, so only characters NFD leaves
        # alone can be asked (and only they ever reach that filter).
        stripped = self.mapping(n.BertNormalizer(False, False, True, False))
        nonspacing = [c for c, s in stripped.items() if s == "" and c not in nfd]
        props[nonspacing] |= np.uint32(CharProp.NONSPACING_MARK)
        combining = self.mapping(n.StripAccents())
        props[[c for c, s in combining.items() if s == ""]] |= np.uint32(CharProp.COMBINING_MARK)
        props[self._split_out(self.pre_tokenizers.BertPreTokenizer())[1]] |= np.uint32(CharProp.BERT_PUNCTUATION)
        return props

    def whitespace(self) -> np.ndarray:
        """Rust's char::is_whitespace (Unicode White_Space), asked of the reference for the only
        categories White_Space draws from (separators and controls), which is quick."""
        import unicodedata

        candidates = [c for c in self.code_points if unicodedata.category(chr(c)) in ("Zs", "Zl", "Zp", "Cc")]
        props = np.zeros(UNICODE_SIZE, dtype=np.uint32)
        props[self._split_out(self.pre_tokenizers.WhitespaceSplit(), [candidates])[0]] |= np.uint32(CharProp.WHITESPACE)
        return props

    def _split_out(self, pre_tokenizer, chunks: Iterable[list[int]] | None = None) -> tuple[list[int], list[int]]:
        """(dropped, isolated): the code points the pre-tokenizer removes and those it makes
        one-character splits of, read from its splits of "x<c>x<c>x..." ("x" is neither)."""
        dropped, isolated = [], []
        for chunk in chunks or self._chunks("x"):
            text = "x" + "x".join(map(chr, chunk)) + "x"
            covered = np.zeros(len(text), dtype=bool)
            for piece, (start, end) in pre_tokenizer.pre_tokenize_str(text):
                covered[start:end] = True
                if end - start == 1 and piece != "x":
                    isolated.append(ord(piece))
            dropped += [chunk[(i - 1) // 2] for i in np.flatnonzero(~covered)]
        return dropped, isolated

    def correct_grapheme_extenders(self, props: np.ndarray) -> np.ndarray:
        """The `regex` module's Unicode is newer than the reference's segmenter, so whether a
        character extends the grapheme before it (Extend, ZWJ, SpacingMark) is asked of the
        reference: a Precompiled normalizer whose only entry maps "a" to "b" turns "a<c>" into
        "b" exactly when <c> joins the "a" grapheme (a grapheme is looked up whole)."""
        joins_previous = (GraphemeBreak.EXTEND, GraphemeBreak.ZWJ, GraphemeBreak.SPACING_MARK)
        normalizer = self.normalizers.Precompiled(_one_entry_charsmap(ord("a"), b"b"))
        candidates = [c for c in self.code_points if c != ord("\n")]  # LF breaks graphemes: the separator
        outputs = normalizer.normalize_str("\n".join("a" + chr(c) for c in candidates)).split("\n")
        corrected = props.copy()
        for c, output in zip(candidates, outputs):
            joins = output == "b"
            if joins != (((int(props[c]) >> GCB_SHIFT) & 0xF) in joins_previous):
                corrected[c] &= np.uint32(~((0xF << GCB_SHIFT) | (0x3 << INCB_SHIFT)) & 0xFFFF_FFFF)
                corrected[c] |= np.uint32(int(GraphemeBreak.EXTEND) << GCB_SHIFT if joins else 0)
        return corrected

    def combining_classes(self, nfd: dict[int, str]) -> np.ndarray:
        """The reference's canonical combining classes. Python's unicodedata gives the candidates;
        each is confirmed by whether the reference's NFD reorders it against a mark of known class
        (the NFD crate is older than unicodedata, and a mark it does not know has class 0)."""
        import unicodedata

        classes = np.zeros(UNICODE_SIZE, dtype=np.uint32)
        candidates = [int(c) for c in self.code_points
                      if unicodedata.combining(chr(c)) and int(c) not in nfd]
        low_mark, high_mark = "\u0334", "\u0f71"  # classes 1 and 129, both in Unicode 1-2
        probes = []
        for c in candidates:
            ccc = unicodedata.combining(chr(c))
            # "a" c low: the reference sorts low before c iff it knows c's class (> 1).
            # "a" high c: for class 1, c moves before the class 129 mark iff known.
            probes.append("a" + chr(c) + low_mark if ccc > 1 else "a" + high_mark + chr(c))
        outputs = self.normalizers.NFD().normalize_str("\0".join(probes)).split("\0")
        for c, probe, output in zip(candidates, probes, outputs):
            if output != probe:
                classes[c] = unicodedata.combining(chr(c))
        return classes


def _grapheme_properties() -> np.ndarray:
    """Grapheme_Cluster_Break, Extended_Pictographic and Indic_Conjunct_Break per code point, from
    the `regex` module's Unicode database (the segmenter the reference uses follows UAX #29)."""
    import regex  # present: _regex_version has checked
    text = "".join(chr(c) for c in range(UNICODE_SIZE) if c not in SURROGATES)
    positions = np.array([c for c in range(UNICODE_SIZE) if c not in SURROGATES])

    def members(property_: str) -> np.ndarray:
        return positions[[m.start() for m in regex.finditer(rf"\p{{{property_}}}", text)]]

    props = np.zeros(UNICODE_SIZE, dtype=np.uint32)
    breaks = {
        GraphemeBreak.CR: "GCB=CR", GraphemeBreak.LF: "GCB=LF", GraphemeBreak.CONTROL: "GCB=Control",
        GraphemeBreak.EXTEND: "GCB=Extend", GraphemeBreak.ZWJ: "GCB=ZWJ",
        GraphemeBreak.REGIONAL_INDICATOR: "GCB=Regional_Indicator", GraphemeBreak.PREPEND: "GCB=Prepend",
        GraphemeBreak.SPACING_MARK: "GCB=SpacingMark", GraphemeBreak.L: "GCB=L", GraphemeBreak.V: "GCB=V",
        GraphemeBreak.T: "GCB=T", GraphemeBreak.LV: "GCB=LV", GraphemeBreak.LVT: "GCB=LVT",
    }
    for value, property_ in breaks.items():
        props[members(property_)] |= np.uint32(int(value) << GCB_SHIFT)
    for value, property_ in {IndicConjunctBreak.LINKER: "InCB=Linker",
                             IndicConjunctBreak.CONSONANT: "InCB=Consonant",
                             IndicConjunctBreak.EXTEND: "InCB=Extend"}.items():
        props[members(property_)] |= np.uint32(int(value) << INCB_SHIFT)
    props[members("Extended_Pictographic")] |= np.uint32(CharProp.EXTENDED_PICTOGRAPHIC)
    return props


def _one_entry_charsmap(key: int, replacement: bytes) -> bytes:
    """A sentencepiece precompiled_charsmap (Darts double array) with the single entry
    byte `key` -> `replacement`. 256 units: every walk from the root stays inside them."""
    units = [0] * 256
    units[0] = 1 << 10  # root: children at 1 ^ label
    units[1 ^ key] = (1 << 10) | (1 << 8) | key  # the key's node: has a leaf, at (1 ^ key) ^ 1
    units[(1 ^ key) ^ 1] = 0  # the leaf: offset 0 into the replacement strings
    return u32s([4 * len(units), *units]) + replacement + b"\0"


def _range_table(props: np.ndarray) -> bytes:
    """(first code point, properties) at every change: ~thousands of ranges for 1.1M code points."""
    starts = np.flatnonzero(np.diff(props, prepend=np.uint32(0xFFFF_FFFF)) != 0)
    table = np.stack([starts.astype(np.uint32), props[starts]], axis=1).astype("<u4")
    return u32s([len(starts)]) + table.tobytes()


def _char_map(mapping: dict[int, str], builder: _BlobBuilder) -> bytes:
    keys = sorted(mapping)
    spans = [builder.add_string(mapping[c]) for c in keys]
    return u32s([len(keys), *keys, *(v for span in spans for v in span)])

