"""onnxruntime's QDQ graphs, measured on onnxruntime itself (1.32, the CPU provider):

- what it runs: porter.recover.canonical.ort_qdq's graph against the model onnxruntime writes
  with SessionOptions.optimized_model_filepath at ORT_ENABLE_ALL (the goldens' level), on every
  QDQ file of the zoo and on one-unit graphs built to probe each selector rule;
- its kernels: porter.reference.ort.qdq against one-op models run with every optimisation off,
  on this machine's CPU (the integer dot as its target takes it: porter.reference.ort.cpu), and
  Pow in every exponent form a graph can hold: multiplied, or refused by name.
"""

import re
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from fixtures import REPO, assert_one_line_error, run_porter
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.frontends.graph import Op
from porter.ir.encoder import Reference
from porter.recover.canonical.ort_ops import float_op
from porter.recover.canonical.ort_qdq import ort_runs
from porter.reference import ops, quant
from porter.reference.ort import qdq as QDQ
from porter.reference.litert.floats import log_op
from porter.reference.ort.cpu import host_target

ZOO = REPO / "graphs" / "zoo"
QDQ_FILES = sorted(p for p in ZOO.glob("*.onnx") if ".qdq8" in p.name)
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool"}
F32 = np.float32


def optimised(path_or_model, tmp_path) -> onnx.ModelProto:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    so.log_severity_level = 3
    source = str(path_or_model) if isinstance(path_or_model, Path) else path_or_model.SerializeToString()
    ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    return onnx.load(so.optimized_model_filepath)


def onnxruntime_signature(model: onnx.ModelProto) -> Counter:
    """Each node as (op type, the producers of its inputs: an op type, or a constant's type)."""
    consts = {i.name: ONNX_TYPES.get(i.data_type) for i in model.graph.initializer}
    made = {o: (n.domain + "." if n.domain else "") + n.op_type for n in model.graph.node for o in n.output}
    return Counter(((n.domain + "." if n.domain else "") + n.op_type,
                    tuple(made.get(x, ("const", consts[x]) if x in consts else "-" if not x else "input") for x in n.input))
                   for n in model.graph.node)


def porter_signature(path: Path) -> Counter:
    q = ort_runs(load_graph(path)).graph
    made = {t: op.type for op in q.ops for t in op.outputs}
    return Counter((op.type, tuple("-" if t < 0 else made.get(t, ("const", q.tensor(t).dtype) if q.tensor(t).data is not None
                                                            else "input") for t in op.inputs))
                   for op in q.ops)


@pytest.mark.parametrize("path", QDQ_FILES, ids=lambda p: p.name)
def test_porter_runs_what_onnxruntime_runs_on_the_zoo(path, tmp_path):
    ours, theirs = porter_signature(path), onnxruntime_signature(optimised(path, tmp_path))
    assert ours == theirs, f"onnxruntime only: {sorted((theirs - ours).items())}\nporter only: {sorted((ours - theirs).items())}"


# ---- one node unit at a time ----------------------------------------------------------------------

def _q(name, x, scale, zp, dtype, inits):
    inits += [numpy_helper.from_array(np.array(scale, F32), f"{name}_s"), numpy_helper.from_array(np.array(zp, dtype), f"{name}_z")]
    return [helper.make_node("QuantizeLinear", [x, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
            helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_f"])]


def _weight(name, w, scales, inits, axis=1):
    inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(np.asarray(scales, F32), f"{name}_ws"),
              numpy_helper.from_array(np.zeros(np.shape(scales), np.int8), f"{name}_wz")]
    return [helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws", f"{name}_wz"], [f"{name}_wf"], axis=axis)]


def unit_model(case: str) -> onnx.ModelProto:
    """A small QDQ graph for one selector rule (`case`), float input x [1, 8, 16], output y."""
    rng = np.random.default_rng(7)
    inits, nodes = [], []
    act = {"u8": np.uint8, "s8": np.int8}
    w = rng.integers(-127, 128, (16, 12)).astype(np.int8)
    if case.startswith("matmul"):  # matmul-u8, matmul-s8 (pair made uint8), matmul-s8-shared, matmul-no-q
        dtype = act["u8" if case in ("matmul-u8", "matmul-no-q") else "s8"]
        nodes += _q("x", "x", 0.05, 3, dtype, inits) + _weight("w", w, rng.random(12) * 0.01 + 1e-3, inits)
        nodes.append(helper.make_node("MatMul", ["x_f", "w_wf"], ["m"]))
        if case == "matmul-s8-shared":  # the activation's DQ read twice: the Q has two DQs after EnsureUniqueDQ
            nodes.append(helper.make_node("Relu", ["x_f"], ["r"]))
        if case == "matmul-no-q":
            nodes.append(helper.make_node("Identity", ["m"], ["y"]))
        else:
            nodes += _q("m", "m", 0.2, 0, dtype, inits)
            nodes.append(helper.make_node("Identity", ["m_f"], ["y"]))
    elif case == "float-a-matmul":  # a float activation times a DQ'd weight
        nodes += _weight("w", w, rng.random(12) * 0.01 + 1e-3, inits)
        nodes.append(helper.make_node("MatMul", ["x", "w_wf"], ["y"]))
    elif case in ("add-same", "add-int32"):
        nodes += _q("x", "x", 0.05, 3, np.uint8, inits) + _q("x2", "x", 0.07, 9, np.uint8, inits)
        other = "x2_f"
        if case == "add-int32":  # a bias-like int32 DQ: the types differ
            inits += [numpy_helper.from_array(rng.integers(-500, 500, 16).astype(np.int32), "b"),
                      numpy_helper.from_array(np.array(0.001, F32), "bs"), numpy_helper.from_array(np.array(0, np.int32), "bz")]
            nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["b_f"]))
            other = "b_f"
        nodes.append(helper.make_node("Add", ["x_f", other], ["a"]))
        nodes += _q("a", "a", 0.1, 5, np.uint8, inits)
        nodes.append(helper.make_node("Identity", ["a_f"], ["y"]))
    elif case in ("softmax-same", "softmax-types-differ"):
        nodes += _q("x", "x", 0.05, 3, np.uint8, inits)
        nodes.append(helper.make_node("Softmax", ["x_f"], ["s"], axis=-1))
        out = np.uint8 if case == "softmax-same" else np.int8
        nodes += _q("s", "s", 1 / 256, 0 if out == np.uint8 else -128, out, inits)
        if out == np.int8:  # the Q read by two DQs: not a pair made uint8, so the types differ
            nodes.append(helper.make_node("DequantizeLinear", ["s_q", "s_s", "s_z"], ["s_f2"]))
            nodes.append(helper.make_node("Add", ["s_f", "s_f2"], ["y"]))
        else:
            nodes.append(helper.make_node("Identity", ["s_f"], ["y"]))
    elif case == "gemm-bias":
        nodes += _q("x", "x", 0.05, 3, np.uint8, inits)
        nodes.append(helper.make_node("Reshape", ["x_f", "shape"], ["x2"]))
        inits.append(numpy_helper.from_array(np.array([8, 16], np.int64), "shape"))
        nodes += _q("x2", "x2", 0.05, 3, np.uint8, inits)
        nodes += _weight("w", w.T.copy(), rng.random(12) * 0.01 + 1e-3, inits, axis=0)
        inits += [numpy_helper.from_array(rng.integers(-500, 500, 12).astype(np.int32), "b"),
                  numpy_helper.from_array(np.array(0.0005, F32), "bs"), numpy_helper.from_array(np.array(0, np.int32), "bz")]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["b_f"]))
        nodes.append(helper.make_node("Gemm", ["x2_f", "w_wf", "b_f"], ["g"], transB=1))
        nodes += _q("g", "g", 0.2, 7, np.uint8, inits)
        nodes.append(helper.make_node("Identity", ["g_f"], ["y"]))
    elif case == "where-dummy":  # Where(cond, DQ(x), -3.4e38) -> Q: a dummy DQ for the constant
        nodes += _q("x", "x", 0.05, 3, np.uint8, inits)
        inits += [numpy_helper.from_array(np.array(-3.4e38, F32), "lowest")]
        nodes.append(helper.make_node("Greater", ["x", "zero"], ["c"]))
        inits.append(numpy_helper.from_array(np.array(0.0, F32), "zero"))
        nodes.append(helper.make_node("Where", ["c", "x_f", "lowest"], ["wh"]))
        nodes += _q("wh", "wh", 0.05, 3, np.uint8, inits)
        nodes.append(helper.make_node("Identity", ["wh_f"], ["y"]))
    # the last value is the graph's output itself (onnxruntime drops an Identity before it)
    (last,) = [n for n in nodes if n.op_type == "Identity"] or [None]
    if last is not None:
        nodes.remove(last)
        for n in nodes:
            n.output[:] = ["y" if o == last.input[0] else o for o in n.output]
            n.input[:] = ["y" if i == last.input[0] else i for i in n.input]
    out_shape = [8, 12] if case == "gemm-bias" else [1, 8, 12] if "matmul" in case else [1, 8, 16]
    g = helper.make_graph(nodes, case, [helper.make_tensor_value_info("x", TP.FLOAT, [1, 8, 16])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


# What onnxruntime makes of each unit (checked below), as the reason the rule exists.
UNITS = {
    "matmul-u8": "QLinearMatMul",
    "matmul-s8": "QLinearMatMul",  # its int8 Q -> DQ pairs become uint8 ones first
    "matmul-s8-shared": "MatMul",  # the activation's Q feeds two DQs: it stays int8, refused on x86
    "matmul-no-q": "com.microsoft.MatMulIntegerToFloat",
    "float-a-matmul": "com.microsoft.MatMulNBits",
    "add-same": "com.microsoft.QLinearAdd",
    "add-int32": "Add",
    "softmax-same": "com.microsoft.QLinearSoftmax",
    "softmax-types-differ": "Softmax",
    "gemm-bias": "com.microsoft.QGemm",
    "where-dummy": "com.microsoft.QLinearWhere",
}


@pytest.mark.parametrize("case", list(UNITS))
def test_porter_runs_what_onnxruntime_runs_on_one_unit(case, tmp_path):
    model = unit_model(case)
    path = tmp_path / f"{case}.onnx"
    onnx.save(model, path)
    theirs = onnxruntime_signature(optimised(model, tmp_path))
    assert porter_signature(path) == theirs
    assert UNITS[case] in {t for t, _ in theirs}


def test_where_dummy_dq_gives_the_constant_its_rounding(tmp_path):
    """WhereDummyDq quantises -3.4e38 (uint8) as 0 with zero point 127 and scale -3.4e38 / (0 - 127)
    (here QLinearWhere takes it as a quantised operand): the value it stands for is
    (0 - 127) * that scale in float32, whatever that rounds to."""
    path = tmp_path / "where.onnx"
    onnx.save(unit_model("where-dummy"), path)
    q = ort_runs(load_graph(path)).graph
    where = next(op for op in q.ops if op.type == "com.microsoft.QLinearWhere")
    value = QDQ.dequantize_linear(*(q.tensor(t).data for t in where.inputs[4:7]))
    assert value == F32(F32(0 - 127) * F32(F32(-3.4e38) / F32(0 - 127)))


def test_a_clip_between_a_unit_and_its_q_is_refused(tmp_path):
    model = unit_model("add-same")
    nodes = list(model.graph.node)
    add = next(i for i, n in enumerate(nodes) if n.op_type == "Add")
    nodes[add].output[0] = "pre"
    nodes.insert(add + 1, helper.make_node("Relu", ["pre"], ["a"]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    with pytest.raises(PorterError, match="Relu and a QuantizeLinear"):
        ort_runs(load_graph(path))


# ---- the kernels against onnxruntime ----------------------------------------------------------------

def run_one(node, inputs: dict, inits: list, outputs: list, domain_ms=False):
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in inputs.items()]
    g = helper.make_graph([node], "one", ins, [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, inputs)


def scalar(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype), name)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_quantize_and_dequantize_linear(dtype):
    rng = np.random.default_rng(1)
    lo, hi = QDQ.LIMITS[dtype]
    for _ in range(20):
        scale, zp = F32(10.0 ** rng.uniform(-4, 1)), int(rng.integers(lo, hi + 1))
        x = np.concatenate([(np.arange(-300, 300) + 0.5) * scale, rng.standard_normal(5000) * 200 * scale,
                            [0.0, -0.0, np.inf, -np.inf, 3.4e38]]).astype(F32)
        inits = [scalar("s", scale, F32), scalar("z", zp, dtype)]
        (q,) = run_one(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), {"x": x}, inits, ["q"])
        assert np.array_equal(q, QDQ.quantize_linear(x, scale, zp, dtype))
        every = np.arange(lo, hi + 1).astype(dtype)
        (f,) = run_one(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["f"]), {"q": every}, inits, ["f"])
        assert np.array_equal(f.view(np.uint32), QDQ.dequantize_linear(every, scale, zp).view(np.uint32))


def test_qlinear_add_every_pair():
    rng = np.random.default_rng(2)
    every = np.arange(256)
    a, b = (v.ravel().astype(np.uint8) for v in np.meshgrid(every, every, indexing="ij"))
    for _ in range(6):
        quants = [(F32(10.0 ** rng.uniform(-4, 0)), int(rng.integers(0, 256))) for _ in range(3)]
        inits = [scalar(f"{n}s", s, F32) for n, (s, _) in zip("abc", quants)] + \
                [scalar(f"{n}z", z, np.uint8) for n, (_, z) in zip("abc", quants)]
        node = helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain="com.microsoft")
        (c,) = run_one(node, {"a": a, "b": b}, inits, ["c"])
        assert np.array_equal(c, QDQ.qlinear_add(a, quants[0], b, quants[1], quants[2], "uint8"))
        # b one value per row of a: the kernel's scalar path
        (c,) = run_one(node, {"a": a.reshape(256, 256), "b": every[:, None].astype(np.uint8)}, inits, ["c"])
        assert np.array_equal(c, QDQ.qlinear_add(a.reshape(256, 256), quants[0], every[:, None], quants[1], quants[2], "uint8"))


def test_qlinear_softmax():
    """onnxruntime 1.32's scalar uint8 kernel: float32 sum in order, each quotient in double
    (rows of equal values make its ties), every zero point's saturation."""
    rng = np.random.default_rng(3)
    for width in (1, 2, 7, 32, 64, 256, 384):
        for _ in range(4):
            x_scale = F32(10.0 ** rng.uniform(-3, 0))
            y_scale = F32(1 / (rng.choice([253, 254, 255, 256, 1000]) + 0.5))
            y_zp = int(rng.integers(0, 256))
            x = rng.integers(0, 256, (300, width)).astype(np.uint8)
            x[:20] = x[:20, :1]
            inits = [scalar("xs", x_scale, F32), scalar("xz", 0, np.uint8), scalar("ys", y_scale, F32), scalar("yz", y_zp, np.uint8)]
            node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                                    axis=-1, opset=13)
            (y,) = run_one(node, {"x": x}, inits, ["y"])
            assert np.array_equal(y, QDQ.qlinear_softmax(x, QDQ.softmax_table(x_scale, width, log_op), y_scale, y_zp))


@pytest.mark.parametrize("b_kind", ["int8 weights", "uint8 activation", "int8 activation"])
def test_qlinear_matmul(b_kind):
    """This CPU's integer dot: porter.reference.ort.cpu's host target (AVX2's saturating pairs
    where the CPU has no VNNI)."""
    rng = np.random.default_rng(4)
    dot = host_target().integer_dot
    for trial in range(10):
        m, k, n = int(rng.integers(1, 40)), int(rng.integers(1, 100)), int(rng.integers(1, 30))
        a = rng.integers(0, 256, (2, m, k)).astype(np.uint8)
        b_dtype = np.uint8 if b_kind == "uint8 activation" else np.int8
        b = rng.integers(-128 if b_dtype == np.int8 else 0, 128 if b_dtype == np.int8 else 256, (k, n) if b_kind == "int8 weights"
                         else (2, k, n)).astype(b_dtype)
        per_column = b_kind == "int8 weights" and trial % 2 == 0
        b_scale = (rng.random(n) * 0.01 + 1e-3).astype(F32) if per_column else F32(0.004)
        b_zp = np.zeros(n, np.int8) if per_column else np.array(int(rng.integers(-20, 20)) if b_dtype == np.int8 else 128, b_dtype)
        quants = [(F32(0.03), int(rng.integers(0, 256))), (F32(0.7), int(rng.integers(0, 256)))]
        inits = [scalar("as", quants[0][0], F32), scalar("az", quants[0][1], np.uint8), numpy_helper.from_array(np.asarray(b_scale, F32), "bs"),
                 numpy_helper.from_array(np.asarray(b_zp, b_dtype), "bz"), scalar("ys", quants[1][0], F32), scalar("yz", quants[1][1], np.uint8)]
        inputs = {"a": a}
        if b_kind == "int8 weights":
            inits.append(numpy_helper.from_array(b, "b"))
        else:
            inputs["b"] = b
        node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
        (y,) = run_one(node, inputs, inits, ["y"])
        scales = QDQ.output_scales(quants[0][0], np.broadcast_to(np.asarray(b_scale, F32), (n,)), quants[1][0])
        zps = np.broadcast_to(np.asarray(b_zp, np.int64).reshape(-1), (n,))
        want = QDQ.qgemm(a, quants[0], b, zps, scales, quants[1], "uint8",
                         integer_dot=dot if b_dtype == np.int8 else quant.EXACT_DOT)
        assert np.array_equal(y, want), (trial, m, k, n)


def test_qgemm_with_bias_and_a_float_output():
    rng = np.random.default_rng(5)
    dot = host_target().integer_dot
    for trial in range(10):
        m, k, n = int(rng.integers(1, 20)), int(rng.integers(1, 90)), int(rng.integers(1, 30))
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        w = rng.integers(-128, 128, (n, k)).astype(np.int8)  # transB
        bias = rng.integers(-3000, 3000, n).astype(np.int32)
        b_scale = (rng.random(n) * 0.01 + 1e-3).astype(F32)
        a_quant = (F32(0.02), int(rng.integers(0, 256)))
        inits = [scalar("as", a_quant[0], F32), scalar("az", a_quant[1], np.uint8), numpy_helper.from_array(w, "b"),
                 numpy_helper.from_array(b_scale, "bs"), numpy_helper.from_array(np.zeros(n, np.int8), "bz"),
                 numpy_helper.from_array(bias, "c")]
        node = helper.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz", "c"], ["y"], domain="com.microsoft", transB=1)
        (y,) = run_one(node, {"a": a}, inits, ["y"])
        want = QDQ.qgemm(a, a_quant, w.T, np.zeros(n), QDQ.output_scales(a_quant[0], b_scale, None), None, "float32",
                         bias, dot)
        assert np.array_equal(y.view(np.uint32), want.view(np.uint32)), trial


def test_qlinear_mul_every_pair():
    """MLAS's SSE2 QLinearMul (uint8 and int8): every pair of values, either operand one value
    (the kernel's scalar path, which takes them swapped), and an output scale so small that the
    conversion overflows (cvtps_epi32 gives int32's minimum, which saturates low)."""
    rng = np.random.default_rng(5)
    node = helper.make_node("QLinearMul", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain="com.microsoft")
    for dtype, (lo, hi) in QDQ.LIMITS.items():
        every = np.arange(lo, hi + 1)
        a, b = (v.ravel().astype(dtype) for v in np.meshgrid(every, every, indexing="ij"))
        for trial in range(4):
            quants = [(F32(10.0 ** rng.uniform(-3, 0)), int(rng.integers(lo, hi + 1))) for _ in range(3)]
            if trial == 0:
                quants[2] = (F32(1e-6), quants[2][1])
            inits = [scalar(f"{n}s", s, F32) for n, (s, _) in zip("abc", quants)] + \
                    [scalar(f"{n}z", z, dtype) for n, (_, z) in zip("abc", quants)]
            for x, y in ((a, b), (a.reshape(every.size, -1), every[:, None].astype(dtype)), (every[:1].astype(dtype), b)):
                (c,) = run_one(node, {"a": x, "b": y}, inits, ["c"])
                assert np.array_equal(c, QDQ.qlinear_mul(x, quants[0], y, quants[1], quants[2], dtype)), (dtype, quants)


EVERY_SAMPLED_F32 = np.concatenate([np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(F32),
                                    F32([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e30, -1e30, 3.4e38])])
BASES = EVERY_SAMPLED_F32[: EVERY_SAMPLED_F32.size // 8 * 8].reshape(-1, 8)
# Every form of exponent a Pow can hold that onnxruntime multiplies for: one value (of any shape)
# equal to 2 or 3, of a float or an integer type, by a base its broadcaster walks in spans
POW_BY_PRODUCTS = {"float [] 2": np.array(2.0, F32), "float [] 3": np.array(3.0, F32), "float [1] 3": np.array([3.0], F32),
                   "float [1, 1, 1] 2": np.full((1, 1, 1), 2.0, F32), "double [] 3": np.array(3.0, np.float64),
                   "int64 [] 3": np.array(3, np.int64), "int32 [1] 2": np.array([2], np.int32)}
# and the forms it computes with std::pow (libm's powf), which porter refuses, naming them: other
# values, an exponent tensor, and a base whose last axis is 1 by an exponent of shape [] (the
# broadcaster's span is then one base value: its scalar-base path, which is std::pow)
POW_REFUSED = {"exponent 0.5": (np.array(0.5, F32), BASES.shape), "exponent 1.0": (np.array(1.0, F32), BASES.shape),
               "exponent 4.0": (np.array(4.0, F32), BASES.shape), "exponent -1.0": (np.array(-1.0, F32), BASES.shape),
               "exponent 2.5": (np.array(2.5, F32), BASES.shape),
               "an exponent tensor of shape [8]": (np.full(8, 3.0, F32), BASES.shape),
               f"a base of shape [{BASES.size}, 1] its broadcaster takes one value at a time, by exponent 2.0":
                   (np.array(2.0, F32), (BASES.size, 1))}
POW = Op(0, "Pow", [0, 1], [2], {}, 15)


def _onnxruntime_pow(x, exponent):
    (y,) = run_one(helper.make_node("Pow", ["x", "e"], ["y"]), {"x": x}, [numpy_helper.from_array(exponent, "e")], ["y"])
    return y


@pytest.mark.parametrize("form", list(POW_BY_PRODUCTS))
def test_pow_by_two_or_three_is_onnxruntimes_product(form):
    """Pow(x, 2) is x * x and Pow(x, 3) (x * x) * x in onnxruntime's kernel for every form of a
    one-value exponent (element_wise_ops.cc: `Y == 2`, `Y == 3`): porter's numpy (the FLOAT step's
    meaning) equals onnxruntime on sampled bit patterns of every exponent and the special values."""
    exponent = POW_BY_PRODUCTS[form]
    kind, attrs, used = float_op(POW, [None, exponent], shapes=[BASES.shape, exponent.shape])
    with np.errstate(all="ignore"):
        ours = ops.evaluate(kind, attrs, [BASES, exponent][: len(used)], Reference.ONNXRUNTIME_CPU)
    theirs = _onnxruntime_pow(BASES, exponent)  # the exponent's axes broadcast: a FLOAT step takes the output's shape
    assert np.array_equal(ours.view(np.uint32).ravel(), theirs.view(np.uint32).ravel()), form


@pytest.mark.parametrize("form", list(POW_REFUSED))
def test_pow_by_anything_else_is_refused_naming_the_form(form):
    """Every other form is std::pow, which porter does not reproduce; where the exponent is 2 or 3
    it is measured not to be the products (an exponent tensor of 3s, a base of one value a span)."""
    exponent, shape = POW_REFUSED[form]
    with pytest.raises(PorterError, match=f"op 0 Pow: {re.escape(form)}: onnxruntime computes it with std::pow"):
        float_op(POW, [None, exponent], shapes=[shape, exponent.shape])
    if float(np.ravel(exponent)[0]) in (2.0, 3.0):
        x = BASES.reshape(shape)
        with np.errstate(all="ignore"):
            products = ops.evaluate("pow", {}, [x, np.ravel(exponent)[:1]], Reference.ONNXRUNTIME_CPU)
        assert not np.array_equal(_onnxruntime_pow(x, exponent).view(np.uint32).ravel(), products.view(np.uint32).ravel())


def test_a_qdq_pow_porter_does_not_reproduce_is_refused_in_one_line(tmp_path):
    """albert-tok.qdq8pc.onnx's tanh GELU with its Pow's exponent made 0.5: compile names it."""
    model = onnx.load(ZOO / "albert-tok.qdq8pc.onnx")
    pow_node = next(n for n in model.graph.node if n.op_type == "Pow")
    exponent = next(i for i in model.graph.initializer if i.name == pow_node.input[1])
    exponent.CopyFrom(numpy_helper.from_array(np.array(0.5, F32), exponent.name))
    path = tmp_path / "albert-tok.pow-half.onnx"
    onnx.save(model, path)
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out", "--ort-cpu", "avx2"),
                          "Pow", "exponent 0.5", "std::pow")


def _zoo_edit(tmp_path, name, edit) -> Path:
    """bert-tok.qdq8pc.onnx with `edit(nodes, made)` applied to its node list."""
    model = onnx.load(ZOO / "bert-tok.qdq8pc.onnx")
    nodes = list(model.graph.node)
    edit(nodes, {o: n for n in nodes for o in n.output})
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    path = tmp_path / f"bert-tok.{name}.onnx"
    onnx.save(model, path)
    return path


def test_a_unit_porter_has_no_kernel_for_is_refused_naming_the_op(tmp_path):
    """The attention's softmax unit made a Sigmoid: onnxruntime fuses it into QLinearSigmoid,
    which porter has no kernel for; compile says so in one line."""
    def edit(nodes, made):
        for n in nodes:
            if n.op_type == "Softmax":
                n.op_type = "Sigmoid"
                del n.attribute[:]
    path = _zoo_edit(tmp_path, "sigmoid", edit)
    assert "com.microsoft.QLinearSigmoid" in {t for t, _ in onnxruntime_signature(optimised(path, tmp_path))}
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out", "--ort-cpu", "avx2"),
                          "onnxruntime QDQ", "QLinearSigmoid")


def test_a_matmul_read_by_an_add_is_refused_naming_the_fusion(tmp_path):
    """A weight MatMul without its Q -> DQ: onnxruntime's level-1 MatMulAddFusion makes it and
    the bias Add a Gemm before its QDQ transformers, which porter does not model."""
    def edit(nodes, made):
        matmul = next(n for n in nodes if n.op_type == "MatMul" and made[n.input[1]].op_type == "DequantizeLinear")
        q = next(n for n in nodes if n.op_type == "QuantizeLinear" and n.input[0] == matmul.output[0])
        dqs = [n for n in nodes if n.op_type == "DequantizeLinear" and n.input[0] == q.output[0]]
        for n in nodes:
            n.input[:] = [matmul.output[0] if x in {d.output[0] for d in dqs} else x for x in n.input]
        for n in [q, *dqs]:
            nodes.remove(n)
    path = _zoo_edit(tmp_path, "no-q", edit)
    assert "Gemm" in {t for t, _ in onnxruntime_signature(optimised(path, tmp_path))}
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out", "--ort-cpu", "avx2"),
                          "onnxruntime QDQ", "MatMulAddFusion")
