"""`porter golden`: reference outputs of a user's own model, written as a porter golden.

Encoders: the windows come from the user's texts, tokenized and windowed exactly as the
redaction service does it (porter.check.windows; a `text_a<TAB>text_b` line is a sentence pair,
encoded by the tokenizer's post-processor with its segment ids), or from seeded random ids when
there is no tokenizer (with a segment B where the model reads token types); each window runs through the reference runtime (porter.check.references: LiteRT
builtin or XNNPACK for .tflite, onnxruntime for .onnx, one thread). Decoders: each prompt is
decoded greedily for a given number of steps with the KV cache, in onnxruntime
(porter.check.decoder_reference), and the prompt pass's and every step's logits are kept.

Every manifest records what is needed to trust or remake the golden: the model's SHA-256, the
runtime, its version and mode, the threads, the CPU (model and flags: XNNPACK's and MLAS's
kernels depend on them), porter's version, and the inputs' files and their SHA-256.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import numpy as np

from porter import __version__
from porter.check import references, windows as windowing
from porter.check.golden import DECODER_FORMAT, ENCODER_FORMAT, npz_path, sha256_of, write_golden
from porter.errors import PorterError
from porter.reference.ort import cpu as ort_cpu
from porter.reference.litert.floats import host_l1d_bytes

DECODING = ("greedy argmax (the first largest logit), {steps} steps, KV cache: one prompt pass "
            "(past length 0) then one token per call; no stop token")


def cpu_facts() -> dict:
    """The CPU the golden is made on, as porter.reference.ort.cpu reads it back: its model name
    and the flags onnxruntime's kernel dispatch looks at (a golden of an ONNX model is only
    valid for CPUs that take the same kernels), the machine and the number of cores."""
    facts = {"cpu_machine": platform.machine(), "cpu_cores": os.cpu_count(),
             "cpu_l1d_bytes": host_l1d_bytes()}  # LiteRT's float blocking (porter.reference.litert.floats)
    try:
        cpu = ort_cpu.host_cpu()
    except PorterError:  # no x86 flags (an Arm machine): no onnxruntime target reproduces it
        return {"cpu_model": platform.processor() or platform.machine(), "cpu_flags": [], **facts}
    return {"cpu_model": cpu.model, "cpu_flags": cpu.flags, **facts}


def _common_manifest(model: Path, golden: Path, mode: str, format_: str) -> dict:
    return {"format": format_, "golden": golden.name, "made_by": f"porter {__version__} golden",
            "model_file": str(model), "model_sha256": sha256_of(model), "mode": mode}


def _file_facts(role: str, path: Path) -> dict:
    return {f"{role}_file": str(path), f"{role}_sha256": sha256_of(path)}


def _require_file(path: Path, what: str) -> Path:
    if not Path(path).is_file():
        raise PorterError(f"{what} {path}: no such file")
    return Path(path)


# --- encoders -----------------------------------------------------------------------------------


def make_encoder_golden(model: Path, graph, out: Path, *, texts: Path | None = None,
                        tokenizer: Path | None = None, random: int | None = None, seed: int = 0,
                        mode: str | None = None, pad_id: int | None = None, echo=None) -> Path:
    """Writes out.npz + out.json for an encoder (`graph`: its porter.frontends Graph); returns
    the .npz path."""
    echo = echo or (lambda line: None)
    reference = references.encoder_reference(model, graph, mode)
    signature = reference.signature
    if signature.seq == references.DYNAMIC_WINDOW:
        raise PorterError(f"{model}: input '{signature.ids}' has a dynamic length and the graph reads no "
                          "position table whose size would bound it: porter golden cannot choose a window")
    if texts is not None:
        text_list = windowing.read_texts(_require_file(texts, "texts"))
        windows, rule = windowing.text_windows(text_list, _require_file(tokenizer, "tokenizer"),
                                               signature.seq, signature.vocab, pad_id)
        source = {"windowing": _text_windowing(rule, signature.seq), **_file_facts("texts", texts),
                  "texts": len(text_list), **_file_facts("tokenizer", tokenizer)}
    else:
        segment_b = signature.type_vocab > 1
        windows = windowing.random_windows(random, signature.seq, signature.vocab, seed, segment_b)
        rule = ("uniform ids in [low, vocab), live lengths stepping down evenly from a full window, "
                "padding id 0, mask 1 on live")
        if segment_b:
            rule += (f"; token type 1 from (live + 1) // 2 to the last live token of each window of "
                     f"{windowing.MIN_PAIR_TOKENS} or more live tokens")
        source = {"windowing": {"source": "random", "seed": seed, "pad_id": windowing.RANDOM_PAD_ID,
                                "rule": rule}}
    _require_readable_types(windows, signature, Path(model).name)
    echo(f"running {len(windows.ids)} windows of {signature.seq} tokens through "
         f"{Path(model).name} ({reference.mode})")
    logits, seconds = references.run_windows(reference, windows.ids, windows.attention_mask,
                                             windows.token_type_ids)
    echo(f"{1000 * float(np.median(seconds)):.2f} ms per window (median)")
    arrays = {"ids": windows.ids, "attention_mask": windows.attention_mask, "live": windows.live,
              "text_index": windows.text_index, "logits": logits}
    if signature.token_types:
        arrays["token_type_ids"] = windows.token_type_ids
    quantization = references.integer_output(reference)
    if quantization is not None:  # a full-integer graph: its int8 output beside the dequantised logits
        arrays["logits_quantized"] = references.quantized_logits(logits, quantization)
    out = npz_path(out)
    manifest = {**_common_manifest(model, out, reference.mode, ENCODER_FORMAT), **reference.facts(),
                **cpu_facts(),
                # token-type inputs are fed the windows' token_type_ids
                "inputs_by_role": {"token_ids": signature.ids, "attention_mask": signature.mask,
                                   "token_type_ids": list(signature.token_types)},
                "seq": signature.seq, "vocab": signature.vocab, "type_vocab": signature.type_vocab,
                "labels": int(logits.shape[2]),
                "pooled": reference.rows == 1, **source,
                "windows": int(len(windows.ids)), "live_tokens": int(windows.live.sum()),
                "arrays": {k: [str(v.dtype), list(v.shape)] for k, v in arrays.items()}}
    if quantization is not None:
        manifest["output_quantization"] = {
            "dtype": quantization[0], "scale": quantization[1], "zero_point": quantization[2],
            "logits": "dequantised: (q - zero_point) in float32, times the scale; q is logits_quantized"}
    return write_golden(out, arrays, manifest)


def _require_readable_types(windows: windowing.Windows, signature, model_name: str) -> None:
    """Every token type a window has must be one the model reads: a pair's segment B is type 1,
    which a model without a token-type input (or with a one-row type table) cannot take."""
    bad = np.argwhere(windows.token_type_ids >= signature.type_vocab)
    if bad.size:
        text = int(windows.text_index[bad[0][0]])
        what = ("has no token-type input" if not signature.token_types
                else f"has a token-type table of {signature.type_vocab} rows")
        raise PorterError(f"text {text}: the tokenizer gives its segment B token type "
                          f"{int(windows.token_type_ids[tuple(bad[0])])}, but {model_name} {what}")


def _text_windowing(rule: windowing.WindowRule, seq: int) -> dict:
    return {"source": "texts", "rule": "the redaction service's: the tokenizer's encoding without "
                                       "its special tokens, ids past the model's vocabulary -> unk, "
                                       "cut into chunks; window = prefix + chunk + suffix, padded; "
                                       "mask 1 on live; an empty text has no window; a text_a<TAB>text_b "
                                       "pair is the tokenizer's pair encoding (its post-processor's "
                                       "special tokens and token type ids), truncated longest-first "
                                       "to the window, one window",
            "prefix_ids": rule.prefix_ids, "suffix_ids": rule.suffix_ids, "pad_id": rule.pad_id,
            "unk_id": rule.unk_id, "chunk": rule.chunk(seq)}


# --- decoders -----------------------------------------------------------------------------------


def read_prompts(path: Path, tokenizer: Path | None) -> list[tuple[str | None, list[int]]]:
    """(text or None, token ids) per prompt: a JSON list of strings or id lists, else one text
    per line (blank lines skipped). Texts need the tokenizer; they are encoded as the
    generation service encodes a prompt, without special tokens."""
    raw = Path(path).read_text(encoding="utf-8")
    if raw.lstrip()[:1] == "[":
        try:
            items = json.loads(raw)
        except ValueError as e:
            raise PorterError(f"{path}: starts like JSON but is not ({e})") from None
    else:
        items = [line for line in raw.splitlines() if line.strip()]
    encoder = None
    prompts = []
    for i, item in enumerate(items):
        if isinstance(item, list) and item and all(isinstance(v, int) and v >= 0 for v in item):
            prompts.append((None, item))
            continue
        if not isinstance(item, str) or not item:
            raise PorterError(f"{path}: prompt {i} is neither a text nor a list of token ids")
        if tokenizer is None:
            raise PorterError(f"{path}: prompt {i} is text; give --tokenizer tokenizer.json to encode it")
        if encoder is None:
            encoder = windowing.read_tokenizer(_require_file(tokenizer, "tokenizer"))[0]
        prompts.append((item, encoder.encode(item, add_special_tokens=False).ids))
    if not prompts:
        raise PorterError(f"{path}: no prompt in it")
    return prompts


def make_decoder_golden(model: Path, out: Path, *, prompts: Path, steps: int,
                        tokenizer: Path | None = None, echo=None) -> Path:
    """Writes out.npz + out.json for a KV-cache decoder; returns the .npz path."""
    from porter.check.decoder_reference import cache_signature, greedy_decode

    echo = echo or (lambda line: None)
    if steps is None or steps < 1:
        raise PorterError("--prompts needs --steps N (at least 1): how many tokens to generate")
    read = read_prompts(_require_file(prompts, "prompts"), tokenizer)
    session = references.ort_session(model)
    signature = cache_signature(session, Path(model).name)
    echo(f"decoding {len(read)} prompts, {steps} greedy steps each, in onnxruntime")
    try:
        results = greedy_decode(session, signature, [ids for _, ids in read], steps)
    except Exception as e:  # onnxruntime's errors (e.g. a prompt past the model's context)
        raise PorterError(f"onnxruntime failed decoding {Path(model).name}: {str(e).splitlines()[0]}") from None
    arrays, records = {}, []
    for i, ((text, ids), (generated, prompt_logits, step_logits)) in enumerate(zip(read, results)):
        arrays.update({f"p{i}_prompt_ids": np.asarray(ids, np.int64),
                       f"p{i}_prompt_logits": np.asarray(prompt_logits, np.float32),
                       f"p{i}_step_logits": np.asarray(step_logits, np.float32),
                       f"p{i}_generated_ids": np.asarray(generated, np.int64)})
        records.append({"index": i, "prompt": text, "prompt_ids": list(ids), "generated_ids": generated})
    out = npz_path(out)
    manifest = {**_common_manifest(model, out, references.ORT_MODE, DECODER_FORMAT),
                **references.ort_facts(), **cpu_facts(),
                "inputs_by_role": {"token_ids": signature.ids, "logits": signature.logits,
                                   "kv_cache": [[past, present] for past, present, _ in signature.cache]},
                "decoding": DECODING.format(steps=steps), "steps": steps,
                **_file_facts("prompts", prompts),
                **(_file_facts("tokenizer", tokenizer) if tokenizer is not None else {}),
                "npz_keys": {"p{i}_prompt_ids": "int64 [T]", "p{i}_prompt_logits": "float32 [T, vocab]",
                             "p{i}_step_logits": f"float32 [{steps}, vocab], row k chose generated token k",
                             "p{i}_generated_ids": f"int64 [{steps}]"},
                "prompts": records}
    return write_golden(out, arrays, manifest)


# --- the command --------------------------------------------------------------------------------


def takes_a_kv_cache(graph) -> bool:
    """A KV-cache decoder takes float inputs (its cache); an encoder takes only integers."""
    return any(graph.tensor(t).dtype.startswith("float") for t in graph.inputs.values())


def make_golden(model: Path, out: Path, *, texts: Path | None = None, tokenizer: Path | None = None,
                random: int | None = None, seed: int = 0, prompts: Path | None = None,
                steps: int | None = None, mode: str | None = None, pad_id: int | None = None,
                echo=None) -> Path:
    """The golden of `model` from exactly one source: texts (with their tokenizer), random
    windows, or prompts (decoders, with steps). Returns the .npz path."""
    from porter.frontends import load_graph

    model = _require_file(model, "model")
    sources = [name for name, given in (("--texts", texts), ("--random", random), ("--prompts", prompts))
               if given is not None]
    if len(sources) != 1:
        raise PorterError("give one of --texts FILE (with --tokenizer), --random N or --prompts FILE "
                          f"(with --steps), not {' and '.join(sources) or 'none'}")
    graph = load_graph(model)
    decoder = takes_a_kv_cache(graph)
    if decoder != (prompts is not None):
        raise PorterError(f"{model.name} is a KV-cache decoder: give --prompts FILE --steps N" if decoder
                          else f"{model.name} is an encoder: --prompts is for KV-cache decoders")
    if decoder:
        if mode not in (None, references.ORT_MODE) or model.suffix != ".onnx":
            raise PorterError(f"decoder goldens run the ONNX graph in onnxruntime (mode ort), not "
                              f"{mode or model.suffix}")
        return make_decoder_golden(model, out, prompts=prompts, steps=steps, tokenizer=tokenizer, echo=echo)
    if texts is not None and tokenizer is None:
        raise PorterError("--texts needs --tokenizer tokenizer.json: the texts are windowed as the "
                          "service windows them")
    return make_encoder_golden(model, graph, out, texts=texts, tokenizer=tokenizer, random=random, seed=seed,
                               mode=mode, pad_id=pad_id, echo=echo)
