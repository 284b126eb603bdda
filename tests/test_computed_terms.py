"""Score terms computed from the inputs: DeBERTa's disentangled attention.

DeBERTa-v2/v3 adds to every layer's scores a content-to-position term (the queries times the
relative embeddings projected by the key Linear, gathered at each pair's log-bucketed relative
position) and a position-to-content term (the keys times the projected relative embeddings,
gathered and transposed), both scaled. Their position parts fold to constants; the products and
gathers are tensor steps (porter.ir.tensor), computed per window and read by the attention step
as a buffer. Its mask is mask[i] * mask[j]: a padded query attends to no key, so its scores are
all the fill value. The zoo files are exact against their goldens in numpy and wasm
(tests/test_zoo.py); here: what the program holds, that each part is needed (mutations that
must fail), and live-row execution against the whole window.
"""

import sys

import numpy as np
import pytest

from fixtures import REPO
from porter.check.golden import load_golden
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.ir.encoder import INPUT_IDS, INPUT_MASK, INPUT_TYPES, Attention, Rows
from porter.ir.tensor import TensorOp, TensorStep
from porter.recover.encoder import recover_encoder
from porter.reference import execute
from porter.reference.litert import floats as LF

ZOO = REPO / "graphs" / "zoo"
sys.path.insert(0, str(ZOO))
import coverage  # noqa: E402

DEBERTA = [ZOO / f"deberta-tok.{flavour}" for flavour in ("litert-f32.tflite", "dynamo-f32.onnx")]
# zoo_torch.RelPosEncoder: a bias per head gathered at the clipped relative positions of the live
# tokens (cumsum of the mask) and an ALiBi penalty, both computed from the mask input
RELPOS = [ZOO / f"relpos-tok.{flavour}" for flavour in ("litert-f32.tflite", "dynamo-f32.onnx")]


def _program(path):
    golden = load_golden(coverage.golden_path(path))
    cpu = {"ort_cpu": "avx2"} if path.suffix == ".onnx" else {"l1d": LF.golden_l1d(golden.manifest)}
    return recover_encoder(load_graph(path), **cpu), golden


def _max_abs(program, golden, live_rows_only: bool = True) -> float:
    worst = 0.0
    for w in range(golden.windows):
        rows = golden.output_rows(w) if live_rows_only else program.seq
        ours = execute.run(program, golden.ids[w], golden.attention_mask[w], types=golden.token_type_ids[w])[:rows]
        worst = max(worst, float(np.abs(ours - golden.logits[w][:rows]).max()))
    return worst


@pytest.mark.parametrize("path", DEBERTA, ids=lambda p: p.name)
def test_deberta_terms_are_computed_per_window(path):
    """Each layer's attention adds one term, a buffer of [heads, seq, seq] that tensor steps
    compute from the queries and keys: products with the projected relative embeddings (a
    constant operand) and gathers at the bucketed relative positions (constant indices, stored
    once for every head)."""
    program, _ = _program(path)
    attentions = program.attentions()
    assert len(attentions) == 2
    for a in attentions:
        assert a.query_mask and not a.arrays() and len(a.computed_terms) == 1
        assert program.buffers[a.computed_terms[0]].rows * program.buffers[a.computed_terms[0]].cols \
            == a.heads * program.seq * program.seq
    tensor_steps = [s for s in program.steps if isinstance(s, TensorStep)]
    products = [s for s in tensor_steps if s.op == TensorOp.MATMUL]
    gathers = [s for s in tensor_steps if s.op == TensorOp.GATHER_ELEMENTS]
    assert len(products) == 4 and all(sum(o.array is not None for o in s.operands) == 1 for s in products)
    assert len(gathers) == 4
    for g in gathers:
        index = program.weights[g.operands[1].array]
        assert index.dtype == np.int32 and index.shape[0] == 1  # the same buckets for every head


@pytest.mark.parametrize("path", DEBERTA, ids=lambda p: p.name)
def test_computed_term_mutations_fail_against_the_golden(path):
    """Exact on every row, padded queries included; the term left out, or the position-to-content
    part read untransposed, is not; without the per-query mask the live rows stay exact and the
    padded ones (which attend to every key alike) do not."""
    program, golden = _program(path)
    assert _max_abs(program, golden, live_rows_only=False) == 0
    for a in program.attentions():
        a.query_mask = False
    assert _max_abs(program, golden) == 0 and _max_abs(program, golden, live_rows_only=False) > 1e-3
    for a in program.attentions():
        a.query_mask = True
    transposes = [s for s in program.steps if isinstance(s, TensorStep) and s.op == TensorOp.MOVE
                  and s.attrs["perm"] == (0, 2, 1)]
    assert len(transposes) == 2
    for s in transposes:
        s.attrs["perm"] = (0, 1, 2)
    assert _max_abs(program, golden) > 1e-3
    for s in transposes:
        s.attrs["perm"] = (0, 2, 1)
    for a in program.attentions():
        a.terms, a.inputs = [], [b for b in a.inputs if b not in a.computed_terms]
    assert _max_abs(program, golden) > 1e-3


# ---- live rows ---------------------------------------------------------------------------------

def run_live(program, ids, mask, live: int) -> np.ndarray:
    """The program as the crate runs it where padding is inert: each step computes only the rows
    (token buffers) or the box (tensor steps) porter.recover.rows gives it, everything else is
    NaN; attention zeroes the K, V rows and term values of keys past the last kept one. The first
    `live` output rows."""
    seq = program.seq
    used = max(live, int(np.nonzero(mask)[0].max()) + 1, 1)
    counts = {Rows.ONE: 1, Rows.LIVE: live, Rows.KEYS: used, Rows.ALL: seq}
    values = {INPUT_IDS: np.asarray(ids, np.int64), INPUT_TYPES: np.zeros(seq, np.int64),
              INPUT_MASK: np.asarray(mask, np.float32)}
    for step in program.steps:
        if isinstance(step, Attention):
            for name in step.inputs[1:3] + step.computed_terms:
                value = np.array(values[name], np.float32)
                if name in step.computed_terms:
                    value.reshape(-1, seq, seq)[:, :, used:] = 0
                else:
                    value.reshape(seq, -1)[used:] = 0
                values[name] = value
        for name, value in zip(step.outputs, execute.run_step(program, step, values)):
            value = np.array(value)
            buffer = program.buffers[name]
            if buffer.tokens and value.dtype.kind == "f":
                value.reshape(seq, -1)[counts[buffer.extent]:] = np.nan
            elif isinstance(step, TensorStep) and value.dtype.kind == "f":
                box = tuple(slice(None) if r == Rows.ALL else slice(counts[r]) for r in step.limits)
                computed = np.full(value.shape, np.nan, value.dtype)
                computed[box] = value[box]
                value = computed
            values[name] = value
    return values[program.output_buffer].reshape(seq, -1)[:live]


@pytest.mark.parametrize("path", DEBERTA + RELPOS, ids=lambda p: p.name)
def test_live_rows_are_the_whole_windows(path):
    """Live-row execution is exact: the c2p product reads the computed queries, the p2c product
    every key up to the last kept one (KEYS), each gather the rows its box needs, so no value
    past them reaches a live output (the rest is NaN here), also where the output stops before
    the last kept key. A p2c box cut at the live rows instead does reach them."""
    program, golden = _program(path)
    assert program.padding_is_inert
    seq = program.seq
    cases = [(golden.ids[w], golden.attention_mask[w], int(golden.live[w])) for w in range(golden.windows)]
    ids = golden.ids[0]
    cases.append((ids, (np.arange(seq) < 40).astype(np.int32), 17))  # the output stops before the last key
    for ids, mask, live in cases:
        whole = execute.run(program, ids, mask)[:live]
        assert np.array_equal(run_live(program, ids, mask, live), whole), live
    # the term's key axis cut at the live rows (p2c's keys, or the relative positions' keys)
    keyed = [s for s in program.steps if isinstance(s, TensorStep) and Rows.KEYS in s.limits and Rows.LIVE not in s.limits]
    assert keyed
    for s in keyed:
        s.limits = tuple(Rows.LIVE if r == Rows.KEYS else r for r in s.limits)
    ids, mask, live = cases[-1]
    assert np.isnan(run_live(program, ids, mask, live)).any()


# ---- tensor steps ------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, negative", [("litert", False), ("onnxruntime", True)])
def test_a_gather_index_out_of_range_stops_the_run(ref, negative):
    """A computed index is checked as the reference checks it: onnxruntime counts a negative one
    from the end, LiteRT refuses it; past the axis both fail the run, and so does porter's."""
    from porter.ir.encoder import Operand, Reference

    reference = Reference.ONNXRUNTIME_CPU if ref == "onnxruntime" else Reference.LITERT_BUILTIN
    step = TensorStep("gather_elements0", ["t1", "t2"], ["t3"], [], TensorOp.GATHER_ELEMENTS,
                      [Operand("t1", None, (2, 3)), Operand("t2", None, (2, 2))], (2, 2), "float32",
                      {"axis": 1, "in_dtypes": ("float32", "int64")})
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = execute.tensor_step(step, [data, np.array([[0, 2], [1, 1]])], reference)
    assert got.tolist() == [[0.0, 2.0], [4.0, 4.0]]
    if negative:
        assert execute.tensor_step(step, [data, np.array([[-1, 0], [0, 0]])], reference)[0, 0] == 2.0
    else:
        with pytest.raises(PorterError, match="gather_elements0: index -1 out of range"):
            execute.tensor_step(step, [data, np.array([[-1, 0], [0, 0]])], reference)
    with pytest.raises(PorterError, match="gather_elements0: index 3 out of range"):
        execute.tensor_step(step, [data, np.array([[3, 0], [0, 0]])], reference)


# ---- terms computed from the mask input ---------------------------------------------------------

def _host_program(path):
    """The program for this machine's runtime (its CPU's onnxruntime kernels, its L1 size)."""
    from fixtures import host_ort_cpu

    return recover_encoder(load_graph(path), **({"ort_cpu": host_ort_cpu()} if path.suffix == ".onnx" else {}))


@pytest.mark.parametrize("path", RELPOS, ids=lambda p: p.name)
def test_terms_of_the_live_positions_follow_the_mask(path):
    """relpos-tok's terms are integer work on the mask input (a running sum, differences, a clip,
    a gather of a learned table at those computed indices, an absolute value cast to float): left
    padding and holes move the positions they are computed from. Every row is the reference
    runtime's (run here: LiteRT's builtin kernels, onnxruntime on this CPU) bit for bit, and holes
    change the logits of the tokens after them beyond dropping their keys."""
    from porter.check.references import encoder_reference, run_windows

    program = _host_program(path)
    kinds = {s.op for s in program.steps if isinstance(s, TensorStep)}
    assert {TensorOp.CUMSUM, TensorOp.GATHER if path.suffix == ".onnx" else TensorOp.LOOKUP, TensorOp.ABS,
            TensorOp.CAST} <= kinds
    assert all(len(a.computed_terms) == 2 for a in program.attentions())
    seq = program.seq
    rng = np.random.default_rng(5)
    positions = np.arange(seq)
    masks = np.stack([positions >= 20, (positions % 5 != 2) & (positions < 50), positions < 30]).astype(np.int32)
    ids = rng.integers(4, program.vocab, (len(masks), seq)).astype(np.int32)
    reference = encoder_reference(path, load_graph(path))
    theirs, _ = run_windows(reference, ids, masks)
    for w in range(len(masks)):
        ours = execute.run(program, ids[w], masks[w])
        assert np.array_equal(ours.view(np.uint32), theirs[w].view(np.uint32)), w
    holed, contiguous = {}, {}
    execute.run(program, ids[1], masks[1], trace=holed)
    execute.run(program, ids[1], (positions < 50).astype(np.int32), trace=contiguous)
    kept = np.flatnonzero(masks[1])
    for term in program.attentions()[0].computed_terms:  # between kept tokens a hole apart
        a, b = (np.asarray(t[term]).reshape(-1, seq, seq)[:, kept[:, None], kept] for t in (holed, contiguous))
        assert not np.array_equal(a, b)


def _relpos_with(op_type: str, path):
    """relpos-tok's ONNX export with `op_type` applied to 1 + its ALiBi distance before the slope
    (an edit of the real export): a term through another op computed per window."""
    import onnx

    model = onnx.load(str(ZOO / "relpos-tok.dynamo-f32.onnx"))
    nodes = list(model.graph.node)
    at = next(i for i, n in enumerate(nodes) if n.op_type == "Cast" and n.output[0] == "_to_copy")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.float32(1.0), "one"))
    edit = [onnx.helper.make_node("Add", ["_to_copy", "one"], ["_to_copy_plus_one"]),  # log(1 + |j - i|)
            onnx.helper.make_node(op_type, ["_to_copy_plus_one"], ["_to_copy_edited"])]
    nodes[at + 1:at + 1] = edit
    for n in nodes[at + 1 + len(edit):]:
        n.input[:] = ["_to_copy_edited" if x == "_to_copy" else x for x in n.input]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(path))
    return path


def test_onnxruntime_log_is_eigens_plog_then_glibcs_logf():
    """onnxruntime's Log on this machine (its kernel is Eigen's array().log(), compiled for SSE):
    Eigen's plog on each packet of four, glibc's logf on the last size % 4, for random bit patterns
    of every class (NaNs, infinities, negatives, subnormals) in tensors of every tail length."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from porter.ir.encoder import Reference
    from porter.reference.ops import evaluate

    rng = np.random.default_rng(3)
    for size in [*range(1, 12), 4099, 1 << 18]:
        io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [size]) for n in "xy"]
        graph = helper.make_graph([helper.make_node("Log", ["x"], ["y"])], "log", io[:1], io[1:])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                       .SerializeToString(), options, providers=["CPUExecutionProvider"])
        x = rng.integers(0, 1 << 32, size, dtype=np.uint64).astype(np.uint32).view(np.float32)
        theirs = session.run(None, {"x": x})[0]
        ours = evaluate("log", {}, [x], Reference.ONNXRUNTIME_CPU)
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), size


def test_a_log_of_a_computed_value_runs_as_onnxruntime_runs_it(tmp_path):
    """relpos-tok's ALiBi distance put through a Log: a tensor step of onnxruntime's Log (Eigen's
    plog, glibc's logf on the tensor's tail) whose program is onnxruntime's, on every window."""
    from fixtures import host_ort_cpu
    from porter.check.references import encoder_reference, run_windows

    edited = _relpos_with("Log", tmp_path / "relpos-log.onnx")
    program = recover_encoder(load_graph(edited), ort_cpu=host_ort_cpu())
    assert any(isinstance(s, TensorStep) and s.op == TensorOp.LOG for s in program.steps)
    golden = load_golden(coverage.golden_path(ZOO / "relpos-tok.dynamo-f32.onnx"))
    theirs, _ = run_windows(encoder_reference(edited, load_graph(edited)), golden.ids, golden.attention_mask)
    for w in range(golden.windows):
        ours = execute.run(program, golden.ids[w], golden.attention_mask[w])
        assert np.array_equal(ours.view(np.uint32), theirs[w].view(np.uint32)), w


def test_an_op_whose_kernel_porter_does_not_reproduce_is_refused_naming_it(tmp_path):
    """onnxruntime's Sign of a float (Eigen's, whose NaN is not measured) is not emulated: the
    ALiBi distance put through a Sign is refused in one line naming the op."""
    from fixtures import assert_one_line_error, run_porter

    edited = _relpos_with("Sign", tmp_path / "relpos-sign.onnx")
    with pytest.raises(PorterError, match=r"Sign .*onnxruntime's Sign of a float"):
        recover_encoder(load_graph(edited), ort_cpu="avx2")
    assert_one_line_error(run_porter("compile", edited, "-o", tmp_path / "out", "--ort-cpu", "avx2"), "Sign")
