"""`porter generate-build`: a GPT-style decoder with a KV cache as a text-generation service, a
wasi:http proxy component that `porter serve` (`wasmtime serve`) and Spin run.

generate-build recovers the decoder (porter.recover.decoder), renders its generation crate
(porter.codegen.decoder, kept in OUT/decoder: `porter build OUT/decoder` builds the greedy eval
module the service is checked against), renders the service crate (templates/generate_service),
which depends on the decoder crate by path, and precompiles the byte-level BPE tokenizer into
bpe.bin (below). The wasi:http glue is the crate every service shares (templates/service_common),
rendered beside the others as a path dependency. The output directory then holds:

    decoder/        the generated decoder crate with model.bin, layout.json, ir.json
    service_common/ the shared wasi:http glue
    crate/          the service crate
    Cargo.toml      the workspace of the three crates (porter.serve.host.write_workspace)
    generate.wasm   the component
    service.json    what was built from what, the limits, the component's size and SHA-256

The byte-level BPE tokenizer is compiled into bpe.bin by porter.tokenize.bpe.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from porter import TEMPLATES_DIR, __version__
from porter.errors import PorterError
from porter.fsutil import copy_atomic
from porter.tokenize.bpe import bpe_blob
from porter.serve.encoder import rust_string
from porter.serve.host import BODY_DEADLINE_MS, SERVICE_CRATE, record_component, render_common_crate, write_workspace

TEMPLATE = TEMPLATES_DIR / "generate_service"
COMPONENT_NAME = "generate.wasm"
FORMAT = "porter.generate/1"
APP_NAME = "generate"
DESCRIPTION = "Text generation: a GPT-style decoder compiled to wasm by porter"
DEFAULT_MAX_BODY_BYTES = 16 * 1024
# Bounds the tokenizer's work; a prompt this long is more tokens than a small context holds anyway.
DEFAULT_MAX_PROMPT_BYTES = 4096

# --- rendering and building --------------------------------------------------------------------


def _recover(model: Path, context: int | None):
    from porter.recover.decoder import is_decoder_graph, recover_decoder
    from porter.frontends import load_graph

    graph = load_graph(model)
    if not is_decoder_graph(graph):
        raise PorterError(f"{model} is not a decoder with a KV cache (no output extends an input); "
                          "`porter serve-build` serves token classifiers")
    return recover_decoder(graph, str(model), context=context)


def generate_build(model: Path, tokenizer_json: Path, out_dir: Path, *, quant: str = "float32",
                   context: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                   max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES, echo=print) -> dict:
    """Compile, render and build the service into out_dir; returns what service.json records."""
    from porter.codegen.render import cargo_config_file, render_crate
    from porter.toolchain.cargo import build_crate
    from porter.codegen.decoder import render_decoder_crate
    from porter.codegen.encoder import crate_name
    from porter.toolchain.discover import CrateKind, require_toolchain

    if not 0 < max_prompt_bytes <= max_body_bytes:
        raise PorterError(f"--max-prompt-bytes {max_prompt_bytes} must lie in 1..--max-body-bytes "
                          f"({max_body_bytes})")
    toolchain = require_toolchain()
    ir = _recover(model, context)
    echo(f"recovered {model}: decoder, {len(ir.layers)} layers, context {ir.n_ctx}, vocabulary {ir.vocab}")
    blob, vocab_size, end_of_text = bpe_blob(tokenizer_json)
    if vocab_size > ir.vocab:
        raise PorterError(f"{tokenizer_json} has {vocab_size} ids, the model only {ir.vocab}")
    decoder_dir = render_decoder_crate(ir, out_dir / "decoder", quant)
    files = {"bpe.bin": blob}
    variables = {"crate_name": "porter-generate-service", "decoder_package": crate_name(ir.source, decoder_dir),
                 "model_id": rust_string(model.name), "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
                 "porter_version": __version__, "reference": rust_string(_reference(ir, quant)),
                 "end_of_text": end_of_text, "max_body_bytes": max_body_bytes,
                 "max_prompt_bytes": max_prompt_bytes, "body_deadline_ms": BODY_DEADLINE_MS,
                 **render_common_crate(out_dir)}
    files.update(cargo_config_file(toolchain, CrateKind.HTTP_COMPONENT))
    crate = render_crate(TEMPLATE, out_dir / SERVICE_CRATE, variables, files)
    write_workspace(out_dir)
    echo(f"building the component in {crate} (the first build compiles std for it: minutes)")
    component = copy_atomic(build_crate(crate, toolchain), out_dir / COMPONENT_NAME)
    facts = _facts(model, tokenizer_json, component, ir, quant, end_of_text, max_body_bytes, max_prompt_bytes)
    return record_component(out_dir, component, facts, echo)


def _reference(ir, quant: str) -> str:
    """What GET /info says the numbers reproduce."""
    weights = "Q8_0 weights" if quant != "float32" else "float32 weights"
    return f"onnxruntime CPU execution provider ({ir.ort_cpu or 'avx2'} target), {weights}"


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
    """porter's arguments that remake out_dir, with paths as `here` writes them (for the Spin
    manifest's build step, which puts the porter program in front)."""
    command = ["generate-build", here(facts["model"]), "--tokenizer", here(facts["tokenizer"])]
    if facts["quant"] != "float32":
        command += ["--quant", facts["quant"]]
    if facts["max_body_bytes"] != DEFAULT_MAX_BODY_BYTES:
        command += ["--max-body-bytes", str(facts["max_body_bytes"])]
    if facts["max_prompt_bytes"] != DEFAULT_MAX_PROMPT_BYTES:
        command += ["--max-prompt-bytes", str(facts["max_prompt_bytes"])]
    return command + ["-o", here(out_dir)]
