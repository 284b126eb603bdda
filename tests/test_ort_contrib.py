"""onnxruntime.transformers' optimizer output (issue 30.2): com.microsoft ops translated into
canonical ops with onnxruntime's CPU arithmetic (porter.recover.canonical.ort_contrib).

The zoo's ortopt-f32 (optimize_model's defaults) and ortopt2-f32 (opt_level 2) files go through
recovery and the executor against their goldens for both CPU targets in tests/test_zoo.py, one
of them through wasm; here: what the translation makes of SkipLayerNormalization, that the
kernel it picks is the one that makes the bits, Attention's key lengths on masks no golden
holds, and the one-line refusals.
"""

import numpy as np
import onnx
import pytest

from fixtures import REPO, assert_one_line_error, recovered, run_porter
from porter.frontends import load_graph
from porter.ir.encoder import KeyRule, LayerNorm, NormForm
from porter.recover.encoder import recover_encoder
from porter.recover.canonical import canonicalise
from porter.reference import execute
from porter.reference.ort import cpu as ort_cpus

ZOO = REPO / "graphs" / "zoo"
BIASED = ZOO / "bert-tok.ortopt2-f32.onnx"  # SkipLayerNormalization with the Linear's bias
FUSED = ZOO / "bert-tok.ortopt-dyn-f32.onnx"  # EmbedLayerNormalization + Attention (1-D mask_index)
WINDOW = 64


def _norms(program) -> list[LayerNorm]:
    return [s for s in program.steps if isinstance(s, LayerNorm)]


@pytest.mark.parametrize("name", ["bert-tok.ortopt-f32.onnx", "bert-tok.ortopt2-f32.onnx"])
def test_every_skip_layer_normalization_is_its_welford_kernel(name):
    graph = load_graph(ZOO / name)
    skips = {op.index for op in graph.ops if op.type == "com.microsoft.SkipLayerNormalization"}
    from_skips = [n for n in _norms(recovered(ZOO / name)) if skips & set(n.source_ops)]
    assert skips and len(from_skips) == len(skips)
    assert all(n.form == NormForm.ONNX_SKIP for n in from_skips), [n.form for n in from_skips]


def test_the_bias_is_added_after_the_residual_sum():
    """SkipLayerNormalization(input, skip, gamma, beta, bias): (input + skip) + bias, as the kernel
    adds them, then the norm of that sum."""
    c = canonicalise(load_graph(BIASED), ort_cpus.target("avx2"))
    g = c.graph
    norms = [op for op in g.ops if op.type == "layer_norm" and op.options.get("ort_skip")]
    assert norms
    for ln in norms:
        biased = g.producer(ln.inputs[0])
        assert biased.type == "add" and g.const(biased.inputs[1]) is not None
        residual = g.producer(biased.inputs[0])
        assert residual.type == "add" and all(g.const(t) is None for t in residual.inputs)


def test_layer_normalizations_kernel_in_their_place_is_not_onnxruntime():
    """The mutation: the same program with LayerNormalization's kernel where the file has
    SkipLayerNormalization misses the golden, so the kernel choice is what the exact rows test."""
    program = recovered(BIASED)
    golden = np.load(REPO / "golden" / "zoo" / f"{BIASED.name}.ort.npz")
    ids, mask = golden["ids"][0], golden["attention_mask"][0]
    exact = execute.run(program, ids, mask)
    saved = [n.form for n in _norms(program)]
    try:
        for n in _norms(program):
            if n.form == NormForm.ONNX_SKIP:
                n.form = NormForm.ONNX
        mutated = execute.run(program, ids, mask)
    finally:
        for n, form in zip(_norms(program), saved):
            n.form = form
    assert not np.array_equal(exact, mutated)


def _edited(tmp_path, edit, name="edited.onnx"):
    model = onnx.load(str(BIASED))
    edit(model)
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def test_a_read_mean_output_is_refused_naming_it(tmp_path):
    def read_mean(model):
        skip = next(n for n in model.graph.node if n.op_type == "SkipLayerNormalization")
        skip.output.extend(["skip_mean"])
        model.graph.node.append(onnx.helper.make_node("Identity", ["skip_mean"], ["mean_copy"]))
    path = _edited(tmp_path, read_mean)
    assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out"),
                          "com.microsoft.SkipLayerNormalization", "output 1 (mean) is read")


def test_a_contrib_op_porter_does_not_know_is_refused_naming_it(tmp_path):
    def quick_gelu(model):
        gelu = next(n for n in model.graph.node if n.op_type == "BiasGelu")
        gelu.op_type = "QuickGelu"
        del gelu.input[1:]
        gelu.attribute.append(onnx.helper.make_attribute("alpha", 1.702))
    path = _edited(tmp_path, quick_gelu)
    line = assert_one_line_error(run_porter("compile", path, "-o", tmp_path / "out"),
                                 "com.microsoft QuickGelu (alpha=", "is not reproduced")
    assert "does not know this onnxruntime contrib op" in line


def test_attention_with_a_form_porter_does_not_reproduce_is_refused_naming_it(tmp_path):
    def unidirectional(model):
        attention = next(n for n in model.graph.node if n.op_type == "Attention")
        attention.attribute.append(onnx.helper.make_attribute("unidirectional", 1))
    model = onnx.load(str(FUSED))
    unidirectional(model)
    path = tmp_path / "causal.onnx"
    onnx.save(model, str(path))
    assert_one_line_error(run_porter("compile", path, "--window", "64", "-o", tmp_path / "out"),
                          "com.microsoft.Attention", "unidirectional=1 is not reproduced")


@pytest.mark.parametrize("holes", ["right-padded", "holed", "left-padded"])
def test_key_lengths_keep_the_leading_count_as_onnxruntime_does(holes):
    """BERT through the optimizer's defaults: Attention reads EmbedLayerNormalization's
    mask_index, the count of the mask's 1s, as key lengths, so a holed or left-padded mask keeps
    the first that many keys. The executor against onnxruntime itself on such masks, every row."""
    import onnxruntime as ort

    program = recover_encoder(load_graph(FUSED), ort_cpus.host_target().name, window=WINDOW)
    assert {a.key_rule for a in program.attentions()} == {KeyRule.LEADING_COUNT}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(FUSED), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(len(holes))
    ids = rng.integers(104, program.vocab, WINDOW)
    mask = (np.arange(WINDOW) < 40).astype(np.int64)
    if holes == "holed":
        mask[[3, 17]] = 0
    elif holes == "left-padded":
        mask = mask[::-1].copy()
    types = np.zeros(WINDOW, np.int64)
    (expected,) = session.run(None, {"input_ids": ids[None], "attention_mask": mask[None], "token_type_ids": types[None]})
    ours = execute.run(program, ids, mask, types=types)
    assert np.array_equal(ours, expected.reshape(ours.shape))
