"""token_type_ids as a real input: the token-type input is found by role (the smaller table added
to the word rows), read by the Embed step, fed by `porter golden` (sentence pairs, random windows
with a segment B), `porter run`, `verify` and the eval module's byte protocol. The goldens are
golden/zoo/pairs/ (graphs/zoo/pair_goldens.py): real LiteRT / onnxruntime on windows whose
segment B moves the logits; porter must reproduce them bit for bit, in numpy and in wasm.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fixtures import REPO, assert_one_line_error, minilm_tokenizer_json, require, run_porter
from porter.check.golden import load_golden
from porter.check.run import executor_agreement
from porter.codegen.compile import recover
from porter.reference import execute

ZOO = REPO / "graphs" / "zoo"
PAIRS = REPO / "golden" / "zoo" / "pairs"
PAIR_GOLDENS = sorted(PAIRS.glob("*.npz"))
# a cross-encoder reranker's shape (graphs/cross/make_cross.py): BertForSequenceClassification,
# one logit, type_vocab_size 2, named token_type_ids; its onnxruntime goldens are an AVX-512 VNNI CPU's
CROSS_GOLDENS = sorted((REPO / "golden" / "cross").glob("*.npz"))
# each format and exporter once in the default suite; every pair golden under -m slow
DEFAULT = ["bert-tok.litert-f32.tflite.builtin.npz", "bert-tok.dq8pc.onnx.ort.npz",
           "bert-tok.keras-dq8.tflite.builtin.npz", "electra-seq.litert-dq8.tflite.builtin.npz",
           "xlmr-seq.dynamo-f32.onnx.ort.npz"]


def model_of(golden_path: Path) -> Path:
    return REPO / load_golden(golden_path).manifest["model_file"]


def program_for(golden_path: Path):
    golden = load_golden(golden_path)
    model = require(model_of(golden_path))
    return recover(model, golden.manifest["ort_cpu"] if model.suffix == ".onnx" else "auto", "auto"), golden


def check_pair_golden(golden_path: Path) -> None:
    program, golden = program_for(golden_path)
    assert program.types_input is not None and program.type_vocab in (1, 2)  # XLM-R's table has one row
    total = executor_agreement(program, golden)
    assert total.max_abs == 0, total.line()
    moved = golden.manifest["segment_b"]["max_abs_vs_type_zero"]
    if program.type_vocab > 1:
        assert moved > 0.1  # segment B matters, so reading it is what makes the logits exact
        w = int(np.argmax(golden.token_type_ids.sum(axis=1)))
        zeros = execute.run(program, golden.ids[w], golden.attention_mask[w])
        assert not np.array_equal(zeros[: golden.output_rows(w)], golden.logits[w][: golden.output_rows(w)])
    else:
        assert moved == 0


@pytest.mark.parametrize("name", DEFAULT)
def test_a_pair_golden_is_reproduced_by_the_executor(name):
    check_pair_golden(PAIRS / name)


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in PAIR_GOLDENS if p.name not in DEFAULT], ids=lambda p: p.name)
def test_every_pair_golden_is_reproduced_by_the_executor(path):
    check_pair_golden(path)


@pytest.mark.parametrize("path", CROSS_GOLDENS, ids=lambda p: p.name)
def test_the_cross_encoder_is_reproduced_by_the_executor(path):
    check_pair_golden(path)
    program, _ = program_for(path)
    assert (program.types_input, program.type_vocab, program.width, program.output_tokens) == \
        ("token_type_ids", 2, 1, False)


def test_the_token_type_input_is_found_by_role_not_by_name():
    """electra-seq's litert-torch export names its inputs args_0..2; the types are the input whose
    two-row table is added to the word rows, wherever it comes in the signature."""
    program, _ = program_for(PAIRS / "electra-seq.litert-dq8.tflite.builtin.npz")
    assert (program.ids_input, program.types_input, program.mask_input) == ("args_0", "args_2", "args_1")
    embed = program.steps[0]
    assert [t.kind for t in embed.terms].count("types") == 1 and "input.types" in embed.inputs


def test_a_model_without_token_types_refuses_a_golden_with_a_segment_b(tmp_path):
    golden = load_golden(PAIRS / "bert-tok.litert-f32.tflite.builtin.npz")
    program, _ = program_for(PAIRS / "bert-tok.litert-f32.tflite.builtin.npz")
    with pytest.raises(ValueError, match=r"token type id out of range \[0, 2\)"):
        execute.run(program, golden.ids[0], golden.attention_mask[0], types=golden.token_type_ids[0] * 2)
    other = tmp_path / "other.npz"
    arrays = dict(np.load(PAIRS / "bert-tok.litert-f32.tflite.builtin.npz"))
    np.savez(other, **arrays)
    manifest = json.loads((PAIRS / "bert-tok.litert-f32.tflite.builtin.json").read_text())
    manifest.pop("model_sha256")
    other.with_suffix(".json").write_text(json.dumps(manifest))
    model = require(REPO / "graphs" / "bert-l2-h128-a4-s64-tok3.litert-dq8.tflite")  # no token-type input
    result = run_porter("run", model, "--golden", other)
    assert_one_line_error(result, "other.npz: window 0 has token type 1", "has no token-type input")


def test_porter_golden_encodes_sentence_pairs_with_the_tokenizers_segment_ids(tmp_path):
    """A `text_a<TAB>text_b` line is the tokenizer's pair encoding ([CLS] a [SEP] b [SEP], token
    type 1 on b and its [SEP]); porter run reproduces LiteRT on it, and segment B is read."""
    from tokenizers import Tokenizer

    tokenizer_json = minilm_tokenizer_json()
    texts = tmp_path / "pairs.txt"
    pairs = [("a dog runs in the park", "the animal is outside"), ("where is the station?", "it is north of here")]
    texts.write_text("\n".join("\t".join(p) for p in pairs) + "\nthe third line is one text\n")
    model = require(ZOO / "bert-tok.litert-f32.tflite")
    made = run_porter("golden", model, "--texts", texts, "--tokenizer", tokenizer_json, "-o", tmp_path / "g")
    assert made.returncode == 0, made.stderr
    golden = load_golden(tmp_path / "g.npz")
    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.no_padding()
    for w, (a, b) in enumerate(pairs):
        encoding = tokenizer.encode(a, b)
        n = len(encoding.ids)
        assert golden.live[w] == n and golden.ids[w, 0] == 101 and list(golden.ids[w, :n]).count(102) == 2
        assert golden.token_type_ids[w, :n].tolist() == encoding.type_ids and golden.token_type_ids[w].max() == 1
    assert golden.text_index.tolist() == [0, 1, 2] and golden.token_type_ids[2].max() == 0
    ran = run_porter("run", model, "--golden", tmp_path / "g.npz")
    assert ran.returncode == 0, ran.stderr
    assert "max |dlogit| 0," in ran.stdout.splitlines()[-1]
    without_types = require(REPO / "graphs" / "bert-l2-h128-a4-s64-tok3.litert-dq8.tflite")
    refused = run_porter("golden", without_types, "--texts", texts, "--tokenizer", tokenizer_json, "-o", tmp_path / "h")
    assert_one_line_error(refused, "text 0: the tokenizer gives its segment B token type 1",
                          "has no token-type input")


def _build(model: Path, out: Path, *flags: str) -> Path:
    compiled = run_porter("compile", model, "-o", out, *flags)
    assert compiled.returncode == 0, compiled.stderr
    built = run_porter("build", out)
    assert built.returncode == 0, built.stderr[-3000:]
    return out


@pytest.mark.parametrize("model,golden,flags", [
    ("bert-tok.litert-dq8.tflite", "bert-tok.litert-dq8.tflite.builtin.npz", ()),
    pytest.param("electra-seq.dq8pc.onnx", "electra-seq.dq8pc.onnx.ort.npz", ("--ort-cpu", "avx512vnni"),
                 marks=pytest.mark.slow),  # a second build: under -m slow to keep the default suite short
], ids=["tflite", "onnx"])
def test_a_pair_golden_is_reproduced_by_the_wasm_module(model, golden, flags, toolchain, tmp_path):
    """The module takes the token types in its byte protocol (PEV3) and is bit-identical to the
    pair golden (the ONNX golden was made on an AVX-512 VNNI CPU, whose arithmetic the module
    reproduces wherever it runs); a token type past its table is refused by the module itself."""
    from porter.runtime import evalproto, wasm

    out = _build(require(ZOO / model), tmp_path / "m", *flags)
    goldens = ["--golden", PAIRS / golden]
    if model.endswith(".tflite"):  # 33.1: a LiteRT golden whose flags are partial (no fma), no L1 size
        partial = _golden_copy(PAIRS / golden, tmp_path, cpu_flags=["avx2"], cpu_l1d_bytes=None)
        goldens += ["--golden", partial]
    verified = run_porter("verify", out, *goldens, "--max-abs", "0")
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    assert "porter verify: PASS" in verified.stdout and "max |dlogit| 0 " in verified.stdout
    g = load_golden(PAIRS / golden)
    request = evalproto.encode_request(g.ids[:1], g.attention_mask[:1], g.live[:1], types=g.token_type_ids[:1] + 1)
    done = wasm.run_command(next(out.glob("*.wasm")), stdin=request, timeout_s=30)
    assert done.exit_code == 2
    assert b"token type 2 is outside the model's token types [0, 2)" in done.stderr


def test_the_float_cross_encoder_is_reproduced_by_the_wasm_module(toolchain, tmp_path):
    """A float head with one output on one pooled row is Eigen's inner product: the module must
    take the row's k values from a buffer that holds the whole window (it once read past them)."""
    out = _build(require(REPO / "graphs" / "cross" / "bert-cross.litert-f32.tflite"), tmp_path / "m")
    golden = REPO / "golden" / "cross" / "bert-cross.litert-f32.tflite.builtin.npz"
    verified = run_porter("verify", out, "--golden", golden, "--max-abs", "0")
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    assert "porter verify: PASS" in verified.stdout and "max |dlogit| 0 " in verified.stdout


# --- 33.1: a golden's CPU record matters only where its reference's arithmetic depends on it ---------


def _golden_copy(source: Path, tmp_path: Path, **changes) -> Path:
    """The golden with its manifest edited: a key set to None is removed."""
    target = tmp_path / source.name
    shutil.copy(source, target)
    manifest = json.loads(source.with_suffix(".json").read_text())
    for key, value in changes.items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    target.with_suffix(".json").write_text(json.dumps(manifest))
    return target


@pytest.mark.parametrize("flags", [None, ["sse4_2", "avx2"]], ids=["no-cpu-flags", "flags-without-fma"])
def test_a_litert_golden_needs_no_cpu_flags(flags, tmp_path):
    """LiteRT's builtin kernels pick nothing by CPU flags, and no layer of this float model is
    deeper than Eigen's L1 block, so neither the flags nor the L1 size matter."""
    golden = _golden_copy(PAIRS / "bert-tok.litert-f32.tflite.builtin.npz", tmp_path, cpu_flags=flags,
                          cpu_l1d_bytes=None)
    ran = run_porter("run", require(ZOO / "bert-tok.litert-f32.tflite"), "--golden", golden)
    assert ran.returncode == 0, ran.stderr
    assert "max |dlogit| 0," in ran.stdout.splitlines()[-1]


def test_a_litert_golden_without_its_l1_size_is_refused_where_a_layer_depends_on_it(tmp_path):
    from porter.check.golden import cpu_choices

    source = REPO / "golden" / "minilm2-v8k-tok9-s256.f32.tflite.builtin.npz"
    model = require(REPO / "graphs" / "minilm2-v8k-tok9-s256.f32.tflite")
    manifest = json.loads(source.with_suffix(".json").read_text())
    assert cpu_choices(model, manifest, source.name) == ("auto", "32768")
    manifest.pop("cpu_l1d_bytes")
    result = run_porter("run", model, "--golden", _golden_copy(source, tmp_path, cpu_l1d_bytes=None))
    assert_one_line_error(result, "records no cpu_l1d_bytes", "float layer of depth 1536",
                          'record that size in bytes as "cpu_l1d_bytes"', "--l1d")
    assert cpu_choices(model, manifest, source.name, l1d="48K") == ("auto", "48K")  # an explicit size stays


@pytest.mark.parametrize("flags,named", [(None, "records no cpu_flags"), (["avx2", "avx512f"], "have no fma")],
                         ids=["no-cpu-flags", "flags-without-fma"])
def test_an_onnx_golden_without_the_flags_its_arithmetic_needs_is_refused(flags, named, tmp_path):
    golden = _golden_copy(PAIRS / "bert-tok.dq8pc.onnx.ort.npz", tmp_path, cpu_flags=flags)
    result = run_porter("run", require(ZOO / "bert-tok.dq8pc.onnx"), "--golden", golden)
    assert_one_line_error(result, named, "/proc/cpuinfo", '"cpu_flags"', "--ort-cpu")
