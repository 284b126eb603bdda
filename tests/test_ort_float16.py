"""How onnxruntime's CPU provider runs a float16 ONNX graph, measured on onnxruntime itself: which
ops have float16 kernels (porter/frontends/ort_float16.py), that float32 work between two ops
without one is not rounded to float16, and that porter refuses such a graph naming the op whose
float16 kernel it does not reproduce."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fixtures import REPO, run_porter
from porter.frontends.ort_float16 import FLOAT16_KERNELS

HALF = TensorProto.FLOAT16
# Ops onnxruntime runs in float32 between Casts (no float16 CPU kernel on x86), and two inputs each.
FLOAT32_ONLY = {"Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Pow": 2, "Sqrt": 1, "Erf": 1, "Tanh": 1, "Exp": 1,
                "Sigmoid": 1, "Neg": 1, "Abs": 1, "Softmax": 1, "ReduceMean": 1, "ReduceSum": 1, "MatMul": 2}
AXES = {"ReduceMean", "ReduceSum", "Unsqueeze", "Squeeze"}


def _one_op_model(op: str) -> onnx.ModelProto:
    inputs = 2 if op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Concat") or FLOAT32_ONLY.get(op) == 2 else 1
    shapes = [[1, 8], [8, 8]] if op == "MatMul" else [[1, 8]] * inputs
    inits, attrs = [], {}
    if op in AXES:
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
    elif op == "Reshape":
        inits.append(numpy_helper.from_array(np.array([8], np.int64), "shape"))
    elif op == "Expand":
        inits.append(numpy_helper.from_array(np.array([3, 8], np.int64), "shape"))
    elif op == "Slice":
        inits += [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("starts", 0), ("ends", 4), ("axes_", 1))]
    elif op == "Gather":
        inits.append(numpy_helper.from_array(np.array([1, 0], np.int64), "indices"))
    elif op == "LayerNormalization":
        inits += [numpy_helper.from_array(np.ones(8, np.float16), "gamma"),
                  numpy_helper.from_array(np.zeros(8, np.float16), "beta")]
    if op == "Concat":
        attrs["axis"] = 0
    if op == "Gather":
        attrs["axis"] = 1
    node = helper.make_node(op, [f"x{i}" for i in range(inputs)] + [t.name for t in inits], ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(f"x{i}", HALF, s) for i, s in enumerate(shapes)],
                              [helper.make_tensor_value_info("y", HALF, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _optimised(model: onnx.ModelProto, tmp_path) -> onnx.ModelProto:
    """The graph onnxruntime runs (ORT_ENABLE_ALL, as porter's goldens are made)."""
    src, out = tmp_path / "m.onnx", tmp_path / "m.opt.onnx"
    onnx.save(model, src)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return onnx.load(out)


@pytest.mark.parametrize("op", sorted(FLOAT16_KERNELS - {"Clip"}) + sorted(FLOAT32_ONLY))
def test_which_ops_onnxruntime_runs_in_float16(op, tmp_path):
    """An op of FLOAT16_KERNELS runs as it is; every other op gets Casts to float32 and back."""
    ran = [n.op_type for n in _optimised(_one_op_model(op), tmp_path).graph.node]
    assert ("Cast" not in ran) == (op in FLOAT16_KERNELS), ran


def test_float32_work_between_two_float16_ops_is_not_rounded(tmp_path):
    """Add then Mul of float16 tensors: the Cast back to float16 after Add and the Cast to float32
    before Mul are removed as a pair (RemoveDuplicateCastTransformer), so the sum reaches the
    product unrounded; only the inputs are widened and the output rounded."""
    a, b, c = (helper.make_tensor_value_info(n, HALF, [1, 4096]) for n in "abc")
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "c"], ["y"])],
                              "g", [a, b, c], [helper.make_tensor_value_info("y", HALF, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    ran = [n.op_type for n in _optimised(model, tmp_path).graph.node]
    assert ran.count("Cast") == 4 and ran.index("Mul") == ran.index("Add") + 1, ran
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal((1, 4096)).astype(np.float16) for _ in range(3))
    got = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"a": x, "b": y, "c": z})[0]
    f32 = np.float32
    unrounded = ((x.astype(f32) + y.astype(f32)) * z.astype(f32)).astype(np.float16)
    rounded = ((x.astype(f32) + y.astype(f32)).astype(np.float16).astype(f32) * z.astype(f32)).astype(np.float16)
    assert np.array_equal(got.view(np.uint16), unrounded.view(np.uint16))
    assert not np.array_equal(got.view(np.uint16), rounded.view(np.uint16))


def test_float16_layer_norm_is_the_float32_kernel_between_widening_and_rounding(tmp_path):
    """onnxruntime's float16 LayerNormalization kernel (the one op of FLOAT16_COMPUTES) gives, bit
    for bit, porter's float32 LayerNormalization (MLAS's, porter.reference.ort.floats) of the
    widened input, rounded to float16."""
    from porter.frontends.ort_float16 import FLOAT16_COMPUTES
    from porter.reference.ort.floats import layer_norm

    assert FLOAT16_COMPUTES == {"LayerNormalization"}
    width, rng = 64, np.random.default_rng(1)
    gamma = (1 + 0.1 * rng.standard_normal(width)).astype(np.float16)
    beta = (0.1 * rng.standard_normal(width)).astype(np.float16)
    node = helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12)
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", HALF, [256, width])],
                              [helper.make_tensor_value_info("y", HALF, None)],
                              initializer=[numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "ln.onnx")
    x = (2 * rng.standard_normal((256, width)) + 0.5).astype(np.float16)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    got = ort.InferenceSession(str(tmp_path / "ln.onnx"), options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    want = layer_norm(x.astype(np.float32), gamma.astype(np.float32), beta.astype(np.float32), 1e-12)
    assert np.array_equal(got.view(np.uint16), want.astype(np.float16).view(np.uint16))


def test_float16_onnx_is_refused_naming_what_porter_does_not_canonicalise(tmp_path):
    result = run_porter("compile", REPO / "graphs" / "zoo" / "bert-tok.f16.onnx", "-o", tmp_path / "out")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("porter: error: float16 ONNX compute: not reproduced (op 2 Add computes on tensor 52 float16"), line
    assert line.endswith("porter does not canonicalise that cast placement yet")
