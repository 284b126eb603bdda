"""The tanh GELU (issue 30.3) against the runtimes it emulates, bit for bit.

- LiteRT's GELU with approximate=True (reference_ops::Gelu, the float32 path GeluEval takes: one
  Eigen expression around Eigen's tanh) against ai-edge-litert's builtin kernel on a sampled
  sweep of f32 bit patterns (every exponent and sign, NaN payloads, the subnormals), the values
  where tanh clamps, x^3 overflows and the result underflows, and tensors of 1 to 9 values (its
  scalar tail); all 2^32 patterns with `-m slow`.
- onnxruntime's Gelu(approximate="tanh") at opset 20 and com.microsoft FastGelu (with and without
  its bias) and BiasGelu against onnxruntime's CPU provider; the canonical translations of the
  contrib ops (bias add, then the Gelu op) computing the same through porter's reference ops.
  MLAS swaps in no AVX-512 tanh, so one definition serves every x86 target; measured: these
  tests pass on this AVX-512 VNNI Xeon natively and with AVX-512 hidden from onnxruntime
  (graphs/zoo/avx2_cpu/run.sh, where its softmax takes the AVX2 kernel).
The Rust kernels are held to these numpy definitions in tests/test_kernels_exhaustive.py.
"""

import sys

import numpy as np
import pytest

from fixtures import REPO, assert_one_line_error, run_porter
from porter.ir.encoder import Reference
from porter.reference.litert import floats as LF
from porter.reference.ort import floats as OF
from porter.reference.ops import evaluate

sys.path.insert(0, str(REPO / "graphs" / "probes"))
from single_op import Input, S, interpreter, run_builtin, single_op_model  # noqa: E402

F32 = np.float32
ALL_PATTERNS = 1 << 32
CHUNK = 1 << 22
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# 0, subnormals, tanh's clamp (7.9073896 after the inner scaling: |x| near 3.5), where x^3
# overflows (|x| > 6.98e12), the largest floats, infinities, NaN
EDGES = F32([0, -0.0, 1e-45, -1e-45, 1e-39, -1e-39, 3.4, -3.4, 3.55, -3.55, 7.9073896, -7.9073896, 6.98e12,
             -6.98e12, 6.99e12, -6.99e12, 3.4028235e38, -3.4028235e38, np.inf, -np.inf, np.nan])


def same_bits(ours, theirs) -> int:
    """How many values differ (NaNs agree whatever their payload)."""
    ours, theirs = np.asarray(ours, F32).reshape(-1), np.asarray(theirs, F32).reshape(-1)
    same = (ours.view(np.uint32) == theirs.view(np.uint32)) | (np.isnan(ours) & np.isnan(theirs))
    return int((~same).sum())


def gelu_interpreter(n: int, approximate: bool = True):
    options = S.GeluOptionsT()
    options.approximate = approximate
    return interpreter(single_op_model(S.BuiltinOperator.GELU, [Input((n,))], [(n,)], options,
                                       S.BuiltinOptions.GeluOptions))


def patterns(start: int, count: int, step: int) -> np.ndarray:
    return ((np.arange(count, dtype=np.uint64) * np.uint64(step) + np.uint64(start)) % np.uint64(ALL_PATTERNS)) \
        .astype(np.uint32).view(F32)


def test_litert_tanh_gelu_matches_litert_on_sampled_bit_patterns():
    n = CHUNK + 3  # a scalar tail of three values after the last packet
    interp = gelu_interpreter(n)
    for c in range(2):
        x = patterns(c * n * 1021, n, 1021)
        x[:EDGES.size] = EDGES
        x[-EDGES.size:] = EDGES[::-1]
        assert same_bits(LF.gelu_tanh(x), run_builtin(interp, [x])[0]) == 0


def test_litert_tanh_gelu_tail_and_small_tensors_match_litert():
    rng = np.random.default_rng(30)
    for n in range(1, 10):
        interp = gelu_interpreter(n)
        for _ in range(50):
            x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 6, n))).astype(F32)
            assert same_bits(LF.gelu_tanh(x), run_builtin(interp, [x])[0]) == 0


def test_litert_tanh_gelu_is_not_the_exact_gelu():
    """The option is read: the two kernels differ on most inputs."""
    x = np.linspace(-6, 6, 10_001, dtype=F32)
    ref = run_builtin(gelu_interpreter(x.size), [x])[0]
    assert same_bits(LF.gelu_exact(x), ref) > 5_000


@pytest.mark.slow
def test_litert_tanh_gelu_matches_litert_on_every_bit_pattern():
    interp = gelu_interpreter(CHUNK)
    for start in range(0, ALL_PATTERNS, CHUNK):
        x = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32).view(F32)
        assert same_bits(LF.gelu_tanh(x), run_builtin(interp, [x])[0]) == 0, hex(start)


# ---- onnxruntime ---------------------------------------------------------------------------------

def run_ort_node(op: str, x: np.ndarray, domain: str = "", bias=None, opset: int = 20, **attrs) -> np.ndarray:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    inputs = ["x"] + ([] if bias is None else ["bias"])
    inits = [] if bias is None else [numpy_helper.from_array(np.asarray(bias, F32), "bias")]
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], domain=domain, **attrs)], "one",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def ort_inputs() -> np.ndarray:
    """Sampled bit patterns (all exponents, both signs), MLAS tanh's clamp at 9 after the inner
    product, and the edges above; rows of 64 for the bias."""
    x = np.concatenate([patterns(7, 1 << 20, 4093), np.linspace(-12, 12, 200_000, dtype=F32), EDGES])
    return x[: x.size // 64 * 64]


def test_onnx_gelu_tanh_is_fast_gelu_on_onnxruntime():
    """Gelu(approximate="tanh") at opset 20 runs FastGelu's loops around MLAS's tanh; the tanh
    kernel is the same on AVX2 and AVX-512F CPUs (MLAS swaps in no AVX-512 tanh)."""
    x = ort_inputs()
    ours = OF.fast_gelu(x)
    assert same_bits(run_ort_node("Gelu", x, approximate="tanh"), ours) == 0
    assert same_bits(run_ort_node("FastGelu", x, "com.microsoft"), ours) == 0
    assert same_bits(evaluate("gelu", {"approximate": "tanh"}, [x], Reference.ONNXRUNTIME_CPU), ours) == 0


def test_contrib_gelus_with_a_bias_are_the_add_then_the_kernel():
    """FastGelu(x, bias) and BiasGelu(x, bias) as canonicalisation translates them: the Add (one
    float add, the bias along the last axis) then the Gelu op's kernel."""
    rows = ort_inputs().reshape(-1, 64)
    bias = np.random.default_rng(31).standard_normal(64).astype(F32)
    biased = evaluate("add", {}, [rows, bias], Reference.ONNXRUNTIME_CPU)
    fast = evaluate("gelu", {"approximate": "tanh"}, [biased], Reference.ONNXRUNTIME_CPU)
    erf = evaluate("gelu", {"approximate": "none"}, [biased], Reference.ONNXRUNTIME_CPU)
    assert same_bits(run_ort_node("FastGelu", rows, "com.microsoft", bias=bias), fast) == 0
    assert same_bits(run_ort_node("BiasGelu", rows, "com.microsoft", bias=bias), erf) == 0


@pytest.mark.parametrize("op, bias_shape, fragment", [("FastGelu", (2, 64), "input 1"),
                                                      ("BiasGelu", None, "has 1 inputs")])
def test_a_contrib_gelu_without_a_one_dimensional_bias_is_refused(tmp_path, op, bias_shape, fragment):
    from onnx import TensorProto, helper, numpy_helper, save

    inputs = ["x"] + (["bias"] if bias_shape else [])
    inits = [numpy_helper.from_array(np.zeros(bias_shape, F32), "bias")] if bias_shape else []
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], domain="com.microsoft", name="act")], "one",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 64])], initializer=inits)
    path = tmp_path / "gelu.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]),
         path)
    assert_one_line_error(run_porter("inspect", path), op, fragment)


@pytest.mark.slow
def test_onnx_gelu_tanh_matches_onnxruntime_on_every_bit_pattern():
    for start in range(0, ALL_PATTERNS, CHUNK):
        x = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32).view(F32)
        assert same_bits(run_ort_node("Gelu", x, approximate="tanh"), OF.fast_gelu(x)) == 0, hex(start)
