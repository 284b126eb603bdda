"""Declarative patterns for BERT-style encoder blocks in TFLite's op vocabulary.

Each pattern reads like the computation the exporters emit (see the spellings noted beside
each); porter.recover assembles the matches into the encoder IR. Names bound here are the
contract with recover.py.

Exporters covered:
- litert-torch (+ ai-edge-quantizer): LayerNorm as MEAN, SQUARED_DIFFERENCE, MEAN, ADD(eps),
  RSQRT, then x * r + (0 - r * mean) with RESHAPEs between [seq] and [1, seq, 1], and the affine
  (MUL gamma, ADD beta) as separate ops whose input, the pre-affine tensor, also feeds the next
  FULLY_CONNECTEDs (their weights carry gamma and beta): the folded affine.
- TensorFlow's converter: LayerNorm as (x - mean) * rstd with the affine after it (and, like
  litert-torch, the next FULLY_CONNECTEDs reading the pre-affine tensor), or as Keras writes
  it, inv = rstd * gamma, x * inv + (beta - mean * inv).
"""

from porter.recover.engine import AnyOf, Const, Op, Var, wrapped


def maybe_reshaped(p):
    """Exporters insert RESHAPEs (rank changes only) freely around element-wise steps."""
    return wrapped(p, lambda q: Op("RESHAPE", q, Const()))


def layout(p, depth: int = 3):
    """Up to `depth` data-movement ops (RESHAPE / TRANSPOSE) around `p`: head split and merge."""
    return wrapped(p, lambda q: Op(("RESHAPE", "TRANSPOSE"), q, Const()), depth)


def scalar_const(name: str):
    return Const(name, where=lambda t, g: t.data is not None and t.data.size == 1)


def vector_const(name: str):
    return Const(name, where=lambda t, g: t.data is not None and t.data.ndim >= 1
                 and t.data.size == t.shape[-1] and t.data.size > 1)


# ---- LayerNorm -------------------------------------------------------------------------------

def _moments():
    x = Var("x")
    mean = Op("MEAN", x, Const(), name="mean")
    var = Op("MEAN", Op("SQUARED_DIFFERENCE", x, maybe_reshaped(mean), commutative=True), Const())
    rstd = Op("RSQRT", Op("ADD", var, scalar_const("eps"), commutative=True), name="rstd")
    return x, mean, rstd


def _layer_norm_shift():
    """litert-torch: norm = x * rstd + (0 - rstd * mean); the affine follows separately."""
    x, mean, rstd = _moments()
    shift = Op("SUB", scalar_const("zero"), Op("MUL", rstd, mean, commutative=True))
    return Op("ADD", Op("MUL", x, maybe_reshaped(rstd), commutative=True),
              maybe_reshaped(shift), commutative=True, name="norm")


def _layer_norm_centred():
    """TensorFlow's converter: norm = (x - mean) * rstd; the affine follows separately."""
    x, mean, rstd = _moments()
    return Op("MUL", Op("SUB", x, maybe_reshaped(mean)), maybe_reshaped(rstd), commutative=True,
              name="norm")


def _layer_norm_keras():
    """TensorFlow/Keras: inv = rstd * gamma; out = x * inv + (beta - mean * inv)."""
    x, mean, rstd = _moments()
    inv = Op("MUL", maybe_reshaped(rstd), vector_const("gamma"), commutative=True, name="inv")
    shift = Op("SUB", vector_const("beta"), Op("MUL", maybe_reshaped(mean), inv, commutative=True))
    return Op("ADD", Op("MUL", x, inv, commutative=True), shift, commutative=True, name="out")


LAYER_NORM_SHIFT = _layer_norm_shift()
LAYER_NORM_CENTRED = _layer_norm_centred()
LAYER_NORM_KERAS = _layer_norm_keras()
# The affine after a "shift" LayerNorm: pre-affine tensor "norm" -> * gamma + beta.
AFFINE = Op("ADD", Op("MUL", Var("norm"), vector_const("gamma"), commutative=True),
            vector_const("beta"), commutative=True, name="affine")

# ---- embeddings ------------------------------------------------------------------------------

_ids = maybe_reshaped(Var("ids"))
WORD_LOOKUP = AnyOf(
    # litert-torch: per-row int8 table read by EMBEDDING_LOOKUP (dequantises on the fly)
    Op("EMBEDDING_LOOKUP", _ids, Const("table"), name="lookup"),
    # TensorFlow: per-tensor int8 table, GATHER then DEQUANTIZE
    Op("DEQUANTIZE", Op("GATHER", Const("table"), _ids), name="lookup"),
    # float table
    Op("GATHER", Const("table"), _ids, name="lookup"),
)
# word + position + token type (constant type 0), in either order, with or without reshapes.
EMBEDDINGS = AnyOf(
    Op("ADD", Op("ADD", maybe_reshaped(WORD_LOOKUP), Const("pos"), commutative=True),
       Const("type"), commutative=True, name="embedded"),
    Op("ADD", maybe_reshaped(WORD_LOOKUP), Const("pos"), commutative=True, name="embedded"),
)

# ---- attention -------------------------------------------------------------------------------

def fully_connected(name: str, x):
    return AnyOf(Op("FULLY_CONNECTED", x, Const(f"{name}_w"), Const(f"{name}_b"), name=name),
                 Op("FULLY_CONNECTED", x, Const(f"{name}_w"), name=name))


_feed = Var("feed")
_q = layout(fully_connected("q", _feed))
_k = layout(fully_connected("k", _feed))
_v = layout(fully_connected("v", _feed))
_scores = Op("BATCH_MATMUL", _q, _k, name="scores")
_scaled = AnyOf(Op("MUL", _scores, scalar_const("scale"), commutative=True, name="scaled"),
                _scores)
_masked = AnyOf(Op("ADD", _scaled, Var("mask_bias"), commutative=True, name="masked"), _scaled)
_probs = Op("SOFTMAX", _masked, name="probs")
_context = Op("BATCH_MATMUL", layout(_probs), _v, name="context")
# The whole self-attention sublayer up to the residual add: ADD(o(merge(context)), resid).
ATTENTION = Op("ADD", fully_connected("o", layout(_context)), Var("resid"), commutative=True,
               name="attn_sum")

# ---- mask ------------------------------------------------------------------------------------

# litert-torch: attention_mask -> CAST(bool) -> GATHER_ND (broadcast to keys) -> LOGICAL_AND
# with a constant all-true [.., seq, 1] -> SELECT_V2(keep, 0, most negative float).
# TensorFlow: (1 - float(attention_mask)) * drop_value, broadcast over query rows.
MASK_BIAS = AnyOf(
    Op("SELECT_V2",
       Op("LOGICAL_AND", Const("keep_all"),
          Op("GATHER_ND", Op("CAST", maybe_reshaped(Var("mask"))), Const("key_index")),
          commutative=True),
       scalar_const("keep_value"), scalar_const("drop_value"), name="mask_bias"),
    Op("MUL", Op("SUB", scalar_const("one"), Op("CAST", maybe_reshaped(Var("mask")))),
       scalar_const("drop_value"), commutative=True, name="mask_bias"),
)

# ---- feed-forward ----------------------------------------------------------------------------

GELU = AnyOf(
    Op("GELU", fully_connected("ffn_in", Var("feed")), name="gelu"),
)
FFN = Op("ADD", fully_connected("ffn_out", GELU), Var("resid"), commutative=True, name="ffn_sum")

HEAD = fully_connected("head", Var("feed"))

# Every op type some pattern above uses: an op outside this set inside a block is reported by
# name instead of as a generic mismatch.
KNOWN_OPS = frozenset({
    "ADD", "SUB", "MUL", "MEAN", "SQUARED_DIFFERENCE", "RSQRT", "RESHAPE", "TRANSPOSE",
    "FULLY_CONNECTED", "BATCH_MATMUL", "SOFTMAX", "GELU", "EMBEDDING_LOOKUP", "GATHER",
    "DEQUANTIZE", "SELECT_V2", "LOGICAL_AND", "GATHER_ND", "CAST",
})
