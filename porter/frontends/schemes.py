"""The quantisation scheme of a model file, layer by layer, read from its tensors' own types
and quantisation parameters, and asserted before recovery.

A scheme is a property of the whole file: which form each layer's weights are stored in and what
its activations are when the layer runs. porter decides it first, so that a scheme it does not
reproduce is refused by its name, not by whatever op of the graph it happens to break first.
`porter inspect` reports it; canonicalisation (porter.recover.canonical) asserts it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from porter.errors import PorterError
from porter.frontends import ort_float16
from porter.frontends.graph import Graph, Op, Quantization, Tensor

# Ops whose constant inputs are weights: op type -> the positions of its weight inputs.
LAYER_WEIGHTS = {
    "FULLY_CONNECTED": (1,), "BATCH_MATMUL": (0, 1), "EMBEDDING_LOOKUP": (1,), "GATHER": (0,),
    "CONV_2D": (1,), "DEPTHWISE_CONV_2D": (1,),
    "MatMul": (0, 1), "Gemm": (0, 1), "MatMulInteger": (0, 1), "Gather": (0,),
}
# Ops that compute a weight from a constant (and so leave it a constant): followed back to the
# stored tensor.
WEIGHT_PRODUCERS = {"DEQUANTIZE", "DequantizeLinear", "Cast", "CAST", "Transpose", "TRANSPOSE",
                    "Reshape", "RESHAPE", "Identity"}
# Ops that only move values: an integer tensor they pass on is not yet computed with.
DATA_MOVEMENT = {"GATHER", "GATHER_ND", "EMBEDDING_LOOKUP", "RESHAPE", "SQUEEZE", "EXPAND_DIMS",
                 "TRANSPOSE", "STRIDED_SLICE", "SLICE", "CONCATENATION", "PACK", "DEQUANTIZE",
                 "QUANTIZE", "Gather", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity",
                 "DequantizeLinear", "QuantizeLinear", "Cast", "CAST", "Shape", "SHAPE"}
INTEGER_ACTIVATIONS = ("int8", "uint8", "int16")
FULL_INTEGER = "full-integer"
REPRODUCED = ("porter reproduces float32, float16, int8 and int4 weights with float activations, "
              "float16 ONNX graphs as onnxruntime runs them, "
              "dynamic-range int8 and int4 (LiteRT's hybrid kernels, onnxruntime's quantize_dynamic), "
              "full-integer TFLite with int8 activations (LiteRT's integer kernels) and onnxruntime QDQ with "
              "8-bit activations (the kernels its QDQ transformers leave)")


@dataclass(frozen=True)
class LayerScheme:
    op: int  # the file's op index
    op_type: str
    weight_tensor: int  # the stored constant
    weights: str  # float32 | float16 | int8 per-tensor | int8 per-channel (axis a) | int4 ...
    activations: str  # float | dynamic int8 | dynamic uint8 | static int8 | float16 | lookup
    # static integer activations: the layer's input and output quantisation, e.g.
    # "in scale 0.0266 zero point 3, out scale 0.0265 zero point 5"; None otherwise
    activation_quant: str | None = None


def stored_weight(g: Graph, t: int) -> Tensor | None:
    """The constant a weight input is computed from (through dequantisations, casts, transposes
    and reshapes of constants), or None if the input is an activation."""
    seen = 0
    while g.tensor(t).data is None:
        producer = g.producer(t)
        if producer is None or producer.type not in WEIGHT_PRODUCERS or seen > 8:
            return None
        t, seen = producer.inputs[0], seen + 1
    return g.tensor(t)


def _storage_scheme(g: Graph, t: Tensor) -> str:
    q = t.quant if t.quant is not None else _onnx_dequantize_params(g, t)
    if t.dtype in ("float32", "float16", "bfloat16") or q is None:
        return t.dtype
    if q.per_channel:
        return f"{t.dtype} per-channel (axis {q.axis})"
    return f"{t.dtype} per-tensor"


def _onnx_dequantize_params(g: Graph, t: Tensor):
    """The quantisation a DequantizeLinear reading `t` applies (the ONNX frontend attaches it to
    weights of quantize_dynamic's MatMulInteger only)."""
    for user in g.users(t.index):
        if user.type == "DequantizeLinear" and len(user.inputs) > 1 and g.const(user.inputs[1]) is not None:
            scale = np.asarray(g.const(user.inputs[1]), np.float32).ravel()
            zp = g.const(user.inputs[2]) if len(user.inputs) > 2 and user.inputs[2] >= 0 else None
            zero_point = np.zeros(scale.size, np.int64) if zp is None else np.asarray(zp, np.int64).ravel()
            axis = int(user.options.get("axis", 1)) if scale.size > 1 else None
            return Quantization(scale, zero_point, axis)
    return None


def _activation_scheme(g: Graph, op: Op, weight_inputs: set[int]) -> str:
    if op.type in ("EMBEDDING_LOOKUP", "GATHER", "Gather"):
        return "lookup"
    xs = [g.tensor(t) for i, t in enumerate(op.inputs) if t >= 0 and i not in weight_inputs
          and g.tensor(t).data is None][:1]
    if not xs:
        return "constant"
    x = xs[0]
    if x.dtype in INTEGER_ACTIVATIONS:
        producer = g.producer(x.index)
        if producer is not None and producer.type == "DynamicQuantizeLinear":
            return f"dynamic {x.dtype}"
        return f"static {x.dtype}"
    if x.dtype == "float16":
        return "float16"
    producer = g.producer(x.index)
    if producer is not None and producer.type == "DequantizeLinear" and g.const(producer.inputs[0]) is None:
        return f"static {g.tensor(producer.inputs[0]).dtype} (onnxruntime QDQ)"
    direct = [g.tensor(op.inputs[i]) for i in weight_inputs]
    if any(w.dtype in ("int8", "int4") for w in direct) and g.format == "tflite":
        return "dynamic int8"
    return "float"


# A float16 ONNX graph's layers, as onnxruntime's CPU provider runs them (ort_float16)
FLOAT16_ONNX_LAYER = "float32 between onnxruntime's Casts (float16 graph)"


def float16_plan(g: Graph):
    """onnxruntime's cast placement in a float16 ONNX graph (ort_float16.placement), or None: for
    any other graph, and for one whose float16 spelling porter does not model (canonicalisation
    refuses that naming the op)."""
    if not ort_float16.computes_in_float16(g):
        return None
    try:
        return ort_float16.placement(g)
    except PorterError:
        return None


def _float16_activations(g: Graph, op: Op, plan, weight_inputs: set[int]) -> str:
    """How a layer of a float16 ONNX graph runs: in float32 on float16 values (rounded where
    onnxruntime casts a float32 result for a float16 op, or made by one) or on float32 ones (float32
    work before it, the casts between removed)."""
    inputs = [(i, t) for i, t in enumerate(op.inputs) if t >= 0 and i not in weight_inputs]
    half = any(i in plan.rounded_reads.get(op.index, ()) or
               (p := g.producer(t)) is not None and p.index in plan.half_ops for i, t in inputs)
    return FLOAT16_ONNX_LAYER + (", on float16 values" if half else ", on float32 values")


def layer_schemes(g: Graph) -> list[LayerScheme]:
    """Every layer (an op that reads a weight) with the form its weights are stored in and the
    activations it runs on."""
    plan = float16_plan(g)
    layers = []
    for op in g.ops:
        positions = [i for i in LAYER_WEIGHTS.get(op.type, ()) if i < len(op.inputs) and op.inputs[i] >= 0]
        weights = {i: stored_weight(g, op.inputs[i]) for i in positions}
        weights = {i: w for i, w in weights.items() if w is not None and w.data.size > 1}
        if not weights:
            continue
        w = max(weights.values(), key=lambda t: t.data.size)
        activations = _activation_scheme(g, op, set(weights))
        if plan is not None and activations == "float16":
            activations = _float16_activations(g, op, plan, set(weights))
        layers.append(LayerScheme(op.index, op.type, w.index, _storage_scheme(g, w), activations,
                                  _static_quantisation(g, op, set(weights)) if activations.startswith("static") else None))
    return layers


def _static_quantisation(g: Graph, op: Op, weight_inputs: set[int]) -> str | None:
    """A static-int8 layer's activation scale and zero point, in and out (as the file stores them:
    the tensors' own quantisation, or in a QDQ graph the DequantizeLinear before the layer and
    the QuantizeLinear after it)."""
    def quant(t: int) -> str | None:
        q = g.tensor(t).quant or _qdq_params(g, t)
        if q is None or q.scale.size != 1:
            return None
        return f"scale {float(q.scale.ravel()[0]):.3g} zero point {int(q.zero_point.ravel()[0])}"

    x = next((t for i, t in enumerate(op.inputs) if t >= 0 and i not in weight_inputs and g.tensor(t).data is None), None)
    out = op.outputs[0] if op.outputs and op.outputs[0] >= 0 else None
    parts = [f"{side} {q}" for side, t in (("in", x), ("out", out)) if t is not None
             for q in [quant(t)] if q is not None]
    return ", ".join(parts) or None


def _qdq_params(g: Graph, t: int) -> Quantization | None:
    """The quantisation of a QDQ layer's input (the DequantizeLinear that makes it) or output (the
    QuantizeLinear that reads it)."""
    producer = g.producer(t)
    ops = [producer] if producer is not None and producer.type == "DequantizeLinear" else \
        [u for u in g.users(t) if u.type == "QuantizeLinear"]
    for op in ops[:1]:
        scale, zp = g.const(op.inputs[1]), g.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else 0
        if scale is not None and zp is not None:
            return Quantization(np.asarray(scale, np.float32).ravel(), np.asarray(zp, np.int64).ravel(), None)
    return None


def assert_scheme_reproduced(g: Graph) -> None:
    """Refuses a file whose quantisation scheme porter does not reproduce, naming the scheme and
    the first op that shows it; returns quietly for every scheme porter does reproduce."""
    static = _static_activations(g)
    if is_full_integer(g) or is_onnxruntime_qdq(g):  # porter.recover.integer / .qdq take them op by op
        static = None
    problem = _quantised_operators(g) or _int4_weights(g) or static or _float16_compute(g)
    if problem is not None:
        scheme, evidence = problem
        raise PorterError(f"{scheme}: not reproduced ({evidence}); {REPRODUCED}")


def is_full_integer(g: Graph) -> bool:
    """A TFLite file whose ops compute with static int8 activations (full-integer int8
    quantisation; int16 or uint8 activations are another scheme)."""
    problem = _static_activations(g)
    return g.format == "tflite" and problem is not None and problem[0] == f"{FULL_INTEGER} int8 (static int8 activations)"


def is_onnxruntime_qdq(g: Graph) -> bool:
    """An ONNX graph in onnxruntime's QDQ format with 8-bit activations: QuantizeLinear of an
    activation, every one to uint8 or int8 (int16 and 4-bit activations are another scheme)."""
    quantised = [op for op in g.ops if op.type == "QuantizeLinear" and g.const(op.inputs[0]) is None]
    return g.format == "onnx" and bool(quantised) and _quantised_operators(g) is None and all(
        g.tensor(op.outputs[0]).dtype in ("uint8", "int8") for op in quantised)


# onnxruntime's quantised operators (QOperator format: quantize_static(quant_format=QOperator)
# writes them into the file; in QDQ files only its transformers make them, at load time).
QUANTISED_OPERATORS = ("QGemm", "QAttention", "QEmbedLayerNormalization")


def _quantised_operators(g: Graph):
    """An ONNX file that holds onnxruntime's quantised operators itself (QLinearMatMul,
    com.microsoft.QLinearAdd, QGemm, ...): the QOperator format, which porter does not take."""
    if g.format != "onnx":
        return None
    for op in g.ops:
        name = op.type.rsplit(".", 1)[-1]
        if name.startswith("QLinear") or name in QUANTISED_OPERATORS:
            return ("onnxruntime QOperator format (quantised operators in the file)",
                    f"op {op.index} {op.type}; porter takes the same quantisation written as QDQ, "
                    "quantize_static's default QuantFormat.QDQ")
    return None


# The ops whose int4 weights porter reproduces: LiteRT's hybrid (dynamic-range) 4-bit kernels, and
# DEQUANTIZE (weight-only int4: a weight computed from a constant, folded in LiteRT's arithmetic).
INT4_READERS = {"FULLY_CONNECTED", "EMBEDDING_LOOKUP", "DEQUANTIZE"}


def _int4_weights(g: Graph):
    """int4 weights read any other way (an int4 BATCH_MATMUL, a CONV_2D)."""
    for op in g.ops:
        for t in op.inputs:
            if t >= 0 and g.tensor(t).dtype == "int4" and g.tensor(t).data is not None \
                    and op.type not in INT4_READERS:
                return (f"int4 weights read by {op.type}",
                        f"op {op.index} {op.type} reads {_short(g.tensor(t))}")
    return None


def _short(t: Tensor) -> str:
    """A tensor as a scheme refusal names it (exporters' tensor names run to hundreds of characters)."""
    return f"tensor {t.index} {t.dtype}{list(t.shape)}"


def _static_activations(g: Graph):
    """An op that computes with a quantised integer activation: full-integer TFLite, or
    onnxruntime's QDQ format (QuantizeLinear of an activation)."""
    for op in g.ops:
        if op.type in ("QuantizeLinear", "QLinearMatMul", "QLinearConv") and g.const(op.inputs[0]) is None:
            x = g.tensor(op.inputs[0])
            return (f"onnxruntime QDQ (static {g.tensor(op.outputs[0]).dtype} activations)",
                    f"op {op.index} {op.type} quantises activation {_short(x)}")
        if op.type in DATA_MOVEMENT:
            continue
        for t in op.inputs:
            x = g.tensor(t) if t >= 0 else None
            if x is not None and x.data is None and x.dtype in INTEGER_ACTIVATIONS and x.quant is not None:
                if g.producer(t) is not None and g.producer(t).type == "DynamicQuantizeLinear":
                    continue
                return (f"{FULL_INTEGER} {x.dtype} (static {x.dtype} activations)",
                        f"op {op.index} {op.type} computes with {_short(x)}, scale "
                        f"{float(x.quant.scale.ravel()[0]):.3g}, zero point {int(x.quant.zero_point.ravel()[0])}")
    return None


def _float16_compute(g: Graph):
    """An op (other than a cast or a view) that computes on a float16 activation in a TFLite graph
    (a float16 ONNX graph runs as onnxruntime places its casts: porter.recover.canonical.ort_float16)."""
    if g.format != "tflite":
        return None
    for op in g.ops:
        if op.type in DATA_MOVEMENT:
            continue
        for t in [*op.inputs, *op.outputs]:
            x = g.tensor(t) if t >= 0 else None
            if x is not None and x.data is None and x.dtype == "float16":
                return ("float16 TFLite compute",
                        f"op {op.index} {op.type} computes on {_short(x)}")
    return None
