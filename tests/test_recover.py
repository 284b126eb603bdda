"""Graph -> IR recovery on every real TFLite fixture, and the clear failures of graphs that do not fit."""

import copy

import numpy as np
import pytest

from fixtures import TFLITE_FIXTURES, fixture_id, require, spec
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.ir.encoder import MASK_INPUT
from porter.recover.encoder import recover_encoder


def _network(path):
    return next(net for net in spec.NETWORKS if path.name.startswith(net.name + "."))


@pytest.fixture(scope="module")
def graphs():
    cache = {}

    def get(path):
        if path not in cache:
            cache[path] = load_graph(require(path))
        return cache[path]
    return get


@pytest.mark.parametrize("path", TFLITE_FIXTURES, ids=fixture_id)
def test_architecture_comes_from_the_graph(path, graphs):
    ir = recover_encoder(graphs(path))
    net = _network(path)
    assert (len(ir.layers), ir.hidden, ir.heads, ir.ffn, ir.vocab, ir.seq, ir.labels) == (
        net.layers, net.hidden, net.heads, net.ffn, net.vocab, net.seq, net.labels)
    assert ir.mask == MASK_INPUT and ir.mask_input is not None
    assert all(ly.attn.head_dim * ly.attn.heads == ir.hidden for ly in ir.layers)
    assert all(ly.attn.scale == pytest.approx(1 / np.sqrt(ir.hidden // ir.heads)) for ly in ir.layers)
    assert {ly.gelu for ly in ir.layers} == {"erf"}


@pytest.mark.parametrize("path", TFLITE_FIXTURES, ids=fixture_id)
def test_quantisation_scheme_is_recorded(path, graphs):
    ir = recover_encoder(graphs(path))
    body = [lin for lin in ir.linears() if lin is not ir.head]
    flavour = path.name.split(".", 1)[1]
    if flavour == "f32.tflite":
        assert {lin.weight_dtype for lin in body} == {"float32"}
        assert ir.embeddings.table_kind == "float32"
        return
    assert {(lin.weight_dtype, lin.per_channel) for lin in body} == {("int8", True)}
    # litert-torch quantises activations symmetrically; TensorFlow asymmetrically.
    assert {lin.asymmetric_inputs for lin in body} == {flavour == "tf-dq8.tflite"}
    assert ir.embeddings.table_kind == ("int8_tensor" if flavour == "tf-dq8.tflite" else "int8_rows")


@pytest.mark.parametrize("path", TFLITE_FIXTURES, ids=fixture_id)
def test_layer_norm_affine_is_folded_into_the_next_layers(path, graphs):
    """Both exporters feed the pre-affine tensor to Q/K/V and the FFN (gamma and beta live in
    their weights) and the post-affine one to the residual."""
    ir = recover_encoder(graphs(path))
    lns = [ir.embeddings.ln] + [ln for ly in ir.layers for ln in (ly.attn_ln, ly.ffn_ln)]
    assert all(ln.affine_folded for ln in lns[:-1])
    assert all(ln.eps == pytest.approx(1e-12) for ln in lns)


def test_every_op_is_explained_once(graphs):
    g = graphs(spec.TINY.path("litert-dq8.tflite"))
    ir = recover_encoder(g)
    owned = sorted(ln_op for ly in ir.layers for ln in (ly.attn_ln, ly.ffn_ln) for ln_op in ln.ops)
    assert len(owned) == len(set(owned))


# ---- graphs that do not fit: one clear line each ----------------------------------------------

def _mutated(graphs, path=None):
    return copy.deepcopy(graphs(path or spec.TINY.path("litert-dq8.tflite")))


def _ops(g, op_type):
    return [op for op in g.ops if op.type == op_type]


def test_missing_layer_norm(graphs):
    g = _mutated(graphs)
    _ops(g, "RSQRT")[1].type = "SQRT"  # the first attention LayerNorm no longer normalises
    with pytest.raises(PorterError, match="LayerNorm"):
        recover_encoder(g)


def test_unknown_op_inside_a_block_is_named(graphs):
    g = _mutated(graphs)
    gelu = _ops(g, "GELU")[0]
    gelu.type = "HARD_SWISH"
    with pytest.raises(PorterError, match=rf"layer 0 feed-forward: unsupported op inside the block: op {gelu.index} HARD_SWISH"):
        recover_encoder(g)


def test_float_layer_among_int8_layers(graphs):
    g = _mutated(graphs)
    fc = _ops(g, "FULLY_CONNECTED")[4]  # layer 0's FFN input projection
    w = g.tensor(fc.inputs[1])
    w.data = w.data.astype(np.float32) * w.quant.scale[:, None]
    w.dtype, w.quant = "float32", None
    with pytest.raises(PorterError, match=r"layer0\.ffn_in .* has float32 weights where the encoder's other layers have int8 per-channel"):
        recover_encoder(g)


def test_scale_along_the_wrong_axis(graphs):
    g = _mutated(graphs)
    fc = _ops(g, "FULLY_CONNECTED")[4]
    w = g.tensor(fc.inputs[1])  # [512, 128]: scales belong to axis 0
    w.quant = type(w.quant)(np.ones(128, np.float32) * 1e-3, np.zeros(128, np.int64), 1)
    with pytest.raises(PorterError, match=rf"tensor {w.index} .* quantised along axis 1 with 128 scales; expected one scale per output channel along axis 0"):
        recover_encoder(g)


def test_non_zero_weight_zero_point(graphs):
    g = _mutated(graphs)
    w = g.tensor(_ops(g, "FULLY_CONNECTED")[0].inputs[1])
    w.quant = type(w.quant)(w.quant.scale, np.ones_like(w.quant.zero_point), w.quant.axis)
    with pytest.raises(PorterError, match="non-zero zero points"):
        recover_encoder(g)


def test_an_op_outside_every_block_is_reported(graphs):
    g = _mutated(graphs)
    stray = copy.deepcopy(_ops(g, "RSQRT")[0])
    out = copy.deepcopy(g.tensor(stray.outputs[0]))
    out.index, out.name = len(g.tensors), "stray"
    g.tensors.append(out)
    stray.index, stray.outputs = len(g.ops), [out.index]
    g.ops.append(stray)
    g.__dict__.pop("producers", None)
    g.__dict__.pop("consumers", None)
    with pytest.raises(PorterError, match=rf"ops not explained by any encoder block: op {stray.index} RSQRT"):
        recover_encoder(g)


def test_porter_inspect_ir_prints_the_architecture():
    from fixtures import run_porter

    path = require(spec.SMALL.path("litert-dq8.tflite"))
    result = run_porter("inspect", "--ir", path)
    assert result.returncode == 0, result.stderr
    assert "encoder: 4 layers, hidden 256, 8 heads, FFN 1024, vocab 8192, window 128, 17 labels" in result.stdout
    assert result.stdout.count("  attention: 8 heads x 32") == 4
    as_json = run_porter("inspect", "--ir", "--json", path)
    import json
    assert json.loads(as_json.stdout)["num_layers"] == 4
