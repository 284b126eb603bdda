"""The text-generation service end to end: `porter generate-build` builds the wasi:http component
of examples/tinystories (float32 and Q8_0) once per module, the real `wasmtime serve` runs it on
127.0.0.1, and so does the real `spin up` from the manifest `porter deploy` writes (the `host`
fixture, when a spin program is there), and a real HTTP client drives it. Greedy output is checked token for token against the
decoder crate's own eval module (`porter build` of the rendered decoder/ crate, over
porter.runtime.decoder_proto) and, for float32, against the onnxruntime golden; text and ids against the
`tokenizers` library. OpenAI's POST /v1/completions is driven by the `openai` package (whole and
streamed) and must give the same tokens as /generate; `porter deploy --kube` writes the SpinKube
manifest and pushes the built app with the real `spin registry push` to a registry on loopback."""

from __future__ import annotations

import hashlib
import http.client
import json
import shlex
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from tokenizers import Tokenizer

from fixtures import REPO, assert_one_line_error, deployed_manifest, run_porter
from porter.runtime import decoder_proto
from porter.serve.deploy import porter_program, served
from porter.serve.generate import generate_build
from porter.serve.host import free_port, http_request, parse_server_timing, stop_server
from porter.toolchain.discover import find_spin

EXAMPLE = REPO / "examples" / "tinystories"
MODEL = EXAMPLE / "model" / "tinystories.onnx"
TOKENIZER_JSON = EXAMPLE / "model" / "tokenizer.json"
GOLDEN = np.load(EXAMPLE / "golden" / "tinystories_greedy.npz")
PROMPTS = [p["prompt"] for p in json.loads((EXAMPLE / "golden" / "manifest.json").read_text())["prompts"]]
STEPS = 32
N_CTX = 128
END_OF_TEXT = 0
REQUEST_TIMEOUT_S = 60
START_TIMEOUT_S = 60
SERVE_TIMEOUT_S = 30  # wasmtime's per-request epoch deadline (Spin sets none)
MAX_PROMPT_BYTES = 4096
MAX_BODY_BYTES = 16 * 1024

TEXTS = [
    "Once upon a time, there was a little girl named Lily.",
    "Hello  world, it's 2024!\n\n  ok",
    "don't I'LL you've we'd they're  \t\n x",
    "Ünïcödé 日本語 😀 αβγ ٣٤ Ⅻ ½ ﬁ e\u0301 ﷽",
    "   leading spaces", "trailing spaces   ", "a\u00a0b\u2003c\u3000d",
    "<|endoftext|>Tom<|endoftext|><|endoftext|>", "x<|endoftext", "'s's'S''",
    "tab\there\r\n\r\n", "1234567890 3.14 1,000,000", "$$$ ### ... !!!?", "👩‍💻🎉 emoji",
    "Sehr geehrte Frau Müller, bitte überweisen Sie den Betrag.", "Nazywam się Łukasz Wiśniewski.",
    "Привет, мир!", "مرحبا بالعالم", "\u0085next line\u2028sep", " ", "\n", "a",
]


@dataclass
class Service:
    port: int
    out_dir: Path
    facts: dict
    host: str

    def request(self, method: str, path: str, body: bytes | str | None = None,
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        """(status, lower-cased headers, raw body)."""
        return http_request(self.port, method, path, body, headers)

    def post(self, path: str, payload) -> tuple[int, dict, dict]:
        status, headers, raw = self.request("POST", path, json.dumps(payload), {"content-type": "application/json"})
        return status, headers, json.loads(raw)

    def generate(self, **payload) -> dict:
        status, _, body = self.post("/generate", payload)
        assert status == 200, body
        return body

    def stream(self, **payload) -> tuple[dict, list[bytes]]:
        """(headers, the body's pieces as they arrived)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT_S)
        try:
            connection.request("POST", "/generate", body=json.dumps({**payload, "stream": True}).encode())
            response = connection.getresponse()
            assert response.status == 200, response.read()
            pieces = []
            while piece := response.read1(65536):  # one chunk at a time
                pieces.append(piece)
            return {k.lower(): v for k, v in response.getheaders()}, pieces
        finally:
            connection.close()


def build_decoder_module(out_dir: Path) -> Path:
    """`porter build` of the decoder crate that generate-build rendered. Run right after the
    render: the builds share one cargo target directory and a crate name, and cargo takes an
    artifact built after a crate's files were written as fresh, even for another crate's files."""
    result = run_porter("build", out_dir / "decoder")
    assert result.returncode == 0, result.stderr
    return next((out_dir / "decoder").glob("*.wasm"))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """quant -> (the service's output directory and service.json, its decoder crate's eval module)."""
    built = {}
    for quant in ("float32", "q8_0"):
        out = tmp_path_factory.mktemp("generate") / quant
        facts = generate_build(MODEL, TOKENIZER_JSON, out, quant=quant, echo=lambda *_: None)
        built[quant] = (out, facts, build_decoder_module(out))
    return built


@pytest.fixture(scope="module")
def services(builds, host):
    """quant -> (a running service built with those weights under `host`, its eval module)."""
    with ExitStack() as stack:
        running = {}
        for quant, (out, facts, module) in builds.items():
            server = stack.enter_context(served(out, host, out / f"{host}.log", SERVE_TIMEOUT_S, START_TIMEOUT_S))
            running[quant] = (Service(server.port, out, facts, host), module)
        yield running


@pytest.fixture(scope="module")
def service(services):
    return services["float32"][0]


@pytest.fixture(scope="module")
def crate_greedy(builds):
    """quant -> the decoder crate's own greedy ids for the golden prompts (its eval module)."""
    modules = {quant: module for quant, (_, _, module) in builds.items()}
    # The two weight formats must really be two modules (see build_decoder_module).
    assert modules["q8_0"].stat().st_size < modules["float32"].stat().st_size / 2
    prompts = [GOLDEN[f"p{i}_prompt_ids"] for i in range(len(PROMPTS))]
    return {quant: [g.generated for g in decoder_proto.generate(module, prompts, STEPS)[0]]
            for quant, module in modules.items()}


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_file(str(TOKENIZER_JSON))


# --- tests ---------------------------------------------------------------------------------------


def test_ping_answers_without_the_model(service):
    status, headers, body = service.request("GET", "/ping")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    assert list(parse_server_timing(headers["server-timing"])) == ["total"]


def test_health_info_and_the_main_route(service, builds):
    """GET /health as /ping; GET /info names the model, its window and the reference; POST / is
    /v1/completions (the main route, as Hugging Face's endpoints answer)."""
    status, _, body = service.request("GET", "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    status, _, body = service.request("GET", "/info")
    info = json.loads(body)
    _, facts, _ = builds["float32"]
    assert status == 200 and info["task"] == "text-generation" and info["model_id"] == MODEL.name
    assert info["model_sha"] == hashlib.sha256(MODEL.read_bytes()).hexdigest()
    assert info["max_input_length"] == facts["n_ctx"] - 1 and info["vocab"] == facts["vocab"]
    assert "onnxruntime" in info["reference"] and "float32 weights" in info["reference"]
    request = {"prompt": PROMPTS[0], "max_tokens": 8, "temperature": 0}
    main, _, via_root = service.post("/", request)
    direct, _, completions = service.post("/v1/completions", request)
    assert (main, direct) == (200, 200)
    assert via_root["choices"][0]["text"] == completions["choices"][0]["text"]


def test_component_fits_spin(services):
    services = {quant: service for quant, (service, _) in services.items()}
    for service in services.values():
        assert service.facts["component_bytes"] == (service.out_dir / "generate.wasm").stat().st_size
        assert service.facts["component_bytes"] < 50 * 1024 * 1024
    assert services["q8_0"].facts["component_bytes"] < services["float32"].facts["component_bytes"]


@pytest.mark.parametrize("quant", ["float32", "q8_0"])
def test_greedy_equals_the_decoder_crate(services, crate_greedy, tokenizer, quant):
    """32 greedy steps without stopping at <|endoftext|>, as the crate and the golden decode."""
    for i, prompt in enumerate(PROMPTS):
        assert tokenizer.encode(prompt).ids == GOLDEN[f"p{i}_prompt_ids"].tolist()
        reply = services[quant][0].generate(prompt=prompt, maxTokens=STEPS, stopAtEndOfText=False)
        assert reply["tokens"] == crate_greedy[quant][i], prompt
        if quant == "float32":
            assert reply["tokens"] == GOLDEN[f"p{i}_generated_ids"].tolist(), prompt
        assert reply["promptTokens"] == len(GOLDEN[f"p{i}_prompt_ids"])
        assert reply["stop"] == "length"
        assert reply["text"] == tokenizer.decode(reply["tokens"])


def test_greedy_stops_at_end_of_text(service, tokenizer):
    for i, prompt in enumerate(PROMPTS):
        golden = GOLDEN[f"p{i}_generated_ids"].tolist()
        reply = service.generate(prompt=prompt, maxTokens=STEPS)
        if END_OF_TEXT in golden:
            assert reply["tokens"] == golden[:golden.index(END_OF_TEXT) + 1]
            assert reply["stop"] == "endoftext"
        else:
            assert (reply["tokens"], reply["stop"]) == (golden, "length")
        assert reply["text"] == tokenizer.decode(reply["tokens"])


def test_context_stop(service):
    prompt = "Tom and Sue went to the park. " * 12
    prompt_tokens = service.post("/tokenize", {"prompt": prompt})[2]["promptTokens"]
    reply = service.generate(prompt=prompt, maxTokens=N_CTX - prompt_tokens, stopAtEndOfText=False)
    assert reply["stop"] == "context"
    assert reply["promptTokens"] + len(reply["tokens"]) == N_CTX


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_matches_the_reference(service, tokenizer, text):
    status, _, reply = service.post("/tokenize", {"prompt": text})
    assert status == 200, reply
    ids = tokenizer.encode(text).ids
    assert reply["tokens"] == ids
    assert reply["promptTokens"] == len(ids)
    assert reply["text"] == tokenizer.decode(ids)


def test_sampling_is_deterministic(service, tokenizer):
    def sample(seed):
        return service.generate(prompt="Once upon a time", maxTokens=24, temperature=1.5, seed=seed,
                                stopAtEndOfText=False)

    first = sample(7)
    assert sample(7) == first
    others = [sample(seed)["tokens"] for seed in (8, 9, 10)]
    assert any(tokens != first["tokens"] for tokens in others)
    # Hot sampling draws rare tokens, byte pieces included: the text is still the reference's.
    for seed in (7, 8, 9, 10, 11):
        reply = sample(seed)
        assert reply["text"] == tokenizer.decode(reply["tokens"])


def test_top_k_1_is_greedy(service):
    greedy = service.generate(prompt="Love is", maxTokens=20)
    for seed in (1, 2):
        reply = service.generate(prompt="Love is", maxTokens=20, temperature=0.9, topK=1, seed=seed)
        assert reply["tokens"] == greedy["tokens"]


@pytest.mark.parametrize("payload", [{}, {"temperature": 1.2, "seed": 3, "topK": 40}])
def test_stream_equals_the_whole_text(service, payload):
    request = {"prompt": "The secret of life is", "maxTokens": 32, "stopAtEndOfText": False, **payload}
    whole = service.generate(**request)
    headers, pieces = service.stream(**request)
    assert headers["transfer-encoding"] == "chunked"
    assert headers["content-type"].startswith("text/plain")
    assert len(pieces) > 1
    assert b"".join(pieces).decode() == whole["text"]
    # The prompt pass is done before the headers go; the rest of the timing is a trailer.
    assert list(parse_server_timing(headers["server-timing"])) == ["tokenizer", "model", "prompt"]


def test_server_timing_splits_the_request(service):
    status, headers, raw = service.request("POST", "/generate", json.dumps(
        {"prompt": "A man walks into a bar", "maxTokens": STEPS, "stopAtEndOfText": False}))
    assert status == 200
    timing = parse_server_timing(headers["server-timing"])
    assert list(timing) == ["tokenizer", "model", "prompt", "decode", "per_token", "total"]
    assert timing["prompt"][1] == "7 tokens"
    assert timing["decode"][1] == f"{STEPS - 1} steps"
    assert timing["per_token"][0] == pytest.approx(timing["decode"][0] / (STEPS - 1), abs=0.01)
    assert timing["total"][0] >= timing["prompt"][0] + timing["decode"][0]
    print(f"\nServer-Timing of {STEPS} greedy tokens: {headers['server-timing']}")


LONG = "a" * (MAX_PROMPT_BYTES + 1)
BAD_REQUESTS = [
    ("POST", "/generate", "{not json", 400),
    ("POST", "/generate", "[1, 2]", 400),
    ("POST", "/generate", "{}", 400),
    ("POST", "/generate", json.dumps({"prompt": 5}), 400),
    ("POST", "/generate", json.dumps({"prompt": "a", "maxTokens": "5"}), 400),
    ("POST", "/generate", json.dumps({"prompt": "a", "maxTokens": 1.5}), 400),
    ("POST", "/generate", json.dumps({"prompt": "a", "maxTokens": 0}), 422),
    ("POST", "/generate", json.dumps({"prompt": "a", "maxTokens": N_CTX}), 422),
    ("POST", "/generate", json.dumps({"prompt": "a", "maxTokens": -3}), 422),
    ("POST", "/generate", json.dumps({"prompt": "a", "temperature": "hot"}), 400),
    ("POST", "/generate", json.dumps({"prompt": "a", "temperature": -0.5}), 422),
    ("POST", "/generate", json.dumps({"prompt": "a", "topK": 2049}), 422),
    ("POST", "/generate", json.dumps({"prompt": "a", "seed": -1}), 422),
    ("POST", "/generate", json.dumps({"prompt": "a", "stream": "yes"}), 400),
    ("POST", "/generate", json.dumps({"prompt": "a", "maxtokens": 5}), 400),
    ("POST", "/generate", json.dumps({"prompt": ""}), 422),
    ("POST", "/generate", json.dumps({"prompt": "Tom ran. " * 40, "maxTokens": 100}), 422),
    ("POST", "/generate", json.dumps({"prompt": LONG}), 413),
    ("POST", "/generate", json.dumps({"prompt": "a", "pad": "x" * MAX_BODY_BYTES}), 413),
    ("POST", "/tokenize", json.dumps({"text": "a"}), 400),
    ("GET", "/generate", None, 405),
    ("POST", "/ping", "{}", 405),
    ("GET", "/nope", None, 404),
]


@pytest.mark.parametrize("method, path, body, status", BAD_REQUESTS)
def test_bad_requests_get_json_errors(service, method, path, body, status):
    got, headers, raw = service.request(method, path, body)
    reply = json.loads(raw)
    assert (got, reply["status"]) == (status, status), reply
    assert reply["error"]
    assert "total" in parse_server_timing(headers["server-timing"])
    if status == 405:
        assert headers["allow"] == ("POST" if path == "/generate" else "GET")


def test_deploy_writes_the_spin_manifest(services, tmp_path, capsys):
    service = services["q8_0"][0]
    spec = deployed_manifest(service.out_dir, tmp_path, capsys)
    manifest = tmp_path / "app" / "spin.toml"
    assert spec["trigger"]["http"] == [{"route": "/...", "component": "generate"}]
    component = spec["component"]["generate"]
    assert component["allowed_outbound_hosts"] == []
    assert (manifest.parent / component["source"]).resolve() == (service.out_dir / "generate.wasm").resolve()
    build = shlex.split(component["build"]["command"])
    assert build[:4] == [*porter_program(), "generate-build"]
    assert build[build.index("--quant") + 1] == "q8_0"
    assert (manifest.parent / build[-1]).resolve() == service.out_dir.resolve()


def test_an_encoder_is_refused(tmp_path):
    encoder = REPO / "graphs" / "bert-l2-h128-a4-s64-tok3.nomask.litert-dq8.tflite"
    result = run_porter("generate-build", encoder, "--tokenizer", TOKENIZER_JSON, "-o", tmp_path / "out")
    assert_one_line_error(result, "not a decoder", "serve-build")


def test_a_wordpiece_tokenizer_is_refused(tmp_path):
    spec = json.loads(TOKENIZER_JSON.read_text())
    spec["model"]["type"] = "WordPiece"
    wordpiece = tmp_path / "tokenizer.json"
    wordpiece.write_text(json.dumps(spec))
    result = run_porter("generate-build", MODEL, "--tokenizer", wordpiece, "-o", tmp_path / "out")
    assert_one_line_error(result, "WordPiece", "byte-level BPE")


# --- OpenAI's POST /v1/completions, through the `openai` package ------------------------------


@pytest.fixture(scope="module")
def clients(services):
    """quant -> an `openai.OpenAI` client of that service."""
    import openai

    return {quant: openai.OpenAI(base_url=f"http://127.0.0.1:{service.port}/v1", api_key="unused", max_retries=0,
                                 timeout=REQUEST_TIMEOUT_S)
            for quant, (service, _) in services.items()}


def complete(client, prompt, **options):
    """One completion with its generated ids (the vLLM-style return_token_ids extension)."""
    extra = {key: options.pop(key) for key in ("top_k", "ignore_eos") if key in options}
    completion = client.completions.create(model="tinystories", prompt=prompt,
                                           extra_body={"return_token_ids": True, **extra}, **options)
    assert (completion.object, completion.model, len(completion.choices)) == ("text_completion", "tinystories", 1)
    assert completion.id.startswith("cmpl-")
    choice = completion.choices[0]
    tokens = choice.model_extra["token_ids"]
    assert completion.usage.completion_tokens == len(tokens)
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + len(tokens)
    return choice, tokens


@pytest.mark.spin_representative  # the generation service's one test under spin up in the default suite
@pytest.mark.parametrize("quant", ["float32", "q8_0"])
def test_completions_greedy_equals_generate_and_the_golden(clients, services, crate_greedy, tokenizer, quant):
    """temperature 0 through the openai client: the decoder crate's ids (and the onnxruntime
    golden's, for float32) token for token, and /generate's for the same settings."""
    for i, prompt in enumerate(PROMPTS):
        choice, tokens = complete(clients[quant], prompt, max_tokens=STEPS, temperature=0, ignore_eos=True)
        assert tokens == crate_greedy[quant][i], prompt
        if quant == "float32":
            assert tokens == GOLDEN[f"p{i}_generated_ids"].tolist(), prompt
        assert choice.text == tokenizer.decode(tokens)
        assert choice.finish_reason == "length"
        generated = services[quant][0].generate(prompt=prompt, maxTokens=STEPS, stopAtEndOfText=False)
        assert (generated["tokens"], generated["text"]) == (tokens, choice.text)


def test_completions_stop_at_end_of_text(clients, service):
    for prompt in PROMPTS:
        choice, tokens = complete(clients["float32"], [prompt], max_tokens=STEPS, temperature=0)
        generated = service.generate(prompt=prompt, maxTokens=STEPS)
        assert tokens == generated["tokens"]
        assert choice.finish_reason == {"endoftext": "stop", "length": "length"}[generated["stop"]]


@pytest.mark.parametrize("options", [{"temperature": 1.2, "seed": 3}, {"temperature": 0.8, "seed": 11, "top_k": 40}])
def test_completions_sampling_equals_generate(clients, service, tokenizer, options):
    """The same seed and sampling give /generate's tokens, and the same tokens every time."""
    prompt = "Once upon a time"
    choice, tokens = complete(clients["float32"], prompt, max_tokens=24, ignore_eos=True, **options)
    generated = service.generate(prompt=prompt, maxTokens=24, stopAtEndOfText=False, temperature=options["temperature"],
                                 seed=options["seed"], topK=options.get("top_k", 0))
    assert tokens == generated["tokens"]
    assert choice.text == generated["text"] == tokenizer.decode(tokens)
    assert complete(clients["float32"], prompt, max_tokens=24, ignore_eos=True, **options) == (choice, tokens)


def test_top_p_keeps_the_nucleus(clients):
    prompt, settings = "Love is", {"max_tokens": 20, "ignore_eos": True, "temperature": 1.0}
    greedy = complete(clients["float32"], prompt, max_tokens=20, ignore_eos=True, temperature=0)[1]
    # A nucleus of one token is greedy, whatever the seed.
    assert all(complete(clients["float32"], prompt, top_p=1e-9, seed=seed, **settings)[1] == greedy for seed in (1, 2))
    nucleus = [complete(clients["float32"], prompt, top_p=0.5, seed=seed, **settings)[1] for seed in (1, 2, 3, 4)]
    assert complete(clients["float32"], prompt, top_p=0.5, seed=1, **settings)[1] == nucleus[0]
    assert any(tokens != nucleus[0] for tokens in nucleus[1:])


def stop_texts(text: str) -> list[str]:
    """Stop texts taken out of a generated text: one that spans several tokens in the middle, one
    that comes only after it (so the first to be generated is also the first in the text), and
    one that never comes."""
    middle = len(text) // 3
    first, later = text[middle:middle + 7], text[2 * middle:2 * middle + 3]
    return [first, "never in it \x01"] + ([later] if text.find(later) >= middle + len(first) else [])


def test_stop_cuts_the_text_before_the_first_stop(clients):
    client = clients["float32"]
    for prompt in PROMPTS:
        whole = complete(client, prompt, max_tokens=STEPS, temperature=0, ignore_eos=True)[0].text
        stops = stop_texts(whole)
        expected = whole[:min(i for i in (whole.find(s) for s in stops) if i >= 0)]
        choice, _ = complete(client, prompt, max_tokens=STEPS, temperature=0, ignore_eos=True, stop=stops)
        assert (choice.text, choice.finish_reason) == (expected, "stop"), prompt
        streamed = client.completions.create(model="tinystories", prompt=prompt, max_tokens=STEPS, temperature=0,
                                             stop=stops, stream=True, extra_body={"ignore_eos": True})
        chunks = list(streamed)
        assert "".join(c.choices[0].text for c in chunks) == expected
        assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"


@pytest.mark.parametrize("stop", [None, "\n"])
def test_completions_stream_equals_the_whole_text(clients, stop):
    client = clients["float32"]
    settings = {"model": "tinystories", "prompt": "The secret of life is", "max_tokens": STEPS, "temperature": 0.9,
                "seed": 5, "stop": stop}
    whole = client.completions.create(**settings)
    chunks = list(client.completions.create(**settings, stream=True, stream_options={"include_usage": True}))
    *texts, usage = chunks
    assert len(texts) > 2
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("cmpl-")
    assert "".join(c.choices[0].text for c in texts) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in texts] == [None] * (len(texts) - 1) + [whole.choices[0].finish_reason]
    assert usage.choices == [] and usage.usage == whole.usage


def test_completions_stream_is_server_sent_events(service):
    """The wire format a non-openai client reads: `data: {json}` events, then `data: [DONE]`."""
    connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": "Never trust", "max_tokens": 8, "temperature": 0, "stream": True, "ignore_eos": True,
             "return_token_ids": True}))
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("content-type") == "text/event-stream"
        events = response.read().decode().split("\n\n")
    finally:
        connection.close()
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert all(event.startswith("data: {") for event in events[:-2])
    assert {chunk["object"] for chunk in chunks} == {"text_completion"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    generated = service.generate(prompt="Never trust", maxTokens=8, stopAtEndOfText=False)
    assert chunks[-1]["choices"][0]["token_ids"] == generated["tokens"]
    assert "".join(chunk["choices"][0]["text"] for chunk in chunks) == generated["text"]


LONG_PROMPT = "Tom ran. " * 40
BAD_COMPLETIONS = [
    ("{not json", 400, None),
    ("[1, 2]", 400, None),
    (json.dumps({"model": "m"}), 400, "prompt"),
    (json.dumps({"prompt": 5}), 400, "prompt"),
    (json.dumps({"prompt": ["a", "b"]}), 400, "prompt"),
    (json.dumps({"prompt": ""}), 400, "prompt"),
    (json.dumps({"prompt": "a", "max_tokens": 0}), 400, "max_tokens"),
    (json.dumps({"prompt": "a", "max_tokens": N_CTX}), 400, "max_tokens"),
    (json.dumps({"prompt": "a", "max_tokens": "5"}), 400, "max_tokens"),
    (json.dumps({"prompt": "a", "max_tokens": 1.5}), 400, "max_tokens"),
    (json.dumps({"prompt": "a", "temperature": 2.5}), 400, "temperature"),
    (json.dumps({"prompt": "a", "temperature": "hot"}), 400, "temperature"),
    (json.dumps({"prompt": "a", "top_p": 0}), 400, "top_p"),
    (json.dumps({"prompt": "a", "top_k": 2049}), 400, "top_k"),
    (json.dumps({"prompt": "a", "seed": -1}), 400, "seed"),
    (json.dumps({"prompt": "a", "stop": 7}), 400, "stop"),
    (json.dumps({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}), 400, "stop"),
    (json.dumps({"prompt": "a", "stop": [""]}), 400, "stop"),
    (json.dumps({"prompt": "a", "stream": "yes"}), 400, "stream"),
    (json.dumps({"prompt": "a", "stream_options": {"include_usage": 1}}), 400, "include_usage"),
    (json.dumps({"prompt": "a", "n": 2}), 400, "n"),
    (json.dumps({"prompt": "a", "model": 3}), 400, "model"),
    (json.dumps({"prompt": "a", "logit_bias": {"5": 1}}), 400, "logit_bias"),
    (json.dumps({"prompt": "a", "maxTokens": 5}), 400, "maxTokens"),
    (json.dumps({"prompt": LONG_PROMPT, "max_tokens": 100}), 400, "prompt"),
    (json.dumps({"prompt": LONG}), 413, "prompt"),
    (json.dumps({"prompt": "a", "user": "x" * MAX_BODY_BYTES}), 413, None),
]


@pytest.mark.parametrize("body, status, param", BAD_COMPLETIONS)
def test_bad_completions_get_openai_errors(service, body, status, param):
    got, headers, raw = service.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    reply = json.loads(raw)
    assert got == status, reply
    assert set(reply) == {"error"} and set(reply["error"]) == {"message", "type", "param", "code"}
    assert reply["error"]["type"] == "invalid_request_error" and reply["error"]["message"]
    assert reply["error"]["param"] == param
    assert "total" in parse_server_timing(headers["server-timing"])


def test_the_openai_client_raises_the_errors(clients):
    import openai

    with pytest.raises(openai.BadRequestError) as raised:
        clients["float32"].completions.create(model="tinystories", prompt=LONG_PROMPT, max_tokens=100)
    assert raised.value.code == "context_length_exceeded" and raised.value.param == "prompt"
    with pytest.raises(openai.BadRequestError) as raised:
        clients["float32"].completions.create(model="tinystories", prompt="a", max_tokens=N_CTX, stream=True)
    assert raised.value.param == "max_tokens"


def test_completions_wrong_method_is_an_openai_error(service):
    status, headers, raw = service.request("GET", "/v1/completions")
    assert (status, headers["allow"]) == (405, "POST")
    assert json.loads(raw)["error"]["type"] == "invalid_request_error"


# --- porter deploy --kube: the SpinKube manifest and `spin registry push` -----------------------


def deploy_kube(out_dir, *args):
    return subprocess.run([sys.executable, str(REPO / "cli.py"), "deploy", str(out_dir), "--kube", *args],
                          capture_output=True, text=True, cwd=REPO)


def test_deploy_kube_dry_run_prints_the_manifest_and_the_push(builds):
    out = builds["q8_0"][0]
    image = "localhost:5000/tinystories:0.1.0"
    result = deploy_kube(out, "--image", image, "--autoscaler", "hpa", "--replicas", "1", "--max-replicas", "6",
                         "--cpu-limit", "1", "--memory-limit", "256Mi", "--dry-run", "--", "--insecure")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(f"wrote {out / 'spinapp.yaml'}:")
    printed = "\n".join(lines[start + 1:-1]) + "\n"
    assert printed == (out / "spinapp.yaml").read_text()
    app, hpa = yaml.safe_load_all(printed)
    assert app["spec"] == {"image": image, "executor": "containerd-shim-spin", "enableAutoscaling": True,
                           "resources": {"limits": {"cpu": "1", "memory": "256Mi"}}}
    assert (hpa["kind"], hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == ("HorizontalPodAutoscaler", 1, 6)
    assert shlex.split(lines[-1].removeprefix("would run: ")) == [
        "spin", "registry", "push", "--from", str(out / "spin.toml"), "--insecure", image]


@pytest.fixture
def registry(tmp_path):
    """An OCI registry (Debian's docker-registry, the distribution project's) on a loopback port;
    yields its host:port."""
    program = shutil.which("docker-registry")
    if program is None:
        pytest.skip("no docker-registry program (scripts/setup.sh installs Debian's)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    log_path = tmp_path / "registry.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([program, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not registry_answers(port):
                assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            yield f"localhost:{port}"
        finally:
            stop_server(server)


def registry_answers(port: int) -> bool:
    try:
        return http_request(port, "GET", "/v2/")[0] == 200
    except OSError:
        return False


def test_deploy_kube_pushes_the_component_to_a_registry(builds, registry):
    """The real `spin registry push` (over plain HTTP: --insecure, passed through after `--`) of
    the built app: the registry then holds the component itself as the artifact's wasm layer."""
    finding = find_spin()
    if not finding.ok:
        pytest.skip(f"no spin: {finding.install}")
    out, facts, _ = builds["q8_0"]
    image = f"{registry}/tinystories:0.1.0"
    result = deploy_kube(out, "--image", image, "--", "--insecure")
    assert result.returncode == 0, result.stderr
    assert f"pushed {image}" in result.stdout
    port = int(registry.rsplit(":", 1)[1])
    status, _, raw = http_request(port, "GET", "/v2/tinystories/manifests/0.1.0",
                                  headers={"accept": "application/vnd.oci.image.manifest.v1+json"})
    assert status == 200, raw
    wasm = [layer for layer in json.loads(raw)["layers"] if layer["mediaType"].endswith("+wasm")]
    assert [(layer["digest"], layer["size"]) for layer in wasm] == [
        ("sha256:" + facts["component_sha256"], facts["component_bytes"])]
    assert yaml.safe_load((out / "spinapp.yaml").read_text())["spec"]["image"] == image


def test_deploy_kube_names_a_failed_push(builds):
    """Nothing listens on the reference's port: one line naming the reference, exit 2."""
    if not find_spin().ok:
        pytest.skip("no spin")
    image = f"localhost:{free_port()}/tinystories:0.1.0"
    assert_one_line_error(deploy_kube(builds["q8_0"][0], "--image", image, "--", "--insecure"),
                          f"spin registry push {image} failed")


def test_bench_times_a_prompt_of_20_tokens_and_one_filling_the_context(builds):
    """porter bench --service on the generation service: /v1/completions generating one token
    after a 20-token prompt and after one that fills the context, timed by Server-Timing."""
    from porter.bench.service import bench_service

    out, facts, _ = builds["q8_0"]
    report = bench_service(out, 20, runs=1, hosts=("wasmtime",), echo=lambda *_: None)
    assert (report["task"], report["route"]) == ("generate", "/v1/completions")
    cases = report["hosts"]["wasmtime"]["cases"]
    assert {name: case["tokens"] for name, case in cases.items()} == {"20 tokens": 20, "full window": facts["n_ctx"] - 1}
    for case in cases.values():
        assert 0 < case["server_ms"]["total"]["min"] <= case["client_ms"]["median"]
