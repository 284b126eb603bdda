"""Quantisation schemes (issue 29): weights computed from constants are constants, folded in the
reference's arithmetic, and a scheme porter does not reproduce is refused first, by its name.

The zoo (tests/test_zoo.py) runs the weight-only int8 and float16 members through recovery and
the executor bit for bit against LiteRT, and each refused scheme's fixture through its refusal;
here: the folding arithmetic itself (exhaustive over its one-value inputs, with a mutation that
must fail), the packed int4 reader, the scheme report of `porter inspect`, and the refusals as
the command line gives them.
"""

import json
import struct
import sys

import numpy as np
import pytest

from fixtures import REPO, run_porter

from porter.errors import PorterError
from porter.frontends import load_graph
from porter.recover.canonical import canonicalise
from porter.frontends.schemes import FLOAT16_ONNX_LAYER, assert_scheme_reproduced, layer_schemes
from porter.reference.ops import evaluate
from porter.ir.encoder import Reference

sys.path.insert(0, str(REPO / "graphs" / "zoo"))
import members  # noqa: E402

ZOO = REPO / "graphs" / "zoo"
F32 = np.float32


def _litert_dequantize(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """LiteRT's reference Dequantize: static_cast<float>(double(scale) * (q - zero_point))."""
    return (np.float64(scale) * (q.astype(np.int64) - zero_point).astype(np.float64)).astype(F32)


def _dequantize(q, scale, zero_point, axis):
    attrs = {"scale": scale, "zero_point": zero_point, "axis": axis}
    return evaluate("dequantize", attrs, [q], Reference.LITERT_BUILTIN)


def test_dequantize_is_the_reference_product_for_every_int8_value_and_many_scales():
    """Every int8 value (and uint8 / int16 zero points), against the double-precision formula of
    LiteRT's kernel: the float32 product porter folds rounds identically."""
    rng = np.random.default_rng(29)
    scales = np.concatenate([rng.uniform(1e-4, 1.0, 2000), 2.0 ** rng.integers(-40, 20, 500),
                             np.nextafter(rng.uniform(1e-3, 1e-1, 500), 1)]).astype(F32)
    q = np.arange(-128, 128, dtype=np.int8)
    for zero_point in (0, -128, 17, 127):
        got = _dequantize(np.broadcast_to(q, (scales.size, 256)), scales,
                          np.full(scales.size, zero_point), axis=0)
        want = _litert_dequantize(q[None], scales[:, None], zero_point)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_per_channel_dequantize_scales_along_its_axis_not_the_last():
    """A square weight is where a scale broadcast along the wrong axis would go unnoticed."""
    rng = np.random.default_rng(3)
    q = rng.integers(-127, 128, (64, 64)).astype(np.int8)
    scale = rng.uniform(1e-3, 1e-1, 64).astype(F32)
    zero = np.zeros(64, np.int64)
    for axis in (0, 1):
        along = [1, 1]
        along[axis] = 64
        want = _litert_dequantize(q, scale.reshape(along), 0)
        assert np.array_equal(_dequantize(q, scale, zero, axis), want)
    # the mutation: scales taken along the other axis must not pass as the same
    assert not np.array_equal(_dequantize(q, scale, zero, 1), _litert_dequantize(q, scale[:, None], 0))


def test_float16_to_float32_is_exact_for_every_half():
    """LiteRT's float16 DEQUANTIZE (half -> float) widens exactly: every one of the 65536 halves,
    against IEEE binary16 decoded independently (struct's 'e' format)."""
    halves = np.arange(1 << 16, dtype=np.uint16)
    got = evaluate("cast", {"to": "float32"}, [halves.view(np.float16)], Reference.LITERT_BUILTIN)
    want = np.array([struct.unpack("<e", int(h).to_bytes(2, "little"))[0] for h in halves], np.float64)
    finite = np.isfinite(want)
    assert np.array_equal(got[finite].view(np.uint32), want[finite].astype(F32).view(np.uint32))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)].astype(F32))


def test_packed_int4_constants_read_low_nibble_first():
    """ai-edge-quantizer's int4 weights, unpacked, are the float weights they were quantised from
    to within half a step (reading the high nibble first would not be)."""
    quantised = load_graph(ZOO / "bert-tok.aeq-dq4.tflite")
    source = load_graph(ZOO / "bert-tok.litert-f32.tflite")
    fcs = [op for op in quantised.ops if op.type == "FULLY_CONNECTED"]
    float_fcs = [op for op in source.ops if op.type == "FULLY_CONNECTED"]
    assert len(fcs) == len(float_fcs) > 0
    for op, float_op in zip(fcs, float_fcs):
        w, f = quantised.tensor(op.inputs[1]), source.tensor(float_op.inputs[1])
        assert w.dtype == "int4" and w.shape == f.shape and -8 <= w.data.min() and w.data.max() <= 7
        step = w.quant.scale.reshape(-1, 1)
        assert np.all(np.abs(w.data * step - f.data) <= step / 2 * (1 + 1e-5))


@pytest.mark.parametrize("flavour, weights, activations", [
    ("aeq-wo8.tflite", "int8 per-channel (axis 0)", "float"),
    ("aeq-f16.tflite", "float16", "float"),
    ("tf-f16.tflite", "float16", "float"),
    ("litert-dq8.tflite", "int8 per-channel (axis 0)", "dynamic int8"),
    ("dq8pc.onnx", "int8 per-channel (axis 1)", "dynamic uint8"),
    ("aeq-si8.tflite", "int8 per-channel (axis 0)", "static int8"),
    ("aeq-dq4.tflite", "int4 per-channel (axis 0)", "dynamic int8"),
    ("aeq-wo4.tflite", "int4 per-channel (axis 0)", "float"),
    ("qdq8pc.onnx", "int8 per-channel (axis 1)", "static int8 (onnxruntime QDQ)"),
    # onnxruntime runs a float16 graph's layers in float32: the Q, K, V, FFN-output and second
    # layer's projections on float32 values (the casts between float32 ops removed), the others on
    # float16 ones (a float16 LayerNormalization's output, a head merge run in float16)
    ("f16.onnx", "float16", (f"{FLOAT16_ONNX_LAYER}, on float32 values", f"{FLOAT16_ONNX_LAYER}, on float16 values")),
    ("dynamo-f32.onnx", "float32", "float"),
])
def test_inspect_reports_the_scheme_of_every_linear_layer(flavour, weights, activations):
    result = run_porter("inspect", "--json", ZOO / f"bert-tok.{flavour}")
    assert result.returncode == 0, result.stderr
    import json

    schemes = json.loads(result.stdout)["schemes"]
    linear = [s for s in schemes["layers"] if s["activations"] != "lookup"]
    assert len(linear) == 13  # 2 layers x 6 Linears + the classifier
    expected = set(activations) if isinstance(activations, tuple) else {activations}
    assert {(s["weights"], s["activations"]) for s in linear} == {(weights, a) for a in expected}
    refused = members.REFUSED_SCHEMES.get(flavour)
    assert (schemes["refused"] or "").startswith(refused[0] if refused else "")
    assert (schemes["refused"] is None) == (refused is None)


@pytest.mark.parametrize("flavour", sorted(members.REFUSED_SCHEMES))
def test_compile_refuses_a_scheme_by_its_name_in_one_line(flavour, tmp_path):
    result = run_porter("compile", ZOO / f"bert-tok.{flavour}", "-o", tmp_path / "out")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    scheme = members.REFUSED_SCHEMES[flavour][0]
    assert len(lines) == 1 and lines[0].startswith(f"porter: error: {scheme}"), lines
    assert "not reproduced" in lines[0]


def test_weight_only_files_fold_every_dequantize_into_constants():
    """No DEQUANTIZE of a weight is left for run time: every Linear's weight is a float32
    constant equal to the file's int8 values times their per-channel scales."""
    g = load_graph(ZOO / "bert-tok.aeq-wo8.tflite")
    c = canonicalise(g)
    assert "dequantize" not in {op.type for op in c.graph.ops}
    linears = [op for op in c.graph.ops if op.type == "linear"]
    assert len(linears) == 13
    stored = {layer.op: g.tensor(layer.weight_tensor) for layer in layer_schemes(g)}
    for op in linears:
        (file_op,) = c.origin[op.index][:1]
        w = stored[file_op]
        assert op.options["weight"].dtype == F32
        assert np.array_equal(op.options["weight"], _litert_dequantize(w.data, w.quant.scale[:, None], 0))


def test_a_dequantize_without_parameters_names_its_real_cause():
    """Issue 33 4(a): float16 -> float32 is a conversion, not a missing quantisation; an integer
    tensor without scales is refused for exactly that, naming its type."""
    g = load_graph(ZOO / "bert-tok.aeq-f16.tflite")
    canonicalise(g)  # every float16 DEQUANTIZE of a constant folds
    g = load_graph(ZOO / "bert-tok.aeq-wo8.tflite")
    op = next(op for op in g.ops if op.type == "DEQUANTIZE")
    g.tensor(op.inputs[0]).quant = None
    assert_scheme_reproduced(g)
    with pytest.raises(PorterError, match=r"DEQUANTIZE.*int8 tensor .* has no quantisation parameters"):
        canonicalise(g)


@pytest.mark.parametrize("flavour, weights, dtype", [("aeq-wo8.tflite", "int8_per_channel", "int8"),
                                                      ("aeq-wo4.tflite", "int4_per_channel", "int8"),
                                                      ("aeq-f16.tflite", "float16", "float16"),
                                                      ("tf-f16.tflite", "float16", "float16")])
def test_weight_only_layers_store_the_files_own_narrow_weights(flavour, weights, dtype):
    """model.bin holds the int8 / int4 / float16 values the file computes its weights from
    (widened in the kernel bit for bit: the zoo's goldens), not float32 copies (int4 values are
    int8 arrays in the IR, packed two a byte by model.bin's writer); an int8 or int4 word table is
    an int8 lookup, a float16 one a float16 lookup."""
    from porter.recover.encoder import recover_encoder

    program = recover_encoder(load_graph(ZOO / f"bert-tok.{flavour}"))
    linears = program.linears()
    assert len(linears) == 13
    assert {(lin.weights.value, lin.activation_quant.value) for lin in linears} == {(weights, "float")}
    assert {str(program.weights[f"{lin.name}.weight"].dtype) for lin in linears} == {dtype}
    word_table = program.weights["embed.word.table"]
    assert str(word_table.dtype) == dtype


def test_a_float16_word_table_is_stored_as_halves_and_stays_exact_through_wasm(tmp_path):
    """The float16 table (a DEQUANTIZE of float16 constants) is in model.bin as its halves, two
    bytes a value: MiniLM-L6's table alone is 47 MB as float32, which with the rest passed Spin's
    50 MiB; the lookup widens each row exactly, as LiteRT's DEQUANTIZE does."""
    out = tmp_path / "f16"
    assert run_porter("compile", ZOO / "bert-tok.aeq-f16.tflite", "-o", out).returncode == 0
    table = next(e for e in json.loads((out / "layout.json").read_text())["arrays"] if e["name"] == "embed.word.table")
    assert table["dtype"] == "float16" and table["size"] >= 2 * int(np.prod(table["shape"]))
    built = run_porter("build", out)
    assert built.returncode == 0, built.stderr[-3000:]
    golden = REPO / "golden" / "zoo" / "bert-tok.aeq-f16.tflite.builtin.npz"
    verified = run_porter("verify", out, "--golden", golden, "--max-abs", "0")
    assert "porter verify: PASS" in verified.stdout, verified.stdout[-3000:] + verified.stderr[-3000:]


@pytest.mark.parametrize("flavour", ["aeq-dq4.tflite", "aeq-wo4.tflite"])
def test_int4_weights_are_stored_two_a_byte_and_stay_exact_through_wasm(flavour, tmp_path):
    """model.bin holds every int4 Linear weight packed (half the int8 bytes, to a 32-value block),
    the Rust kernel unpacks it per forward pass (hybrid int4: into the integer GEMM; weight-only
    int4: then widened as LiteRT's DEQUANTIZE computes it, into the float product), and the wasm
    build still matches LiteRT bit for bit."""
    out = tmp_path / "int4"
    assert run_porter("compile", ZOO / f"bert-tok.{flavour}", "-o", out).returncode == 0
    layout = json.loads((out / "layout.json").read_text())
    int4 = [e for e in layout["arrays"] if e["dtype"] == "int4"]
    assert len(int4) == 13 and all(e["name"].endswith(".weight") for e in int4)
    assert all(e["size"] == -(-int(np.prod(e["shape"])) // 32) * 16 for e in int4)
    built = run_porter("build", out)
    assert built.returncode == 0, built.stderr[-3000:]
    golden = REPO / "golden" / "zoo" / f"bert-tok.{flavour}.builtin.npz"
    verified = run_porter("verify", out, "--golden", golden, "--max-abs", "0")
    assert "porter verify: PASS" in verified.stdout, verified.stdout[-3000:] + verified.stderr[-3000:]
