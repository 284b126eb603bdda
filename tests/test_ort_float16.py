"""How onnxruntime's CPU provider runs a float16 ONNX graph, measured on onnxruntime itself, and
porter's model of it (porter/frontends/ort_float16.py, porter/recover/canonical/float16.py,
porter/reference/ort/float16.py): which ops have float16 kernels, where its Casts round a value
to float16 and where they cancel, its float16 LayerNormalization and Softmax, its Cast's
rounding; and small graphs where each of its transformers' rules decides the result, run by
onnxruntime and by porter's canonical ops, bit for bit."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fixtures import REPO, run_porter
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.frontends.ort_float16 import FLOAT16_COMPUTES, FLOAT16_KERNELS
from porter.ir.encoder import Reference, TableKind, WeightFormat
from porter.recover import probe
from porter.recover.canonical import canonicalise
from porter.reference import ops
from porter.reference.ort import cpu as ort_cpus
from porter.reference.ort import floats as OF
from porter.reference.ort.float16 import layer_norm_half, round_half, widen

HALF = TensorProto.FLOAT16
# Ops onnxruntime runs in float32 between Casts (no float16 CPU kernel on x86), and their inputs.
FLOAT32_ONLY = {"Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Pow": 2, "Sqrt": 1, "Erf": 1, "Tanh": 1, "Exp": 1,
                "Sigmoid": 1, "Neg": 1, "Abs": 1, "Softmax": 1, "ReduceMean": 1, "ReduceSum": 1, "MatMul": 2,
                "Where": 3, "Equal": 2, "Tile": 1, "Dropout": 1}
AXES = {"ReduceMean", "ReduceSum", "Unsqueeze", "Squeeze"}
HOST_FLOATS = ort_cpus.host_target().floats  # the MLAS kernels onnxruntime takes on this CPU


def _session(model: onnx.ModelProto, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, out=None):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    if out is not None:
        options.optimized_model_filepath = str(out)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _one_op_model(op: str) -> onnx.ModelProto:
    inputs = FLOAT32_ONLY.get(op) or (2 if op in ("Max", "Min", "Concat") else 1)
    shapes = [[1, 8], [8, 8]] if op == "MatMul" else [[1, 8]] * inputs
    types = [TensorProto.BOOL, HALF, HALF] if op == "Where" else [HALF] * inputs
    inits, attrs = [], {}
    if op in AXES:
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
    elif op == "Reshape":
        inits.append(numpy_helper.from_array(np.array([8], np.int64), "shape"))
    elif op in ("Expand", "Tile"):
        inits.append(numpy_helper.from_array(np.array([3, 8] if op == "Expand" else [3, 1], np.int64), "shape"))
    elif op == "Slice":
        inits += [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("starts", 0), ("ends", 4), ("axes_", 1))]
    elif op in ("Gather", "GatherElements", "GatherND"):
        inits.append(numpy_helper.from_array(np.zeros((1, 1) if op != "Gather" else (2,), np.int64), "indices"))
    elif op == "LayerNormalization":
        inits += [numpy_helper.from_array(np.ones(8, np.float16), "gamma"),
                  numpy_helper.from_array(np.zeros(8, np.float16), "beta")]
    if op == "Concat":
        attrs["axis"] = 0
    if op in ("Gather", "GatherElements", "Split"):
        attrs["axis"] = 1
    if op == "Split":
        attrs["num_outputs"] = 2
    outputs = ["y", "y2"] if op == "Split" else ["y"]
    out_type = TensorProto.BOOL if op in ("Equal", "IsNaN") else TensorProto.INT64 if op == "Shape" else HALF
    node = helper.make_node(op, [f"x{i}" for i in range(inputs)] + [t.name for t in inits], outputs, **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(f"x{i}", t, s) for i, (t, s) in
                                           enumerate(zip(types, shapes))],
                              [helper.make_tensor_value_info(o, out_type, None) for o in outputs], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("op", sorted(FLOAT16_KERNELS - {"Clip", "Relu", "Shape"}) + sorted(FLOAT32_ONLY))
def test_which_ops_onnxruntime_runs_in_float16(op, tmp_path):
    """An op of FLOAT16_KERNELS reads its float16 input as it is; every other op through a Cast
    to float32 (a Softmax through its function body's ops)."""
    model = _one_op_model(op)
    _session(model, out=tmp_path / "m.onnx")
    ran = onnx.load(tmp_path / "m.onnx").graph.node
    halves = {i.name for i in model.graph.input if i.type.tensor_type.elem_type == HALF}
    widened = any(n.op_type == "Cast" and n.input[0] in halves for n in ran)
    assert widened == (op not in FLOAT16_KERNELS), [n.op_type for n in ran]


def test_float32_work_between_two_float16_ops_is_not_rounded():
    """Add then Mul of float16 tensors: the Cast back to float16 after Add and the Cast to float32
    before Mul are removed as a pair (RemoveDuplicateCastTransformer), so the sum reaches the
    product unrounded; only the inputs are widened and the output rounded."""
    a, b, c = (helper.make_tensor_value_info(n, HALF, [1, 4096]) for n in "abc")
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "c"], ["y"])],
                              "g", [a, b, c], [helper.make_tensor_value_info("y", HALF, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal((1, 4096)).astype(np.float16) for _ in range(3))
    got = _session(model).run(None, {"a": x, "b": y, "c": z})[0]
    f32 = np.float32
    unrounded = ((x.astype(f32) + y.astype(f32)) * z.astype(f32)).astype(np.float16)
    rounded = ((x.astype(f32) + y.astype(f32)).astype(np.float16).astype(f32) * z.astype(f32)).astype(np.float16)
    assert np.array_equal(got.view(np.uint16), unrounded.view(np.uint16))
    assert not np.array_equal(got.view(np.uint16), rounded.view(np.uint16))


def test_float16_layer_norm_is_the_float32_kernel_between_widening_and_rounding():
    """onnxruntime's float16 LayerNormalization kernel (the one op of FLOAT16_COMPUTES) gives, bit
    for bit, the float32 LayerNormalization (MLAS's) of the widened input, rounded to float16."""
    assert FLOAT16_COMPUTES == {"LayerNormalization"}
    width, rng = 64, np.random.default_rng(1)
    gamma = (1 + 0.1 * rng.standard_normal(width)).astype(np.float16)
    beta = (0.1 * rng.standard_normal(width)).astype(np.float16)
    node = helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12)
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", HALF, [256, width])],
                              [helper.make_tensor_value_info("y", HALF, None)],
                              initializer=[numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")])
    x = (2 * rng.standard_normal((256, width)) + 0.5).astype(np.float16)
    got = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).run(None, {"x": x})[0]
    want = layer_norm_half(widen(x), widen(gamma), widen(beta), 1e-12)
    assert np.array_equal(got.astype(np.float32).view(np.uint32), want.view(np.uint32))


def test_float16_softmax_is_its_function_body_with_this_cpus_exp():
    """A float16 Softmax (no float16 kernel) runs as ONNX's function body in float32, with the Exp
    kernel MLAS takes on this CPU (porter.reference.ops.softmax_function), then rounded; padded keys
    at -10000, as a converted BERT's mask makes them, give exact zeros."""
    rng = np.random.default_rng(2)
    x = (3 * rng.standard_normal((64, 64))).astype(np.float16)
    x[:, 40:] -= np.float16(10000)
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "s",
                              [helper.make_tensor_value_info("x", HALF, [64, 64])],
                              [helper.make_tensor_value_info("y", HALF, None)])
    got = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).run(None, {"x": x})[0]
    want = round_half(ops.softmax_function(widen(x), HOST_FLOATS))
    assert np.array_equal(got.astype(np.float32).view(np.uint32), want.view(np.uint32))
    body = ops.softmax_function(widen(x), HOST_FLOATS)
    assert not np.any(body[:, 40:]) and not np.array_equal(body, OF.softmax(widen(x), HOST_FLOATS))


def test_exp_is_mlass_exp_kernel_of_this_cpu():
    """onnxruntime's Exp on float32 (MlasComputeExpF32KernelFma3 on AVX2, ...Avx512F on AVX-512F;
    porter.reference.ort.floats.exp) on 1 M inputs over the whole range, NaNs aside."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-110, 90, 1 << 19).astype(np.float32),
                        (rng.standard_normal(1 << 18) * 5).astype(np.float32),
                        rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.float32([-np.inf, np.inf, -0.0, 0.0, -103.97208, -88.3763, 88.7762, 88.8])])
    graph = helper.make_graph([helper.make_node("Exp", ["x"], ["y"])], "e",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    got = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).run(None, {"x": x})[0]
    want = OF.exp(x, HOST_FLOATS)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


# ---- the rounding of onnxruntime's Casts --------------------------------------------------------------

def _cast_sessions():
    def cast(src, dst):
        graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=dst)], "c",
                                  [helper.make_tensor_value_info("x", src, [None])],
                                  [helper.make_tensor_value_info("y", dst, None)])
        return _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    return cast(TensorProto.FLOAT, HALF), cast(HALF, TensorProto.FLOAT)


def _onnxruntime_round_trip(x: np.ndarray, sessions) -> np.ndarray:
    narrow, wide = sessions
    return wide.run(None, {"x": narrow.run(None, {"x": x})[0]})[0]


def round_half_classes() -> np.ndarray:
    """Every case the rounding branches on: each float16 value and the midpoint to the next one
    (ties, both parities), each with its float32 neighbours; float16 subnormals and the normal
    threshold; overflow around 65504 / 65520; infinities; NaNs of every payload shape; both signs."""
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves) & (halves.view(np.uint16) < 0x8000)]
    with np.errstate(over="ignore"):
        above = np.nextafter(finite, np.float16(np.inf))
    midpoints = ((finite.astype(np.float64) + above.astype(np.float64)) / 2)[np.isfinite(above)]
    points = np.concatenate([finite.astype(np.float32), midpoints.astype(np.float32),  # midpoints are exact
                             np.float32([65519, 65519.996, 65520, 65520.004, 65536, 1e30, 2 ** -25, 1e-30])])
    bits = points.view(np.uint32).astype(np.int64)
    bits = np.concatenate([bits + d for d in (-1, 0, 1)])
    bits = bits[(bits >= 0) & (bits < 0x7F800000)]
    nans = [0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FA00000, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF, 0x7FBFE000]
    bits = np.concatenate([bits, [0x7F800000], nans]).astype(np.uint32)
    # eight ones last: onnxruntime's Cast takes a scalar path for a tensor's last size % 8 values,
    # which drops a NaN's payload (porter follows its vector path)
    return np.concatenate([bits, bits | np.uint32(0x80000000), np.ones(8, np.uint32) * 0x3F800000]).view(np.float32)


def test_round_half_is_onnxruntimes_two_casts_on_every_class():
    x = round_half_classes()
    got = _onnxruntime_round_trip(x, _cast_sessions())
    assert np.array_equal(got.view(np.uint32), round_half(x).view(np.uint32))


@pytest.mark.slow
def test_round_half_is_onnxruntimes_two_casts_on_every_float32():
    """All 2^32 bit patterns, NaN payloads included (a few minutes)."""
    sessions, chunk = _cast_sessions(), 1 << 24
    for start in range(0, 1 << 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        got = _onnxruntime_round_trip(x, sessions)
        assert np.array_equal(got.view(np.uint32), round_half(x).view(np.uint32)), hex(start)


def test_a_mutated_round_half_fails_against_onnxruntime():
    """The check can fail: ties rounded away from zero instead of to even."""
    x = round_half_classes()
    with np.errstate(over="ignore", invalid="ignore"):
        mutant = np.where(np.isfinite(x), np.float32(np.float16(x.astype(np.float64) + np.sign(x) * 2.0 ** -40)), x)
    got = _onnxruntime_round_trip(x, _cast_sessions())
    assert not np.array_equal(got.view(np.uint32), widen(mutant.astype(np.float16)).view(np.uint32))


# ---- the placement, rule by rule: onnxruntime against porter's canonical ops -------------------------------

def _graph(nodes, inputs, inits=(), outputs=("y",), out_type=HALF, opset=18):
    values = [helper.make_tensor_value_info(name, t, shape) for name, t, shape in inputs]
    graph = helper.make_graph(nodes, "g", values, [helper.make_tensor_value_info(o, out_type, None) for o in outputs],
                              initializer=[numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _half(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float16)


def _case_isolated_reshape(rng):
    """A Reshape between two float32 ops runs in float32 (ForceSingleNodeCPUFloat16ToFloat32)."""
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Mul", ["r", "d"], ["y"])]
    return _graph(nodes, [("x", HALF, [4, 64])], [("c", _half(rng, 64)), ("shape", np.int64([2, 128])),
                                                   ("d", _half(rng, 128))])


def _case_reshape_then_transpose(rng):
    """Two float16 data-movement ops in a row run in float16: the sum is rounded where it enters them."""
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]), helper.make_node("Mul", ["t", "d"], ["y"])]
    return _graph(nodes, [("x", HALF, [4, 64])], [("c", _half(rng, 64)), ("shape", np.int64([8, 32])),
                                                   ("d", _half(rng, 8))])


def _case_layer_norms(rng):
    """A LayerNormalization among float32 ops runs in float32 and takes its residual Add into
    SkipLayerNormalization; one whose output a Reshape reads runs in float16."""
    w = (1 + 0.1 * rng.standard_normal(64)).astype(np.float16)
    nodes = [helper.make_node("Add", ["x", "x2"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Mul", ["n", "d"], ["m"]), helper.make_node("Add", ["m", "x"], ["s2"]),
             helper.make_node("LayerNormalization", ["s2", "g", "b"], ["n2"], axis=-1, epsilon=1e-5),
             helper.make_node("Reshape", ["n2", "shape"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Mul", ["t", "e"], ["y"])]
    return _graph(nodes, [("x", HALF, [1, 16, 64]), ("x2", HALF, [1, 16, 64])],
                  [("g", w), ("b", _half(rng, 64, scale=0.1)), ("d", _half(rng, 64)), ("shape", np.int64([1, 16, 64])),
                   ("e", _half(rng, 16))])


def _case_softmax_and_matmul_add(rng):
    """MatMul + Add fused into Gemm (their reshapes running in float16 at level 1), a Softmax as
    its function body, a product's rounding before a Transpose."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "bias"], ["q"]),
             helper.make_node("Reshape", ["q", "heads"], ["h"]), helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["ht", "ht_t"], ["scores"]), helper.make_node("Softmax", ["scores"], ["p2"], axis=-1),
             helper.make_node("MatMul", ["p2", "ht"], ["ctx"]), helper.make_node("Transpose", ["ctx"], ["y"], perm=[0, 2, 1, 3])]
    nodes.insert(4, helper.make_node("Transpose", ["ht"], ["ht_t"], perm=[0, 1, 3, 2]))
    return _graph(nodes, [("x", HALF, [1, 16, 32])], [("w", _half(rng, 32, 32, scale=0.2)), ("bias", _half(rng, 32, scale=0.1)),
                                                      ("heads", np.int64([1, 16, 2, 16]))])


def _case_float_input_cast(rng):
    """convert_float_to_float16(keep_io_types=True) on a float input: its Cast to float16 is dropped
    for the float32 ops that read it (RemoveDuplicateCastTransformer takes the Cast it inserted
    after it as loss-free), and kept for a float16 one."""
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=HALF), helper.make_node("Add", ["h", "c"], ["a"]),
             helper.make_node("Reshape", ["h", "shape"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Reshape", ["t", "shape2"], ["u"]), helper.make_node("Mul", ["a", "u"], ["m"]),
             helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    return _graph(nodes, [("x", TensorProto.FLOAT, [4, 64])], [("c", _half(rng, 64)), ("shape", np.int64([8, 32])),
                                                                ("shape2", np.int64([4, 64]))], out_type=TensorProto.FLOAT)


PLACEMENT_CASES = {f.__name__.removeprefix("_case_"): f for f in (
    _case_isolated_reshape, _case_reshape_then_transpose, _case_layer_norms, _case_softmax_and_matmul_add,
    _case_float_input_cast)}


@pytest.mark.parametrize("case", list(PLACEMENT_CASES))
def test_porters_canonical_ops_compute_what_onnxruntime_computes(case, tmp_path):
    rng = np.random.default_rng(sum(map(ord, case)))
    model = PLACEMENT_CASES[case](rng)
    path = tmp_path / f"{case}.onnx"
    onnx.save(model, path)
    feeds = {i.name: (3 * rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]))
             .astype(np.float16 if i.type.tensor_type.elem_type == HALF else np.float32) for i in model.graph.input}
    want = _session(model).run(None, feeds)[0].astype(np.float32)
    c = canonicalise(load_graph(path), ort_cpus.host_target())
    g = c.graph
    values = probe.run(g, list(range(len(g.ops))), {g.inputs[n]: widen(v) if v.dtype == np.float16 else v
                                                     for n, v in feeds.items()}, Reference.ONNXRUNTIME_CPU)
    got = np.asarray(values[g.outputs["y"]], np.float32).reshape(want.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), np.abs(got - want).max()


def test_a_float16_graph_keeps_its_weights_as_halves():
    """The Linear weights and the embedding tables of a float16 file are stored as its halves."""
    from porter.recover.encoder import recover_encoder

    program = recover_encoder(load_graph(REPO / "graphs" / "zoo" / "bert-tok.f16.onnx"), ort_cpu="avx2")
    assert {lin.weights for lin in program.linears()} == {WeightFormat.FLOAT16}
    embed = program.steps[0]
    assert embed.word.kind == TableKind.FLOAT16
    assert program.weights[f"{embed.word.name}.table"].dtype == np.float16


@pytest.mark.parametrize("spelling", ["gelu20", "layernorm"])
def test_a_float16_spelling_porter_does_not_model_is_refused_naming_the_op(spelling, tmp_path):
    """onnxruntime's level-1 fusions would make a float16 kernel of these float16 ops (Gelu's function
    body at opset 20; LayerNormFusionL1): refused in one line naming the op."""
    if spelling == "gelu20":
        model = _graph([helper.make_node("Gelu", ["x"], ["y"])], [("x", HALF, [4, 64])], opset=20)
        says = "op 0 Gelu"
    else:
        nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"]), helper.make_node("Sub", ["x", "m"], ["y"])]
        model = _graph(nodes, [("x", HALF, [4, 64])], [("axes", np.int64([-1]))])
        says = "op 0 ReduceMean"
    path = tmp_path / f"{spelling}.onnx"
    onnx.save(model, path)
    with pytest.raises(PorterError, match=f"float16 ONNX compute: not reproduced \\({says}"):
        canonicalise(load_graph(path), ort_cpus.host_target())
    result = run_porter("compile", path, "-o", tmp_path / "out")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_porter_golden_widens_a_float16_output(tmp_path):
    """torch's .half() export returns float16 logits: `porter golden` records them widened to
    float32 (the manifest says float16), and porter's program reproduces them bit for bit."""
    golden = tmp_path / "half"
    made = run_porter("golden", REPO / "graphs" / "zoo" / "bert-tok.half.onnx", "-o", golden, "--random", "2")
    assert made.returncode == 0, made.stderr
    import json

    assert json.loads((tmp_path / "half.json").read_text())["outputs"]["logits"][0] == "float16"
    ran = run_porter("run", REPO / "graphs" / "zoo" / "bert-tok.half.onnx", "--golden", golden)
    assert ran.returncode == 0 and "max |dlogit| 0," in ran.stdout.splitlines()[-1], ran.stdout + ran.stderr
