"""onnxruntime as the decoder's reference: the exported graph itself, run with a KV cache
(one prompt pass, then one token per call), greedy; for Q8_0 with its initializers replaced by
the Q8_0 round trip of the weights (porter.reference.q8_0.with_q8_0_weights), so that onnxruntime and
the crate compute with the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter.check.references import ort_session
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.ir.decoder import DecoderIR
from porter.recover.decoder.io import fed_kind, fed_value


def _initializer_names(ir: DecoderIR) -> list[tuple[str, str, bool, list | None]]:
    """(IR array, ONNX initializer name, transposed, the file's order of its outputs) for every
    quantised array: MatMul weights and Gemm's without transB are [in, out] there."""
    g = load_graph(ir.source)
    names = [(ir.weight_of(lin), *_weight_initializer(g, ir, lin), lin.file_outputs) for lin in ir.linears()]
    head = g.ops[ir.head.source_op]
    if ir.tied and g.tensor(head.inputs[1]).is_const:  # a tied head with its own copy of the table
        names.append(("wte", *_weight_initializer(g, ir, ir.head), None))
    # The token table: the constant a Gather reads rows of, shaped [vocab, hidden].
    gather = next(op for op in g.ops if op.type == "Gather" and g.tensor(op.inputs[0]).is_const
                  and g.tensor(op.inputs[0]).shape == tuple(ir.weights["wte"].shape))
    return names + [("wte", g.tensor(gather.inputs[0]).name, False, None)]


def _weight_initializer(g, ir: DecoderIR, lin) -> tuple[str, bool]:
    op = g.ops[lin.source_op]
    weight = g.tensor(op.inputs[1])
    if not weight.is_const:
        raise PorterError(f"{ir.source}: {op.describe()} does not read its weight from an initializer")
    return weight.name, not (op.type == "Gemm" and op.options.get("transB", 0))


def model_with_weights(ir: DecoderIR, weights: dict) -> bytes:
    """The ONNX file of `ir` with the given IR arrays written into its initializers."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(ir.source)
    by_name = {init.name: init for init in model.graph.initializer}
    for array, name, transposed, file_outputs in _initializer_names(ir):
        if name not in by_name:
            raise PorterError(f"{ir.source}: no initializer {name} for {array}")
        value = np.asarray(weights[array], np.float32)
        if file_outputs is not None:  # back into the file's order of outputs
            value = value[np.argsort(file_outputs)]
        by_name[name].CopyFrom(numpy_helper.from_array(value.T.copy() if transposed else value, name))
    return model.SerializeToString()


@dataclass(frozen=True)
class CacheSignature:
    """A KV-cache decoder's ONNX signature: the ids input, the logits output, and each cache
    input (past) with the output that carries it forward (present) and its empty shape."""

    ids: str
    logits: str
    cache: tuple[tuple[str, str, tuple[int, ...]], ...]  # (past input, present output, empty shape)
    fed: tuple[tuple[str, str], ...] = ()  # inputs porter feeds itself (porter.recover.decoder.io)


def cache_signature(session, model_name: str) -> CacheSignature:
    """Cache inputs are the float ones; each pairs with the output named like it with "present"
    for "past" (past_key_0 -> present_key_0, past_key_values.0.key -> present.0.key), else with
    the cache outputs in order. The empty cache has length 0 on its one symbolic axis."""
    inputs, outputs = session.get_inputs(), [o.name for o in session.get_outputs()]
    integers = [i for i in inputs if i.type in ("tensor(int64)", "tensor(int32)")]
    fed = tuple((i.name, fed_kind(i.name)) for i in integers if fed_kind(i.name) is not None)
    ids = [i for i in integers if fed_kind(i.name) is None]
    past = [i for i in inputs if i.type == "tensor(float)"]
    if len(ids) != 1 or len(integers) + len(past) != len(inputs):
        raise PorterError(f"{model_name}: inputs {[i.name for i in inputs]}; a decoder golden needs "
                          "one integer token-id input and float KV-cache inputs, besides position ids "
                          "and an attention mask porter feeds, nothing else")
    logits = "logits" if "logits" in outputs else outputs[0]
    present = [name for name in outputs if name != logits]
    if len(present) != len(past):
        raise PorterError(f"{model_name}: {len(past)} cache inputs but {len(present)} outputs besides "
                          f"{logits}")
    cache = []
    for k, spec in enumerate(past):
        renamed = spec.name.replace("past_key_values", "present").replace("past", "present")
        empty = tuple(d if isinstance(d, int) and d > 0 else 0 for d in spec.shape)
        if empty.count(0) != 1:
            raise PorterError(f"{model_name}: cache input {spec.name} has shape {spec.shape}; expected "
                              "one symbolic (past length) axis")
        cache.append((spec.name, renamed if renamed in present else present[k], empty))
    return CacheSignature(ids[0].name, logits, tuple(cache), fed)


def greedy_decode(session, signature: CacheSignature, prompts: list, steps: int):
    """Per prompt: (generated ids, prompt logits [T, vocab], step logits [steps, vocab]): one
    prompt pass from an empty cache, then one token per call; the first largest logit wins.
    Position ids and an attention mask get what porter feeds (decoder_io.fed_value)."""
    ids_type = next(i.type for i in session.get_inputs() if i.name == signature.ids)
    ids_dtype = np.int64 if ids_type == "tensor(int64)" else np.int32
    out_names = [o.name for o in session.get_outputs()]
    results = []
    for prompt in prompts:
        cache = {past: np.zeros(empty, np.float32) for past, _, empty in signature.cache}
        feed, rows, prompt_logits, generated = np.asarray(prompt, ids_dtype)[None], [], None, []
        length = 0
        for _ in range(steps):
            fed = {name: fed_value(kind, length, feed.shape[1]) for name, kind in signature.fed}
            length += feed.shape[1]
            outputs = dict(zip(out_names, session.run(None, {signature.ids: feed, **cache, **fed})))
            logits = outputs[signature.logits][0]
            if prompt_logits is None:
                prompt_logits = logits
            rows.append(logits[-1])
            generated.append(int(np.argmax(logits[-1])))
            cache = {past: outputs[present] for past, present, _ in signature.cache}
            feed = np.asarray([[generated[-1]]], ids_dtype)
        results.append((generated, prompt_logits, np.stack(rows)))
    return results


def ort_greedy(model: bytes | str | Path, prompts: list, steps: int):
    """greedy_decode in onnxruntime's CPU session (porter.check.references.ort_session)."""
    session = ort_session(model if isinstance(model, bytes) else Path(model))
    return greedy_decode(session, cache_signature(session, "the decoder"), prompts, steps)
