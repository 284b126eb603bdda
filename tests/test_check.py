"""`porter golden` and `porter check` in the checkout, against the real runtimes: goldens from
texts are the committed goldens' windows and logits bit for bit (windowed as the service
windows them), random goldens are seeded, inputs are found by role, decoder goldens reproduce
examples/tinystories/golden, and every graphs/zoo golden is reproduced; `porter check` exits 2 with the reason on a graph porter refuses,
1 on a golden whose logits were moved, 0 on a decoder, and its JUnit file says so."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import porter
from fixtures import (REPO, assert_one_line_error, host_ort_cpu, minilm_tokenizer_json, ort_golden, require,
                      run_porter, tinystories_golden)
from porter.reference.ort import cpu as ort_cpu
from porter.check.decoder_reference import ort_greedy
from porter.check.golden import load_decoder_golden, load_golden
from porter.check.references import encoder_reference, ort_session, run_windows
from porter.frontends import load_graph

TINY = "bert-l2-h128-a4-s64-tok3"
TINY_TFLITE = REPO / "graphs" / f"{TINY}.litert-dq8.tflite"
TINY_ONNX = REPO / "graphs" / f"{TINY}.dq8pc.onnx"
TEXTS = REPO / "golden" / "texts.json"
EMPTY_TEXT = 10  # golden/texts.json's empty text: the committed goldens give it a [CLS] [SEP] window
TINYSTORIES = REPO / "examples" / "tinystories"


def junit_cases(path: Path) -> list[ET.Element]:
    return ET.parse(path).getroot().findall("testsuite/testcase")


# --- porter golden --------------------------------------------------------------------------


@pytest.mark.parametrize("model,mode", [(TINY_TFLITE, "builtin"), (TINY_TFLITE, "xnnpack"), (TINY_ONNX, "ort")],
                         ids=["litert-builtin", "litert-xnnpack", "onnxruntime"])
def test_a_golden_from_texts_is_the_committed_golden(model, mode, tmp_path):
    """onnxruntime's golden is the committed one of this CPU's target; XNNPACK, which picks its
    kernels by CPUID and which porter does not reproduce, gives the committed (AVX2) golden's
    bits on an AVX2 CPU and elsewhere stays as close to the builtin kernels as that golden is."""
    result = run_porter("golden", require(model), "--texts", TEXTS, "--tokenizer", minilm_tokenizer_json(),
                        "--mode", mode, "-o", tmp_path / "mine")
    assert result.returncode == 0, result.stderr
    ours = load_golden(tmp_path / "mine.npz")
    committed_path = (ort_golden(model, host_ort_cpu()) if mode == "ort"
                      else REPO / "golden" / f"{model.name}.{mode}.npz")
    committed = load_golden(committed_path)
    kept = committed.text_index != EMPTY_TEXT
    for name in ("ids", "attention_mask", "live", "text_index"):
        assert np.array_equal(getattr(ours, name), getattr(committed, name)[kept]), name
    if mode == "xnnpack" and host_ort_cpu() != "avx2":
        builtin = load_golden(REPO / "golden" / f"{model.name}.builtin.npz").logits[kept]
        live = ours.attention_mask.astype(bool)
        committed_distance = np.abs(committed.logits[kept] - builtin)[live].max()
        assert np.abs(ours.logits - builtin)[live].max() <= 2 * committed_distance
    else:
        assert np.array_equal(ours.logits, committed.logits[kept])
    m = ours.manifest
    assert m["model_sha256"] == committed.manifest["model_sha256"]
    assert (m["mode"], m["num_threads"], m["runtime_version"]) == (mode, 1, committed.manifest["runtime_version"])
    assert m["runtime"] == ("onnxruntime" if mode == "ort" else "ai-edge-litert")
    assert m["cpu_model"] and m["cpu_flags"]
    if mode == "ort":  # verify gates modules of this CPU's onnxruntime target only by it
        assert ort_cpu.golden_target(m, "mine").name == ort_cpu.host_target().name
    assert m["windowing"]["prefix_ids"] == [101] and m["windowing"]["suffix_ids"] == [102]


def test_random_windows_are_seeded_and_step_down_from_a_full_window(tmp_path):
    paths = [porter.make_golden(require(TINY_TFLITE), tmp_path / name, random=5, seed=seed)
             for name, seed in (("a", 3), ("b", 3), ("c", 4))]
    assert paths[0].read_bytes() == paths[1].read_bytes()
    a, c = load_golden(paths[0]), load_golden(paths[2])
    assert not np.array_equal(a.ids, c.ids)
    assert a.live.tolist() == [64, 51, 38, 26, 13]
    assert np.array_equal(a.attention_mask, (np.arange(64) < a.live[:, None]).astype(np.int32))
    assert (a.ids[a.attention_mask == 1] >= 1000).all() and (a.ids[a.attention_mask == 0] == 0).all()
    assert a.logits.shape == (5, 64, 3) and a.manifest["windowing"]["seed"] == 3


def pooled_model(path: Path) -> Path:
    """Inputs named so that only their roles tell them apart: 'a' the mask, 'b' the token ids
    (a 50-row table), 'c' token types (a 2-row table); a mean-pooled head [1, 4]."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("words", (50, 8)), ("types", (2, 8)), ("head", (8, 4)))]
    nodes = [helper.make_node("Gather", ["words", "b"], ["w"]), helper.make_node("Gather", ["types", "c"], ["t"]),
             helper.make_node("Add", ["w", "t"], ["e"]), helper.make_node("Cast", ["a"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["m", "axis"], ["m3"]), helper.make_node("Mul", ["e", "m3"], ["x"]),
             helper.make_node("ReduceMean", ["x"], ["pooled"], axes=[1], keepdims=0),
             helper.make_node("MatMul", ["pooled", "head"], ["out"])]
    inits.append(numpy_helper.from_array(np.array([2], np.int64), "axis"))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, 16]) for n in ("a", "b", "c")]
    graph = helper.make_graph(nodes, "pooled", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4])],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_inputs_are_found_by_role_and_a_pooled_head_gives_one_row_per_window(tmp_path):
    model = pooled_model(tmp_path / "pooled.onnx")
    golden = load_golden(porter.make_golden(model, tmp_path / "g", random=3))
    assert golden.logits.shape == (3, 1, 4) and golden.pooled
    roles = golden.manifest["inputs_by_role"]
    assert (roles["token_ids"], roles["attention_mask"], roles["token_type_ids"]) == ("b", "a", ["c"])
    assert golden.manifest["vocab"] == 50 and (golden.ids < 50).all()
    assert golden.manifest["type_vocab"] == 2 and golden.token_type_ids[0].tolist() == [0] * 8 + [1] * 8
    session = ort_session(model)
    for w in range(3):
        feeds = {"a": golden.attention_mask[w:w + 1].astype(np.int64), "b": golden.ids[w:w + 1].astype(np.int64),
                 "c": golden.token_type_ids[w:w + 1].astype(np.int64)}
        assert np.array_equal(session.run(None, feeds)[0], golden.logits[w])


def test_a_decoder_golden_from_prompts_is_the_tinystories_golden(tmp_path):
    manifest = json.loads((TINYSTORIES / "golden" / "manifest.json").read_text())
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(p["prompt"] for p in manifest["prompts"]) + "\n")
    result = run_porter("golden", TINYSTORIES / "model" / "tinystories.onnx", "--prompts", prompts, "--steps", 32,
                        "--tokenizer", TINYSTORIES / "model" / "tokenizer.json", "-o", tmp_path / "ts")
    assert result.returncode == 0, result.stderr
    ours = np.load(tmp_path / "ts.npz")
    with np.load(tinystories_golden(host_ort_cpu())) as committed:
        assert sorted(ours.files) == sorted(committed.files)
        for key in committed.files:
            assert ours[key].dtype == committed[key].dtype and np.array_equal(ours[key], committed[key]), key
    golden = load_decoder_golden(tmp_path / "ts.npz")
    assert golden.manifest["format"] == "porter.decoder-golden/1" and golden.manifest["mode"] == "ort"
    assert golden.manifest["model_sha256"] == manifest["model_sha256"] and golden.steps == 32


@pytest.mark.parametrize("args,fragments", [
    (["--texts", TEXTS], ["--texts needs --tokenizer"]),
    (["--random", "2", "--texts", TEXTS], ["give one of", "not --texts and --random"]),
    (["--random", "2", "--mode", "xnnpack"], ["--mode xnnpack", "runs in ort"]),
    (["--prompts", TEXTS, "--steps", "2"], ["is an encoder", "--prompts is for KV-cache decoders"]),
    (["--random", "0"], ["--random 0"]),
], ids=["texts-without-tokenizer", "two-sources", "xnnpack-for-onnx", "prompts-for-an-encoder", "no-windows"])
def test_bad_golden_requests_are_one_line(args, fragments, tmp_path):
    assert_one_line_error(run_porter("golden", require(TINY_ONNX), *args, "-o", tmp_path / "g"), *fragments)
    assert not list(tmp_path.iterdir())


def test_a_decoder_needs_prompts(tmp_path):
    assert_one_line_error(run_porter("golden", TINYSTORIES / "model" / "tinystories.onnx", "--random", "2",
                                     "-o", tmp_path / "g"), "is a KV-cache decoder", "--prompts")


# --- porter check ---------------------------------------------------------------------------


def test_check_on_a_graph_porter_refuses_exits_2_with_the_reason(tmp_path):
    model = onnx.load(str(require(TINY_ONNX)))
    erf = next(node for node in model.graph.node if node.op_type == "Erf")
    erf.op_type = "Sinh"  # onnxruntime runs it; porter has no kernel for it
    onnx.save(model, str(tmp_path / "sinh.onnx"))
    out = tmp_path / "ci"
    reason = assert_one_line_error(run_porter("check", tmp_path / "sinh.onnx", "--random", "2", "-o", out),
                                   "sinh.onnx", f"op {list(model.graph.node).index(erf)} Sinh")
    (case,) = junit_cases(out / "junit.xml")
    failure = case.find("failure")
    assert case.get("name") == "compile" and failure is not None
    assert failure.get("message") == reason.removeprefix("porter: error: ")
    report = json.loads((out / "report.json").read_text())
    assert (report["exit_code"], report["outcome"], report["error"]["step"]) == (2, "cannot compile", "compile")
    assert "cannot compile" in (out / "summary.md").read_text()
    assert not (out / "compiled").exists()


def test_check_compiles_an_onnx_model_for_the_cpu_its_golden_was_made_on(tmp_path):
    """A committed golden of the other CPU kind than this machine's (CI runners differ): the
    module is compiled for that golden's onnxruntime target and every logit equals it."""
    other = "avx512vnni" if host_ort_cpu() == "avx2" else "avx2"
    out = tmp_path / "ci"
    result = run_porter("check", TINY_ONNX, "--golden", ort_golden(TINY_ONNX, other), "--max-abs", "0", "-o", out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "porter check: PASS" in result.stdout
    assert json.loads((out / "compiled" / "ir.json").read_text())["ort_cpu"] == other


def test_check_exits_1_when_the_modules_logits_differ_from_the_golden(tmp_path):
    golden = load_golden(porter.make_golden(require(TINY_TFLITE), tmp_path / "g", random=4))
    moved = golden.logits.copy()
    moved[1, 3, 0] += 0.25  # one logit of window 1, past the default --max-abs 0.05
    np.savez(tmp_path / "moved.npz", ids=golden.ids, attention_mask=golden.attention_mask, live=golden.live,
             text_index=golden.text_index, logits=moved)
    (tmp_path / "moved.json").write_text(json.dumps(golden.manifest))
    out = tmp_path / "ci"
    result = run_porter("check", TINY_TFLITE, "--golden", tmp_path / "moved.npz", "-o", out)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "porter check: FAIL" in result.stdout
    failing = [c.get("name") for c in junit_cases(out / "junit.xml") if c.find("failure") is not None]
    assert failing[0] == "window 001 (text 1, 48 live tokens)"
    assert all(not name.startswith("window") for name in failing[1:])  # the other windows pass
    report = json.loads((out / "report.json").read_text())
    assert report["outcome"] == "verification failed" and not report["verify"]["passed"]
    assert any("max |dlogit| 0.25 > 0.05" in f for f in report["verify"]["failures"])
    assert (out / "summary.md").read_text().startswith("## porter check: FAIL")


def test_check_verifies_a_decoder_prompt_by_prompt_and_verify_fails_a_moved_logit(tmp_path):
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(["Once upon a time", [33, 440, 1602]]))
    result = porter.check(TINYSTORIES / "model" / "tinystories.onnx", prompts=prompts, steps=8,
                          tokenizer=TINYSTORIES / "model" / "tokenizer.json", out_dir=tmp_path / "ci")
    assert result.exit_code == 0, result.error
    assert [s["name"] for s in result.report["steps"]] == ["compile", "golden", "build", "verify"]
    names = [c.get("name") for c in junit_cases(result.junit_path)]
    assert names[:2] == ["prompt 000 (5 tokens, 8 steps)", "prompt 001 (3 tokens, 8 steps)"]
    assert names[2:] == ["greedy token agreement"]
    golden = result.report["goldens"][0]
    with np.load(golden) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["p1_step_logits"][5, 7] += 1.0
    np.savez(tmp_path / "moved.npz", **arrays)
    moved = run_porter("verify", tmp_path / "ci" / "compiled", "--golden", tmp_path / "moved.npz")
    assert moved.returncode == 1
    assert "prompt   1 (3 tokens): all 8 tokens equal, max |dlogit| 1" in moved.stdout
    assert moved.stdout.splitlines()[-1].startswith("porter verify: FAIL: max |dlogit| 1 > 0.05")


ZOO_GOLDENS = sorted(p for p in (REPO / "golden" / "zoo").glob("*.npz")
                     if not p.name.endswith((".torch.npz", ".xnnpack.npz")))  # XNNPACK's depend on the CPU


def zoo_golden_of_this_cpu(path: Path) -> Path:
    """onnxruntime's goldens of a CPU other than an AVX2 one are under golden/zoo/<target>/."""
    if not path.name.endswith(".ort.npz") or host_ort_cpu() == "avx2":
        return path
    mine = path.parent / host_ort_cpu() / path.name
    assert mine.is_file(), f"no onnxruntime golden of this CPU ({host_ort_cpu()}): run graphs/zoo/cpu_goldens.py"
    return mine


@pytest.mark.parametrize("path", ZOO_GOLDENS, ids=lambda p: p.name.removesuffix(".npz"))
def test_the_reference_runners_reproduce_every_zoo_golden(path):
    """graphs/zoo's goldens were made by its own runners from the members' known input names; porter's
    runners, finding the inputs by role (Keras' wrapped ids, args_0 / args_1, token types, pooled
    heads) and the KV cache from the signature, give the same outputs bit for bit (onnxruntime's
    those of this CPU's target)."""
    path = zoo_golden_of_this_cpu(path)
    model = require(REPO / "graphs" / "zoo" / path.name.removesuffix(".npz").rpartition(".")[0])
    mode = path.name.removesuffix(".npz").rpartition(".")[2]
    with np.load(path) as arrays:
        decoder = "p0_prompt_ids" in arrays.files
    if decoder:
        golden = load_decoder_golden(path)
        for i, (ids, prompt_logits, step_logits) in enumerate(ort_greedy(model, golden.prompt_ids, golden.steps)):
            assert ids == golden.generated_ids[i].tolist()
            assert np.array_equal(prompt_logits, golden.prompt_logits[i]) and np.array_equal(step_logits, golden.step_logits[i])
        return
    golden = load_golden(path)
    logits, _ = run_windows(encoder_reference(model, load_graph(model), mode), golden.ids, golden.attention_mask)
    assert logits.shape == golden.logits.shape and np.array_equal(logits, golden.logits)
