"""A float16 ONNX graph in porter's float32 vocabulary, with onnxruntime's roundings as ops.

onnxruntime runs such a graph in float32 between the Casts it places (porter/frontends/ort_float16.py says where):
every float16 value is a float32 one here, every float16 constant its exact widening (model.bin
may store the halves: Builder.stored), and each place where onnxruntime rounds a float32 result
to float16 is a `round_half` op (float32 -> nearest float16 -> float32,
porter.reference.ort.float16.round_half):

- on an input that onnxruntime casts to float16 before an op runs it (a float16 data-movement
  op or LayerNormalization reading a float32 result);
- on the output of an op onnxruntime runs with a float16 kernel that computes (its float16
  LayerNormalization: the float32 kernel between the widening and a rounding) or of a Cast to
  float16 it keeps.

A Softmax onnxruntime replaces by its function body is `softmax` with body=True. Rounding moves
no value between positions, so it commutes with data movement: a product's rounding is placed
after the reshapes and transposes that follow it (`place_product_roundings`), where the head
merge after P . V leaves attention's context, as in a float32 graph.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from porter.frontends.graph import Op
from porter.recover.canonical.builder import Builder, Pass
from porter.frontends.ort_float16 import HALF, Float16Plan

LAYOUT = ("view", "permute")
# Ops whose result rounding their input cannot change (a NaN stays one; a shape is a shape): their
# rounded reads are left out, so that torch's NaN guard after a softmax stays that guard.
ROUNDING_BLIND = {"IsNaN", "Shape"}
_FLOAT16 = 10  # ONNX's TensorProto.FLOAT16
_FLOAT = 1


class Float16Translation:
    """Wraps the translation of each file op: its rounded inputs and outputs become round_half ops."""

    def __init__(self, b: Builder, plan: Float16Plan):
        self.b, self.plan = b, plan
        self.rounded: dict[int, int] = {}  # tensor -> its rounding
        for t in b.tensors:
            if t.dtype != HALF:
                continue
            if t.data is not None:
                b.stored[t.index] = t  # the halves, which widen to the float32 values exactly
                b.tensors[t.index] = replace(t, dtype="float32", data=np.asarray(t.data, np.float16).astype(np.float32))
            else:
                b.tensors[t.index] = replace(t, dtype="float32")
        b.cast_constants = set(plan.cast_constants)

    def before(self, op: Op) -> Op:
        """The op as translation sees it: reading rounded values where onnxruntime does, writing
        its outputs to tensors of their own where they are rounded after it."""
        op = Op(op.index, op.type, list(op.inputs), list(op.outputs), dict(op.options), op.version)
        for position in sorted(self.plan.uncast_reads.get(op.index, ())):
            op.inputs[position] = self.b.g.producer(op.inputs[position]).inputs[0]
        for position in sorted(self.plan.rounded_reads.get(op.index, ())):
            if op.type not in ROUNDING_BLIND:
                op.inputs[position] = self._rounding(op.inputs[position], op.index)
        if op.type == "Cast" and int(op.options.get("to", 0)) == _FLOAT16:
            op.options["to"] = _FLOAT  # float16 values are float32 ones here
        if op.index in self.plan.softmax_bodies:
            op.options["body"] = True
        if op.index in self.plan.rounded_outputs:
            op.outputs = [self._unrounded(t) for t in op.outputs]
        return op

    def after(self, file_op: Op, translated: Op) -> None:
        if file_op.index not in self.plan.rounded_outputs:
            return
        for unrounded, out in zip(translated.outputs, file_op.outputs):
            self.b.emit("round_half", [unrounded], [out], [file_op.index])

    def _rounding(self, t: int, reader: int) -> int:
        if t not in self.rounded:
            like = self.b.tensor(t)
            self.rounded[t] = self.b.add_tensor(like, f"{like.name}/float16", like.shape, "float32")
            self.b.emit("round_half", [t], [self.rounded[t]], [reader])
        return self.rounded[t]

    def _unrounded(self, t: int) -> int:
        like = self.b.tensor(t)
        return self.b.add_tensor(like, f"{like.name}/float32", like.shape, "float32")


def place_product_roundings(p: Pass) -> None:
    """A rounding of a product of two activations (a matmul) read only through data movement
    moves past it: round(permute(view(x))) for permute(view(round(x))), the same values."""
    b = p.b
    for op in list(p.ops):
        if op is None or op.type != "round_half":
            continue
        product = p.producer(op.inputs[0])
        if product is None or product.type != "matmul" or any(b.const(t) is not None for t in product.inputs):
            continue
        chain, t = [], op.outputs[0]
        while len(users := p.users(t)) == 1 and users[0].type in LAYOUT and t not in p.outputs.values():
            chain.append(users[0])
            t = users[0].outputs[0]
        if not chain or t in p.outputs.values():
            continue
        source, end = op.inputs[0], chain[-1].outputs[0]
        chain[0].inputs = [source if x == op.outputs[0] else x for x in chain[0].inputs]
        rounded = op.outputs[0]
        b.tensors[rounded] = replace(b.tensor(rounded), shape=b.tensor(end).shape)
        for user in p.users(end):
            user.inputs = [rounded if x == end else x for x in user.inputs]
        op.inputs = [end]
