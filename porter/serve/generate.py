"""`porter generate-build`: a GPT-style decoder with a KV cache as a text-generation service, a
wasi:http proxy component that `porter serve` (`wasmtime serve`) and Spin run.

generate-build recovers the decoder (porter.recover.decoder), renders its generation crate
(porter.codegen.decoder, kept in OUT/decoder: `porter build OUT/decoder` builds the greedy eval
module the service is checked against), copies that crate's modules and model.bin into the
service crate (templates/generate_service), and precompiles the byte-level BPE tokenizer into
bpe.bin (below). The wasi:http glue (error.rs, http.rs, json.rs, timing.rs) is the redaction service's,
copied from templates/redact_service. The output directory then holds:

    decoder/        the generated decoder crate with model.bin, layout.json, ir.json
    crate/          the service crate
    generate.wasm   the component
    service.json    what was built from what, the limits, the component's size and SHA-256

porter's own tokenizer compiler (porter.tokenize.compile) has no BPE model, so the byte-level BPE that
GPT-2-style tokenizers use is compiled here into a flat blob the Rust side reads in place (no JSON
parsing per request; the platform starts a fresh instance for every request).

bpe.bin (little-endian u32 throughout):

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
import hashlib
import json
import struct
import unicodedata
from pathlib import Path

from porter import TEMPLATES_DIR
from porter.errors import PorterError
from porter.fsutil import copy_atomic
from porter.serve.redact import SERVICE_TEMPLATE, forward_modules, record_component

TEMPLATE = TEMPLATES_DIR / "generate_service"
COMPONENT_NAME = "generate.wasm"
FORMAT = "porter.generate/1"
APP_NAME = "generate"
DESCRIPTION = "Text generation: a GPT-style decoder compiled to wasm by porter"
# The redaction service's wasi:http glue, copied into the generation service unchanged.
SHARED_SOURCES = ("error.rs", "http.rs", "json.rs", "timing.rs")
DECODER_MAIN = "src/main.rs"
DEFAULT_MAX_BODY_BYTES = 16 * 1024
# Bounds the tokenizer's work; a prompt this long is more tokens than a small context holds anyway.
DEFAULT_MAX_PROMPT_BYTES = 4096
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


def _u32s(values) -> bytes:
    values = list(values)
    return struct.pack(f"<{len(values)}I", *values)


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
        Section.BYTE_IDS: _u32s(vocab.get(to_unicode[b], MISSING) for b in range(256)),
        Section.TOKEN_OFFSETS: _u32s(offsets),
        Section.TOKEN_BYTES: b"".join(token_bytes),
        Section.SPECIAL: _u32s(special),
        Section.ADDED: _u32s(added_rows),
        Section.MERGES: _u32s(v for row in _merge_pairs(spec["model"].get("merges") or [], vocab,
                                                        tokenizer_json) for v in row),
        Section.CLASSES: _u32s(v for row in _character_classes() for v in row),
        Section.ADDED_TEXT: added_text,
    }
    add_prefix_space = int(bool(spec["pre_tokenizer"].get("add_prefix_space")))
    return _pack(sections, size, add_prefix_space), size, vocab[END_OF_TEXT]


def _pack(sections: dict[Section, bytes], vocab_size: int, flags: int) -> bytes:
    header_words = 5 + 2 * len(Section)
    at = 4 * header_words
    table, body = [], b""
    for section in Section:
        data = sections[section]
        pad = (-len(body)) % 4  # u32 sections start on a word (after TOKEN_BYTES, say)
        body += b"\0" * pad
        table += [at + len(body), len(data)]
        body += data
    return BPE_MAGIC + _u32s([BPE_VERSION, vocab_size, flags, len(Section), *table]) + body


# --- rendering and building --------------------------------------------------------------------


def decoder_files(crate: Path) -> tuple[dict[str, bytes], list[str]]:
    """The decoder crate's sources without its main.rs, plus model.bin, as relative path -> bytes
    for the service crate, and the modules its root declares."""
    modules = forward_modules((crate / DECODER_MAIN).read_text(encoding="utf-8"))
    files = {str(p.relative_to(crate)): p.read_bytes()
             for p in sorted((crate / "src").rglob("*")) if p.is_file()}
    del files[DECODER_MAIN]
    files["model.bin"] = (crate / "model.bin").read_bytes()
    for name in SHARED_SOURCES:
        files[f"src/{name}"] = (SERVICE_TEMPLATE / "src" / name).read_bytes()
    return files, modules


def _recover(model: Path):
    from porter.recover.decoder import is_decoder_graph, recover_decoder
    from porter.frontends import load_graph

    graph = load_graph(model)
    if not is_decoder_graph(graph):
        raise PorterError(f"{model} is not a decoder with a KV cache (no past_key inputs); "
                          "`porter serve-build` serves token classifiers")
    return recover_decoder(graph, str(model))


def generate_build(model: Path, tokenizer_json: Path, out_dir: Path, *, quant: str = "float32",
                   max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                   max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES, echo=print) -> dict:
    """Compile, render and build the service into out_dir; returns what service.json records."""
    from porter.toolchain.cargo import build_crate, render_crate
    from porter.codegen.decoder import render_decoder_crate
    from porter.toolchain.discover import CrateKind, require_toolchain

    if not 0 < max_prompt_bytes <= max_body_bytes:
        raise PorterError(f"--max-prompt-bytes {max_prompt_bytes} must lie in 1..--max-body-bytes "
                          f"({max_body_bytes})")
    toolchain = require_toolchain()
    ir = _recover(model)
    echo(f"recovered {model}: decoder, {len(ir.layers)} layers, context {ir.n_ctx}, vocabulary {ir.vocab}")
    blob, vocab_size, end_of_text = bpe_blob(tokenizer_json)
    if vocab_size > ir.vocab:
        raise PorterError(f"{tokenizer_json} has {vocab_size} ids, the model only {ir.vocab}")
    files, modules = decoder_files(render_decoder_crate(ir, out_dir / "decoder", quant))
    files["bpe.bin"] = blob
    variables = {"crate_name": "porter-generate-service", "decoder_modules": modules,
                 "end_of_text": end_of_text, "max_body_bytes": max_body_bytes,
                 "max_prompt_bytes": max_prompt_bytes}
    crate = render_crate(TEMPLATE, out_dir / "crate", variables, toolchain, CrateKind.HTTP_COMPONENT,
                         extra_files=files)
    echo(f"building the component in {crate} (the first build compiles std for it: minutes)")
    component = copy_atomic(build_crate(crate, toolchain), out_dir / COMPONENT_NAME)
    facts = _facts(model, tokenizer_json, component, ir, quant, end_of_text, max_body_bytes, max_prompt_bytes)
    return record_component(out_dir, component, facts, echo)


def _facts(model, tokenizer_json, component, ir, quant, end_of_text, max_body_bytes, max_prompt_bytes) -> dict:
    data = component.read_bytes()
    return {
        "format": FORMAT,
        "model": str(model.resolve()),
        "tokenizer": str(tokenizer_json.resolve()),
        "component": component.name,
        "component_bytes": len(data),
        "component_sha256": hashlib.sha256(data).hexdigest(),
        "quant": quant,
        "n_ctx": ir.n_ctx,
        "vocab": ir.vocab,
        "end_of_text_id": end_of_text,
        "max_body_bytes": max_body_bytes,
        "max_prompt_bytes": max_prompt_bytes,
    }


def build_command(facts: dict, out_dir: Path, here) -> list[str]:
    """The generate-build command that remakes out_dir, with paths as `here` writes them (for the
    Spin manifest's build step)."""
    command = ["porter", "generate-build", here(facts["model"]), "--tokenizer", here(facts["tokenizer"])]
    if facts["quant"] != "float32":
        command += ["--quant", facts["quant"]]
    if facts["max_body_bytes"] != DEFAULT_MAX_BODY_BYTES:
        command += ["--max-body-bytes", str(facts["max_body_bytes"])]
    if facts["max_prompt_bytes"] != DEFAULT_MAX_PROMPT_BYTES:
        command += ["--max-prompt-bytes", str(facts["max_prompt_bytes"])]
    return command + ["-o", here(out_dir)]
