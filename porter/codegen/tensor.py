"""A tensor step (porter.ir.tensor) as the crate's kernels/common/tensor.rs runs it: its kernel
and parameters on four axes (leading axes of one added), its operands' values and dtypes, and
the box it computes (porter.recover.rows)."""

from __future__ import annotations

import numpy as np

from porter.codegen.integer import ARITHMETIC, COMPARISONS
from porter.codegen.literals import f32_literal
from porter.errors import PorterError
from porter.ir.encoder import INPUT_MASK, Reference, Rows
from porter.ir.tensor import TensorOp, TensorStep

# the crate's storage of each dtype: 8-bit values (a quantised table's rows, only moved until
# dequantised) in int32 words
DTYPES = {"float32": "F32", "int32": "I32", "int64": "I64", "bool": "Bool", "uint8": "I32", "int8": "I32"}
ROWS = {Rows.ONE: "One", Rows.LIVE: "Live", Rows.KEYS: "Keys", Rows.ALL: "All"}
# the rest of the Pointwise ops: Arithmetic and Compare take typed programs' names (exact.rs's
# Arithmetic and Comparison, porter.codegen.integer's ARITHMETIC and COMPARISONS)
POINTWISE = {TensorOp.DIV: "Div", TensorOp.NEG: "Neg", TensorOp.ABS: "Abs", TensorOp.SIGN: "Sign",
             TensorOp.CEIL: "Ceil", TensorOp.FLOOR: "Floor", TensorOp.LOG: "Log", TensorOp.CAST: "Cast",
             TensorOp.LOGICAL_AND: "And", TensorOp.LOGICAL_OR: "Or", TensorOp.LOGICAL_NOT: "Not",
             TensorOp.WHERE: "Where"}
# model.bin's dtype of a constant -> the crate's Data variant
CONSTANTS = {"float32": "F32", "int32": "I32", "uint8": "U8"}


def words(dtype: str) -> int:
    """32-bit words a value of `dtype` takes in a slot."""
    return 2 if dtype == "int64" else 1


def padded(shape, what: str) -> list[int]:
    """A shape on four axes, leading axes of one added (a step over more axes is refused)."""
    shape = list(shape)
    if len(shape) > 4:
        raise PorterError(f"{what}: a tensor step over a rank-{len(shape)} tensor {shape}")
    return [1] * (4 - len(shape)) + shape


def tensor_variables(step: TensorStep, slot_of: dict, array, weights: dict, reference: Reference) -> dict:
    """The model.rs variables of one tensor step; slot_of: buffer -> slot, array: name -> layout."""
    where = step.name
    operands = []
    for operand, dtype in zip(step.operands, step.attrs["in_dtypes"]):
        data = {"mask": operand.buffer == INPUT_MASK, "slot": None, "const": None, "kind": None}
        if operand.buffer and not data["mask"]:
            data["slot"] = slot_of[operand.buffer]
        elif operand.array:
            data.update(const=array(operand.array), kind=CONSTANTS[str(weights[operand.array].dtype)])
        operands.append({**data, "dtype": DTYPES[dtype], "shape": padded(operand.shape, where)})
    limits = step.limits or tuple(Rows.ALL for _ in step.shape)
    return {"kind": "tensor", "out": slot_of[step.outputs[0]], "dtype": DTYPES[step.dtype],
            "shape": padded(step.shape, where), "limits": [ROWS[r] for r in padded_limits(limits)],
            "kernel": _kernel(step, reference), "operands": operands, "name": step.name}


def padded_limits(limits) -> list[Rows]:
    return [Rows.ALL] * (4 - len(limits)) + list(limits)


def kernel_spec(step: TensorStep, reference: Reference) -> tuple[str, dict]:
    """The crate's TensorKernel of a step on four axes: its variant and fields (numbers, bools,
    a float, a list of four), or ("Pointwise", {"op": name}) (Arithmetic and Compare with "how")."""
    op, attrs, shift = step.op, step.attrs, 4 - len(step.shape)
    wraps = reference == Reference.ONNXRUNTIME_CPU  # onnxruntime counts a negative index from the end
    if op == TensorOp.MATMUL:
        if reference != Reference.ONNXRUNTIME_CPU and attrs.get("alpha", 1.0) != 1.0:
            raise PorterError(f"{step.name}: a scaled BATCH_MATMUL")
        return "MatMul", {"adj_b": attrs["adj_b"], "alpha": float(np.float32(attrs["alpha"])),
                          "onnxruntime": reference == Reference.ONNXRUNTIME_CPU}
    if op == TensorOp.MOVE:
        operand_rank = len(step.operands[0].shape)
        return "Move", {"perm": list(range(4 - operand_rank)) + [p + 4 - operand_rank for p in attrs["perm"]]}
    if op == TensorOp.GATHER_ELEMENTS:
        return "GatherElements", {"axis": attrs["axis"] + shift, "negative_wraps": wraps}
    if op == TensorOp.GATHER:
        data, axis = list(step.operands[0].shape), attrs["axis"]
        return "Gather", {"axis_len": data[axis], "inner": int(np.prod(data[axis + 1:])),
                          "indices": int(np.prod(step.operands[1].shape)), "negative_wraps": wraps}
    if op == TensorOp.GATHER_ND:
        data, depth = list(step.operands[0].shape), step.operands[1].shape[-1]
        if depth > 4:
            raise PorterError(f"{step.name}: a gather_nd addressing {depth} axes")
        strides = [int(np.prod(data[a + 1:])) for a in range(depth)]
        return "GatherNd", {"depth": depth, "dims": (data[:depth] + [1] * 4)[:4], "strides": (strides + [0] * 4)[:4],
                            "inner": int(np.prod(data[depth:])), "negative_wraps": wraps}
    if op == TensorOp.CUMSUM:
        return "CumSum", {"axis": attrs["axis"] + shift, "exclusive": attrs["exclusive"], "reverse": attrs["reverse"]}
    if op == TensorOp.LOOKUP:
        rows, width = step.operands[0].shape
        return "Lookup", {"rows": rows, "width": width, "scaled": len(step.operands) > 2}
    if op == TensorOp.DEQUANTIZE:
        return "Dequantize", {"scale": attrs["scale"], "zero_point": attrs["zero_point"]}
    if op == TensorOp.LOG and reference == Reference.ONNXRUNTIME_CPU:
        return "Pointwise", {"op": "LogOrt"}  # Eigen's plog in packets, glibc's logf on the tail
    if op.value in ARITHMETIC:
        return "Pointwise", {"op": "Arithmetic", "how": ARITHMETIC[op.value]}
    if op.value in COMPARISONS:
        return "Pointwise", {"op": "Compare", "how": COMPARISONS[op.value]}
    return "Pointwise", {"op": POINTWISE[op]}


def _kernel(step: TensorStep, reference: Reference) -> str:
    kind, fields = kernel_spec(step, reference)
    if kind == "Pointwise":
        how = {"Arithmetic": "Arithmetic::", "Compare": "Comparison::"}.get(fields["op"])
        return f"TensorKernel::Pointwise(Pointwise::{fields['op']}({how}{fields['how']}))" if how \
            else f"TensorKernel::Pointwise(Pointwise::{fields['op']})"
    rust = {k: f32_literal(v) if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in fields.items()}
    return f"TensorKernel::{kind} {{ " + ", ".join(f"{k}: {v}" for k, v in rust.items()) + " }"
