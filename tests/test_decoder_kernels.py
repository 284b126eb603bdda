"""onnxruntime's kernels that decoders add to porter/reference/ort/floats.py, each run against
onnxruntime itself (one-node models, the CPU provider, one thread) on wide inputs, bit for bit:
Sin and Cos (Eigen's psincos_float, and its exact reduction of large arguments), MLAS's logistic
(Sigmoid and QuickGelu), FastGelu, Gelu and BiasGelu, and Pow with the exponents it
special-cases. The Rust kernels are held to these in tests/test_decoder_zoo.py."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fixtures import host_ort_cpu
from porter.ir.encoder import Reference
from porter.reference.ort import floats as OF
from porter.reference.ort import cpu as ort_cpu
from porter.reference.ops import evaluate


def run_one(op: str, x: np.ndarray, domain: str = "", constant=None, **attrs) -> np.ndarray:
    inputs = ["x"] + ([] if constant is None else ["c"])
    inits = [] if constant is None else [numpy_helper.from_array(np.asarray(constant, np.float32), "c")]
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], domain=domain, **attrs)], "one",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the op's own kernel
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def wide_inputs(seed: int = 0) -> np.ndarray:
    """Normal values at several scales, a dense grid over the interesting range, the kernels'
    clamps and boundaries, zeros, infinities, subnormals, NaN. A multiple of 4 long."""
    rng = np.random.default_rng(seed)
    special = np.float32([0, -0.0, 18, -18, 9, -9, 0.921875, -0.921875, 88.7, -88.7, np.inf, -np.inf, np.nan,
                          1e-40, -1e-40, np.finfo(np.float32).max, -np.finfo(np.float32).max, 3.0])
    x = np.concatenate([(rng.standard_normal(400_000) * s).astype(np.float32) for s in (0.3, 3, 30)]
                       + [np.linspace(-40, 40, 300_001, dtype=np.float32), special])
    return x[: x.size // 4 * 4]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, np.float32).reshape(-1), np.asarray(b, np.float32).reshape(-1)
    both_nan = np.isnan(a) & np.isnan(b)
    return a.shape == b.shape and bool(np.all(both_nan | (a.view(np.uint32) == b.view(np.uint32))))


X = wide_inputs()
# infinities and NaNs among the inputs make numpy warn inside the kernels' float arithmetic
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("op, ours", [("Sin", OF.sin), ("Cos", OF.cos)])
def test_sin_and_cos_are_eigens_float_kernels(op, ours):
    """Positions times inverse frequencies reach far past the fast reduction's 25966 / 18838,
    where Eigen reduces exactly; lengths that are not a multiple of four end in std::sin."""
    rng = np.random.default_rng(1)
    positions = np.arange(70_000, dtype=np.float32)
    for x in (X, np.concatenate([positions, positions * np.float32(0.31622776), rng.uniform(-1e5, 1e5, 100_000)
                                 .astype(np.float32)])):
        assert same_bits(run_one(op, x), ours(x))
    for n in (1, 2, 3, 5, 6, 7):
        tail = rng.uniform(-50, 50, n).astype(np.float32)
        assert np.array_equal(run_one(op, tail), ours(tail))


def test_sigmoid_and_quick_gelu_are_mlas_logistic():
    """QuickGelu is x * logistic(x) as Sigmoid then Mul computes it, but for its logistic capped
    at 1 on AVX-512F CPUs; X holds an input where that is seen (the cap is not a no-op)."""
    assert same_bits(run_one("Sigmoid", X), OF.logistic(X))
    floats = ort_cpu.target(host_ort_cpu()).floats
    assert same_bits(run_one("QuickGelu", X, "com.microsoft", alpha=1.0), OF.quick_gelu(X, floats))
    assert not same_bits(OF.quick_gelu(X, ort_cpu.AVX512_FLOATS), OF.quick_gelu(X, ort_cpu.AVX2_FLOATS))
    assert same_bits(OF.quick_gelu(X, ort_cpu.AVX2_FLOATS), OF.silu(X))
    assert same_bits(evaluate("sigmoid", {}, [X], Reference.ONNXRUNTIME_CPU), OF.logistic(X))


def test_fast_gelu_and_gelu_with_and_without_their_bias():
    rows = X[: X.size // 64 * 64].reshape(-1, 64)
    bias = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    biased = (rows + bias).astype(np.float32)
    assert same_bits(run_one("FastGelu", X, "com.microsoft"), OF.fast_gelu(X))
    assert same_bits(run_one("Gelu", X, "com.microsoft"), OF.gelu_fused(X))
    assert same_bits(run_one("FastGelu", rows, "com.microsoft", constant=bias), OF.fast_gelu(biased))
    assert same_bits(run_one("BiasGelu", rows, "com.microsoft", constant=bias), OF.gelu_fused(biased))


@pytest.mark.parametrize("exponent", [2.0, 3.0])
def test_pow_by_two_and_three_is_repeated_multiplication(exponent):
    ours = evaluate("pow", {}, [X, np.float32(exponent)], Reference.ONNXRUNTIME_CPU)
    assert same_bits(run_one("Pow", X, constant=np.float32(exponent)), ours)


def test_a_changed_coefficient_is_caught():
    """The checks above can fail: logistic with its last denominator coefficient one ulp off."""
    original = OF._LOGISTIC_Q[-1]
    try:
        OF._LOGISTIC_Q[-1] = np.nextafter(original, np.float32(2))
        assert not same_bits(run_one("Sigmoid", X), OF.logistic(X))
    finally:
        OF._LOGISTIC_Q[-1] = original


def test_fused_matmul_of_one_row_is_mlas_transposed_b_kernel():
    """FusedMatMul(transB) at alpha 1 on one row of A is MLAS's SgemmKernelM1TransposeBAvx: eight
    lanes along k, then sums whose order depends on the column's group of four, two or one
    (MatMulTransposeFusion makes it of OPT's Q.K^T, which has no scale to fuse)."""
    rng = np.random.default_rng(8)
    for k in (3, 8, 13, 16, 40, 64):
        for n in (1, 2, 3, 4, 5, 6, 7, 9, 14):
            a = (rng.standard_normal((1, k)) * np.exp2(rng.integers(-6, 6, (1, k)))).astype(np.float32)
            b = (rng.standard_normal((n, k)) * np.exp2(rng.integers(-6, 6, (n, k)))).astype(np.float32)
            graph = helper.make_graph(
                [helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", transB=1, alpha=1.0)], "one",
                [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, k]),
                 helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, k])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            got = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
                None, {"a": a, "b": b})[0]
            assert same_bits(got, OF.fused_m1(a, b.T)), (k, n)


def test_a_product_with_one_broadcast_head_is_one_gemm_of_every_row():
    """MatMul of [1, heads, 1, k] by [1, 1, k, n]: onnxruntime folds the heads into the rows of
    one GEMM (MLAS's SGEMM), where [1, heads, k, n] takes its one-row kernel per head; the
    decoder executor's product() follows both."""
    from porter.reference.execute_decoder import product

    rng = np.random.default_rng(9)
    for k in (8, 13, 16):
        a = rng.standard_normal((4, 1, k)).astype(np.float32)
        for heads_of_b in (1, 4):
            b = rng.standard_normal((heads_of_b, k, 24)).astype(np.float32)
            graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "one",
                                      [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4, 1, k]),
                                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, heads_of_b, k, 24])],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            got = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
                None, {"a": a[None], "b": b[None]})[0][0]
            ours = product(a, np.broadcast_to(b, (4, k, 24)), None, heads_of_b == 1)
            assert same_bits(got, ours), (k, heads_of_b)
            assert not same_bits(got, product(a, np.broadcast_to(b, (4, k, 24)), None, heads_of_b != 1))
