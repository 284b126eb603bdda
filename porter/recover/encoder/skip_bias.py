"""onnxruntime's SkipLayerNormalization with a bias: where a Linear's bias Add is fused into the
norm after its residual sum, the bias is added after the sum, not after the product.

SkipLayerNormFusion (core/optimizer/skip_layer_norm_fusion.cc, Formats 1 and 2) takes
LayerNormalization(Add1(Add2(product, C), residual)), with C a constant of one dimension the
width of the product's rows, into one kernel that computes (product + residual) + C before it
normalises: another order than the graph's (product + C) + residual. It only meets such an Add2
after a float MatMul that MatMulAddFusion left alone: one whose input is neither of rank 2 nor of
a fully known shape (dynamic axes). quantize_dynamic's chain (MatMulInteger -> Cast -> Mul -> Add)
loses its bias Add to MatMulIntegerToFloatFusion first. This module rewrites the canonical graph where that happens: the
Linear loses its bias, and an `add` of the bias follows the residual sum, as the kernel does.
Fusion conditions on the shapes are decided on the shapes onnxruntime sees (`shapes`: the
file's, declared or inferred, porter.recover.canonical.ort_shapes.value_shapes).
"""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Graph, Op, Tensor
from porter.recover.canonical import Canonical


def fuse_skip_biases(c: Canonical, skip_fuses, shapes: dict) -> dict[int, int]:
    """Rewrites c.graph in place for every LayerNormalization that onnxruntime gives a bias.
    Returns {the biased sum: the residual sum it adds the bias to} (tensor indices)."""
    g = c.graph
    moved = {}
    for ln in [op for op in g.ops if op.type == "layer_norm"]:
        found = _fused_bias(c, ln, skip_fuses, shapes)
        if found is not None:
            summed = ln.inputs[0]
            _move_bias_after_sum(c, ln, *found)
            moved[ln.inputs[0]] = summed
    return moved


def _fused_bias(c: Canonical, ln: Op, skip_fuses, shapes: dict):
    """(residual add, linear, the file's bias Add) when onnxruntime fuses that Add into `ln`."""
    g = c.graph
    x = ln.inputs[0]
    add1 = g.producer(x)
    if add1 is None or add1.type != "add" or [u.index for u in g.users(x)] != [ln.index]:
        return None
    if not skip_fuses(add1):
        return None
    for operand in add1.inputs:  # Format 1 (the product on Add1's first input), then Format 2
        linear = g.producer(operand)
        if linear is None or linear.type != "linear" or linear.options.get("bias") is None \
                or len(g.users(operand)) != 1:
            continue
        add2 = _bias_add(c, linear, shapes)
        if add2 is not None:
            return add1, linear, add2
    return None


def _bias_add(c: Canonical, linear: Op, shapes: dict):
    """The file's Add of the linear's bias, if SkipLayerNormFusion's second-Add check takes it
    (the bias an initializer [out] on either input: onnxruntime 1.32 fuses TorchScript's
    Add(bias, product) too, measured on bert-tok.dyn-f16.onnx; a float16 graph's constant read
    through a shared Cast node is not an initializer) and MatMulAddFusion did not."""
    src = c.source
    adds = [src.ops[i] for i in c.origin[linear.index] if src.ops[i].type == "Add"]
    if len(adds) != 1:
        return None
    add2 = adds[0]
    side = next((i for i in (1, 0) if src.const(add2.inputs[i]) is not None), None)
    if side is None or add2.inputs[side] in c.graph.metadata.get("ort_cast_constants", ()):
        return None
    bias = src.const(add2.inputs[side])
    out_features = linear.options["weight"].shape[0]
    if bias.ndim != 1 or bias.size != out_features:
        return None
    product = src.producer(add2.inputs[1 - side])
    # The quantize_dynamic chain's bias Add is MatMulIntegerToFloatFusion's (DynamicQuantizeMatMul
    # with a bias) before SkipLayerNormFusion runs; a MatMul's is Gemm's where MatMulAddFusion fires.
    if product is None or product.type != "MatMul" or _matmul_add_fuses(src, product, shapes):
        return None
    return add2


def _matmul_add_fuses(src: Graph, matmul, shapes: dict) -> bool:
    """MatMulAddFusion turns a MatMul + Add into Gemm when its input has rank 2, or a shape it
    knows entirely (it reshapes to 2-D around the Gemm)."""
    dims = shapes.get(src.tensor(matmul.inputs[0]).name)
    return dims is not None and (len(dims) == 2 or all(isinstance(d, int) and d > 0 for d in dims))


def _move_bias_after_sum(c: Canonical, ln: Op, add1: Op, linear: Op, add2) -> None:
    g = c.graph
    bias = np.asarray(linear.options["bias"], np.float32)
    linear.options["bias"] = None
    summed = g.tensor(ln.inputs[0])
    bias_t = _new_tensor(g, f"{summed.name}/skip_bias", bias.shape, bias)
    biased = _new_tensor(g, f"{summed.name}/skip_biased", summed.shape)
    c.origin[linear.index] = tuple(i for i in c.origin[linear.index] if i != add2.index)
    ln.inputs[0] = biased
    _insert_after(c, add1, Op(-1, "add", [summed.index, bias_t], [biased], {}), (add2.index,))


def _new_tensor(g: Graph, name: str, shape, data=None) -> int:
    g.tensors.append(Tensor(len(g.tensors), name, tuple(shape), "float32", None, data))
    return len(g.tensors) - 1


def _insert_after(c: Canonical, before: Op, op: Op, origin: tuple[int, ...]) -> None:
    """Puts `op` right after `before` in c.graph's execution order, renumbering the ops after it."""
    g = c.graph
    at = before.index + 1
    ops = g.ops[:at] + [op] + g.ops[at:]
    old_origin = dict(c.origin)
    for i, o in enumerate(ops):
        c.origin[i] = origin if o is op else old_origin[o.index]
        o.index = i
    g.ops[:] = ops
    g.__dict__.pop("producers", None)
    g.__dict__.pop("consumers", None)
