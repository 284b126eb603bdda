"""Declarative patterns for BERT-style encoder blocks in ONNX's op vocabulary.

The same engine and the same binding names as porter.recover.tflite_patterns (the contract with
porter.recover); only the spellings differ. Recovery matches these after constant folding
(porter.recover.fold), so position ids, token-type rows, reshape targets and the shape arithmetic of
the mask path are constants here.

Exporters covered (see graphs/README.md):
- torch.onnx, dynamo (opset 18): LayerNormalization as one op; linears MatMul(x, W[in, out]) then
  Add(bias); attention Reshape/Transpose, MatMul(q, k^T), Mul(1/sqrt(d)), Add(mask), Softmax,
  MatMul, Transpose/Reshape; GELU x * (0.5 * (erf(x / sqrt 2) + 1)); the mask as
  Cast(bool) -> GatherND -> And -> Where(keep, 0, -FLT_MAX); word lookup Gather, the token-type
  rows a constant and the position rows Gather(table, constant ids).
- torch.onnx, TorchScript (opset 17): the same blocks, bias first in Add(bias, MatMul), GELU as
  (x * (erf(x / sqrt 2) + 1)) * 0.5, the mask broadcast through Flatten/Gather/Reshape/Expand
  with shapes computed by Shape/ConstantOfShape/Concat (folded to constants).
- onnxruntime quantize_dynamic (QInt8) of the dynamo export: every linear is
  DynamicQuantizeLinear(x) -> MatMulInteger(q, W int8, zp_x, zp_w) -> Cast(float) ->
  Mul(scale_x * scale_w) -> Add(bias), one DynamicQuantizeLinear shared by Q, K and V; the word
  and position tables uint8 with a zero point, Gather -> DequantizeLinear.
- Older exporters' decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then
  Mul(gamma), Add(beta)) and the Gelu op.
"""

import numpy as np

from porter.recover.fold import EVALUATORS
from porter.recover.engine import AnyOf, Const, Op, Var, wrapped
from porter.recover.tflite_patterns import scalar_const, vector_const

RESHAPE = "Reshape"
# MatMul computes x @ W with W [in, out]: the output channel is axis 1 (the IR stores [out, in]).
WEIGHT_OUT_AXIS = 1


def last_axis(op, g) -> bool:
    """Softmax / LayerNormalization / ReduceMean acting on the last axis only."""
    rank = len(g.tensor(op.inputs[0]).shape)
    if op.type == "ReduceMean":
        axes = (g.const(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] >= 0
                else op.options.get("axes"))
        return axes is not None and [int(a) % rank for a in np.ravel(axes)] == [rank - 1]
    return int(op.options.get("axis", -1)) % rank == rank - 1


def _gathers_rows(op, g) -> bool:
    return int(op.options.get("axis", 0)) == 0


def maybe_reshaped(p):
    return wrapped(p, lambda q: Op("Reshape", q, Const()))


def layout(p, depth: int = 3):
    """Up to `depth` Reshape / Transpose ops around `p` (head split and merge); ONNX's Transpose
    carries its permutation as an attribute, not an input."""
    return wrapped(p, lambda q: AnyOf(Op("Reshape", q, Const()), Op("Transpose", q)), depth)


# ---- LayerNorm -------------------------------------------------------------------------------

# One op: x, gamma, beta; epsilon and axis are attributes.
LAYER_NORM_OP = Op("LayerNormalization", Var("x"), vector_const("gamma"), vector_const("beta"),
                   name="out", where=last_axis)


def _layer_norm_decomposed():
    """norm = (x - mean) / sqrt(mean((x - mean)^2) + eps); the affine follows separately."""
    x = Var("x")
    mean = Op("ReduceMean", x, name="mean", where=last_axis)
    centred = Op("Sub", x, mean, name="centred")
    var = Op("ReduceMean", Op("Pow", centred, scalar_const("two")), where=last_axis)
    std = Op("Sqrt", Op("Add", var, scalar_const("eps"), commutative=True))
    return Op("Div", centred, std, name="norm")


LAYER_NORM_DECOMPOSED = _layer_norm_decomposed()
# (form, pattern): onnxruntime fuses the decomposed spelling into one LayerNormalization, and
# the recovery then picks the kernel onnxruntime runs for each (porter.recover._onnxruntime_form).
LAYER_NORMS = (("onnx", LAYER_NORM_OP), ("onnx", LAYER_NORM_DECOMPOSED))
AFFINE = Op("Add", Op("Mul", Var("norm"), vector_const("gamma"), commutative=True),
            vector_const("beta"), commutative=True, name="affine")

# ---- linear layers ---------------------------------------------------------------------------


def _dynamic_quantized_matmul(name: str, x):
    """quantize_dynamic's MatMulInteger chain up to the rescaled product (before the bias)."""
    quantized = Op("DynamicQuantizeLinear", x, name=f"{name}_input_quant")
    x_scale = Op("DynamicQuantizeLinear", x, output=1)
    x_zero_point = Op("DynamicQuantizeLinear", x, output=2)
    product = Op("MatMulInteger", quantized, Const(f"{name}_w"), x_zero_point, name=name)
    scale = Op("Mul", x_scale, Const(f"{name}_wscale"), commutative=True)
    return Op("Mul", Op("Cast", product, where=lambda op, g: op.options.get("to") == 1), scale,
              commutative=True)


def linear(name: str, x):
    """y = x @ W (+ b): float MatMul or the dynamically quantised chain, bias on either side."""
    products = (Op("MatMul", x, Const(f"{name}_w"), name=name), _dynamic_quantized_matmul(name, x))
    with_bias = [Op("Add", p, vector_const(f"{name}_b"), commutative=True) for p in products]
    return AnyOf(*with_bias, *products)


# ---- embeddings ------------------------------------------------------------------------------

_ids = maybe_reshaped(Var("ids"))
WORD_LOOKUP = AnyOf(
    # quantize_dynamic: uint8 table with one scale and zero point, dequantised after the lookup
    Op("DequantizeLinear", Op("Gather", Const("table"), _ids, where=_gathers_rows),
       scalar_const("table_scale"), scalar_const("table_zero_point"), name="lookup"),
    Op("Gather", Const("table"), _ids, where=_gathers_rows, name="lookup"),
)
# word + two constant [seq, hidden] terms (token type, position: folded lookups), or one.
EMBEDDINGS = AnyOf(
    Op("Add", Op("Add", maybe_reshaped(WORD_LOOKUP), Const("pos"), commutative=True),
       Const("type"), commutative=True, name="embedded"),
    Op("Add", maybe_reshaped(WORD_LOOKUP), Const("pos"), commutative=True, name="embedded"),
)

# ---- attention -------------------------------------------------------------------------------

_feed = Var("feed")
_q = layout(linear("q", _feed))
_k = layout(linear("k", _feed))
_v = layout(linear("v", _feed))
_scores = Op("MatMul", _q, _k, name="scores")
_scaled = AnyOf(Op("Mul", _scores, scalar_const("scale"), commutative=True, name="scaled"),
                Op("Div", _scores, scalar_const("scale_divisor"), name="scaled"),
                _scores)
_masked = AnyOf(Op("Add", _scaled, Var("mask_bias"), commutative=True, name="masked"), _scaled)
_probs = Op("Softmax", _masked, name="probs", where=last_axis)
_context = Op("MatMul", layout(_probs), _v, name="context")
ATTENTION = Op("Add", linear("o", layout(_context)), Var("resid"), commutative=True,
               name="attn_sum")

# ---- feed-forward ----------------------------------------------------------------------------


def gelu_erf(h):
    """h * 0.5 * (1 + erf(h / sqrt 2)) in the two association orders torch.onnx writes.

    `h` appears twice; the engine's name bindings make both occurrences the same tensor.
    """
    erf = Op("Erf", AnyOf(Op("Div", h, scalar_const("erf_divisor")),
                          Op("Mul", h, scalar_const("erf_factor"), commutative=True)))
    one_plus = Op("Add", erf, scalar_const("one"), commutative=True)
    dynamo = Op("Mul", h, Op("Mul", one_plus, scalar_const("half"), commutative=True),
                commutative=True, name="gelu")
    torchscript = Op("Mul", Op("Mul", h, one_plus, commutative=True), scalar_const("half"),
                     commutative=True, name="gelu")
    return AnyOf(dynamo, torchscript)


_ffn_in = linear("ffn_in", Var("feed"))
GELU = AnyOf(Op(("Gelu", "com.microsoft.Gelu"), _ffn_in, name="gelu"), gelu_erf(_ffn_in))
FFN = Op("Add", linear("ffn_out", GELU), Var("resid"), commutative=True, name="ffn_sum")

HEAD = linear("head", Var("feed"))

# Every op type some pattern above uses, or the mask path's evaluation understands.
KNOWN_OPS = frozenset({
    "LayerNormalization", "ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Add", "Mul", "MatMul",
    "MatMulInteger", "DynamicQuantizeLinear", "Cast", "DequantizeLinear", "Gather", "Reshape",
    "Transpose", "Softmax", "Erf", "Gelu", "com.microsoft.Gelu",
}) | frozenset(EVALUATORS)
