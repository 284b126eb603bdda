"""The zoo's decoders (graphs/zoo: transformers' GPT2LMHeadModel through torch.onnx dynamo, a
plain PyTorch GPT through the TorchScript exporter, a Llama-style decoder with RoPE, SwiGLU and
grouped-query attention, a GPT-NeoX, a Phi and a GPT-J through dynamo) recovered by role, against their
onnxruntime goldens: the numpy executor for every member, the wasm module for the Llama and the
GPT-NeoX here and for the others under -m slow; what each recovery decided; refusals of graphs
that do not fit."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from fixtures import REPO, assert_one_line_error, run_porter
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.recover.decoder import recover_decoder
from porter.reference.ort import floats as OF
from porter.reference.ort import cpu as ort_cpu
from porter.reference.execute_decoder import Session, activate, greedy
from porter.runtime import decoder_proto
from test_decoder_kernels import same_bits, wide_inputs

ZOO = REPO / "graphs" / "zoo"
GOLDEN = REPO / "golden" / "zoo"
# member file -> the context compile is given (None: the learned position table's rows)
MEMBERS = {"gpt2-lm.dynamo-f32.onnx": None, "plain-gpt-lm.ts-f32.onnx": None, "llama-lm.dynamo-f32.onnx": 64,
           "neox-lm.dynamo-f32.onnx": 64, "phi-lm.dynamo-f32.onnx": 64, "gptj-lm.dynamo-f32.onnx": 64,
           "opt-lm.dynamo-f32.onnx": None, "falcon-lm.dynamo-f32.onnx": 64}
WASM_DEFAULT = "llama-lm.dynamo-f32.onnx"  # the family furthest from tinystories
WASM_PARALLEL = "neox-lm.dynamo-f32.onnx"  # partial rotary, parallel residual, qkv laid out per head


def golden(name: str, ort_cpu: str = "avx2"):
    """The zoo's onnxruntime golden of a decoder made on a CPU of that target."""
    data = np.load((GOLDEN if ort_cpu == "avx2" else GOLDEN / ort_cpu) / f"{name}.ort.npz")
    count = len([k for k in data.files if k.endswith("_prompt_ids")])
    return data, [data[f"p{i}_prompt_ids"] for i in range(count)]


_RECOVERED: dict = {}
# golden/zoo/'s decoder goldens are an AVX2 CPU's (their manifests' cpu_flags; the newer ones an
# AVX-512 CPU's with AVX-512 hidden from onnxruntime: graphs/zoo/avx2_cpu)
GOLDEN_CPU = "avx2"


def recovered(name: str, ort_cpu: str = GOLDEN_CPU):
    """The IR for the goldens' CPU, or (auto) for live onnxruntime on this machine."""
    if (name, ort_cpu) not in _RECOVERED:
        _RECOVERED[name, ort_cpu] = recover_decoder(load_graph(ZOO / name), str(ZOO / name), ort_cpu,
                                                    context=MEMBERS[name])
    return _RECOVERED[name, ort_cpu]


@pytest.mark.parametrize("name", MEMBERS)
def test_the_executor_reproduces_the_golden_bit_for_bit(name):
    ir = recovered(name)
    data, prompts = golden(name)
    for i, prompt in enumerate(prompts):
        ids, prompt_logits, step_logits = greedy(ir, prompt, len(data[f"p{i}_generated_ids"]))
        assert ids == data[f"p{i}_generated_ids"].tolist(), f"prompt {i}"
        assert np.array_equal(prompt_logits, data[f"p{i}_prompt_logits"])
        assert np.array_equal(step_logits, data[f"p{i}_step_logits"])


def test_gpt2_conv1d_weights_tanh_gelu_and_a_tied_head():
    """Conv1D's [in, out] weights as Gemm (the bias as C), gelu_new spelled out as Pow/Tanh,
    which onnxruntime's FastGeluFusion turns into its FastGelu kernel, the head tied to wte."""
    ir = recovered("gpt2-lm.dynamo-f32.onnx")
    ly = ir.layers[0]
    assert (len(ir.layers), ir.hidden, ir.heads, ir.kv_heads, ir.head_dim, ir.ffn, ir.vocab, ir.n_ctx) == \
        (2, 64, 4, 4, 16, 256, 256, 64)
    assert ir.positions == "learned" and ir.tied and len(ly.attention.projections) == 1
    assert {lin.bias for lin in ly.attention.linears() + ly.mlp.linears()} == {"gemm"}
    assert (ly.mlp.activation.kind, ly.mlp.activation.kernel) == ("gelu_tanh", "ort_fast_gelu")
    assert (ly.attention.mask, ly.attention.scale) == ("add", 0.25)
    assert (ir.final_norm.kind, ir.final_norm.form, ir.final_norm.skip_bias) == ("layer_norm", "ort_skip", False)


def test_plain_gpt_fused_qkv_split_masked_fill_and_an_untied_head():
    """TorchScript's Greater/Where mask replaces scores with -inf; its GELU spelling is one
    GeluFusion takes (then BiasGelu with the fc bias); its shapes are unknown to onnxruntime, so
    the last residual sum is not fused into the final LayerNorm."""
    ir = recovered("plain-gpt-lm.ts-f32.onnx")
    ly = ir.layers[0]
    assert not ir.tied and ir.head.out_features == ir.vocab and ir.head.bias == "none"
    assert len(ly.attention.projections) == 1 and ly.attention.projections[0].bias == "add"
    assert (ly.attention.mask, ly.attention.fill) == ("replace", float("-inf"))
    assert (ly.mlp.activation.kind, ly.mlp.activation.kernel) == ("gelu_erf", "ort_gelu")
    assert ir.final_norm.form == "ort"


def test_llama_rms_norm_rotary_positions_swiglu_and_grouped_query_attention():
    ir = recovered("llama-lm.dynamo-f32.onnx")
    ly = ir.layers[0]
    a, m = ly.attention, ly.mlp
    assert (ir.heads, ir.kv_heads, ir.head_dim, ir.ffn, ir.positions) == (4, 2, 16, 128, "rotary")
    assert a.rotary.style == "half" and [p.out_features for p in a.projections] == [64, 32, 32]
    assert (a.norm.kind, a.norm.form, a.norm.has_beta) == ("rms_norm", "reciprocal", False)
    # x * sigmoid(x): onnxruntime's QuickGeluFusion makes it one QuickGelu (its optimised graph
    # has two QuickGelu nodes and no Sigmoid)
    assert m.gate is not None and (m.activation.kind, m.activation.kernel) == ("silu", "ort_quick_gelu")
    assert (a.mask, a.fill) == ("add", float(np.finfo(np.float32).min))
    assert ir.weights["rope.cos"].shape == (64, 16) and not ir.tied
    assert {lin.bias for lin in a.linears() + m.linears()} == {"none"}


def test_gpt_neox_partial_rotary_a_parallel_residual_and_qkv_laid_out_per_head():
    """Pythia's layout: query_key_value's outputs interleaved per head (q, k, v of head 0, then
    head 1, ...), rotary on the first 4 of 16 values of a head, attention and MLP both reading
    the layer's input through their own LayerNorms, summed before the residual."""
    ir = recovered("neox-lm.dynamo-f32.onnx")
    a, m = ir.layers[0].attention, ir.layers[0].mlp
    assert [ly.parallel for ly in ir.layers] == [True, True] and m.norm.name != a.norm.name
    assert (a.rotary.style, a.rotary.dims, ir.head_dim) == ("half", 4, 16)
    assert ir.weights["rope.cos"].shape == (64, 4)
    assert [p.out_features for p in a.projections] == [3 * 64]
    assert (m.activation.kind, ir.head.bias, ir.final_norm.form) == ("gelu_erf", "none", "ort_skip")


def test_phi_one_shared_norm_half_rotary_and_an_lm_head_with_a_bias():
    ir = recovered("phi-lm.dynamo-f32.onnx")
    a, m = ir.layers[0].attention, ir.layers[0].mlp
    assert ir.layers[0].parallel and m.norm.name == a.norm.name
    assert ir.array_order().count(f"{a.norm.name}.gamma") == 1
    assert (a.rotary.dims, len(a.projections), ir.head.bias) == (8, 3, "add")
    assert (m.activation.kind, m.activation.kernel) == ("gelu_tanh", "ort_fast_gelu")
    assert ir.final_norm.form == "ort_skip" and not ir.final_norm.skip_bias


def test_gptj_partial_rotary_on_interleaved_pairs():
    ir = recovered("gptj-lm.dynamo-f32.onnx")
    a, m = ir.layers[0].attention, ir.layers[0].mlp
    assert (a.rotary.style, a.rotary.dims, len(a.projections)) == ("interleaved", 8, 3)
    assert ir.layers[0].parallel and m.norm.name == a.norm.name and ir.head.bias != "none"


def test_opt_scaled_queries_a_fused_product_offset_positions_and_a_flattened_stream():
    """OPT: q_proj(x) * scaling before Q.K^T (a factor on Q, applied after the Linear's bias), no
    scale on the scores but the K transpose that onnxruntime folds into FusedMatMul (alpha 1,
    whose one-row kernel a step takes), positions from row 2 of the learned table, the stream
    flattened to [tokens, hidden] between the residuals (so its MLP Linears are Gemms)."""
    ir = recovered("opt-lm.dynamo-f32.onnx")
    a, m = ir.layers[0].attention, ir.layers[0].mlp
    assert a.q_factor == ("mul", 0.25) and a.k_factor is None and a.scale == 1.0
    assert ir.positions == "learned" and ir.n_ctx == 64 and ir.tied
    assert (m.up.bias, m.down.bias, m.activation.kind) == ("gemm", "gemm", "relu")
    table = next(t for t in load_graph(ZOO / "opt-lm.dynamo-f32.onnx").tensors  # rows 0 and 1 never read
                 if t.data is not None and t.data.shape == (66, 64))
    assert np.array_equal(ir.weights["wpe"], table.data[2:])


def test_falcon_one_broadcast_kv_head_folds_the_heads_into_one_gemm():
    """Falcon's multi-query attention: one kv head that the products broadcast over the query
    heads (no repeat), so onnxruntime runs every head's rows as one GEMM: no one-row kernel,
    even for a one-token step (the flags the executor and the crate read)."""
    ir = recovered("falcon-lm.dynamo-f32.onnx")
    a = ir.layers[0].attention
    assert (a.heads, a.kv_heads, len(a.projections), a.rotary.style) == (4, 1, 1, "half")
    assert a.keys_broadcast and a.values_broadcast and ir.layers[0].parallel


def _without_the_final_norm(graph) -> None:
    """The LM head reads the residual stream itself: the last LayerNormalization's readers read
    its input instead."""
    final = [n for n in graph.node if n.op_type == "LayerNormalization"][-1]
    for node in graph.node:
        node.input[:] = [final.input[0] if i == final.output[0] else i for i in node.input]
    graph.node.remove(final)


def test_a_decoder_without_a_final_norm_matches_onnxruntime(tmp_path):
    from porter.check.decoder_reference import ort_greedy

    path = _edited("neox-lm.dynamo-f32.onnx", tmp_path, _without_the_final_norm)
    ir = recover_decoder(load_graph(path), str(path), "auto", context=64)
    assert ir.final_norm.kind == "none" and "final_norm.gamma" not in ir.array_order()
    _, prompts = golden("neox-lm.dynamo-f32.onnx")
    for i, (ids, prompt_logits, step_logits) in enumerate(ort_greedy(path, prompts, 12)):
        ours = greedy(ir, prompts[i], 12)
        assert ours[0] == ids, f"prompt {i}"
        assert np.array_equal(ours[1], prompt_logits) and np.array_equal(ours[2], step_logits)


def test_rotary_tables_whose_rows_depend_on_the_call_are_refused():
    """phi-rot6-lm rotates 6 of 16 dims, so its Cos / Sin see 6 values a token: onnxruntime computes
    the last size % 4 of each call another way (std::cos), so a position's row in a one-token step
    is not always its row in a prompt, and no one table folded at compile time is both. Measured
    on onnxruntime's own Cos; the recovery refuses, naming the op and the packet."""
    from test_decoder_kernels import run_one

    inv_freq = (1.0 / (10000.0 ** (np.arange(0, 6, 2, dtype=np.float32) / 6))).astype(np.float32)
    freqs = np.arange(64, dtype=np.float32)[:, None] * inv_freq[None, :]
    table = np.concatenate([freqs, freqs], axis=-1)  # [64 positions, 6]
    whole = run_one("Cos", table)
    steps = np.concatenate([run_one("Cos", row[None]) for row in table])
    assert not same_bits(whole, steps)
    assert same_bits(whole, OF.cos(table)) and same_bits(steps, np.concatenate([OF.cos(r[None]) for r in table]))
    name = "phi-rot6-lm.dynamo-f32.onnx"
    with pytest.raises(PorterError, match=r"Cos\(.*takes packets of 4"):
        recover_decoder(load_graph(ZOO / name), name, "avx2", context=64)


def test_a_rotary_graph_needs_a_context(tmp_path):
    path = ZOO / "llama-lm.dynamo-f32.onnx"
    with pytest.raises(PorterError, match="give the context"):
        recover_decoder(load_graph(path), str(path))
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out"), "--context N")


def _with_position_and_mask_inputs(graph) -> None:
    """GPT-2 as exporters that take position_ids and attention_mask write it: the positions
    read from an input, and (1 - mask) * -1e9 added to the causal mask."""
    gather = next(n for n in graph.node if n.op_type == "Gather" and n.input[0] == "model.transformer.wpe.weight")
    graph.input.append(helper.make_tensor_value_info("position_ids", onnx.TensorProto.INT64, [1, "seq"]))
    gather.input[1] = "position_ids"
    graph.input.append(helper.make_tensor_value_info("attention_mask", onnx.TensorProto.INT64, [1, "past_plus_seq"]))
    graph.initializer.extend([onnx.numpy_helper.from_array(np.float32(1), "one"),
                              onnx.numpy_helper.from_array(np.float32(-1e9), "big"),
                              onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "axes")])
    for node in graph.node:
        if node.op_type == "Add" and "where" in node.input:
            node.input[list(node.input).index("where")] = "where_masked"
    at = [n.output[0] for n in graph.node].index("where") + 1
    for k, node in enumerate([helper.make_node("Cast", ["attention_mask"], ["m"], to=1),
                              helper.make_node("Sub", ["one", "m"], ["dropped"]),
                              helper.make_node("Mul", ["dropped", "big"], ["bias"]),
                              helper.make_node("Unsqueeze", ["bias", "axes"], ["bias4"]),
                              helper.make_node("Add", ["where", "bias4"], ["where_masked"])]):
        graph.node.insert(at + k, node)


def test_position_ids_and_an_attention_mask_are_inputs_porter_feeds(tmp_path):
    """The graph with those inputs still reproduces the golden (onnxruntime fed positions and
    ones gives the same logits): porter feeds them itself, and its references do too."""
    from porter.check.decoder_reference import ort_greedy

    path = _edited("gpt2-lm.dynamo-f32.onnx", tmp_path, _with_position_and_mask_inputs)
    ir = recover_decoder(load_graph(path), str(path), GOLDEN_CPU)
    assert ir.fed_inputs == {"position_ids": "positions", "attention_mask": "mask"}
    data, prompts = golden("gpt2-lm.dynamo-f32.onnx")
    reference = ort_greedy(path, prompts, 12)
    for i, prompt in enumerate(prompts):
        ids, prompt_logits, step_logits = greedy(ir, prompt, 12)
        assert ids == reference[i][0] == data[f"p{i}_generated_ids"].tolist()
        assert np.array_equal(prompt_logits, data[f"p{i}_prompt_logits"]) and np.array_equal(step_logits, reference[i][2])


# ---- refusals -------------------------------------------------------------------------------


def _edited(name: str, tmp_path: Path, edit) -> Path:
    model = onnx.load(ZOO / name)
    edit(model.graph)
    path = tmp_path / name
    onnx.save(model, path)
    return path


def test_a_mask_that_also_hides_the_diagonal_is_refused(tmp_path):
    """plain-gpt's arange(S)[None] > arange(T)[:, None] + past, with >= instead: every query
    loses its own key. The mask is evaluated at several cache lengths and found wrong."""
    def edit(graph):
        for node in graph.node:
            if node.op_type == "Greater":
                node.op_type = "GreaterOrEqual"
    path = _edited("plain-gpt-lm.ts-f32.onnx", tmp_path, edit)
    with pytest.raises(PorterError, match=r"layer 0 attention: the mask .* is not causal: .* hides key 3 from query 3"):
        recover_decoder(load_graph(path), str(path))
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out"), "GreaterOrEqual", "is not causal")


def test_an_unknown_op_inside_a_block_is_refused_by_name(tmp_path):
    """A Round (an op porter has no canonical form of) between Llama's gated product and its down
    projection."""
    def edit(graph):
        gated = next(n for n in graph.node if n.op_type == "Mul" and "silu" in n.input)
        down = next(n for n in graph.node if n.op_type == "MatMul" and n.input[0] == gated.output[0])
        graph.node.insert(list(graph.node).index(down), helper.make_node("Round", [down.input[0]], ["rounded"]))
        down.input[0] = "rounded"
    path = _edited("llama-lm.dynamo-f32.onnx", tmp_path, edit)
    with pytest.raises(PorterError, match=r"op \d+ Round\(.*porter does not know this op"):
        recover_decoder(load_graph(path), str(path), context=64)
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out", "--context", "64"), "Round")


def test_a_known_op_where_no_block_has_it_is_refused_by_name(tmp_path):
    """An Abs on GPT-2's values before they enter the cache: no attention moves V that way."""
    def edit(graph):
        concat = next(n for n in graph.node if n.op_type == "Concat" and n.input[0] == "past_value_0")
        graph.node.insert(list(graph.node).index(concat), helper.make_node("Abs", [concat.input[1]], ["v_abs"]))
        concat.input[1] = "v_abs"
    path = _edited("gpt2-lm.dynamo-f32.onnx", tmp_path, edit)
    with pytest.raises(PorterError, match=r"layer 0 attention, V: .* abs"):
        recover_decoder(load_graph(path), str(path))


# ---- wasm -----------------------------------------------------------------------------------


def _module(name: str, tmp_path_factory, quant: str = "float32", ort_cpu: str = GOLDEN_CPU) -> Path:
    out = tmp_path_factory.mktemp("zoo-decoder") / f"{name}-{quant}"
    args = ["compile", ZOO / name, "-o", out, "--quant", quant, "--ort-cpu", ort_cpu]
    if MEMBERS[name] is not None:
        args += ["--context", str(MEMBERS[name])]
    result = run_porter(*args)
    assert result.returncode == 0, result.stderr
    result = run_porter("build", out)
    assert result.returncode == 0, result.stderr
    return next(out.glob("*.wasm"))


def _module_matches_golden(module: Path, name: str, ort_cpu: str = GOLDEN_CPU) -> None:
    data, prompts = golden(name, ort_cpu)
    results, _ = decoder_proto.generate(module, prompts, len(data["p0_generated_ids"]), with_logits=True)
    for i, r in enumerate(results):
        assert r.generated == data[f"p{i}_generated_ids"].tolist(), f"prompt {i}"
        assert np.array_equal(r.prompt_logits, data[f"p{i}_prompt_logits"])
        assert np.array_equal(r.step_logits, data[f"p{i}_step_logits"])


@pytest.fixture(scope="module")
def llama_module(toolchain, tmp_path_factory):
    return _module(WASM_DEFAULT, tmp_path_factory)


def test_the_llama_module_reproduces_its_golden_bit_for_bit(llama_module):
    _module_matches_golden(llama_module, WASM_DEFAULT)


def test_the_gpt_neox_module_reproduces_its_golden_bit_for_bit(toolchain, tmp_path_factory):
    _module_matches_golden(_module(WASM_PARALLEL, tmp_path_factory), WASM_PARALLEL)


def kernel(module: Path, which: int, values: np.ndarray) -> np.ndarray:
    """The module's float kernel `which` (main.rs answer_kernel) applied to the values."""
    from porter.runtime import wasm

    request = b"KERN" + int(which).to_bytes(4, "little") + values.astype("<f4").tobytes()
    result = wasm.run_command(module, stdin=request, timeout_s=600)
    assert result.exit_code == 0, result.stderr
    return np.frombuffer(result.stdout, "<f4")


# KERN kernel numbers (templates/rust_decoder/src/main.rs.j2 answer_kernel) -> numpy reference
ONE_INPUT = {0: OF.logistic, 1: OF.tanh, 2: OF.fast_gelu, 3: OF.gelu_fused, 4: OF.erf}


def check_kernels(module: Path, ir) -> None:
    """Each Rust kernel against its numpy definition (itself onnxruntime's, test_decoder_kernels)
    on about 1.5 M inputs, bit for bit; layer 0's activation and attention norm likewise."""
    x = wide_inputs()
    with np.errstate(all="ignore"):  # the inputs' infinities and NaNs
        for which, ours in ONE_INPUT.items():
            assert same_bits(kernel(module, which, x), ours(x)), f"kernel {which}"
        assert same_bits(kernel(module, 10, x), activate(ir.layers[0].mlp.activation, x, ort_cpu.target(ir.ort_cpu).floats))
    rows = np.random.default_rng(4).standard_normal((3000, ir.hidden)).astype(np.float32) * 3
    expected = Session(ir).norm(ir.layers[0].attention.norm, rows)
    assert same_bits(kernel(module, 20, rows.reshape(-1)), expected)


def test_the_llama_modules_kernels_are_numpys(llama_module):
    check_kernels(llama_module, recovered(WASM_DEFAULT))


def test_the_llama_module_for_avx512_cpus_caps_quick_gelus_logistic(toolchain, tmp_path_factory):
    """Compiled for AVX-512 VNNI CPUs: onnxruntime's QuickGelu fusion there caps its logistic at
    1 (on inputs where that shows) and the module reproduces that CPU's golden."""
    ir = recovered(WASM_DEFAULT, "avx512vnni")
    assert ir.layers[0].mlp.activation.kernel == "ort_quick_gelu"
    module = _module(WASM_DEFAULT, tmp_path_factory, ort_cpu="avx512vnni")
    x = wide_inputs()
    with np.errstate(all="ignore"):
        capped = kernel(module, 10, x)
        assert same_bits(capped, OF.quick_gelu(x, ort_cpu.AVX512_FLOATS))
        assert not same_bits(capped, OF.silu(x))
    _module_matches_golden(module, WASM_DEFAULT, "avx512vnni")


@pytest.mark.slow
def test_a_changed_kernel_constant_fails_the_checks(toolchain, tmp_path_factory):
    """The kernel checks and the golden catch a one-ulp change in the crate's logistic."""
    import re

    out = tmp_path_factory.mktemp("mutated") / "llama"
    assert run_porter("compile", ZOO / WASM_DEFAULT, "-o", out, "--context", "64", "--ort-cpu", GOLDEN_CPU).returncode == 0
    source = out / "src" / "kernels" / "decoder_float.rs"
    text = source.read_text()
    mutated = re.sub(r"0x3f7e3f34\]", "0x3f7e3f35]", text)
    assert mutated != text
    source.write_text(mutated)
    result = run_porter("build", out)
    assert result.returncode == 0, result.stderr
    module = next(out.glob("*.wasm"))
    x = wide_inputs()
    assert not same_bits(kernel(module, 0, x), OF.logistic(x))
    with pytest.raises(AssertionError):
        _module_matches_golden(module, WASM_DEFAULT)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MEMBERS if n not in (WASM_DEFAULT, WASM_PARALLEL)])
def test_the_other_zoo_modules_reproduce_their_goldens_bit_for_bit(name, toolchain, tmp_path_factory):
    module = _module(name, tmp_path_factory)
    _module_matches_golden(module, name)
    check_kernels(module, recovered(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", MEMBERS)
def test_q8_0_int8_zoo_modules_are_bit_identical_to_the_executor(name, toolchain, tmp_path_factory):
    ir = recovered(name)
    _, prompts = golden(name)
    results, _ = decoder_proto.generate(_module(name, tmp_path_factory, "q8_0_int8"), prompts, 24, with_logits=True)
    for i, r in enumerate(results):
        ids, prompt_logits, step_logits = greedy(ir, prompts[i], 24, int8_dot=True)
        assert r.generated == ids, f"prompt {i}"
        assert np.array_equal(r.prompt_logits, prompt_logits) and np.array_equal(r.step_logits, step_logits)


@pytest.mark.slow
@pytest.mark.parametrize("name", MEMBERS)
def test_q8_0_zoo_modules_generate_what_onnxruntime_does_with_the_same_weights(name, toolchain, tmp_path_factory):
    from porter.check.decoder_reference import model_with_weights, ort_greedy
    from porter.reference.q8_0 import with_q8_0_weights

    ir = recovered(name, "auto")  # live onnxruntime on this machine's CPU
    _, prompts = golden(name)
    reference = ort_greedy(model_with_weights(ir, with_q8_0_weights(ir).weights), prompts, 24)
    results, _ = decoder_proto.generate(_module(name, tmp_path_factory, "q8_0", "auto"), prompts, 24, with_logits=True)
    for i, (r, (ids, prompt_logits, step_logits)) in enumerate(zip(results, reference)):
        assert r.generated == ids, f"prompt {i}"
        assert np.array_equal(r.prompt_logits, prompt_logits) and np.array_equal(r.step_logits, step_logits)
