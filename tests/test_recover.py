"""Graph -> program recovery on every committed fixture (TFLite and ONNX), and what happens to
graphs that do not fit: a spelling no block knows still compiles op by op; an op porter cannot
run is refused in one line naming the file's op."""

import copy
import json

import numpy as np
import pytest

from fixtures import ALL_FIXTURES, assert_one_line_error, fixture_id, recovered, require, run_porter, spec
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.ir.encoder import (ActivationQuant, Attention, ElementwiseStep, Embed, Gelu, GeluStep,
                               LayerNorm, LinearStep, MaskMode, NormForm, Reference, TableKind, WeightFormat)
from porter.recover.canonical import canonicalise
from porter.recover.encoder import recover_encoder

EXTRA_ONNX = [spec.TINY.path("f32-ts.onnx"), spec.TINY.path("dq8pt.onnx")]
FIXTURES = ALL_FIXTURES + EXTRA_ONNX


def _network(path):
    return next(net for net in spec.NETWORKS if path.name.startswith(net.name + "."))


def _flavour(path):
    return path.name.split(".", 1)[1]


def steps(program, kind):
    return [s for s in program.steps if isinstance(s, kind)]


@pytest.fixture
def programs():
    return recovered


@pytest.mark.parametrize("path", FIXTURES, ids=fixture_id)
def test_architecture_comes_from_the_graph(path, programs):
    p = programs(path)
    net = _network(path)
    attentions = p.attentions()
    assert (len(attentions), p.vocab, p.seq, p.width) == (net.layers, net.vocab, net.seq, net.labels)
    assert {(a.heads, a.heads * a.head_dim) for a in attentions} == {(net.heads, net.hidden)}
    assert {s.linear.out_features for s in steps(p, LinearStep)} == {net.hidden, net.ffn, net.labels}
    assert p.output_tokens and p.mask == MaskMode.ADD and p.mask_input is not None
    # the scores are scaled by 1 / sqrt(head_dim), wherever the graph puts the factor
    for a in attentions:
        factor = np.prod([f for f in (a.q_scale, a.k_scale, a.score_scale) if f is not None])
        factor /= a.score_divisor or 1.0
        assert factor == pytest.approx(1 / np.sqrt(a.head_dim), rel=1e-6)
        assert a.drop_value == float(np.finfo(np.float32).min)
    assert p.reference == (Reference.LITERT_BUILTIN if path.suffix == ".tflite" else Reference.ONNXRUNTIME_CPU)
    assert all(ln.eps == pytest.approx(1e-12) for ln in steps(p, LayerNorm))
    assert len(steps(p, LayerNorm)) == 2 * net.layers + 1


@pytest.mark.parametrize("path", FIXTURES, ids=fixture_id)
def test_quantisation_scheme_is_recorded(path, programs):
    p = programs(path)
    flavour = _flavour(path)
    linears = [s.linear for s in steps(p, LinearStep)]
    body = [lin for lin in linears if lin.out_features != p.width]
    word = steps(p, Embed)[0].word.kind
    if "f32" in flavour:
        assert {(lin.weights, lin.activation_quant) for lin in linears} == {(WeightFormat.FLOAT32, ActivationQuant.FLOAT)}
        assert word == TableKind.FLOAT32
    elif path.suffix == ".tflite":
        # litert-torch quantises activations symmetrically; TensorFlow asymmetrically
        expected = ActivationQuant.HYBRID_ASYMMETRIC if flavour == "tf-dq8.tflite" else ActivationQuant.HYBRID_SYMMETRIC
        assert {(lin.weights, lin.activation_quant) for lin in body} == {(WeightFormat.INT8_PER_CHANNEL, expected)}
        assert word == (TableKind.INT8_TENSOR if flavour == "tf-dq8.tflite" else TableKind.INT8_ROWS)
    else:
        per = WeightFormat.INT8_PER_CHANNEL if flavour == "dq8pc.onnx" else WeightFormat.INT8_PER_TENSOR
        assert {(lin.weights, lin.activation_quant) for lin in linears} == {(per, ActivationQuant.ORT_DYNAMIC_UINT8)}
        assert word == TableKind.UINT8_TENSOR  # quantize_dynamic stores the table as uint8
        assert p.weights["embed.word.zero_point"].shape == (1,)
    for s in steps(p, LinearStep):  # weights are kept [out, in] whatever the file stores
        assert p.weights[f"{s.linear.name}.weight"].shape == (s.linear.out_features, s.linear.in_features)


@pytest.mark.parametrize("path", FIXTURES, ids=fixture_id)
def test_layer_norms_are_the_kernels_the_reference_runs(path, programs):
    """litert-torch and TensorFlow feed the pre-affine rows to Q/K/V and the FFN (gamma and beta
    folded into their weights) and the post-affine ones to the residual; onnxruntime fuses each
    residual add into SkipLayerNormalization."""
    lns = steps(programs(path), LayerNorm)
    flavour = _flavour(path)
    if path.suffix == ".onnx":
        assert {(ln.form, len(ln.outputs)) for ln in lns} == {(NormForm.ONNX_SKIP, 1)}
        return
    form = NormForm.CENTRED if flavour == "tf-dq8.tflite" else NormForm.SHIFT
    assert {(ln.form, len(ln.outputs), ln.has_gamma) for ln in lns[:-1]} == {(form, 2, True)}
    assert (lns[-1].form, len(lns[-1].outputs), lns[-1].has_gamma) == (form, 1, False)  # folded into the head


@pytest.mark.parametrize("path", FIXTURES, ids=fixture_id)
def test_gelu_is_the_reference_kernel_or_op_by_op(path, programs):
    """LiteRT's GELU op and onnxruntime's fused Gelu kernel are blocks; the dynamo export's
    x * 0.5 * (1 + erf(x / sqrt 2)), which onnxruntime does not fuse, runs op by op."""
    p = programs(path)
    gelus = {s.kind for s in steps(p, GeluStep)}
    generic = {s.op.value for s in steps(p, ElementwiseStep)}
    if path.suffix == ".tflite":
        assert (gelus, generic) == ({Gelu.LITERT}, {"add"})
    elif "f32-ts" in path.name:  # TorchScript's association order is the one onnxruntime fuses
        assert (gelus, generic) == ({Gelu.ORT_ERF_MUL}, {"add"})
    else:
        assert (gelus, generic) == (set(), {"add", "div", "erf", "mul"})


def test_every_op_of_the_file_is_explained():
    """Each op of the file is in a step or explained by canonicalisation (folded, an identity,
    unused); the LayerNorms' ops are in exactly one step each."""
    g = load_graph(require(spec.TINY.path("litert-dq8.tflite")))
    p = recover_encoder(g)
    in_steps = {i for s in p.steps for i in s.source_ops}
    c = canonicalise(g)
    views = {i for op in c.graph.ops if op.type == "view" for i in c.origin[op.index]}
    assert set(range(len(g.ops))) == in_steps | set(c.explained) | views
    owned = [i for ln in steps(p, LayerNorm) for i in ln.source_ops]
    assert len(owned) == len(set(owned))


# ---- graphs that no fixture spells: compiled op by op, or refused in one line -----------------

def _mutated(path=None):
    return copy.deepcopy(load_graph(require(path or spec.TINY.path("litert-dq8.tflite"))))


def _ops(g, op_type):
    return [op for op in g.ops if op.type == op_type]


def _recover(g):
    for cached in ("producers", "consumers"):
        g.__dict__.pop(cached, None)
    return recover_encoder(g)


def test_a_layer_norm_spelled_another_way_runs_op_by_op():
    """SQRT + DIV where the exporter wrote RSQRT + MUL is no LayerNorm block: its ops become
    elementwise and reduction steps in LiteRT's arithmetic, proven against the graph like any
    block, and the rest of the model keeps its blocks."""
    g = _mutated()
    _ops(g, "RSQRT")[1].type = "SQRT"
    p = _recover(g)
    assert len(steps(p, LayerNorm)) == 2 * spec.TINY.layers
    assert "sqrt" in {s.op.value for s in steps(p, ElementwiseStep)}


def test_an_unknown_op_is_refused_naming_it():
    g = _mutated()
    gelu = _ops(g, "GELU")[0]
    gelu.type = "HARD_SWISH"
    with pytest.raises(PorterError, match=rf"^op {gelu.index} HARD_SWISH \(canonical tflite.HARD_SWISH\) is not part "
                                          "of any block porter knows and cannot run on its own"):
        _recover(g)


def test_a_float_layer_among_int8_layers_keeps_its_format():
    g = _mutated()
    fc = _ops(g, "FULLY_CONNECTED")[4]  # layer 0's FFN input projection
    w = g.tensor(fc.inputs[1])
    w.data = w.data.astype(np.float32) * w.quant.scale[:, None]
    w.dtype, w.quant = "float32", None
    p = _recover(g)
    formats = [(s.source_ops, s.linear.weights) for s in steps(p, LinearStep)]
    assert (fc.index,) in {tuple(ops) for ops, f in formats if f == WeightFormat.FLOAT32}
    assert sum(f == WeightFormat.FLOAT32 for _, f in formats) == 1


def test_scales_along_the_wrong_axis_are_refused():
    g = _mutated()
    fc = _ops(g, "FULLY_CONNECTED")[4]
    w = g.tensor(fc.inputs[1])  # [512, 128]: the scales belong to axis 0
    w.quant = type(w.quant)(np.ones(128, np.float32) * 1e-3, np.zeros(128, np.int64), 1)
    with pytest.raises(PorterError, match=rf"op {fc.index} FULLY_CONNECTED.*tensor {w.index} .* quantised along "
                                          r"axis 1 with 128 scales; expected one scale per output channel along axis 0"):
        _recover(g)


def test_non_zero_weight_zero_points_are_refused():
    g = _mutated()
    w = g.tensor(_ops(g, "FULLY_CONNECTED")[0].inputs[1])
    w.quant = type(w.quant)(w.quant.scale, np.ones_like(w.quant.zero_point), w.quant.axis)
    with pytest.raises(PorterError, match="non-zero zero points"):
        _recover(g)


def test_an_unused_op_is_explained_as_unused():
    g = _mutated()
    stray = copy.deepcopy(_ops(g, "RSQRT")[0])
    out = copy.deepcopy(g.tensor(stray.outputs[0]))
    out.index, out.name = len(g.tensors), "stray"
    g.tensors.append(out)
    stray.index, stray.outputs = len(g.ops), [out.index]
    g.ops.append(stray)
    p = _recover(g)
    assert stray.index not in {i for s in p.steps for i in s.source_ops}


def test_a_mask_that_does_not_drop_padding_is_refused():
    g = _mutated(spec.TINY.path("f32.onnx"))
    where = _ops(g, "Where")[0]
    g.tensor(where.inputs[2]).data = np.array(-1.0, np.float32)  # padded keys barely penalised
    with pytest.raises(PorterError, match="padded keys get -1; a mask must drop them with a large negative number"):
        _recover(g)


def test_a_causal_mask_in_an_encoder_is_refused():
    g = _mutated(spec.TINY.path("f32.onnx"))
    keep = _ops(g, "And")[0]
    const = next(t for t in keep.inputs if g.tensor(t).is_const)
    g.tensor(const).data = np.tril(np.ones((64, 64), bool)).reshape(1, 1, 64, 64)
    with pytest.raises(PorterError, match="a causal mask is not supported in an encoder"):
        _recover(g)


def test_a_gelu_with_another_constant_runs_op_by_op():
    """erf(x / 1.5) is not GELU, but every op of it runs exactly: it compiles, with no GELU."""
    g = _mutated(spec.TINY.path("f32-ts.onnx"))
    erf = _ops(g, "Erf")[0]
    g.tensor(g.producer(erf.inputs[0]).inputs[1]).data = np.array(1.5, np.float32)
    p = _recover(g)
    assert len(steps(p, GeluStep)) == spec.TINY.layers - 1
    assert "erf" in {s.op.value for s in steps(p, ElementwiseStep)}


def test_an_unknown_onnx_op_is_one_line_on_the_command_line(tmp_path):
    import onnx

    model = onnx.load(str(require(spec.TINY.path("dq8pc.onnx"))))
    erf = next(n for n in model.graph.node if n.op_type == "Erf")
    erf.op_type = "Sinh"
    out = tmp_path / "sinh.onnx"
    onnx.save(model, str(out))
    assert_one_line_error(run_porter("inspect", "--ir", out), "Sinh (canonical onnx.Sinh) is not part of any block")


def test_porter_inspect_ir_prints_the_program():
    path = require(spec.SMALL.path("litert-dq8.tflite"))
    result = run_porter("inspect", "--ir", path)
    assert result.returncode == 0, result.stderr
    assert "encoder program: " in result.stdout and "4 attention blocks, vocab 8192, window 128" in result.stdout
    assert result.stdout.count("attention 8 heads x 32") == 4
    summary = json.loads(run_porter("inspect", "--ir", "--json", path).stdout)
    assert (summary["layers"], summary["heads"], summary["labels"]) == (4, 8, 17)
    assert [s["step"] for s in summary["steps"]].count("Attention") == 4
