"""Folding and identities: what the canonical ops simplify to before recovery sees them.

Each new op gets static shapes and is folded when its inputs are constants (`settle`, in the
reference's arithmetic); then `simplify` removes identities, merges views, makes implicit
broadcasts explicit, models onnxruntime's arithmetic-changing fusions where its rules fire,
lifts Linear layers out of their spellings, turns gathers at constant indices into slices and
drops what nothing reads. Removing an identity is exact; nothing here reassociates float
arithmetic."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Quantization, Tensor
from porter.ir.encoder import ActivationQuant, IntegerDot, Reference
from porter.recover.canonical import onnx, tflite
from porter.recover.canonical.builder import FOLD_LIMIT, Builder, Pass, file_op, reference_of, worth_folding
from porter.recover.canonical.views import merge_views, view_target
from porter.recover.schemes import weight_scheme
from porter.reference.ops import Unsupported, evaluate


def simplify(p: Pass, reference: Reference) -> None:
    """The passes over the translated ops, in the order each needs the one before."""
    _remove_identities(p)
    merge_views(p)
    _remove_identities(p)
    _implicit_broadcasts(p)
    _ort_matmul_scale_fusion(p)
    _ort_matmul_transpose_fusion(p)
    _ort_div_mul_fusion(p)
    _lift_dynamic_quantize(p)
    _lift_linear_bias(p)
    _fold_lifted(p)
    gathers_as_slices(p.b, _PassGraph(p), p.ops, reference)
    _dead_code(p)


_SHAPE_KEEPING = set(tflite.BINARY.values()) | set(tflite.UNARY.values()) | set(onnx.BINARY.values()) \
    | set(onnx.UNARY.values()) | {"gelu", "cast", "softmax", "where", "l2_normalization", "round_half"}


def _infer_shape(b: Builder, op: Op) -> None:
    """Checks a static output shape against the one the op computes from its inputs (a file can
    declare any shape: recovery must not trust one its op does not produce), and fills in shapes
    the format left dynamic (views got theirs from their targets already), evaluating the op on
    zeros where no shape rule knows it."""
    if op.type == "dynamic_quantize":  # the quantised tensor, its scale and its zero point
        _fill_shapes(b, op, [b.tensor(op.inputs[0]).shape, (), ()])
        return
    out = b.tensor(op.outputs[0]) if len(op.outputs) == 1 else None
    if out is None or any(d < 0 for t in op.inputs if t >= 0 for d in b.tensor(t).shape):
        return
    shape = _computed_shape(b, op)
    if shape is not None and all(d >= 0 for d in out.shape):
        if tuple(out.shape) != shape:
            raise PorterError(f"{file_op(b, op).describe()}: its output {out.describe()} is declared "
                              f"{list(out.shape)}, but the op computes {list(shape)} from its inputs")
        return
    if op.type == "view" or all(d >= 0 for d in out.shape):
        return
    if shape is None:
        values = [b.const(t) if b.const(t) is not None else
                  np.zeros(tuple(b.tensor(t).shape), b.tensor(t).dtype) for t in op.inputs if t >= 0]
        if any(v.size > FOLD_LIMIT for v in values):
            return
        try:
            shape = tuple(evaluate(op.type, op.options, values, reference_of(b)).shape)
        except Unsupported:
            return
    b.tensors[out.index] = replace(out, shape=shape)


def _fill_shapes(b: Builder, op: Op, shapes) -> None:
    """Gives a multi-output op's outputs the shapes it computes, where they are still unknown."""
    for t, shape in zip(op.outputs, shapes):
        out = b.tensor(t)
        if any(d < 0 for d in out.shape) and all(d >= 0 for d in shape):
            b.tensors[t] = replace(out, shape=tuple(shape))


def _matmul_shape(a: tuple, w: tuple, where: str) -> tuple[int, ...] | None:
    """A matrix product's shape (both operands of rank 2 or more, leading dimensions broadcast)."""
    if len(a) < 2 or len(w) < 2:
        return None
    if a[-1] != w[-2]:
        raise PorterError(f"{where}: a product of {list(a)} and {list(w)} over unequal depths")
    try:
        batch = np.broadcast_shapes(a[:-2], w[:-2])
    except ValueError:
        raise PorterError(f"{where}: operand shapes {list(a)} and {list(w)} do not broadcast") from None
    return tuple(batch) + (a[-2], w[-1])


def _computed_shape(b: Builder, op: Op) -> tuple[int, ...] | None:
    """The output shape of the ops whose shape follows from their inputs' by a rule; None for the
    others. Inputs that do not fit the op (operands that do not broadcast, a view that changes
    the number of values, a product over unequal depths) are refused naming the op."""
    shapes = [tuple(b.tensor(t).shape) for t in op.inputs if t >= 0]
    where = file_op(b, op).describe()
    if op.type in _SHAPE_KEEPING:  # elementwise: the broadcast of the operands' shapes
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise PorterError(f"{where}: operand shapes {[list(s) for s in shapes]} do not broadcast") from None
    if op.type == "matmul_integer":
        return _matmul_shape(shapes[0], shapes[1], where)
    if op.type == "linear":
        weight = op.options["weight"].shape
        if not shapes[0] or shapes[0][-1] != weight[-1]:
            raise PorterError(f"{where}: input shape {list(shapes[0])} does not end in the weights' "
                              f"depth {weight[-1]}")
        shape = shapes[0][:-1] + (weight[0],)
        declared = tuple(b.tensor(op.outputs[0]).shape)
        # FULLY_CONNECTED without keep_num_dims flattens the leading dimensions into one
        flattened = len(declared) == 2 and declared == (int(np.prod(shape[:-1])), weight[0])
        return declared if flattened else shape
    if op.type == "view":
        target = tuple(op.options.get("shape") or ())
        if op.options.get("shape") is not None and int(np.prod(target)) != int(np.prod(shapes[0])):
            raise PorterError(f"{where}: a view of {list(shapes[0])} as {list(target)} changes the "
                              "number of values")
        return None
    if op.type == "permute":
        perm = tuple(op.options["perm"])
        if sorted(perm) != list(range(len(shapes[0]))):
            raise PorterError(f"{where}: perm {list(perm)} is not a permutation of a rank-{len(shapes[0])} input")
        return tuple(shapes[0][i] for i in perm)
    return None


def settle(b: Builder, g: Graph, op: Op, reference: Reference) -> bool:
    """Gives a new canonical op static shapes and folds it if its inputs are all constant, so
    that the ops translated after it see constants (a Reshape's target, an Expand's shape).
    Returns whether it folded."""
    if op.type == "view" and op.options.get("shape") is None:
        view_target(b, g, op)
    if op.type == "view":
        out = b.tensor(op.outputs[0])
        if tuple(out.shape) != tuple(op.options["shape"]):
            b.tensors[out.index] = replace(out, shape=tuple(op.options["shape"]))
    _infer_shape(b, op)
    if len(op.outputs) != 1 or not all(t < 0 or b.const(t) is not None for t in op.inputs):
        return False
    values = [b.const(t) for t in op.inputs if t >= 0]
    if not worth_folding(b.tensor(op.outputs[0]), values):
        return False
    try:
        value = evaluate(op.type, _file_placement(b, op, reference), values, reference)
    except Unsupported:
        return False
    out = b.tensor(op.outputs[0])
    if out.shape and all(d >= 0 for d in out.shape) and tuple(value.shape) != tuple(out.shape) \
            and value.size == int(np.prod(out.shape)):
        value = value.reshape(out.shape)
    b.set_const(op.outputs[0], np.asarray(value))
    _remember_stored_form(b, op)
    return True


def _file_placement(b: Builder, op: Op, reference: Reference) -> dict:
    """The op's attributes, and where LiteRT reads a constant of the file from when that changes
    its arithmetic: MEAN sums a row in Eigen's packets from its first 16-byte boundary, and a
    constant is read in place, in the model file mapped at a page boundary (the rest of LiteRT's
    tensors are in its aligned arena)."""
    source = b.tensor(op.inputs[0]) if op.inputs else None
    if reference != Reference.LITERT_BUILTIN or op.type != "reduce_mean" or source.storage is None \
            or source.storage.offset < 0:
        return op.options
    return {**op.options, "misaligned": source.storage.offset % 16 // 4}


def _remember_stored_form(b: Builder, op: Op) -> None:
    """A weight folded from a narrower constant keeps that constant beside it: int8 or int4
    dequantized with zero point 0 (value = float(q) * scale, one scale or one per index of its axis) or float16
    widened. Whoever stores the weight may store that form, from which the same float32 values
    follow exactly."""
    if op.type not in ("cast", "dequantize"):
        return
    source = b.tensor(op.inputs[0])
    if op.type == "cast" and source.dtype == "float16" and op.options["to"] == "float32":
        b.stored[op.outputs[0]] = source
    elif op.type == "dequantize" and source.dtype in ("int8", "int4") \
            and not np.any(np.asarray(op.options.get("zero_point", 0))):
        scale = np.asarray(op.options["scale"], np.float32).reshape(-1)
        axis = op.options.get("axis") if scale.size > 1 else None
        b.stored[op.outputs[0]] = replace(source, quant=Quantization(scale, np.zeros(scale.size, np.int64), axis))


# op -> (the value that leaves its other operand unchanged, whether it may be the first operand).
# Adding +0 is not listed: -0 + +0 is +0, so only -0 would be an exact identity.
_NEUTRAL = {"mul": (1.0, True), "div": (1.0, False), "sub": (0.0, False)}


def _is_identity(p: Pass, op: Op) -> str | None:
    """Why `op` computes exactly its (non-constant) input, or None."""
    b = p.b
    if not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1:
        return None
    out = b.tensor(op.outputs[0])
    x = b.tensor(op.inputs[0])
    if op.type in ("view", "expand", "slice") and tuple(x.shape) == tuple(out.shape):
        return f"{op.type} to the same shape"
    if op.type == "permute" and tuple(op.options["perm"]) == tuple(range(len(x.shape))):
        return "identity permutation"
    if op.type == "concat" and len(op.inputs) == 1:
        return "concat of one tensor"
    if op.type == "cast" and op.options["to"] == x.dtype:
        return "cast to the type it has"
    if op.type in _NEUTRAL and len(op.inputs) == 2:
        neutral, either_side = _NEUTRAL[op.type]
        for x_pos in ((0, 1) if either_side else (0,)):
            x_t, c = op.inputs[x_pos], b.const(op.inputs[1 - x_pos])
            if c is None or b.const(x_t) is not None or c.dtype.kind != "f" or not np.all(c == neutral):
                continue
            if tuple(b.tensor(x_t).shape) == tuple(out.shape) and b.tensor(x_t).dtype == out.dtype:
                op.inputs = [x_t, op.inputs[1 - x_pos]]
                return f"{op.type} by {neutral:g}"
    return None


def _remove_identities(p: Pass) -> None:
    for op in p.ops:
        if op is None:
            continue
        reason = _is_identity(p, op)
        if reason is not None:
            p.bypass(op, f"identity: {reason}")


_BROADCASTING = (set(tflite.BINARY.values()) | set(onnx.BINARY.values()) | {"where"})


def _implicit_broadcasts(p: Pass) -> None:
    """An expand read only by ops that broadcast their operands anyway is implicit: each reader,
    given the unexpanded input, computes the same values at the same shape."""
    b = p.b
    for op in p.ops:
        if op is None or op.type != "expand" or op.outputs[0] in p.outputs.values():
            continue
        out, source = op.outputs[0], op.inputs[0]
        users = p.users(out)
        if not users or not all(_broadcast_keeps_shape(b, u, out, source) for u in users):
            continue
        for user in users:
            user.inputs = [source if t == out else t for t in user.inputs]
        p.drop(op, "implicit in the broadcasting op that reads it")


def _broadcast_keeps_shape(b: Builder, user: Op, expanded: int, source: int) -> bool:
    if user.type not in _BROADCASTING:
        return False
    shapes = [b.tensor(source if t == expanded else t).shape for t in user.inputs]
    try:
        shape = np.broadcast_shapes(*[tuple(s) for s in shapes])
    except ValueError:
        return False
    return tuple(shape) == tuple(b.tensor(user.outputs[0]).shape)


def _ort_matmul_scale_fusion(p: Pass) -> None:
    """onnxruntime's MatMulScaleFusion, so the canonical graph computes what onnxruntime does:
    a product of activations whose operands were scaled by constant scalars (through
    transposes, which its transpose optimiser moves out of the way), or whose only reader scales
    it, becomes one product multiplied by alpha, the float32 product of the scales (a divisor d
    counting as 1.0f / d), operands first. MLAS then rounds alpha * dot once, where the graph as
    written rounds each scaling."""
    if p.reference != Reference.ONNXRUNTIME_CPU:
        return
    b = p.b
    for op in list(p.ops):
        if op is None or op.type != "matmul" or any(b.const(t) is not None for t in op.inputs):
            continue
        scales = [s for s in (_leading_scale(p, t) for t in op.inputs) if s is not None]
        trailing = _trailing_scale(p, op)
        if not scales and trailing is None:
            continue
        alpha = np.float32(1.0)
        origin: list[int] = list(b.origin[op.index])
        for scale_op, reader, x, value in scales:
            alpha = np.float32(alpha * value)
            reader.inputs = [x if t == scale_op.outputs[0] else t for t in reader.inputs]
            origin += b.origin[scale_op.index]
            p.ops[scale_op.index] = None
        out = op.outputs[0]
        if trailing is not None:
            scale_op, value = trailing
            alpha = np.float32(alpha * value)
            out = scale_op.outputs[0]
            origin += b.origin[scale_op.index]
            p.ops[scale_op.index] = None
        like = b.tensor(op.outputs[0])
        unscaled = b.add_tensor(like, f"{like.name}/unscaled", like.shape, like.dtype)
        alpha_t = b.add_tensor(like, f"{like.name}/alpha", (), "float32", np.asarray(alpha, np.float32))
        op.outputs = [unscaled]
        fused = b.emit("mul", [unscaled, alpha_t], [out], sorted(set(origin)))
        p.ops.append(fused)


def _ort_matmul_transpose_fusion(p: Pass) -> None:
    """onnxruntime's MatMulTransposeFusion: a product of activations reading a Transpose of the
    last two axes (not a graph output) runs as FusedMatMul with the transpose folded in. That
    kernel is MLAS's SGEMM at every row count, where a plain MatMul of one row takes MLAS's
    one-row kernel, whose sums differ: the product is marked `fused` (alpha 1 unless a scale
    was fused into it above)."""
    if p.reference != Reference.ONNXRUNTIME_CPU:
        return
    for op in p.ops:
        if op is None or op.type != "matmul" or any(p.b.const(t) is not None for t in op.inputs):
            continue
        if any(_swaps_last_two_axes(p, t) for t in op.inputs[:2]):
            op.options["fused"] = True


def _swaps_last_two_axes(p: Pass, t: int) -> bool:
    op = p.producer(t)
    if op is None or op.type != "permute" or t in p.outputs.values():
        return False
    perm = list(op.options["perm"])
    rank = len(perm)
    return rank >= 2 and perm == list(range(rank - 2)) + [rank - 1, rank - 2]


def _ort_div_mul_fusion(p: Pass) -> None:
    """onnxruntime's DivMulFusion, so the canonical graph computes what onnxruntime does:
    x * (1 / y), the division read by that product alone, is x / y (one rounding, not two)."""
    if p.reference != Reference.ONNXRUNTIME_CPU:
        return
    b = p.b
    for op in list(p.ops):
        if op is None or op.type != "div" or len(op.inputs) != 2 or op.outputs[0] in p.outputs.values():
            continue
        one = b.const(op.inputs[0])
        users = p.users(op.outputs[0])
        if one is None or one.size != 1 or float(one.reshape(-1)[0]) != 1.0 or len(users) != 1 \
                or users[0].type != "mul" or b.const(op.inputs[1]) is not None:
            continue
        mul = users[0]
        other = mul.inputs[1] if mul.inputs[0] == op.outputs[0] else mul.inputs[0]
        mul.type, mul.inputs = "div", [other, op.inputs[1]]
        b.origin[mul.index] = b.origin[op.index] + b.origin[mul.index]
        p.ops[op.index] = None


def _scale_of(p: Pass, op: Op | None, x_rank_from: int | None = None) -> tuple[int, np.float32] | None:
    """(scaled operand, scale as onnxruntime takes it) of a mul / div by a one-value float
    constant whose rank does not broadcast the other operand."""
    if op is None or op.type not in ("mul", "div") or len(op.inputs) != 2:
        return None
    b = p.b
    for pos in ((0, 1) if op.type == "mul" else (0,)):
        x, c = op.inputs[pos], op.inputs[1 - pos]
        value = b.const(c)
        if value is None or b.const(x) is not None or value.size != 1 or value.dtype.kind != "f" \
                or value.ndim > len(b.tensor(x).shape) or not b.tensor(x).shape or c in b.cast_constants:
            continue
        scale = np.float32(value.reshape(-1)[0])
        return x, (np.float32(np.float32(1.0) / scale) if op.type == "div" else scale)
    return None


def _leading_scale(p: Pass, t: int):
    """(scale op, the op reading its output, its unscaled input, scale) behind a product operand."""
    reader = None
    while (op := p.producer(t)) is not None and op.type == "permute" and len(p.users(t)) == 1:
        reader, t = op, op.inputs[0]
    op = p.producer(t)
    found = _scale_of(p, op)
    if found is None or len(p.users(t)) != 1 or t in p.outputs.values():
        return None
    return op, reader if reader is not None else p.users(t)[0], found[0], found[1]


def _trailing_scale(p: Pass, product: Op):
    users = p.users(product.outputs[0])
    if len(users) != 1 or product.outputs[0] in p.outputs.values():
        return None
    found = _scale_of(p, users[0])
    if found is None or found[0] != product.outputs[0]:
        return None
    return users[0], found[1]


def _lift_linear_bias(p: Pass) -> None:
    """linear without bias -> add of a vector constant: one linear with a bias (what TFLite's
    FULLY_CONNECTED computes either way: b + y, and what onnxruntime fuses MatMul + Add into).
    The add may come after a view that splits the outputs into heads (Keras' EinsumDense adds
    a [heads, head_dim] bias there): the same additions, one per output."""
    b = p.b
    for op in p.ops:
        if op is None or op.type != "add":
            continue
        for x_pos in (0, 1):
            bias = b.const(op.inputs[1 - x_pos])
            view = p.producer(op.inputs[x_pos])
            lin = p.producer(view.inputs[0]) if view is not None and view.type == "view" else view
            if lin is None or lin.type != "linear" or lin.options.get("bias") is not None or bias is None:
                continue
            out_features = lin.options["weight"].shape[0]
            if bias.size != out_features or bias.dtype != np.float32 or len(p.users(lin.outputs[0])) != 1 \
                    or lin.outputs[0] in p.outputs.values():
                continue
            if view is not lin:
                split = b.tensor(view.outputs[0]).shape
                trailing = [d for d in bias.shape if d != 1]
                if len(p.users(view.outputs[0])) != 1 or list(split[len(split) - len(trailing):]) != trailing \
                        or int(np.prod(split[len(split) - len(trailing):])) != out_features:
                    continue
            elif bias.shape[-1] != out_features:
                continue
            lin.options["bias"] = np.asarray(bias, np.float32).reshape(-1)
            b.origin[lin.index] = b.origin[lin.index] + b.origin[op.index]
            if view is lin:
                lin.outputs = list(op.outputs)
            else:  # the linear makes the biased outputs (a tensor of its own), the view shows them
                old = b.tensor(lin.outputs[0])
                biased = b.add_tensor(old, f"{old.name}/biased", old.shape, old.dtype)
                lin.outputs = [biased]
                view.inputs = [biased]
                view.outputs = list(op.outputs)
            p.ops[op.index] = None
            break


def _lift_dynamic_quantize(p: Pass) -> None:
    """onnxruntime's quantize_dynamic chain, DynamicQuantizeLinear(x) -> MatMulInteger(q, W, zp_x)
    -> Cast(float) -> Mul(x_scale * w_scale), becomes one linear with ORT_DYNAMIC_UINT8 inputs
    (the weight's scale must be the one its Mul applies)."""
    b = p.b
    for op in p.ops:
        if op is None or op.type != "matmul_integer":
            continue
        quantize = p.producer(op.inputs[0])
        w_t = b.tensor(op.inputs[1])
        if quantize is None or quantize.type != "dynamic_quantize" or w_t.data is None:
            continue
        if len(op.inputs) > 2 and op.inputs[2] != quantize.outputs[2]:
            continue
        cast_ops = p.users(op.outputs[0])
        if len(cast_ops) != 1 or cast_ops[0].type != "cast" or cast_ops[0].options["to"] != "float32":
            continue
        cast = cast_ops[0]
        muls = p.users(cast.outputs[0])
        if len(muls) != 1 or muls[0].type != "mul":
            continue
        mul = muls[0]
        scale_t = mul.inputs[1] if mul.inputs[0] == cast.outputs[0] else mul.inputs[0]
        scale_op = p.producer(scale_t)
        if scale_op is None or scale_op.type != "mul" or quantize.outputs[1] not in scale_op.inputs:
            continue
        w_scale = b.const(scale_op.inputs[1] if scale_op.inputs[0] == quantize.outputs[1] else scale_op.inputs[0])
        where = p.b.g.ops[b.origin[op.index][0]].describe()
        scheme = weight_scheme(b.g, w_t, 1, where)
        if w_scale is None or not np.array_equal(np.broadcast_to(np.asarray(w_scale, np.float32),
                                                                 w_t.quant.scale.shape), w_t.quant.scale):
            raise PorterError(f"{where}: the product is rescaled by values that are not the weight's "
                              "quantisation scale")
        w_zp = b.const(op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] >= 0 else None
        if w_zp is not None and np.any(w_zp != 0):
            raise PorterError(f"{where}: weights with a non-zero zero point are not supported")
        lin = b.emit("linear", [quantize.inputs[0]], mul.outputs,
                     b.origin[op.index] + b.origin[cast.index] + b.origin[mul.index],
                     weight=np.ascontiguousarray(np.asarray(w_t.data).T), weights=scheme,
                     activation_quant=ActivationQuant.ORT_DYNAMIC_UINT8,
                     scale=np.asarray(w_t.quant.scale, np.float32), bias=None,
                     integer_dot=IntegerDot(b.ort_cpu.integer_dot), weight_tensor=w_t.index)
        p.ops.append(lin)
        for dead in (op, cast, mul):
            p.ops[dead.index] = None
        # The scale product and the quantisation itself stay until nothing reads them.
        p.explained.setdefault(b.origin[scale_op.index][0], "the weight scale of a dynamically quantised Linear")
    for op in p.ops:
        if op is not None and op.type in ("dynamic_quantize", "mul") and op.type == "dynamic_quantize" \
                and not any(p.users(t) for t in op.outputs):
            p.drop(op, "the input quantisation of dynamically quantised Linears")
    for op in p.ops:
        if op is not None and op.type == "mul" and not p.users(op.outputs[0]) \
                and op.outputs[0] not in p.outputs.values():
            p.drop(op, "the weight scale of a dynamically quantised Linear")


def _fold_lifted(p: Pass) -> None:
    """Ops whose inputs are all constants once the Linears are lifted fold too, in the reference's
    arithmetic: quantize_dynamic's Linears of DeBERTa's relative embeddings (a constant) and
    everything computed from them."""
    changed = True
    while changed:
        changed = False
        for op in p.ops:
            if op is None or not op.inputs or any(t in p.outputs.values() for t in op.outputs) \
                    or not all(t < 0 or p.b.const(t) is not None for t in op.inputs):
                continue
            if settle(p.b, p.b.g, op, p.reference):
                p.drop(op, "folded into a constant")
                changed = True


GATHERS = ("gather", "gather_nd", "gather_elements")


def gathers_as_slices(b: "Builder | None", g: Graph, ops: list, reference: Reference) -> None:
    """A gather of an activation at constant indices only moves data; where it picks a
    contiguous range along one axis (x[:, 0] spelled as Gather, GatherND or GatherElements: CLS
    pooling) it is that slice, then a view to the gather's shape. Decided by running the gather on
    the positions of its input."""
    for i, op in enumerate(ops):
        if op is None or op.type not in GATHERS:
            continue
        data, index = op.inputs[0], op.inputs[1]
        if g.const(data) is not None or g.const(index) is None:
            continue
        shape = tuple(g.tensor(data).shape)
        # a gather from, or into, so big a tensor stays a gather (its positions would not fit)
        if max(int(np.prod(shape)), _gathered_size(op, shape, np.shape(g.const(index)))) > FOLD_LIMIT:
            continue
        positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        try:
            picked = evaluate(op.type, op.options, [positions, g.const(index)], reference)
        except Unsupported:
            continue
        found = _as_one_slice(shape, picked)
        if found is None:
            continue
        axis, start, stop = found
        out = g.tensor(op.outputs[0])
        kept = list(shape)
        kept[axis] = stop - start
        slice_op = Op(op.index, "slice", [data], op.outputs, {"slices": ((axis, start, stop, 1),)})
        if tuple(kept) != tuple(out.shape):
            if b is None:
                continue
            mid = b.add_tensor(out, f"{out.name}/sliced", kept, out.dtype)
            slice_op.outputs = [mid]
            ops.append(b.emit("view", [mid], op.outputs, b.origin[op.index], shape=tuple(out.shape)))
        ops[i] = slice_op


def _gathered_size(op: Op, shape: tuple, index_shape: tuple) -> int:
    """How many values the gather op picks from a tensor of `shape` at indices of `index_shape`."""
    if op.type == "gather_elements":
        return int(np.prod(index_shape))
    if op.type == "gather_nd":
        depth = index_shape[-1] if index_shape else 0
        return int(np.prod(index_shape[:-1])) * int(np.prod(shape[depth:]))
    axis = int(op.options.get("axis", 0)) % max(len(shape), 1)
    return int(np.prod(index_shape)) * int(np.prod(shape)) // max(shape[axis], 1) if shape else 0


def _as_one_slice(shape: tuple, picked: np.ndarray) -> tuple[int, int, int] | None:
    """(axis, start, stop) when `picked` (positions of a tensor of `shape`) is that slice of it."""
    flat = picked.reshape(-1)
    if flat.size == 0:
        return None
    index = np.stack(np.unravel_index(flat, shape))
    for axis in range(len(shape)):
        start, stop = int(index[axis].min()), int(index[axis].max()) + 1
        kept = [slice(None)] * len(shape)
        kept[axis] = slice(start, stop)
        expected = np.arange(int(np.prod(shape))).reshape(shape)[tuple(kept)].reshape(-1)
        if expected.size == flat.size and np.array_equal(expected, flat):
            return axis, start, stop
    return None


class _PassGraph:
    """The little of a Graph that gathers_as_slices reads, over the builder's tensors."""

    def __init__(self, p: Pass):
        self.b = p.b

    def const(self, t: int):
        return self.b.const(t)

    def tensor(self, t: int) -> Tensor:
        return self.b.tensor(t)


def _dead_code(p: Pass) -> None:
    """Ops nothing reads (after folding and fusion) are explained by being unused."""
    changed = True
    while changed:
        changed = False
        live_outputs = set(p.outputs.values())
        for op in reversed(p.ops):
            if op is None:
                continue
            if not any(t in live_outputs or p.users(t) for t in op.outputs):
                p.drop(op, "its result is never used")
                changed = True


