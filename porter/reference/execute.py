"""The numpy executor: runs an EncoderProgram step by step in the reference's arithmetic.

It is the definition the generated crate is checked against, and (through porter.recover.prove)
what each recovered block is compared with when it is proven against the graph's own ops. Every
step follows its reference runtime (program.reference): LiteRT's builtin kernels
(porter.reference.litert.floats, porter.reference.quant) or onnxruntime's CPU kernels
(porter.reference.ort.floats); elementwise and reduction steps use porter.reference.ops, the same
functions recovery folds constants with. onnxruntime's kernels are those of the CPU
program.ort_cpu names (porter.reference.ort.cpu).

`run(program, ids, mask, trace=dict)` fills `trace` with every buffer the program writes (by
buffer name), so a divergence can be located to the first step that differs; `types` are the
window's token type ids (zeros when not given, the only value a graph without that input has).
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.ir.encoder import (INPUT_IDS, INPUT_MASK, INPUT_TYPES, Attention, ElementwiseStep, Embed,
                               EncoderProgram, Gelu, GeluStep, LayerNorm, LinearStep, Lookup, MaskMode,
                               L2NormalizeStep, NormForm, Operand, ReduceStep, Reference, SliceStep,
                               TableKind, kept_keys)
from porter.ir.integer import IntegerStep
from porter.ir.tensor import GATHERS, TensorOp, TensorStep
from porter.reference.litert import floats as LF
from porter.reference.litert import int8_steps
from porter.reference.ort import floats as OF
from porter.reference.ort import qdq
from porter.reference import exact, ops
from porter.reference.ort import cpu as ort_cpu

F32 = np.float32


def run(program: EncoderProgram, ids, mask=None, trace: dict | None = None, types=None) -> np.ndarray:
    """The output buffer for one window of token ids (padded to program.seq by the caller):
    [seq, width] for a token output, [1, width] for a pooled one."""
    values = {} if trace is None else trace
    ids = np.asarray(ids, dtype=np.int64)
    if ids.shape != (program.seq,):
        raise ValueError(f"expected {program.seq} token ids, got {ids.shape}")
    if ids.min() < 0 or ids.max() >= program.vocab:
        raise ValueError(f"token id out of range [0, {program.vocab})")
    values[INPUT_IDS] = ids
    values[INPUT_TYPES] = token_types(program, ids, types)
    values[INPUT_MASK] = (np.ones(program.seq, F32) if mask is None else np.asarray(mask).astype(F32))
    for step in program.steps:
        outputs = run_step(program, step, values)
        for name, value in zip(step.outputs, outputs):
            values[name] = value
    out = values[program.output_buffer]
    return out.reshape(program.seq, -1) if program.output_tokens else out.reshape(1, -1)


def token_types(program: EncoderProgram, ids: np.ndarray, types) -> np.ndarray:
    """The window's token type ids, checked against the type table (zeros when not given)."""
    if types is None:
        return np.zeros_like(ids)
    types = np.asarray(types, dtype=np.int64)
    if types.shape != ids.shape:
        raise ValueError(f"expected {program.seq} token type ids, got {types.shape}")
    if types.min() < 0 or types.max() >= program.type_vocab:
        raise ValueError(f"token type id out of range [0, {program.type_vocab})")
    return types


def _floats(program: EncoderProgram) -> str | None:
    return ort_cpu.target(program.ort_cpu).floats if program.ort_cpu else None


def run_step(program: EncoderProgram, step, values: dict) -> list[np.ndarray]:
    w = program.weights
    ref = program.reference
    if isinstance(step, IntegerStep):
        ins = [operand_value(o, w, values) for o in step.operands]
        if ref == Reference.ONNXRUNTIME_CPU:  # an onnxruntime QDQ program
            return [qdq.run(step, w, ins, lambda kind, attrs, xs: ops.evaluate(kind, attrs, xs, ref))]
        return [int8_steps.run(step, w, ins)]
    if isinstance(step, Embed):
        return [embed(step, w, values[INPUT_IDS], values.get(INPUT_TYPES))]
    if isinstance(step, LinearStep):
        x = values[step.inputs[0]]
        attrs = {**linear_attrs(step.linear, w), "eigen_l1d": program.eigen_l1d}
        return [ops.linear(attrs, x.reshape(-1, step.linear.in_features), ref)]
    if isinstance(step, LayerNorm):
        return layer_norm(step, w, values[step.inputs[0]], ref)
    if isinstance(step, Attention):
        terms = [operand_value(t, w, values) for t in step.terms]
        return [attention(step, ref, *(values[t] for t in step.inputs[:3]), values[INPUT_MASK], _floats(program),
                          terms)]
    if isinstance(step, TensorStep):
        return [tensor_step(step, [operand_value(o, w, values) for o in step.operands], ref)]
    if isinstance(step, GeluStep):
        return [gelu(step.kind, values[step.inputs[0]])]
    if isinstance(step, ElementwiseStep):
        inputs = [operand_value(o, w, values) for o in step.operands]
        return [ops.evaluate(step.op.value, {}, inputs, ref).reshape(step.shape)]
    if isinstance(step, ReduceStep):
        x = operand_value(step.operand, w, values)
        return [ops.reduce_float(step.op.value, x.astype(F32), step.axes, ref)]
    if isinstance(step, L2NormalizeStep):
        return [ops.evaluate("l2_normalization", {}, [operand_value(step.operand, w, values)], ref)]
    if isinstance(step, SliceStep):
        x = operand_value(step.operand, w, values)
        index = [slice(None)] * x.ndim
        for axis, start, stop, stride in step.slices:
            index[axis] = slice(start, stop, stride)
        return [np.ascontiguousarray(x[tuple(index)])]
    raise TypeError(f"no executor for {type(step).__name__}")


def operand_value(o: Operand, weights: dict, values: dict) -> np.ndarray:
    data = weights[o.array] if o.array else values[o.buffer]
    return np.asarray(data).reshape(o.shape)


def linear_attrs(lin, weights: dict) -> dict:
    return {"weight": weights[f"{lin.name}.weight"], "scale": weights.get(f"{lin.name}.scale"),
            "bias": weights.get(f"{lin.name}.bias"), "weights": lin.weights,
            "activation_quant": lin.activation_quant, "integer_dot": lin.integer_dot}


def lookup_rows(lookup: Lookup, weights: dict, ids: np.ndarray) -> np.ndarray:
    table = weights[f"{lookup.name}.table"]
    rows = table[ids]
    if lookup.kind == TableKind.INT8_ROWS:
        return (rows.astype(F32) * weights[f"{lookup.name}.scale"][ids][:, None]).astype(F32)
    if lookup.kind == TableKind.INT8_TENSOR:
        return (rows.astype(F32) * weights[f"{lookup.name}.scale"][0]).astype(F32)
    if lookup.kind == TableKind.UINT8_TENSOR:  # DequantizeLinear: float(q - zero_point) * scale
        centred = rows.astype(np.int32) - weights[f"{lookup.name}.zero_point"][0]
        return (centred.astype(F32) * weights[f"{lookup.name}.scale"][0]).astype(F32)
    return rows.astype(F32)


def position_ids(term, ids: np.ndarray) -> np.ndarray:
    """RoBERTa's position ids: pad + the running count of real tokens; pad on padding."""
    real = ids != term.pad_id
    return np.where(real, np.cumsum(real) + term.pad_id, term.pad_id)


def embed(step: Embed, weights: dict, ids: np.ndarray, types: np.ndarray | None = None) -> np.ndarray:
    """The word rows, then each term added in the graph's order (one rounding per addition)."""
    x = lookup_rows(step.word, weights, ids)
    for term in step.terms:
        if term.kind == "rows":
            x = (x + weights[term.array]).astype(F32)
        elif term.kind == "types":
            x = (x + lookup_rows(term.lookup, weights, np.asarray(types).reshape(ids.shape))).astype(F32)
        else:
            x = (x + lookup_rows(term.lookup, weights, position_ids(term, ids))).astype(F32)
    return x


def layer_norm(step: LayerNorm, weights: dict, x: np.ndarray, ref: Reference) -> list[np.ndarray]:
    """[out] or [out, normalised] as the step's outputs say (normalised: before gamma and beta)."""
    x = np.asarray(x, F32).reshape(-1, step.width)
    gamma = weights.get(f"{step.name}.gamma")
    beta = weights.get(f"{step.name}.beta")
    if step.form in (NormForm.ONNX, NormForm.ONNX_SKIP, NormForm.ORT_EMBED):
        fn = {NormForm.ONNX: OF.layer_norm, NormForm.ONNX_SKIP: OF.skip_layer_norm,
              NormForm.ORT_EMBED: OF.embed_layer_norm}[step.form]
        out = fn(x, gamma, beta, step.eps)
        return [out, out][: len(step.outputs)]
    mean = LF.mean_last_axis(x)
    centred = (x - mean).astype(F32)
    var = LF.mean_last_axis((centred * centred).astype(F32))
    rstd = (F32(1) / np.sqrt((var + F32(step.eps)).astype(F32))).astype(F32)
    if step.form == NormForm.KERAS:
        inv = (rstd * gamma).astype(F32)
        out = ((x * inv).astype(F32) + (beta - (mean * inv).astype(F32)).astype(F32)).astype(F32)
        return [out, out][: len(step.outputs)]
    if step.form == NormForm.CENTRED:
        normalised = (centred * rstd).astype(F32)
    else:  # SHIFT
        shift = (F32(0) - (rstd * mean).astype(F32)).astype(F32)
        normalised = ((x * rstd).astype(F32) + shift).astype(F32)
    out = normalised
    if gamma is not None:
        out = (out * gamma).astype(F32)
    if beta is not None:
        out = (out + beta).astype(F32)
    return [out, normalised][: len(step.outputs)]


def gelu(kind: Gelu, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F32)
    if kind == Gelu.LITERT:
        return LF.gelu_exact(x)
    if kind == Gelu.LITERT_TANH:
        return LF.gelu_tanh(x)
    if kind == Gelu.ORT_FAST_GELU:
        return OF.fast_gelu(x)
    if kind == Gelu.ORT_ERF_MUL:
        return OF.gelu_erf(x, multiply=True)
    if kind == Gelu.ORT_ERF_DIV:
        return OF.gelu_erf(x, multiply=False)
    raise ValueError(f"no executor for GELU {kind.value}")


def attention(a: Attention, ref: Reference, q, k, v, mask, floats: str | None = None,
              terms: list[np.ndarray] = ()) -> np.ndarray:
    """floats: onnxruntime's float kernel family (porter.reference.ort.cpu), for ONNXRUNTIME_CPU;
    terms: the score terms ([heads, seq, seq]), each one float addition in the graph's order."""
    mask = np.asarray(mask).reshape(-1)
    seq = mask.shape[0]
    split = lambda t: np.asarray(t, F32).reshape(seq, a.heads, a.head_dim).transpose(1, 0, 2)  # noqa: E731
    qh, kh, vh = split(q), split(k), split(v)
    if a.q_scale is not None:
        qh = (qh * F32(a.q_scale)).astype(F32)
    if a.k_scale is not None:
        kh = (kh * F32(a.k_scale)).astype(F32)
    onnx = ref == Reference.ONNXRUNTIME_CPU
    if onnx:
        # onnxruntime fuses a multiplication of the scores into FusedMatMul(alpha), which
        # never takes MLAS's M = 1 kernel and applies alpha per SGEMM block
        alpha = F32(a.score_scale) if a.score_scale is not None else F32(1)
        scores = OF.sgemm(qh, kh.transpose(0, 2, 1), alpha=alpha)
    else:
        scores = LF.batch_matmul(qh, kh.transpose(0, 2, 1))
        if a.score_scale is not None:
            scores = (scores * F32(a.score_scale)).astype(F32)
    if a.score_divisor is not None:
        scores = (scores / F32(a.score_divisor)).astype(F32)
    for term in terms:  # [heads, seq, seq], perhaps with leading axes of one
        scores = (scores + np.asarray(term, F32).reshape(scores.shape)).astype(F32)
    kept = kept_keys(a.key_rule, mask)
    if a.query_mask:  # a query the mask drops keeps no key
        kept = kept[None, :] & (mask != 0)[:, None]
    if a.mask == MaskMode.ADD:
        bias = np.where(kept, F32(a.keep_value), F32(a.drop_value))
        scores = np.where(kept & (F32(a.keep_value) == 0), scores, (scores + bias).astype(F32))
    elif a.mask == MaskMode.REPLACE:
        scores = np.where(kept, scores, F32(a.drop_value))
    if a.softmax_body:
        probs = ops.softmax_function(scores, floats)
    else:
        probs = OF.softmax(scores, floats) if onnx else LF.softmax(scores, a.softmax_beta)
    ctx = (OF.matmul if onnx else LF.batch_matmul)(probs, vh)
    return ctx.transpose(1, 0, 2).reshape(seq, a.heads * a.head_dim)




def tensor_step(step: TensorStep, inputs: list[np.ndarray], ref: Reference) -> np.ndarray:
    """A tensor step: its canonical op on inputs of the graph's dtypes (the mask buffer holds its
    0 / 1 as floats), every gather index checked against its axis as the reference checks it."""
    inputs = [np.asarray(x).astype(dtype, copy=False) for x, dtype in zip(inputs, step.attrs["in_dtypes"])]
    if step.op == TensorOp.GATHER_ELEMENTS:  # a constant index is stored once along the axes it does not vary on
        inputs[1] = np.broadcast_to(inputs[1], step.shape)
    if step.op in GATHERS:
        inputs[1] = gather_index(step, inputs[0].shape, inputs[1], ref)
    if step.op == TensorOp.DIV and all(x.dtype.kind in "iub" for x in inputs) and np.any(inputs[1] == 0):
        raise PorterError(f"{step.name}: integer division by zero")
    attrs = {k: v for k, v in step.attributes().items() if k != "in_dtypes"}
    if step.op == TensorOp.MOVE:
        return np.ascontiguousarray(np.broadcast_to(np.transpose(inputs[0], attrs["perm"]), step.shape))
    if step.op == TensorOp.LOOKUP:  # EMBEDDING_LOOKUP(ids, table), with an int8 table's row scales
        table, ids = inputs[:2]
        attrs["scale"] = inputs[2] if len(inputs) > 2 else None
        inputs = [lookup_ids(step, table.shape[0], ids), table]
    if step.op == TensorOp.DEQUANTIZE:
        attrs = {"scale": np.float32([attrs["scale"]]), "zero_point": np.array([attrs["zero_point"]]), "axis": None}
    out = ops.evaluate(step.op.value, attrs, inputs, ref)
    return np.asarray(out).astype(step.dtype, copy=False).reshape(step.shape)


def lookup_ids(step: TensorStep, rows: int, ids: np.ndarray) -> np.ndarray:
    """EMBEDDING_LOOKUP's ids, each a row of the table (LiteRT fails the run on any other)."""
    return _checked(step, ids, rows, False)


def gather_index(step: TensorStep, data_shape: tuple, index: np.ndarray, ref: Reference) -> np.ndarray:
    """The index of a gather, each value in [0, size of the axis it addresses); onnxruntime counts a
    negative one from the end, LiteRT refuses it. Out of range: the reference fails the run, and
    so does this (PorterError naming the step)."""
    index = np.asarray(index)
    sizes = data_shape[:index.shape[-1]] if step.op == TensorOp.GATHER_ND else data_shape[step.attrs["axis"]]
    return _checked(step, index, sizes, ref == Reference.ONNXRUNTIME_CPU)


def _checked(step: TensorStep, index: np.ndarray, sizes, wraps: bool) -> np.ndarray:
    """exact.indices, an index out of range a PorterError naming the step (as the crate's panic does)."""
    try:
        return exact.indices(index, sizes, wraps)
    except ValueError as e:
        raise PorterError(f"{step.name}: {e}") from None
