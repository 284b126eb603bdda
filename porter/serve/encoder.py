"""`porter serve-build --task embeddings|sequence-classification|rerank|token-classification`: an encoder
as a service in the APIs clients already speak (Text Embeddings Inference, OpenAI,
the Hugging Face Inference API): templates/encoder_service, beside the forward crate, the
tokenizer crate and the shared wasi:http glue, as the redaction service is built (porter.serve.redact
renders the same three dependencies).

The task is what the IR says the model outputs, unless --task says otherwise:

    one output row, written by a Linear    sequence-classification (the Linear is the head);
                                           rerank for one output (TEI's reranker: a
                                           cross-encoder's relevance logit), /predict beside it
    one output row, written by anything    embeddings (pooling, a slice of the first token,
      else                                 normalisation)
    one row per token                      the redaction service (porter.serve.redact);
                                           --task token-classification serves it in the
                                           Hugging Face pipeline's shape instead

Whether an embedding model's output is already of unit length is decided by running the
program (the numpy executor) on seeded windows; TEI's `normalize` then changes nothing.
Sequence classifiers (rerank included) read text pairs when the tokenizer.json has a pair
template whose token types the model reads (BERT's type 1 on segment B needs a token-type
input; RoBERTa's and XLM-R's templates give type 0 only). Classification labels come from --labels (a JSON list, {"labels": [...]} or a Hugging Face
config.json's id2label), else LABEL_0 ... as Hugging Face names them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from porter import TEMPLATES_DIR, __version__
from porter.check.windows import require_vocabulary_fits, window_rule
from porter.errors import PorterError
from porter.ir.encoder import LinearStep, MaskMode
from porter.serve.host import BODY_DEADLINE_MS, SERVICE_CRATE, record_component, write_workspace

TEMPLATE = TEMPLATES_DIR / "encoder_service"
FORMAT = "porter.encoder/1"
APP_NAME = "encoder"
DESCRIPTION = "An encoder model compiled to wasm by porter, in TEI's, OpenAI's and Hugging Face's APIs"
TASKS = ("embeddings", "sequence-classification", "rerank", "token-classification")
COMPONENT_NAME = "encoder.wasm"
DEFAULT_MAX_BODY_BYTES = 256 * 1024
DEFAULT_MAX_BATCH = 32
DEFAULT_REQUEST_BUDGET_MS = 20_000  # as the redaction service's (porter.serve.redact)
UNIT_LENGTH_TOLERANCE = 1e-4


def task_of(ir) -> str:
    """What the model outputs, by the step that writes its output buffer."""
    if ir.output_tokens:
        return "redact"
    writer = next(s for s in reversed(ir.steps) if ir.output_buffer in s.outputs)
    if not isinstance(writer, LinearStep):
        return "embeddings"
    return "rerank" if ir.width == 1 else "sequence-classification"


def output_is_unit_length(ir, rule, seed: int = 0) -> bool:
    """Whether the model's own output row has L2 norm 1 on seeded windows of every length."""
    from porter.reference import execute

    rng = np.random.default_rng(seed)
    for live in (len(rule.prefix_ids) + len(rule.suffix_ids) + 1, ir.seq // 2, ir.seq):
        ids = np.full(ir.seq, rule.pad_id, np.int64)
        ids[:live] = rng.integers(0, ir.vocab, live)
        mask = (np.arange(ir.seq) < live).astype(np.int32)
        row = np.asarray(execute.run(ir, ids, mask), np.float64).reshape(-1)
        if abs(np.linalg.norm(row) - 1.0) > UNIT_LENGTH_TOLERANCE:
            return False
    return True


def reads_pairs(tokenizer_json: Path, ir) -> bool:
    """Whether the tokenizer has a pair template whose token types the model reads."""
    from porter.tokenize.compile import pair_type_ids, read_tokenizer_json

    types = pair_type_ids(read_tokenizer_json(tokenizer_json), tokenizer_json.name)
    return types is not None and max(types) < ir.type_vocab


def rust_string(text: str) -> str:
    """A Rust string literal of `text` (Jinja's tojson writes JSON escapes Rust does not read)."""
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\u{{{ord(c):x}}}" for c in text)
    return f'"{escaped}"'


def read_labels(path: Path | None, width: int) -> list[str]:
    if path is None:
        return [f"LABEL_{i}" for i in range(width)]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PorterError(f"cannot read the labels of {path}: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("id2label"), dict):
        try:
            labels = [data["id2label"][key] for key in sorted(data["id2label"], key=int)]
        except ValueError:
            raise PorterError(f"{path}: id2label's keys must be output indices") from None
    else:
        labels = data.get("labels") if isinstance(data, dict) else data
    if not isinstance(labels, list) or not all(isinstance(label, str) and label for label in labels):
        raise PorterError(f"{path}: expected a JSON list of label names, {{\"labels\": [...]}} or a config.json "
                          "with id2label")
    if len(labels) != width:
        raise PorterError(f"{path} lists {len(labels)} labels; the model has {width} outputs")
    return labels


def encoder_serve_build(model: Path, tokenizer_json: Path, out_dir: Path, task: str, ir, *,
                        labels_path: Path | None = None, pad_id: int | None = None,
                        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_batch: int = DEFAULT_MAX_BATCH,
                        request_budget_ms: int = DEFAULT_REQUEST_BUDGET_MS, echo=print) -> dict:
    """Render and build the service for the recovered `ir` into out_dir; returns service.json's facts."""
    from porter.codegen.encoder import arithmetic
    from porter.codegen.render import cargo_config_file, render_crate
    from porter.serve.redact import render_dependencies
    from porter.tokenize.compile import build_blob, read_tokenizer_json
    from porter.toolchain.cargo import build_crate
    from porter.toolchain.discover import CrateKind, require_toolchain
    from porter.fsutil import copy_atomic

    if task not in TASKS:
        raise PorterError(f"--task {task}: the encoder service serves {', '.join(TASKS)}")
    per_token = task == "token-classification"
    if ir.output_tokens != per_token:
        rows = "one output row per token" if ir.output_tokens else "one output row per window"
        raise PorterError(f"{model} has {rows}; --task {task} needs "
                          + ("one row per token" if per_token else "one row per window"))
    if max_batch <= 0 or request_budget_ms <= 0:
        raise PorterError(f"--max-batch ({max_batch}) and --request-budget-ms ({request_budget_ms}) must be positive")
    toolchain = require_toolchain()
    rule = window_rule(tokenizer_json, pad_id)
    rule.chunk(ir.seq)
    require_vocabulary_fits(rule, ir.vocab)
    labels = read_labels(labels_path, ir.width) if task != "embeddings" else []
    pairs = task in ("sequence-classification", "rerank") and reads_pairs(tokenizer_json, ir)
    if task == "rerank" and ir.width != 1:
        raise PorterError(f"--task rerank needs one output (a relevance logit); {model} has {ir.width}")
    if task == "rerank" and not pairs:
        raise PorterError(f"--task rerank: {tokenizer_json} has no pair template whose token types {model} reads "
                          f"(it has {ir.type_vocab} token type(s))")
    normalized = task == "embeddings" and output_is_unit_length(ir, rule)
    echo(f"{model}: {task}, window {ir.seq}, {ir.width} values per input"
         + (", already unit length" if normalized else ""))
    blob = build_blob(read_tokenizer_json(tokenizer_json), tokenizer_json.name)
    packages = render_dependencies(ir, blob, out_dir, toolchain)
    model_sha256 = hashlib.sha256(model.read_bytes()).hexdigest()
    variables = {
        "crate_name": "porter-encoder-service", "task": task, "window": ir.seq,
        "prefix_ids": rule.prefix_ids, "suffix_ids": rule.suffix_ids, "pad_id": rule.pad_id,
        "padding_note": ("The model attends to every key: the padding id is the one it was checked with."
                         if ir.mask == MaskMode.NONE else "The model's mask input drops padded keys."),
        "vocab": ir.vocab, "unk_id": rule.unk_id if rule.unk_id is not None else rule.pad_id,
        "output_is_normalized": normalized, "labels": [rust_string(label) for label in labels], "pairs": pairs,
        "model_id": rust_string(model.name), "model_sha256": model_sha256, "porter_version": __version__,
        "reference": rust_string(arithmetic(ir)), "max_body_bytes": max_body_bytes, "max_batch": max_batch,
        "request_budget_ms": request_budget_ms, "body_deadline_ms": BODY_DEADLINE_MS, **packages,
    }
    crate = render_crate(TEMPLATE, out_dir / SERVICE_CRATE, variables,
                         cargo_config_file(toolchain, CrateKind.HTTP_COMPONENT))
    write_workspace(out_dir)
    echo(f"building the component in {crate} (the first build compiles std for it: minutes)")
    component = copy_atomic(build_crate(crate, toolchain), out_dir / COMPONENT_NAME)
    data = component.read_bytes()
    facts = {
        "format": FORMAT, "task": task, "model": str(model.resolve()), "model_sha256": model_sha256,
        "tokenizer": str(tokenizer_json.resolve()),
        "labels_file": str(labels_path.resolve()) if labels_path else None, "labels": labels,
        "component": component.name, "component_bytes": len(data),
        "component_sha256": hashlib.sha256(data).hexdigest(),
        "window": ir.seq, "width": ir.width, "mask": ir.mask.value, "output_is_normalized": normalized, "pairs": pairs,
        "prefix_ids": rule.prefix_ids, "suffix_ids": rule.suffix_ids, "pad_id": rule.pad_id,
        "max_body_bytes": max_body_bytes, "max_batch": max_batch,
        "request_budget_ms": request_budget_ms, "body_deadline_ms": BODY_DEADLINE_MS,
    }
    return record_component(out_dir, component, facts, echo)


def build_command(facts: dict, out_dir: Path, here) -> list[str]:
    """porter's arguments that remake out_dir (for the Spin manifest's build step)."""
    command = ["serve-build", here(facts["model"]), "--tokenizer", here(facts["tokenizer"]), "--task", facts["task"]]
    if facts["labels_file"]:
        command += ["--labels", here(facts["labels_file"])]
    for option, key, default in (("--max-body-bytes", "max_body_bytes", DEFAULT_MAX_BODY_BYTES),
                                 ("--max-batch", "max_batch", DEFAULT_MAX_BATCH),
                                 ("--request-budget-ms", "request_budget_ms", DEFAULT_REQUEST_BUDGET_MS)):
        if facts[key] != default:
            command += [option, str(facts[key])]
    return command + ["-o", here(out_dir)]


def serve_build(model: Path, tokenizer_json: Path, out_dir: Path, *, task: str | None = None,
                labels_path: Path | None = None, echo=print, **options) -> dict:
    """`porter serve-build`: the service for what the model outputs (or for `task`)."""
    from porter.codegen.compile import recover
    from porter.serve import redact

    ir = recover(model)
    task = task or task_of(ir)
    if task == "redact":
        if labels_path is None:
            raise PorterError(f"{model} outputs one row per token: the redaction service needs --labels "
                              "(labels.json, one BIOES label per output)")
        options.pop("max_batch", None)
        return redact.serve_build(model, tokenizer_json, labels_path, out_dir, echo=echo, **options)
    options.pop("max_windows", None)  # the redaction service's
    return encoder_serve_build(model, tokenizer_json, out_dir, task, ir, labels_path=labels_path, echo=echo, **options)
