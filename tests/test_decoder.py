"""GPT-style decoders (examples/tinystories): recovery from the real torch.onnx export, the
numpy step executor and the generated crate against onnxruntime, float32 and Q8_0 weights.
The zoo's decoders (GPT-2, a plain GPT, a Llama) are tests/test_decoder_zoo.py.

The committed goldens were made on an AVX2 CPU (golden/) and on an AVX-512 VNNI one
(golden/avx512vnni/): what is compared with one is compiled for its target; what is compared
with live onnxruntime, for this machine's CPU (porter.reference.ort.cpu)."""

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from fixtures import REPO, assert_one_line_error, host_ort_cpu, run_porter, tinystories_golden
from porter.runtime import decoder_proto
from porter.ir.decoder import DecoderIR
from porter.recover.decoder import recover_decoder
from porter.reference.q8_0 import Q8_0_BLOCK, dequantize_q8_0, quantize_q8_0, with_q8_0_weights
from porter.codegen.decoder import ROW_TILE, render_decoder_crate, tile_q8_0_rows
from porter.reference.execute_decoder import greedy
from porter.check.decoder_reference import model_with_weights, ort_greedy
from porter.errors import PorterError
from porter.frontends import load_graph

EXAMPLE = REPO / "examples" / "tinystories"
MODEL = EXAMPLE / "model" / "tinystories.onnx"
GOLDEN = np.load(tinystories_golden("avx2"))
GOLDEN_AVX512VNNI = np.load(tinystories_golden("avx512vnni"))
PROMPTS = [GOLDEN[f"p{i}_prompt_ids"] for i in range(6)]
LONG_STEPS = 64


@pytest.fixture(scope="module")
def ir():
    """The IR of the committed golden's CPU."""
    return recover_decoder(load_graph(MODEL), str(MODEL), "avx2")


# module name -> (--quant, --ort-cpu): the float module meets the committed (AVX2) golden, the
# q8_0 one live onnxruntime on this machine, the q8_0_int8 one the executor of `ir`
MODULES = {"float32": ("float32", "avx2"), "q8_0": ("q8_0", "auto"), "q8_0_int8": ("q8_0_int8", "avx2"),
           "float32-avx512vnni": ("float32", "avx512vnni")}


@pytest.fixture(scope="module")
def modules(toolchain, tmp_path_factory):
    """module name -> built generation module."""
    built = {}
    for name, (quant, target) in MODULES.items():
        out = tmp_path_factory.mktemp("decoder") / name
        result = run_porter("compile", MODEL, "-o", out, "--quant", quant, "--ort-cpu", target)
        assert result.returncode == 0, result.stderr
        assert "decoder, 4 layers" in result.stdout
        assert f"onnxruntime on {host_ort_cpu() if target == 'auto' else target} CPUs" in result.stdout
        result = run_porter("build", out)
        assert result.returncode == 0, result.stderr
        built[name] = next(out.glob("*.wasm"))
    return built


def test_architecture_comes_from_the_graph(ir):
    assert (len(ir.layers), ir.hidden, ir.heads, ir.head_dim, ir.ffn, ir.vocab, ir.n_ctx) == (4, 192, 4, 48, 768, 2048, 128)
    assert ir.kv_heads == ir.heads and ir.positions == "learned" and ir.tied
    assert ir.layers[0].attention.scale == pytest.approx(48 ** -0.5)
    assert [ly.attention.past_key for ly in ir.layers] == [f"past_key_{i}" for i in range(4)]
    assert ir.summary()["parameters"] == 2_197_632  # every parameter of the checkpoint


def test_each_choice_of_arithmetic_is_onnxruntimes(ir):
    """MatMul then Add (3-D inputs: no Gemm fusion), the GELU as its own ops (Mul(0.5, erf + 1)
    is not a spelling GeluFusion takes), the mask replacing scores with -inf, and the last
    residual sum fused into SkipLayerNormalization with the last Linear's bias."""
    ly = ir.layers[0]
    assert {lin.bias for lin in ly.attention.linears() + ly.mlp.linears()} == {"add"}
    act = ly.mlp.activation
    assert (act.kind, act.kernel, [i.op for i in act.program]) == ("gelu_erf", "ops", ["div", "erf", "add", "mul", "mul"])
    assert (ly.attention.mask, ly.attention.fill) == ("replace", float("-inf"))
    assert (ir.final_norm.form, ir.final_norm.skip_bias) == ("ort_skip", True)


def test_executor_reproduces_onnxruntime_bit_for_bit(ir):
    for i, prompt in enumerate(PROMPTS):
        ids, prompt_logits, step_logits = greedy(ir, prompt, 32)
        assert ids == GOLDEN[f"p{i}_generated_ids"].tolist()
        assert np.array_equal(prompt_logits, GOLDEN[f"p{i}_prompt_logits"])
        assert np.array_equal(step_logits, GOLDEN[f"p{i}_step_logits"])


def test_float_module_reproduces_onnxruntime_bit_for_bit(modules):
    results, load_ms = decoder_proto.generate(modules["float32"], PROMPTS, 32, with_logits=True)
    assert load_ms < 1.0
    for i, r in enumerate(results):
        assert r.generated == GOLDEN[f"p{i}_generated_ids"].tolist(), f"prompt {i}"
        assert np.array_equal(r.prompt_logits, GOLDEN[f"p{i}_prompt_logits"])
        assert np.array_equal(r.step_logits, GOLDEN[f"p{i}_step_logits"])


def test_the_modules_kernels_are_numpys(ir, modules):
    """Its GELU, the graph's own ops, runs as the vectorised gelu_erf; its LayerNorm kernel."""
    from test_decoder_zoo import check_kernels

    check_kernels(modules["float32"], ir)


def test_avx512_float_module_and_executor_reproduce_the_avx512vnni_golden(modules):
    """Compiled for AVX-512 VNNI CPUs, the module and the executor give that CPU's onnxruntime
    bits; its step logits differ from AVX2's once a softmax row holds more than eight keys."""
    ir512 = recover_decoder(load_graph(MODEL), str(MODEL), "avx512vnni")
    results, _ = decoder_proto.generate(modules["float32-avx512vnni"], PROMPTS, 32, with_logits=True)
    for i, r in enumerate(results):
        want = [GOLDEN_AVX512VNNI[f"p{i}_{key}"] for key in ("generated_ids", "prompt_logits", "step_logits")]
        assert r.generated == want[0].tolist(), f"prompt {i}"
        assert np.array_equal(r.prompt_logits, want[1]) and np.array_equal(r.step_logits, want[2])
        assert not np.array_equal(want[2], GOLDEN[f"p{i}_step_logits"])
        if i < 2:  # the executor emulates onnxruntime's fma one element at a time: slow
            ids, prompt_logits, step_logits = greedy(ir512, PROMPTS[i], 32)
            assert ids == want[0].tolist()
            assert np.array_equal(prompt_logits, want[1]) and np.array_equal(step_logits, want[2])


def test_q8_0_module_generates_what_onnxruntime_does_with_the_same_weights(ir, modules):
    """Live onnxruntime on this machine's CPU, the module compiled for it (--ort-cpu auto)."""
    reference = ort_greedy(model_with_weights(ir, with_q8_0_weights(ir).weights), PROMPTS, LONG_STEPS)
    results, _ = decoder_proto.generate(modules["q8_0"], PROMPTS, LONG_STEPS, with_logits=True)
    for i, (r, (ids, prompt_logits, step_logits)) in enumerate(zip(results, reference)):
        assert r.generated == ids, f"prompt {i}"
        assert np.array_equal(r.prompt_logits, prompt_logits) and np.array_equal(r.step_logits, step_logits)


def test_q8_0_int8_module_is_bit_identical_to_the_executor(ir, modules):
    """Integer block dot products: the crate's logits are the executor's bit for bit; against
    onnxruntime on the Q8_0 weights only the agreement is reported (inputs are quantised too)."""
    reference = ort_greedy(model_with_weights(ir, with_q8_0_weights(ir).weights), PROMPTS, LONG_STEPS)
    results, _ = decoder_proto.generate(modules["q8_0_int8"], PROMPTS, LONG_STEPS, with_logits=True)
    agreeing = []
    for i, r in enumerate(results):
        ids, prompt_logits, step_logits = greedy(ir, PROMPTS[i], LONG_STEPS, int8_dot=True)
        assert r.generated == ids, f"prompt {i}"
        assert np.array_equal(r.prompt_logits, prompt_logits) and np.array_equal(r.step_logits, step_logits)
        ort_ids = reference[i][0]
        agreeing.append(next((k for k, (a, b) in enumerate(zip(ids, ort_ids)) if a != b), len(ids)))
    print(f"q8_0_int8: tokens equal to onnxruntime (q8_0 weights) before the first difference: {agreeing}")


def test_q8_0_int8_tiles_hold_each_block_of_their_rows_side_by_side():
    rng = np.random.default_rng(5)
    rows, k = 6, 96  # two tiles of four rows, the second half padding
    q = rng.integers(-127, 128, (rows, k)).astype(np.int8)
    scale = rng.random((rows, k // Q8_0_BLOCK)).astype(np.float32)
    q_tiles, scale_tiles = tile_q8_0_rows(q, scale)
    assert q_tiles.shape == (2, 3, ROW_TILE, Q8_0_BLOCK) and scale_tiles.shape == (2, 3, ROW_TILE)
    for row in range(2 * ROW_TILE):
        for b in range(3):
            tile, j = divmod(row, ROW_TILE)
            values = q[row, b * 32:(b + 1) * 32] if row < rows else np.zeros(32, np.int8)
            assert np.array_equal(q_tiles[tile, b, j], values)
            assert scale_tiles[tile, b, j] == (scale[row, b] if row < rows else 0)


def test_q8_0_int8_module_with_a_vocabulary_that_leaves_a_part_tile(ir, tmp_path):
    """The token table / LM head of 2045 rows ends in a tile of one row and three zero rows:
    the crate still equals the executor bit for bit (tinystories' own shapes are all whole tiles)."""
    vocab = 2045
    assert vocab % ROW_TILE
    weights = {**ir.weights, "wte": ir.weights["wte"][:vocab]}
    head = dataclasses.replace(ir.head, out_features=vocab)
    cut = DecoderIR(**{**{f: getattr(ir, f) for f in ir.__dataclass_fields__}, "vocab": vocab, "head": head,
                       "weights": weights})
    out = render_decoder_crate(cut, tmp_path / "part-tile", "q8_0_int8")
    result = run_porter("build", out)
    assert result.returncode == 0, result.stderr
    prompts = [np.asarray(p) % vocab for p in PROMPTS[:3]]
    results, _ = decoder_proto.generate(next(out.glob("*.wasm")), prompts, 24, with_logits=True)
    for prompt, r in zip(prompts, results):
        ids, prompt_logits, step_logits = greedy(cut, prompt, 24, int8_dot=True)
        assert r.generated == ids
        assert r.prompt_logits.shape == (len(prompt), vocab)
        assert np.array_equal(r.prompt_logits, prompt_logits) and np.array_equal(r.step_logits, step_logits)


def test_q8_0_model_bin_is_an_eighth_bigger_than_int8(modules, ir):
    model_bin = modules["q8_0"].parent / "model.bin"
    quantised = ir.weights["wte"].size + sum(ir.weights[ir.weight_of(lin)].size for lin in ir.linears())
    rest = ir.summary()["parameters"] - quantised
    # one int8 per weight and one float32 per 32 of them; the rest float32; 16-byte alignment
    expected = quantised * (1 + 4 / Q8_0_BLOCK) + 4 * rest
    assert expected <= model_bin.stat().st_size <= expected + 16 * 64
    layout = json.loads((modules["q8_0"].parent / "layout.json").read_text())
    names = [e["name"] for e in layout["arrays"]]
    assert names[:3] == ["wte.q", "wte.scale", "wpe"] and "layer0.attn.qkv.weight.q" in names


def test_q8_0_rounds_half_away_from_zero_and_keeps_zero_blocks():
    w = np.zeros((2, 64), np.float32)
    w[0, :32] = 127.0
    w[0, 0] = 63.5  # exactly half way: 63.5 / 1.0 rounds away from zero to 64
    w[0, 1] = -63.5
    w[1, 32:] = np.linspace(-1, 1, 32, dtype=np.float32)
    q, scale = quantize_q8_0(w)
    assert scale.tolist() == [[1.0, 0.0], [0.0, np.float32(1 / 127)]] and q[0, 0] == 64 and q[0, 1] == -64
    assert (q[0, 32:] == 0).all() and (q[1, :32] == 0).all()
    assert q[1, 32] == -127 and q[1, 63] == 127
    assert np.abs(dequantize_q8_0(q, scale) - w).max() <= scale.max() / 2
    with pytest.raises(PorterError, match="multiple of 32"):
        quantize_q8_0(np.zeros((1, 33), np.float32))


def test_a_mask_that_does_not_hide_later_tokens_is_refused(tmp_path):
    model = onnx.load(MODEL)
    where = next(n for n in model.graph.node if n.op_type == "Where")
    fill = next(i for i in model.graph.initializer if i.name == where.input[1])
    fill.CopyFrom(numpy_helper.from_array(np.array(0.0, np.float32), fill.name))
    path = tmp_path / "no-mask.onnx"
    onnx.save(model, path)
    with pytest.raises(PorterError, match="hidden keys get 0; a causal mask hides them"):
        recover_decoder(load_graph(path), str(path))
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out"), "hidden keys get 0")


def test_bad_generation_requests_exit_2_with_a_message(modules, wasm_runtime):
    module = modules["float32"]
    too_long = decoder_proto.encode_request([np.zeros(100, np.int32)], 40, False)
    result = wasm_runtime.run_command(module, [], too_long)
    assert result.exit_code == 2 and b"exceed the context of 128" in result.stderr
    bad_id = decoder_proto.encode_request([np.array([5, 2048])], 2, False)
    result = wasm_runtime.run_command(module, [], bad_id)
    assert result.exit_code == 2 and b"outside the vocabulary" in result.stderr


def argmax_cases() -> list[np.ndarray]:
    """Logits where a first-index-of-the-maximum argmax can go wrong: ties inside one SIMD lane
    and across lanes, the maximum in the scalar tail, -0 beside 0, infinities and NaNs
    (numpy's argmax returns the first NaN), every length from 1 to 13."""
    rng = np.random.default_rng(3)
    cases = [rng.standard_normal(n).astype(np.float32) for n in range(1, 14)]
    cases += [np.float32([1, 5, 5, 2, 5, 0, 0, 0]), np.float32([0, 0, 0, 7, 7, 0, 0, 0, 7]),
              np.float32([2, 2, 2, 2, 2, 2, 2, 2, 2, 2]), np.float32([-0.0, 0.0, -0.0, 0.0, 0.0]),
              np.float32([1, 2, 3, 4, 5, 6, 7, 8, 9]), np.float32([-np.inf] * 9),
              np.float32([0, 1, np.inf, 3, np.inf, 0, 0, 0]), np.float32([0, 1, 2, 3, 4, 5, 6, np.nan, 9, np.nan]),
              np.float32([9, 1, 2, 3, 4, 5, 6, 7, 8, np.nan]), np.float32([np.nan, 1, 2])]
    vocab = rng.standard_normal(2048).astype(np.float32)
    vocab[[100, 1001, 1502]] = 40.0  # the maximum three times, in different lanes
    cases.append(vocab)
    return cases


def test_next_token_is_numpys_argmax(modules, wasm_runtime):
    for logits in argmax_cases():
        result = wasm_runtime.run_command(modules["q8_0_int8"], [], b"ARGM" + logits.astype("<f4").tobytes())
        assert result.exit_code == 0, result.stderr
        assert int.from_bytes(result.stdout, "little") == int(np.argmax(logits)), logits


def test_the_command_line_offers_every_decoder_quantisation():
    from porter import cli
    from porter.codegen import decoder as decoder_codegen

    assert cli.QUANT_MODES == decoder_codegen.QUANT_MODES


def test_encoders_refuse_a_decoder_quantisation(tmp_path):
    tflite = REPO / "graphs" / "bert-l2-h128-a4-s64-tok3.litert-dq8.tflite"
    assert_one_line_error(run_porter("compile", tflite, "-o", tmp_path / "x", "--quant", "q8_0"), "--quant q8_0")


def test_bench_reports_tokens_per_second_beside_onnxruntime(modules, tmp_path):
    result = run_porter("bench", modules["q8_0"].parent, "--rounds", "1", "--iterations", "1",
                        "--json", tmp_path / "b.json", "--png", tmp_path / "b.png")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "b.json").read_text())
    assert list(report["cases"]) == ["prompt (8 tokens)", "decode (64 tokens, per token)"]
    decode = report["cases"]["decode (64 tokens, per token)"]
    assert set(decode["runners"]) == {"porter wasm", "onnxruntime"}
    assert decode["tokens_per_second"]["porter wasm"] == pytest.approx(1000 / decode["runners"]["porter wasm"]["median"])
    assert "ort-web" in report["skipped"] and "tokens per second" in result.stdout


def test_rebuilding_one_crate_after_another_of_the_same_model_keeps_its_own_module(modules):
    """Both crates come from tinystories.onnx and build in the shared cargo target directory:
    their package names differ by directory, so a rebuild cannot hand out the other's binary."""
    float_module = modules["float32"]
    size = float_module.stat().st_size
    result = run_porter("build", float_module.parent)
    assert result.returncode == 0, result.stderr
    assert float_module.stat().st_size == size != modules["q8_0"].stat().st_size
    assert float_module.name != modules["q8_0"].name
