"""The numpy executor against LiteRT: bit-identical to the builtin kernels' goldens."""

import numpy as np
import pytest

from fixtures import REPO, TFLITE_FIXTURES, executor_windows, fixture_id, recovered, require, run_porter, spec
from porter.reference import execute
from porter.codegen.compile import recover
from porter.check.golden import load_golden
from porter.ir.encoder import MaskMode
from porter.check.run import executor_agreement

GOLDEN = REPO / "golden"


def _golden_agreement(path, mode):
    golden = load_golden(GOLDEN / f"{path.name}.{mode}.npz")
    return executor_agreement(recovered(path), golden, windows=executor_windows(golden))


@pytest.mark.parametrize("path", TFLITE_FIXTURES, ids=fixture_id)
def test_executor_matches_litert_builtin_kernels(path):
    a = _golden_agreement(path, "builtin")
    print(f"{path.name} vs builtin: {a.line()}")
    assert a.label_rate == 1.0
    if path.name.endswith("dq8.tflite") and not path.name.startswith(spec.TINY.name + ".tf"):
        # int8 graphs: every op emulated exactly, so the logits are the same bits.
        assert a.max_abs == 0.0
    else:
        # A float FULLY_CONNECTED with very few outputs (TINY's 3-label head) goes through a
        # different GEMM path in LiteRT whose summation order porter does not reproduce.
        assert a.max_abs < 1e-5


def test_padding_is_masked_out_as_the_ir_says():
    """Recovery decides from the graph that padded keys are masked out; LiteRT confirms that live rows then ignore
    what the padded positions hold, and the executor agrees bit for bit."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    path = require(spec.SMALL.path("litert-dq8.tflite"))
    ir = recover(path)
    assert ir.mask == MaskMode.ADD and ir.padding_is_inert
    live = 20
    rng = np.random.default_rng(3)
    ids = np.zeros(ir.seq, np.int32)
    ids[:live] = rng.integers(1000, ir.vocab, live)
    mask = (np.arange(ir.seq) < live).astype(np.int32)
    other = ids.copy()
    other[live:] = rng.integers(1000, ir.vocab, ir.seq - live)  # different padding content

    runner = Interpreter(model_path=str(path), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
                         ).get_signature_runner()

    def litert(window):
        out = runner(**{ir.ids_input: window[None], ir.mask_input: mask[None]})
        return next(iter(out.values()))[0]
    a, b = litert(ids), litert(other)
    assert np.array_equal(a[:live], b[:live])
    assert not np.array_equal(a[live:], b[live:])  # padded rows themselves do change
    assert np.array_equal(execute.run(ir, other, mask)[:live], a[:live])


def test_porter_run_reports_golden_agreement():
    path = require(spec.TINY.path("tf-dq8.tflite"))
    golden = GOLDEN / f"{path.name}.builtin.npz"
    result = run_porter("run", path, "--golden", golden, "--locate")
    assert result.returncode == 0, result.stderr
    assert "overall vs ai-edge-litert" in result.stdout
    assert "labels 1260/1260 (100.00%)" in result.stdout or "(100.00%)" in result.stdout
    # TINY's float head is the one place LiteRT sums in another order: locate names it.
    assert "first difference: linear12 (graph ops" in result.stdout


def test_porter_run_refuses_a_golden_of_another_model():
    path = require(spec.TINY.path("litert-dq8.tflite"))
    golden = GOLDEN / f"{spec.TINY.path('tf-dq8.tflite').name}.builtin.npz"
    result = run_porter("run", path, "--golden", golden)
    assert result.returncode == 2 and "was made from a model with sha256" in result.stderr


def test_whole_window_graph_makes_padding_load_bearing():
    """A graph without a mask input (an all-ones mask traced in) attends over the whole window:
    porter finds no mask in the graph, LiteRT confirms that live rows change with the
    padding, and the executor reproduces LiteRT bit for bit under both paddings."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    path = require(spec.TINY.path("nomask.litert-dq8.tflite"))
    ir = recover(path)
    assert ir.mask == MaskMode.NONE and ir.mask_input is None and not ir.padding_is_inert
    live = 12
    rng = np.random.default_rng(5)
    ids = np.zeros(ir.seq, np.int32)
    ids[:live] = rng.integers(1000, ir.vocab, live)
    other = ids.copy()
    other[live:] = 1  # pad with another id, as the redact write-up's model needed
    runner = Interpreter(model_path=str(path), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
                         ).get_signature_runner()

    def litert(window):
        return next(iter(runner(**{ir.ids_input: window[None]}).values()))[0]
    a, b = litert(ids), litert(other)
    assert not np.array_equal(a[:live], b[:live])  # the padding changes the live logits
    mask = np.ones(ir.seq, np.int32)
    assert np.array_equal(execute.run(ir, ids, mask), a)
    assert np.array_equal(execute.run(ir, other, mask), b)
