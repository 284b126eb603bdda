"""`porter serve-build`, `porter serve` and `porter deploy`: a token classifier as a redaction
service, a wasi:http proxy component that Spin and `wasmtime serve` run.

serve-build compiles the model (porter.compile) and renders four crates: the generated forward
pass (templates/rust_forward), the precompiled tokenizer (templates/tokenizer), the shared
wasi:http glue (templates/service_common) and the service (templates/redact_service), which
depends on the other three by path, with the facts the service
needs rendered into its config.rs: the window, the special tokens around each window's text, the
padding id, the labels, the limits and the request's time budget.
The output directory then holds:

    forward/        the generated forward crate with model.bin, layout.json, ir.json
    tokenizer/      the tokenizer crate with tokenizer.bin
    service_common/ the wasi:http glue porter's services share (templates/service_common)
    crate/          the service crate (buildable by hand with the command in .cargo/config.toml)
    Cargo.toml      the workspace of the three crates (porter.serve.host.write_workspace)
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
from porter.check.windows import WindowRule, require_vocabulary_fits, window_rule
from porter.errors import PorterError
from porter.ir.encoder import MaskMode
from porter.serve.host import BODY_DEADLINE_MS, SERVICE_CRATE, record_component, render_common_crate, write_workspace

SERVICE_TEMPLATE = TEMPLATES_DIR / "redact_service"
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


@dataclass(frozen=True)
class LabelSet:
    categories: list[str]
    tags: list[tuple[str, int]]  # per output index: ("O"|"B"|"I"|"E"|"S", category index)


# --- reading the inputs ------------------------------------------------------------------------


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


def render_dependencies(ir, tokenizer_blob: bytes, out_dir: Path, toolchain) -> dict[str, str]:
    """Renders the service crate's three path dependencies beside it: the forward crate into
    out_dir/forward (kept: `porter build` / `porter verify` work on it too), the tokenizer crate
    into out_dir/tokenizer and the shared wasi:http glue into out_dir/service_common. Returns
    their package names, which the service's Cargo.toml names.

    Both names carry a hash of their directory (codegen.encoder.crate_name): every build shares
    one cargo target directory, where two services' tokenizer crates of one name would be one
    unit, and a build could take the other service's tokenizer.bin for fresh."""
    from porter.codegen.encoder import crate_name, render_forward_crate
    from porter.tokenize.compile import render_tokenizer_crate

    forward_dir = render_forward_crate(ir, out_dir / "forward")
    tokenizer_dir = out_dir / "tokenizer"
    tokenizer_package = crate_name("tokenizer", tokenizer_dir)
    render_tokenizer_crate(tokenizer_blob, tokenizer_dir, toolchain, tokenizer_package)
    return {"forward_package": crate_name(ir.source, forward_dir), "tokenizer_package": tokenizer_package,
            **render_common_crate(out_dir)}


def service_variables(ir, rule: WindowRule, labels: LabelSet, packages: dict[str, str],
                      max_body_bytes: int, max_windows: int, request_budget_ms: int) -> dict:
    if request_budget_ms <= 0:
        raise PorterError(f"--request-budget-ms must be positive, not {request_budget_ms}")
    rule.chunk(ir.seq)
    require_vocabulary_fits(rule, ir.vocab)
    padding_note = ("The model attends to every key, so the padding id changes its output: it "
                    "must be the one the model was checked with (the tokenizer's padding token "
                    "unless --pad-id says otherwise)." if ir.mask == MaskMode.NONE else
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
        "body_deadline_ms": BODY_DEADLINE_MS,
        "categories": labels.categories,
        "labels": labels.tags,
        **packages,
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
    if not ir.output_tokens:
        raise PorterError(f"{model} has a pooled output ({ir.width} values per window); the redaction "
                          "service needs one output row per token (a token classifier)")
    echo(f"recovered {model}: window {ir.seq}, {ir.width} labels, mask {ir.mask.value}")
    labels = read_labels(labels_json, ir.width)
    rule = window_rule(tokenizer_json, pad_id)
    blob = build_blob(read_tokenizer_json(tokenizer_json), tokenizer_json.name)
    packages = render_dependencies(ir, blob, out_dir, toolchain)
    variables = service_variables(ir, rule, labels, packages, max_body_bytes, max_windows, request_budget_ms)
    crate = render_crate(SERVICE_TEMPLATE, out_dir / SERVICE_CRATE, variables,
                         cargo_config_file(toolchain, CrateKind.HTTP_COMPONENT))
    write_workspace(out_dir)
    echo(f"building the component in {crate} (the first build compiles std for it: minutes)")
    built = build_crate(crate, toolchain)
    component = out_dir / COMPONENT_NAME
    shutil.copyfile(built, component)
    facts = _facts(model, tokenizer_json, labels_json, component, ir, rule, labels,
                   max_body_bytes, max_windows, request_budget_ms)
    return record_component(out_dir, component, facts, echo)


def build_command(facts: dict, out_dir: Path, here) -> list[str]:
    """porter's arguments that remake out_dir, with paths as `here` writes them (for the Spin
    manifest's build step, which puts the porter program in front)."""
    build = ["serve-build", here(facts["model"]), "--tokenizer", here(facts["tokenizer"]),
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
        "mask": ir.mask.value,
        "padding_is_inert": ir.padding_is_inert,
        "prefix_ids": rule.prefix_ids,
        "suffix_ids": rule.suffix_ids,
        "pad_id": rule.pad_id,
        "categories": labels.categories,
        "max_body_bytes": max_body_bytes,
        "max_windows": max_windows,
        "request_budget_ms": request_budget_ms,
        "body_deadline_ms": BODY_DEADLINE_MS,
    }


