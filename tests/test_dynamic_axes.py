"""Graphs exported with dynamic axes (issue 30.1) and the refusals that must name their real cause
(issue 33.4 b, c).

The zoo's dynamic-axes members (graphs/zoo/*.ts-dyn-f32.onnx, *.dyn-dq8pc.onnx,
*.dynamo-dyn-f32.onnx) go through recovery and the executor against their goldens in
tests/test_zoo.py (the golden's window bound); here: a window other than the export's, checked
against onnxruntime run at that window, the default window, and the refusals.
"""

import numpy as np
import onnx
import pytest

from fixtures import REPO, run_porter
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.recover.encoder import recover_encoder
from porter.reference import execute
from porter.reference.ort import cpu as ort_cpus

ZOO = REPO / "graphs" / "zoo"
WINDOW = 16  # not the members' export window (32 or 64)


def _host_target():
    try:
        return ort_cpus.host_target().name
    except PorterError as e:  # a CPU whose onnxruntime arithmetic porter does not reproduce
        pytest.skip(str(e))


def _windows(vocab: int, pad: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A full window and a half-padded one of WINDOW tokens."""
    rng = np.random.default_rng(seed)
    out = []
    for live in (WINDOW, WINDOW // 2):
        ids = np.full(WINDOW, pad, np.int64)
        ids[:live] = rng.integers(4, vocab, size=live)
        out.append((ids, (np.arange(WINDOW) < live).astype(np.int64)))
    return out


@pytest.mark.parametrize("name, pad", [("roberta-tok.dynamo-dyn-f32.onnx", 1), ("minilm-mean.dyn-dq8pc.onnx", 0)])
def test_a_dynamic_graph_compiled_for_another_window_is_onnxruntime_at_that_window(name, pad):
    import onnxruntime as ort

    path = ZOO / name
    program = recover_encoder(load_graph(path), _host_target(), window=WINDOW)  # proved at WINDOW
    assert program.seq == WINDOW
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for ids, mask in _windows(program.vocab, pad, seed=len(name)):
        (expected,) = session.run(None, dict(zip(names, (ids[None], mask[None]))))
        ours = execute.run(program, ids.astype(np.int32), mask.astype(np.int32))
        rows = int(mask.sum()) if program.output_tokens else 1
        assert np.array_equal(ours[:rows], expected.reshape(ours.shape)[:rows]), name


def test_the_window_defaults_to_the_position_table():
    program = recover_encoder(load_graph(ZOO / "bert-tok.ts-dyn-f32.onnx"), "avx2")
    assert program.seq == 64  # BERT's position table: max_position_embeddings rows


def test_a_window_nothing_bounds_is_refused_naming_the_dimension():
    """RoBERTa computes its positions from the ids (cumsum): no table is read at positions alone."""
    with pytest.raises(PorterError) as refused:
        recover_encoder(load_graph(ZOO / "roberta-tok.ts-dyn-f32.onnx"), "avx2")
    message = str(refused.value)
    assert "input 'input_ids' has the dynamic dimension 'sequence_length'" in message and "--window N" in message


def test_compile_window_on_a_fixed_window_graph_is_refused(tmp_path):
    result = run_porter("compile", ZOO / "roberta-tok.ts-f32.onnx", "-o", tmp_path / "out", "--window", "24")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("porter: error:"), result.stderr
    assert "a window of 24 tokens was asked for" in lines[0] and "has a fixed window of 64 tokens" in lines[0]


def _with_opsets(model: onnx.ModelProto, tmp_path, name: str) -> str:
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path)


def test_a_declared_but_unused_domain_is_ignored_and_a_used_unknown_one_named_at_its_op(tmp_path):
    model = onnx.load(str(ZOO / "bert-tok.ts-dyn-f32.onnx"))
    model.opset_import.append(onnx.helper.make_opsetid("ai.onnx.ml", 5))  # as onnxruntime's optimizer writes
    model.opset_import.append(onnx.helper.make_opsetid("org.example", 1))
    load_graph(_with_opsets(model, tmp_path, "unused.onnx"))  # no error: nothing uses them
    erf = next(k for k, n in enumerate(model.graph.node) if n.op_type == "Erf")
    model.graph.node[erf].domain = "org.example"
    with pytest.raises(PorterError) as refused:
        load_graph(_with_opsets(model, tmp_path, "used.onnx"))
    message = str(refused.value)
    assert f"node {erf} " in message and "(Erf)" in message and "domain 'org.example'" in message
    assert "ai.onnx.ml" not in message


def test_the_outputs_of_contrib_ops_are_typed_by_the_reader():
    """onnxruntime.transformers.optimizer's output on a dynamic-axes export (bert-tok.ortopt-dyn-f32:
    com.microsoft EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu; domains it
    declares and never uses; no value_info): ONNX shape inference knows none of the contrib ops,
    so the reader types their outputs itself, symbolic dimensions kept."""
    path = ZOO / "bert-tok.ortopt-dyn-f32.onnx"
    assert any(o.domain == "ai.onnx.ml" for o in onnx.load(str(path)).opset_import)
    graph = load_graph(path)
    attention = next(op for op in graph.ops if op.type == "com.microsoft.Attention")
    assert graph.tensor(attention.outputs[0]).shape == (-1, -1, 64)
    embed = next(op for op in graph.ops if op.type == "com.microsoft.EmbedLayerNormalization")
    assert graph.tensor(embed.outputs[1]).dtype == "int32" and len(graph.tensor(embed.outputs[1]).shape) == 1


def test_a_golden_gives_its_window():
    """RoBERTa's dynamic-axes file has no window of its own; `porter run --golden` binds the golden's."""
    result = run_porter("run", ZOO / "roberta-tok.ts-dyn-f32.onnx", "--golden",
                        REPO / "golden" / "zoo" / "roberta-tok.ts-dyn-f32.onnx.ort.npz")
    assert result.returncode == 0, result.stderr
    assert "labels 168/168 (100.00%), max |dlogit| 0," in result.stdout


def test_porter_golden_of_a_dynamic_graph_runs_the_position_tables_window(tmp_path):
    model = ZOO / "distilbert-seq.ts-dyn-f32.onnx"
    made = run_porter("golden", model, "--random", "2", "-o", tmp_path / "g")
    assert made.returncode == 0, made.stderr
    ran = run_porter("run", model, "--golden", tmp_path / "g.npz")
    assert ran.returncode == 0, ran.stderr
    assert "labels 2/2 (100.00%), max |dlogit| 0," in ran.stdout
