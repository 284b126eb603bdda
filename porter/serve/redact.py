"""`porter serve-build`, `porter serve` and `porter deploy`: a token classifier as a redaction
service, a wasi:http proxy component that Spin and `wasmtime serve` run.

serve-build compiles the model (porter.compile), renders the generated forward pass
(templates/rust_forward) and the precompiled tokenizer (templates/tokenizer) as modules into the
service crate (templates/redact_service), with the facts the service needs rendered into its
config.rs: the window, the special tokens around each window's text, the padding id, the labels.
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
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from porter import TEMPLATES_DIR
from porter.errors import PorterError
from porter.ir.encoder import WHOLE_WINDOW
from porter.fsutil import write_atomic

SERVICE_TEMPLATE = TEMPLATES_DIR / "redact_service"
TOKENIZER_MODULE = TEMPLATES_DIR / "tokenizer" / "src" / "tokenizer.rs"
COMPONENT_NAME = "redact.wasm"
SERVICE_JSON = "service.json"
SPIN_TOML = "spin.toml"
# Spin / Akamai Functions refuse applications above 50 MiB.
MAX_COMPONENT_BYTES = 50 * 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 64 * 1024
# Each window is one forward pass; 16 windows of a MiniLM-sized model stay well inside a
# request timeout of tens of seconds.
DEFAULT_MAX_WINDOWS = 16
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


def forward_modules(main_rs: str) -> list[str]:
    """The modules the forward crate's root declares (`mod kernels;`), in order."""
    return re.findall(r"^\s*(?:pub\s+)?mod\s+(\w+)\s*;", main_rs, flags=re.MULTILINE)


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
                      max_body_bytes: int, max_windows: int) -> dict:
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
        "categories": labels.categories,
        "labels": labels.tags,
        "forward_modules": modules,
    }


def serve_build(model: Path, tokenizer_json: Path, labels_json: Path, out_dir: Path, *,
                pad_id: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                max_windows: int = DEFAULT_MAX_WINDOWS, echo=print) -> dict:
    """Compile, render and build the service into out_dir; returns what service.json records."""
    from porter.toolchain.cargo import build_crate, render_crate
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
    variables = service_variables(ir, rule, labels, modules, max_body_bytes, max_windows)
    crate = render_crate(SERVICE_TEMPLATE, out_dir / "crate", variables, toolchain,
                         CrateKind.HTTP_COMPONENT, extra_files=files)
    echo(f"building the component in {crate} (the first build compiles std for it: minutes)")
    built = build_crate(crate, toolchain)
    component = out_dir / COMPONENT_NAME
    shutil.copyfile(built, component)
    facts = _facts(model, tokenizer_json, labels_json, component, ir, rule, labels,
                   max_body_bytes, max_windows)
    return record_component(out_dir, component, facts, echo)


def record_component(out_dir: Path, component: Path, facts: dict, echo) -> dict:
    """Writes service.json; refuses a component over Spin's size limit."""
    write_atomic(out_dir / SERVICE_JSON, (json.dumps(facts, indent=1) + "\n").encode())
    if facts["component_bytes"] >= MAX_COMPONENT_BYTES:
        raise PorterError(f"{component} is {facts['component_bytes']:,} bytes; Spin's limit is "
                          f"{MAX_COMPONENT_BYTES:,}")
    echo(f"{component}: {facts['component_bytes']:,} bytes "
         f"({facts['component_bytes'] / MAX_COMPONENT_BYTES:.0%} of the 50 MiB limit)")
    return facts


def _facts(model, tokenizer_json, labels_json, component, ir, rule, labels, max_body_bytes,
           max_windows) -> dict:
    data = component.read_bytes()
    return {
        "format": "porter.service/1",
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
    }


def read_facts(out_dir: Path) -> dict:
    path = out_dir / SERVICE_JSON
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PorterError(f"{path}: not a built service ({e}); run `porter serve-build` first") from None


# --- serving and deploying ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Instance memory reuse for `wasmtime serve`. Each request still gets a fresh instance, but its
# slot in the pooling allocator keeps the linear memory mapped: PAGEMAP_SCAN (Linux 6.7+; "auto"
# falls back elsewhere) finds the pages the last request wrote and only those are reset, so the
# weights' pages stay mapped rather than faulting in again on every request. Measured on a
# 20-token /redact: Server-Timing total about 1 ms lower (median 15.9 -> 14.7 ms). The bound
# covers a whole MiniLM-sized component (weights, tokenizer, heap) with room to spare.
KEEP_RESIDENT_BYTES = 256 << 20
INSTANCE_REUSE = ("pooling-allocator=y,pooling-pagemap-scan=auto,"
                  f"pooling-memory-keep-resident={KEEP_RESIDENT_BYTES}")


def serve_command(wasmtime: Path, component: Path, port: int, timeout_s: float) -> list[str]:
    """`wasmtime serve` on loopback. -W timeout turns epoch interruption on, as Spin runs it."""
    return [str(wasmtime), "serve", "--addr", f"127.0.0.1:{port}", "-W", f"timeout={timeout_s:g}s",
            "-O", INSTANCE_REUSE, str(component)]


def stop_server(server) -> None:
    """Stops a `wasmtime serve` subprocess: terminate, then kill if it does not stop."""
    import subprocess

    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


HTTP_TIMEOUT_S = 60.0


def http_request(port: int, method: str, path: str, body: bytes | str | None = None,
                 headers: dict | None = None, timeout_s: float = HTTP_TIMEOUT_S) -> tuple[int, dict, bytes]:
    """One request to a server on loopback: (status, lower-cased headers, raw body)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        data = body.encode() if isinstance(body, str) else body
        connection.request(method, path, body=data, headers=headers or {})
        response = connection.getresponse()
        raw = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, raw
    finally:
        connection.close()


def wait_until_serving(server, port: int, log_path: Path, timeout_s: float) -> None:
    """Polls GET /ping until a `wasmtime serve` started on `port` answers 200; if the server
    exits or `timeout_s` passes first, kills it and fails with its log."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if http_request(port, "GET", "/ping")[0] == 200:
                return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            server.wait()
            log = log_path.read_text(errors="replace") if log_path.is_file() else ""
            raise PorterError(f"wasmtime serve did not come up: {log}")
        time.sleep(0.2)


def parse_server_timing(header: str) -> dict[str, tuple[float, str | None]]:
    """A Server-Timing header (`name;dur=ms;desc="..."`, comma-separated) as {name: (ms, desc)}."""
    entries = {}
    for part in header.split(","):
        fields = [f.strip() for f in part.split(";")]
        params = dict(f.split("=", 1) for f in fields[1:])
        entries[fields[0]] = (float(params["dur"]), params.get("desc", "").strip('"') or None)
    return entries


def wasmtime_program() -> Path:
    from porter.toolchain.discover import find_wasmtime_cli

    finding = find_wasmtime_cli()
    if not finding.ok:
        raise PorterError(f"no wasmtime program for `wasmtime serve`: {finding.install}")
    return finding.path


def _redact_build_command(facts: dict, out_dir: Path, here) -> list[str]:
    build = ["porter", "serve-build", here(facts["model"]), "--tokenizer", here(facts["tokenizer"]),
             "--labels", here(facts["labels_file"]), "-o", here(out_dir)]
    if facts["max_body_bytes"] != DEFAULT_MAX_BODY_BYTES:
        build += ["--max-body-bytes", str(facts["max_body_bytes"])]
    if facts["max_windows"] != DEFAULT_MAX_WINDOWS:
        build += ["--max-windows", str(facts["max_windows"])]
    return build


def application(facts: dict) -> tuple[str, str, Callable]:
    """(name, description, build command maker) of the service that service.json describes: the
    redaction service, or the generation service of porter.serve.generate."""
    if facts.get("format") == "porter.generate/1":  # porter.serve.generate.FORMAT
        from porter.serve import generate as generate_service

        return generate_service.APP_NAME, generate_service.DESCRIPTION, generate_service.build_command
    return "redact", "PII redaction: a token classifier compiled to wasm by porter", _redact_build_command


def spin_toml(facts: dict, out_dir: Path, manifest_dir: Path, name: str | None = None) -> str:
    """Spin manifest v2; paths relative to the manifest's directory, where spin runs the build.

    The route must be "/...": "/" matches the root path only. The component may call nothing
    outside (allowed_outbound_hosts = []), so the text it handles cannot leave it."""
    def here(path: Path | str) -> str:
        return os.path.relpath(Path(path).resolve(), manifest_dir.resolve())

    default_name, description, build_command = application(facts)
    name = name or default_name
    return "\n".join([
        "# Written by `porter deploy` from service.json.",
        "spin_manifest_version = 2",
        "",
        "[application]",
        f'name = "{name}"',
        'version = "0.1.0"',
        f"description = {json.dumps(description)}",
        "",
        "[[trigger.http]]",
        'route = "/..."',
        f'component = "{name}"',
        "",
        f"[component.{name}]",
        f"source = {json.dumps(here(out_dir / facts['component']))}",
        "allowed_outbound_hosts = []",
        "",
        f"[component.{name}.build]",
        f"command = {json.dumps(shlex.join(build_command(facts, out_dir, here)))}",
        "",
    ])


SPIN_ACTIONS = {"up": ["up"], "deploy": ["deploy"], "aka": ["aka", "deploy"]}


def deploy(out_dir: Path, action: str, manifest: Path | None = None, echo=print) -> int:
    """Writes spin.toml (default: in out_dir); runs `spin <action>` when spin is installed, else
    says what to run."""
    facts = read_facts(out_dir)
    component = out_dir / facts["component"]
    if not component.is_file():
        raise PorterError(f"{component} is missing; run `porter serve-build` again")
    size = component.stat().st_size
    if size >= MAX_COMPONENT_BYTES:
        raise PorterError(f"{component} is {size:,} bytes; Spin's limit is {MAX_COMPONENT_BYTES:,}")
    manifest = manifest or out_dir / SPIN_TOML
    write_atomic(manifest, spin_toml(facts, out_dir, manifest.parent).encode())
    echo(f"wrote {manifest} (component {component.name}, {size:,} bytes, route /..., no outbound hosts)")
    command = ["spin", *SPIN_ACTIONS[action], "--from", str(manifest)]
    spin = shutil.which("spin")
    if spin is None:
        echo("the spin program is not installed (it ships from github.com/fermyon/spin releases, "
             "not from a package registry). With it, run:")
        echo("  " + " ".join(command))
        echo(f"or serve it here: porter serve {out_dir}")
        return 0
    echo("running: " + " ".join(command))
    return subprocess.call([spin, *command[1:]])


def serve(out_dir: Path, port: int, timeout_s: float, echo=print) -> None:
    """Replaces this process with `wasmtime serve`, so that signals reach the server itself."""
    facts = read_facts(out_dir)
    command = serve_command(wasmtime_program(), out_dir / facts["component"], port, timeout_s)
    echo(f"serving on http://127.0.0.1:{port} (try: curl http://127.0.0.1:{port}/ping)")
    sys.stdout.flush()
    os.execv(command[0], command)
