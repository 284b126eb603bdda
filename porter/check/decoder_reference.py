"""onnxruntime as the decoder's reference: the exported graph itself, run with a KV cache
(one prompt pass, then one token per call), greedy; for Q8_0 with its initializers replaced by
the Q8_0 round trip of the weights (porter.reference.q8_0.with_q8_0_weights), so that onnxruntime and
the crate compute with the same weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from porter.ir.decoder import DecoderIR
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.recover.decoder_io import fed_value


def _initializer_names(ir: DecoderIR) -> list[tuple[str, str, bool]]:
    """(IR array, ONNX initializer name, transposed) for every quantised array: MatMul weights
    and Gemm's without transB are [in, out] there."""
    g = load_graph(ir.source)
    names = [(ir.weight_of(lin), *_weight_initializer(g, ir, lin)) for lin in ir.linears()]
    head = g.ops[ir.head.source_op]
    if ir.tied and g.tensor(head.inputs[1]).is_const:  # a tied head with its own copy of the table
        names.append(("wte", *_weight_initializer(g, ir, ir.head)))
    # The token table: the constant a Gather reads rows of, shaped [vocab, hidden].
    gather = next(op for op in g.ops if op.type == "Gather" and g.tensor(op.inputs[0]).is_const
                  and g.tensor(op.inputs[0]).shape == tuple(ir.weights["wte"].shape))
    return names + [("wte", g.tensor(gather.inputs[0]).name, False)]


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
    for array, name, transposed in _initializer_names(ir):
        if name not in by_name:
            raise PorterError(f"{ir.source}: no initializer {name} for {array}")
        value = np.asarray(weights[array], np.float32)
        by_name[name].CopyFrom(numpy_helper.from_array(value.T.copy() if transposed else value, name))
    return model.SerializeToString()


def ort_greedy(model: bytes | str | Path, ir: DecoderIR, prompts: list, steps: int):
    """Per prompt: (generated ids, prompt logits [T, vocab], step logits [steps, vocab])."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model if isinstance(model, bytes) else str(model), options,
                                   providers=["CPUExecutionProvider"])
    out_names = [o.name for o in session.get_outputs()]
    results = []
    for prompt in prompts:
        cache = {}
        for ly in ir.layers:
            a = ly.attention
            for name in (a.past_key, a.past_value):
                cache[name] = np.zeros((1, a.kv_heads, 0, a.head_dim), np.float32)
        ids, rows, prompt_logits = list(map(int, prompt)), [], None
        feed = np.asarray(ids, np.int64)[None]
        generated = []
        for k in range(steps):
            fed = {name: fed_value(kind, len(ids) - feed.shape[1], feed.shape[1]) for name, kind in ir.fed_inputs.items()}
            outputs = dict(zip(out_names, session.run(None, {ir.ids_input: feed, **cache, **fed})))
            logits = outputs[ir.logits_output][0]
            if prompt_logits is None:
                prompt_logits = logits
            rows.append(logits[-1])
            generated.append(int(np.argmax(logits[-1])))
            for ly in ir.layers:
                a = ly.attention
                cache[a.past_key], cache[a.past_value] = outputs[a.present_key], outputs[a.present_value]
            feed = np.asarray([[generated[-1]]], np.int64)
            ids.append(generated[-1])
        results.append((generated, prompt_logits, np.stack(rows)))
    return results
