"""Which weight quantisation schemes porter accepts: the assertions recovery makes on a graph's
weights before it trusts them (the arithmetic of each scheme is porter.reference.quant; the
scheme of a whole file, asserted before recovery, is porter.frontends.schemes)."""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Tensor


def weight_scheme(g: Graph, t: Tensor, out_axis: int, where: str) -> str:
    """Classify a FULLY_CONNECTED/embedding weight, or fail naming the tensor.

    Returns "float32", "int8_per_channel" (one scale per index of `out_axis`, zero points 0)
    or "int8_per_tensor" (one scale, zero point 0).
    """
    if t.data is None:
        raise PorterError(f"{where}: weight {t.describe()} is not a constant")
    if t.data.size == 0:
        raise PorterError(f"{where}: weight {t.describe()} is empty")
    if t.dtype == "float32":
        return "float32"
    if t.dtype == "int4":
        return _int4_scheme(t, out_axis, where)
    if t.dtype != "int8":
        raise PorterError(f"{where}: weight {t.describe()} has dtype {t.dtype}; "
                          "expected int8 (hybrid quantisation) or float32")
    q = t.quant
    if q is None or q.scale.size == 0:
        raise PorterError(f"{where}: int8 weight {t.describe()} has no quantisation scales")
    if np.any(q.zero_point != 0):
        raise PorterError(f"{where}: int8 weight {t.describe()} has non-zero zero points; "
                          "expected symmetric weights (zero point 0)")
    if not np.all(np.isfinite(q.scale)) or np.any(q.scale <= 0):
        raise PorterError(f"{where}: int8 weight {t.describe()} has a non-positive or "
                          "non-finite scale")
    if q.scale.size == 1:
        return "int8_per_tensor"
    if q.axis != out_axis or q.scale.size != t.shape[out_axis]:
        raise PorterError(f"{where}: int8 weight {t.describe()} is quantised along axis "
                          f"{q.axis} with {q.scale.size} scales; expected one scale per "
                          f"output channel along axis {out_axis} ({t.shape[out_axis]} scales)")
    return "int8_per_channel"


def _int4_scheme(t: Tensor, out_axis: int, where: str) -> str:
    """int4 weights (ai-edge-quantizer's dynamic_wi4_afp32): symmetric, one scale per output
    channel, values -7..7 (LiteRT's 4-bit kernels make them unsigned by adding 7)."""
    q = t.quant
    if q is None or q.scale.size != t.shape[out_axis] or (q.scale.size > 1 and q.axis != out_axis) \
            or np.any(q.zero_point != 0) or not np.all(np.isfinite(q.scale)):
        raise PorterError(f"{where}: int4 weight {t.describe()} is not quantised symmetrically with one "
                          f"scale per output channel along axis {out_axis}")
    if t.data.min() < -7:
        raise PorterError(f"{where}: int4 weight {t.describe()} holds -8, which LiteRT's 4-bit kernels "
                          "do not represent")
    return "int4_per_channel"
