"""`porter bench --service DIR --host wasmtime,spin`: requests to a built service (any task
serve-build or generate-build makes), served as `porter serve` (`wasmtime serve`) and as
`spin up` serve it.

The eval-module timings in porter.bench cover the forward pass alone. A served request also
instantiates the component, tokenizes, encodes the windows and decodes the spans, so this part
serves the component under each host (epoch interruption on, a fresh instance per request) and
reads each response's Server-Timing header: the handler's own clock, per stage. With several
hosts all of them serve at once and the requests alternate between them, so that a busy minute
of the shared machine falls on every host alike. The texts are built with the service's
tokenizer to fill exactly the bench's cases: 20 tokens, and one whole window (a decoder: a 20-token
prompt and one that fills the context, each generating one token, so both time the prompt's pass).
"""

from __future__ import annotations

import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path

from porter.errors import PorterError
from porter.serve.deploy import HOSTS, served
from porter.serve.host import http_request, parse_server_timing, read_facts

START_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 120.0
SERVE_DEADLINE_S = 60.0
# Words that are one token in common vocabularies, tried in turn to land on an exact length.
FILLER = ("Anna Schmidt from Berlin wrote to the office about her card and the new address in "
          "Paris on Monday . She will call back at noon , and then we meet at the station .").split()


def text_of_tokens(tokenizer_json: Path, tokens: int) -> str:
    """A text that the tokenizer encodes to exactly `tokens` ids (special tokens excluded)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.no_padding()  # tokenizer.json may pad or cut to a fixed length; the service does neither
    tokenizer.no_truncation()
    words: list[str] = []
    count = 0
    stalled = 0
    position = 0
    while count < tokens:
        candidate = words + [FILLER[position % len(FILLER)]]
        position += 1
        length = len(tokenizer.encode(" ".join(candidate), add_special_tokens=False).ids)
        if length <= tokens:
            words, count, stalled = candidate, length, 0
        else:
            stalled += 1
        if stalled > len(FILLER):
            raise PorterError(f"{tokenizer_json}: cannot build a text of exactly {tokens} tokens from the filler words")
    return " ".join(words)


def time_request(port: int, route: str, body: dict) -> tuple[dict[str, float], float]:
    """The Server-Timing entries and the client's round trip (ms) of one POST."""
    started = time.perf_counter()
    status, headers, raw = http_request(port, "POST", route, json.dumps(body).encode(),
                                        {"content-type": "application/json"}, REQUEST_TIMEOUT_S)
    round_trip = (time.perf_counter() - started) * 1000.0
    if status != 200:
        raise PorterError(f"POST {route} answered {status}: {raw[:200]!r}")
    if "server-timing" not in headers:
        raise PorterError(f"POST {route} answered without a Server-Timing header")
    return {name: ms for name, (ms, _) in parse_server_timing(headers["server-timing"]).items()}, round_trip


# What each kind of service is asked: its main route and a request of one text (a pair's two
# halves for a reranker). format -> task -> (route, body of the text(s)).
REQUESTS = {
    "porter.service/1": {"redact": ("/redact", lambda texts: {"text": texts[0]})},
    "porter.encoder/1": {
        "embeddings": ("/embed", lambda texts: {"inputs": texts[0]}),
        "sequence-classification": ("/predict", lambda texts: {"inputs": texts[0]}),
        "token-classification": ("/predict", lambda texts: {"inputs": texts[0]}),
        "rerank": ("/rerank", lambda texts: {"query": texts[0], "texts": [texts[1]], "raw_scores": True}),
    },
    "porter.generate/1": {"generate": ("/v1/completions", lambda texts: {
        "prompt": texts[0], "max_tokens": 1, "temperature": 0, "ignore_eos": True})},
}


def service_plan(out_dir: Path, short_tokens: int) -> tuple[dict, str, str, dict]:
    """(service.json, task, route, case -> (tokens in the window, body)), or a clear error."""
    from tokenizers import Tokenizer

    facts = read_facts(out_dir)
    tasks = REQUESTS.get(facts.get("format"))
    task = facts.get("task", next(iter(tasks))) if tasks else None
    if not tasks or task not in tasks:
        raise PorterError(f"{out_dir}: --service takes a service built by porter serve-build or generate-build, "
                          f"not {facts.get('format')} {facts.get('task') or ''}".rstrip())
    route, body = tasks[task]
    tokenizer = Path(facts["tokenizer"])
    pair = task == "rerank"
    if facts["format"] == "porter.service/1":  # the redaction service records its special ids
        specials = len(facts["prefix_ids"]) + len(facts["suffix_ids"])
    else:
        processor = Tokenizer.from_file(str(tokenizer)).post_processor
        specials = processor.num_special_tokens_to_add(pair) if processor is not None else 0
    window = int(facts.get("window") or facts["n_ctx"] - 1)  # a decoder keeps a slot for the token it generates
    cases = {}
    for name, tokens in ((f"{short_tokens} tokens", short_tokens), ("full window", window)):
        content = tokens - specials
        halves = [content - content // 2, content // 2] if pair else [content]
        cases[name] = (tokens, body([text_of_tokens(tokenizer, n) for n in halves]))
    return facts, task, route, cases


def summary(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "runs": len(values)}


def redaction_facts(out_dir: Path) -> dict:
    """service.json of a built redaction service, or a clear error (porter bench --load sends
    maximal /redact requests)."""
    facts = read_facts(out_dir)
    if facts.get("format") != "porter.service/1":
        raise PorterError(f"{out_dir}: --service takes a redaction service (porter serve-build), "
                          f"not {facts.get('format')}")
    return facts


def parse_hosts(text: str) -> list[str]:
    """--host: comma-separated, each once, in the order given."""
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    unknown = [h for h in hosts if h not in HOSTS]
    if unknown or not hosts or len(set(hosts)) != len(hosts):
        raise PorterError(f"--host {text!r}: give one or more of {', '.join(HOSTS)}, comma-separated, each once")
    return hosts


def bench_service(out_dir: Path, short_tokens: int, runs: int, hosts: tuple[str, ...] = ("wasmtime",), echo=print) -> dict:
    """Times a 20-token request and a one-window request under each host; returns the report's
    service part: {"task", "route", "hosts": {host: {"start_s", "cases": {case: ...}}}}."""
    facts, task, route, cases = service_plan(out_dir, short_tokens)
    report = {"component": str(out_dir / facts["component"]), "task": task, "route": route, "runs": runs,
              "hosts": {}}
    with ExitStack() as stack:
        servers = [stack.enter_context(served(out_dir, host, out_dir / f"bench-{host}.log", SERVE_DEADLINE_S,
                                              START_TIMEOUT_S)) for host in hosts]
        for server in servers:
            report["hosts"][server.host] = {"start_s": server.start_s, "cases": {}}
        for name, (tokens, body) in cases.items():
            samples = {server.host: ([], []) for server in servers}
            for run in range(runs + 1):
                for server in servers:
                    stages, round_trip = time_request(server.port, route, body)
                    if run > 0:  # the first request of a case warms the host's code and page caches
                        samples[server.host][0].append(stages)
                        samples[server.host][1].append(round_trip)
            for host, (served_stages, round_trips) in samples.items():
                report["hosts"][host]["cases"][name] = {
                    "tokens": tokens, "client_ms": summary(round_trips),
                    "server_ms": {stage: summary([s[stage] for s in served_stages]) for stage in served_stages[0]}}
    for line in service_lines(report):
        echo(line)
    return report


HOST_LINES = {"wasmtime": "wasmtime serve (porter serve's settings)", "spin": "spin up (the manifest porter deploy writes)"}


def service_lines(report: dict) -> list[str]:
    lines = [f"served {report['task']} ({report['route']}), epoch interruption and a fresh instance per request, {report['runs']} requests per "
             f"case and host{' alternating between hosts' if len(report['hosts']) > 1 else ''}; Server-Timing "
             f"min / median ms:"]
    for host, result in report["hosts"].items():
        lines.append(f" {HOST_LINES[host]}: first /ping answered {result['start_s']:.1f} s after start")
        for name, case in result["cases"].items():
            stages = case["server_ms"]
            total = stages.get("total", {"min": float("nan"), "median": float("nan")})
            parts = ", ".join(f"{stage} {s['median']:.2f}" for stage, s in stages.items() if stage != "total")
            lines.append(f"  {name} ({case['tokens']} tokens in the window): total {total['min']:.2f} / "
                         f"{total['median']:.2f}; medians: {parts}; client round trip median "
                         f"{case['client_ms']['median']:.2f}")
    return lines
