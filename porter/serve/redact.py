"""`porter serve-build`, `porter serve` and `porter deploy`: a token classifier as a redaction
service, a wasi:http proxy component that Spin and `wasmtime serve` run.

serve-build compiles the model (porter.compile), renders the generated forward pass
(templates/rust_forward) and the precompiled tokenizer (templates/tokenizer) as modules into the
service crate (templates/redact_service), with the facts the service needs rendered into its
config.rs: the window, the special tokens around each window's text, the padding id, the labels,
the limits and the request's time budget.
The output directory then holds:

    forward/        the generated forward crate with model.bin, layout.json, ir.json
    crate/          the service crate (buildable by hand with the command in .cargo/config.toml)
    redact.wasm     the component
    service.json    what was built from what, the limits, the component's size and SHA-256

deploy writes spin.toml beside them and hands over to the `spin` program when there is one.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from porter import TEMPLATES_DIR
from porter.errors import PorterError
from porter.ir.encoder import WHOLE_WINDOW
from porter.serve.host import forward_modules, record_component

SERVICE_TEMPLATE = TEMPLATES_DIR / "redact_service"
TOKENIZER_MODULE = TEMPLATES_DIR / "tokenizer" / "src" / "tokenizer.rs"
COMPONENT_NAME = "redact.wasm"
FORMAT = "porter.service/1"
DESCRIPTION = "PII redaction: a token classifier compiled to wasm by porter"
DEFAULT_MAX_BODY_BYTES = 64 * 1024
# Each window is one forward pass; 16 windows of a MiniLM-sized model stay well inside a
# request timeout of tens of seconds.
DEFAULT_MAX_WINDOWS = 16
# A request's time budget inside the component: two thirds of `porter serve`'s 30 s timeout, so
# that the window in flight when the budget check passes can still finish before the host's
# deadline even on a loaded machine (a MiniLM window takes 0.24 s alone, seconds under load).
DEFAULT_REQUEST_BUDGET_MS = 20_000
BIOES_TAGS = ("B", "I", "E", "S")
PAD_TOKEN_NAMES = ("[PAD]", "<pad>")
# The forward crate's own entry point: its modules become the service's, its main() does not.
FORWARD_MAIN = "src/main.rs"


@dataclass(frozen=True)
class WindowRule:
    """How the text's tokens become model windows: special tokens around them, then padding."""

    prefix_ids: list[int]
    suffix_ids: list[int]
    pad_id: int
    unk_id: int | None  # replaces ids past the model's vocabulary; None if the tokenizer has none
    vocab_size: int  # the tokenizer's


@dataclass(frozen=True)
class LabelSet:
    categories: list[str]
    tags: list[tuple[str, int]]  # per output index: ("O"|"B"|"I"|"E"|"S", category index)


# --- reading the inputs ------------------------------------------------------------------------


def window_rule(tokenizer_json: Path, pad_id: int | None = None) -> WindowRule:
    """Special tokens, padding and unknown ids as the reference `tokenizers` library sees them."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_json))
        spec = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    except Exception as e:  # tokenizers raises a bare Exception for a malformed file
        raise PorterError(f"cannot read tokenizer {tokenizer_json}: {e}") from None
    padding = tokenizer.padding
    tokenizer.no_truncation()
    tokenizer.no_padding()
    # sequence_ids is None exactly on the post-processor's special tokens.
    encoding = tokenizer.encode("a")
    text_positions = [i for i, s in enumerate(encoding.sequence_ids) if s is not None]
    if not text_positions:
        raise PorterError(f"{tokenizer_json}: encoding 'a' gives no text token")
    first, last = text_positions[0], text_positions[-1]
    if pad_id is None:
        pad_id = _pad_id(tokenizer, padding, tokenizer_json)
    return WindowRule(list(encoding.ids[:first]), list(encoding.ids[last + 1:]), pad_id,
                      _unk_id(tokenizer, spec.get("model") or {}), tokenizer.get_vocab_size())


def _pad_id(tokenizer, padding: dict | None, path: Path) -> int:
    if padding and padding.get("pad_id") is not None:
        return int(padding["pad_id"])
    for name in PAD_TOKEN_NAMES:
        found = tokenizer.token_to_id(name)
        if found is not None:
            return found
    raise PorterError(f"{path} names no padding token; give --pad-id")


def _unk_id(tokenizer, model: dict) -> int | None:
    if isinstance(model.get("unk_id"), int):  # Unigram
        return model["unk_id"]
    if model.get("unk_token"):  # WordPiece, BPE
        return tokenizer.token_to_id(model["unk_token"])
    return None


def read_labels(labels_json: Path, expected: int) -> LabelSet:
    """labels.json's "labels" (output index -> "O" | "B-CAT" | "I-CAT" | "E-CAT" | "S-CAT")."""
    try:
        labels = json.loads(labels_json.read_text(encoding="utf-8"))["labels"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PorterError(f"cannot read the label list of {labels_json}: {e}") from None
    if not isinstance(labels, list) or len(labels) != expected:
        raise PorterError(f"{labels_json} lists {len(labels) if isinstance(labels, list) else 'no'} "
                          f"labels; the model has {expected} outputs")
    categories: list[str] = []
    tags = []
    for index, label in enumerate(labels):
        if label == "O":
            tags.append(("O", 0))
            continue
        tag, _, category = str(label).partition("-")
        if tag not in BIOES_TAGS or not re.fullmatch(r"[A-Z][A-Z0-9_]*", category):
            raise PorterError(f"{labels_json}: label {index} is {label!r}; expected O or "
                              "B-/I-/E-/S- and an upper-case category (BIOES)")
        if category not in categories:
            categories.append(category)
        tags.append((tag, categories.index(category)))
    return LabelSet(categories, tags)


# --- rendering and building --------------------------------------------------------------------


def forward_files(ir, forward_dir: Path) -> tuple[dict[str, bytes], list[str]]:
    """Renders the forward crate into forward_dir (kept: `porter build` / `porter verify` work on
    it) and returns its sources without main.rs, plus model.bin, as relative path -> bytes for
    the service crate, and the module names the service must declare."""
    from porter.codegen.encoder import render_forward_crate

    crate = render_forward_crate(ir, forward_dir)
    modules = forward_modules((crate / FORWARD_MAIN).read_text(encoding="utf-8"))
    files = {str(p.relative_to(crate)): p.read_bytes()
             for p in sorted((crate / "src").rglob("*")) if p.is_file()}
    del files[FORWARD_MAIN]
    files["model.bin"] = (crate / "model.bin").read_bytes()
    return files, modules


def service_variables(ir, rule: WindowRule, labels: LabelSet, modules: list[str],
                      max_body_bytes: int, max_windows: int, request_budget_ms: int) -> dict:
    if request_budget_ms <= 0:
        raise PorterError(f"--request-budget-ms must be positive, not {request_budget_ms}")
    if len(rule.prefix_ids) + len(rule.suffix_ids) >= ir.seq:
        raise PorterError(f"the window of {ir.seq} tokens has no room left for text")
    if rule.vocab_size > ir.vocab and rule.unk_id is None:
        raise PorterError(f"the tokenizer has {rule.vocab_size} ids, the model {ir.vocab}, and "
                          "the tokenizer names no unknown token to stand for the rest")
    padding_note = ("The model attends to every key, so the padding id changes its output: it "
                    "must be the one the model was checked with (the tokenizer's padding token "
                    "unless --pad-id says otherwise)." if ir.mask == WHOLE_WINDOW else
                    "The model's mask input drops padded keys.")
    return {
        "crate_name": "porter-redact-service",
        "window": ir.seq,
        "prefix_ids": rule.prefix_ids,
        "suffix_ids": rule.suffix_ids,
        "pad_id": rule.pad_id,
        "padding_note": padding_note,
        "vocab": ir.vocab,
        # Without an unknown token every tokenizer id fits the model (checked above): never used.
        "unk_id": rule.unk_id if rule.unk_id is not None else rule.pad_id,
        "max_body_bytes": max_body_bytes,
        "max_windows": max_windows,
        "request_budget_ms": request_budget_ms,
        "categories": labels.categories,
        "labels": labels.tags,
        "forward_modules": modules,
    }


def serve_build(model: Path, tokenizer_json: Path, labels_json: Path, out_dir: Path, *,
                pad_id: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                max_windows: int = DEFAULT_MAX_WINDOWS, request_budget_ms: int = DEFAULT_REQUEST_BUDGET_MS,
                echo=print) -> dict:
    """Compile, render and build the service into out_dir; returns what service.json records."""
    from porter.codegen.render import cargo_config_file, render_crate
    from porter.toolchain.cargo import build_crate
    from porter.codegen.compile import recover
    from porter.tokenize.compile import build_blob, read_tokenizer_json
    from porter.toolchain.discover import CrateKind, require_toolchain

    toolchain = require_toolchain()
    ir = recover(model)
    echo(f"recovered {model}: window {ir.seq}, {ir.labels} labels, mask {ir.mask}")
    labels = read_labels(labels_json, ir.labels)
    rule = window_rule(tokenizer_json, pad_id)
    blob = build_blob(read_tokenizer_json(tokenizer_json), tokenizer_json.name)
    files, modules = forward_files(ir, out_dir / "forward")
    files["tokenizer.bin"] = blob
    files["src/tokenizer.rs"] = TOKENIZER_MODULE.read_bytes()
    variables = service_variables(ir, rule, labels, modules, max_body_bytes, max_windows, request_budget_ms)
    files.update(cargo_config_file(toolchain, CrateKind.HTTP_COMPONENT))
    crate = render_crate(SERVICE_TEMPLATE, out_dir / "crate", variables, files)
    echo(f"building the component in {crate} (the first build compiles std for it: minutes)")
    built = build_crate(crate, toolchain)
    component = out_dir / COMPONENT_NAME
    shutil.copyfile(built, component)
    facts = _facts(model, tokenizer_json, labels_json, component, ir, rule, labels,
                   max_body_bytes, max_windows, request_budget_ms)
    return record_component(out_dir, component, facts, echo)


def build_command(facts: dict, out_dir: Path, here) -> list[str]:
    build = ["porter", "serve-build", here(facts["model"]), "--tokenizer", here(facts["tokenizer"]),
             "--labels", here(facts["labels_file"]), "-o", here(out_dir)]
    if facts["max_body_bytes"] != DEFAULT_MAX_BODY_BYTES:
        build += ["--max-body-bytes", str(facts["max_body_bytes"])]
    if facts["max_windows"] != DEFAULT_MAX_WINDOWS:
        build += ["--max-windows", str(facts["max_windows"])]
    if facts["request_budget_ms"] != DEFAULT_REQUEST_BUDGET_MS:
        build += ["--request-budget-ms", str(facts["request_budget_ms"])]
    return build


def _facts(model, tokenizer_json, labels_json, component, ir, rule, labels, max_body_bytes,
           max_windows, request_budget_ms) -> dict:
    data = component.read_bytes()
    return {
        "format": FORMAT,
        "model": str(model.resolve()),
        "tokenizer": str(tokenizer_json.resolve()),
        "labels_file": str(labels_json.resolve()),
        "component": component.name,
        "component_bytes": len(data),
        "component_sha256": hashlib.sha256(data).hexdigest(),
        "window": ir.seq,
        "mask": ir.mask,
        "prefix_ids": rule.prefix_ids,
        "suffix_ids": rule.suffix_ids,
        "pad_id": rule.pad_id,
        "categories": labels.categories,
        "max_body_bytes": max_body_bytes,
        "max_windows": max_windows,
        "request_budget_ms": request_budget_ms,
    }


