"""Attention with additive score terms: softmax(scale * Q.K^T + terms + mask) . V.

MPNet (graphs/zoo/mpnet-tok) adds a relative-position bias to every layer's scores: log buckets of
j - i (LOG, CAST, MINIMUM, SELECT on position constants) indexing a learned value per head. It
depends on no input, so canonicalisation folds it to a constant in the reference's arithmetic
(LiteRT's LOG is glibc's logf: porter.reference.litert.floats.log_op, held to LiteRT itself by
tests/test_litert_float.py) and attention adds it as a [heads, seq, seq] array. The zoo files are
exact against their goldens in numpy and in wasm (tests/test_zoo.py); here: what the program
holds and that each term is needed where it is (mutations that must fail). Terms computed from
the inputs (DeBERTa's): tests/test_computed_terms.py.
"""

import sys

import numpy as np
import pytest

from fixtures import REPO
from porter.check.golden import load_golden
from porter.frontends import load_graph
from porter.ir.encoder import Attention, Reference
from porter.recover.encoder import recover_encoder
from porter.reference import execute
from porter.reference.ops import Unsupported, evaluate
from porter.reference.litert import floats as LF

ZOO = REPO / "graphs" / "zoo"
sys.path.insert(0, str(ZOO))
import coverage  # noqa: E402

MPNET = [ZOO / f"mpnet-tok.{flavour}" for flavour in ("litert-f32.tflite", "dynamo-f32.onnx")]


def _program(path):
    golden = load_golden(coverage.golden_path(path))
    cpu = {"ort_cpu": "avx2"} if path.suffix == ".onnx" else {"l1d": LF.golden_l1d(golden.manifest)}
    return recover_encoder(load_graph(path), **cpu), golden


def _max_abs(program, golden) -> float:
    worst = 0.0
    for w in range(golden.windows):
        rows = golden.output_rows(w)
        ours = execute.run(program, golden.ids[w], golden.attention_mask[w])[:rows]
        worst = max(worst, float(np.abs(ours - golden.logits[w][:rows]).max()))
    return worst


@pytest.mark.parametrize("path", MPNET, ids=lambda p: p.name)
def test_mpnet_bias_is_one_constant_term_per_layer(path):
    """Every layer's attention adds one [heads, seq, seq] term, the same bias in each (MPNet
    computes it once for the encoder), varying with j - i only."""
    program, _ = _program(path)
    attentions = [s for s in program.steps if isinstance(s, Attention)]
    assert len(attentions) == 2 and all(len(a.arrays()) == 1 and not a.computed_terms for a in attentions)
    terms = [program.weights[a.arrays()[0]] for a in attentions]
    heads, seq = attentions[0].heads, program.seq
    assert all(t.shape == (heads, seq, seq) and t.dtype == np.float32 for t in terms)
    assert np.array_equal(terms[0], terms[1])
    i, j = np.meshgrid(np.arange(seq), np.arange(seq), indexing="ij")
    for offset in (-40, -3, 0, 5, 33):
        along = terms[0][:, (j - i) == offset]
        assert np.all(along == along[:, :1]), offset
    assert len(np.unique(terms[0][0])) > 8  # log buckets, not a constant


@pytest.mark.parametrize("path", MPNET, ids=lambda p: p.name)
def test_mutated_score_terms_fail_against_the_golden(path):
    """The program is exact; the term left out, or read for i - j instead of j - i (MPNet's
    buckets tell the two directions apart), is not."""
    program, golden = _program(path)
    assert _max_abs(program, golden) == 0
    names = [name for a in program.steps if isinstance(a, Attention) for name in a.arrays()]
    kept = {name: program.weights[name] for name in names}
    for mutate in (np.zeros_like, lambda t: np.ascontiguousarray(t.transpose(0, 2, 1))):
        for name in names:
            program.weights[name] = mutate(kept[name])
        assert _max_abs(program, golden) > 1e-3
        program.weights.update(kept)


@pytest.mark.parametrize("ref", list(Reference))
def test_bucket_ops_fold_as_the_runtimes_compute_them(ref):
    """The ops relative-position buckets are made of, on constants: an integer ABS stays integer,
    CEIL / FLOOR round, SIGN is (0 < x) - (x < 0) in x's type, and a float cast to int truncates,
    with x86's integer indefinite for -inf (log(0) in MPNet's buckets) and NaN."""
    ints = np.array([-5, 0, 7], np.int32)
    assert evaluate("abs", {}, [ints], ref).dtype == np.int32
    assert evaluate("abs", {}, [ints], ref).tolist() == [5, 0, 7]
    assert evaluate("sign", {}, [ints], ref).tolist() == [-1, 0, 1]
    floats = np.float32([-2.5, -0.0, 0.25, 3.0])
    assert evaluate("ceil", {}, [floats], ref).tolist() == [-2.0, 0.0, 1.0, 3.0]
    assert evaluate("floor", {}, [floats], ref).tolist() == [-3.0, -0.0, 0.0, 3.0]
    assert evaluate("sign", {}, [floats], ref).tolist() == [-1.0, 0.0, 1.0, 1.0]
    cast = evaluate("cast", {"to": "int32"}, [np.float32([-2.7, 2.7, -np.inf, np.nan, 3e9])], ref)
    assert cast.tolist() == [-2, 2, -2 ** 31, -2 ** 31, -2 ** 31]
    if ref == Reference.ONNXRUNTIME_CPU:
        with pytest.raises(Unsupported):
            evaluate("sign", {}, [np.float32([np.nan])], ref)
        # the log of a negative value: Eigen's plog (onnxruntime's, on a packet of four) gives the NaN of
        # all ones, glibc's logf (LiteRT's) x86's default NaN (tests/test_computed_terms.py measures both)
        assert evaluate("log", {}, [floats], ref).view(np.uint32)[0] == 0xFFFFFFFF
        assert evaluate("log", {}, [floats], Reference.LITERT_BUILTIN).view(np.uint32)[0] == 0xFFC00000
