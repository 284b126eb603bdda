"""Which ops onnxruntime's CPU provider runs in float16 on x86, and how it runs the others.

Measured on onnxruntime 1.32 (tests/test_ort_float16.py builds a one-op float16 model of each op
and reads the graph onnxruntime optimises it into, `SessionOptions.optimized_model_filepath`),
and read in its source (core/optimizer/insert_cast_transformer.cc):

- an op with no float16 CPU kernel (Add, Mul, MatMul, Gemm, Erf, Exp, Softmax, ReduceMean, ...)
  gets a Cast to float32 on each float16 input and a Cast back on its output, and runs its
  float32 kernel; an op whose float16 form has no kernel but a function body (Softmax, Gelu) is
  first replaced by that body;
- RemoveDuplicateCastTransformer then drops each float32 -> float16 -> float32 pair between two
  such ops (its precision test compares type groups, and float16 and float32 are one group), so
  consecutive float work stays float32: nothing is rounded to float16 between them;
- an op that has a float16 kernel runs in float16, unless every float16 neighbour of it is cast
  (ForceSingleNodeCPUFloat16ToFloat32), so a value is rounded to float16 exactly where it enters
  such an op. Those kernels move data (FLOAT16_MOVES: exact in either precision), pick one input
  (FLOAT16_PICKS: exact), or compute (FLOAT16_COMPUTES: LayerNormalization widens its input
  exactly, runs the float32 LayerNormalization kernel and rounds its output to float16, half to
  even: measured bit for bit against porter.reference.ort.floats.layer_norm).

porter uses this to say what it does not reproduce yet (porter.frontends.schemes refuses float16
ONNX compute): canonicalising a float16 graph into that cast placement.
"""

from __future__ import annotations

FLOAT16_MOVES = frozenset({"Reshape", "Transpose", "Concat", "Unsqueeze", "Squeeze", "Expand", "Slice",
                           "Gather", "GatherElements", "GatherND", "Split", "Identity", "Flatten", "Shape"})
# exact in either precision: one of the inputs (Relu is replaced by its function body, Max(x, 0)),
# or a value every float16 input gives exactly
FLOAT16_PICKS = frozenset({"Max", "Min", "Clip", "Relu", "Sign", "IsNaN"})
FLOAT16_COMPUTES = frozenset({"LayerNormalization"})
FLOAT16_KERNELS = FLOAT16_MOVES | FLOAT16_PICKS | FLOAT16_COMPUTES
