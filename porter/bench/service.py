"""`porter bench --service DIR`: requests to a built redaction service inside `wasmtime serve`.

The eval-module timings in porter.bench cover the forward pass alone. A served request also
instantiates the component, tokenizes, encodes the windows and decodes the spans, so this part
serves the component as Spin would (wasmtime serve, epoch interruption on, a fresh instance per
request) and reads each response's Server-Timing header: the handler's own clock, per stage.
The texts are built with the service's tokenizer to fill exactly the bench's cases: 20 tokens,
and one whole window.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from porter.errors import PorterError
from porter.serve.host import (free_port, http_request, parse_server_timing, read_facts, serve_command, stop_server,
                               wait_until_serving, wasmtime_program)

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


@contextmanager
def running(component: Path, log_path: Path):
    """`wasmtime serve` of `component` on a free loopback port until the block ends; yields the port."""
    port = free_port()
    command = serve_command(wasmtime_program(), component, port, SERVE_DEADLINE_S)
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_serving(server, port, log_path, START_TIMEOUT_S)
            yield port
        finally:
            stop_server(server)


def time_redact(port: int, text: str, runs: int) -> tuple[list[dict[str, float]], list[float]]:
    """Server-Timing entries and client round trips of `runs` POST /redact requests."""
    body = json.dumps({"text": text}).encode()
    served, round_trips = [], []
    for _ in range(runs):
        started = time.perf_counter()
        status, headers, raw = http_request(port, "POST", "/redact", body, {"content-type": "application/json"},
                                            REQUEST_TIMEOUT_S)
        round_trips.append((time.perf_counter() - started) * 1000.0)
        if status != 200:
            raise PorterError(f"POST /redact answered {status}: {raw[:200]!r}")
        if "server-timing" not in headers:
            raise PorterError("POST /redact answered without a Server-Timing header")
        served.append({name: ms for name, (ms, _) in parse_server_timing(headers["server-timing"]).items()})
    return served, round_trips


def summary(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "runs": len(values)}


def redaction_facts(out_dir: Path) -> dict:
    """service.json of a built redaction service, or a clear error."""
    facts = read_facts(out_dir)
    if facts.get("format") != "porter.service/1":
        raise PorterError(f"{out_dir}: --service takes a redaction service (porter serve-build), "
                          f"not {facts.get('format')}")
    return facts


def bench_service(out_dir: Path, short_tokens: int, runs: int, echo=print) -> dict:
    """Times a 20-token request and a one-window request; returns the report's service part."""
    facts = redaction_facts(out_dir)
    specials = len(facts["prefix_ids"]) + len(facts["suffix_ids"])
    window = int(facts["window"])
    cases = {f"{short_tokens} tokens": short_tokens, "full window": window}
    report = {"component": str(out_dir / facts["component"]), "runs": runs, "cases": {}}
    with running(out_dir / facts["component"], out_dir / "bench-serve.log") as port:
        for name, tokens in cases.items():
            text = text_of_tokens(Path(facts["tokenizer"]), tokens - specials)
            served, round_trips = time_redact(port, text, runs + 1)
            served, round_trips = served[1:], round_trips[1:]  # the first request warms the code cache
            stages = {stage: summary([s[stage] for s in served]) for stage in served[0]}
            report["cases"][name] = {"tokens": tokens, "server_ms": stages, "client_ms": summary(round_trips)}
    for line in service_lines(report):
        echo(line)
    return report


def service_lines(report: dict) -> list[str]:
    lines = [f"wasmtime serve (epoch interruption, a fresh instance per request), {report['runs']} requests "
             f"per case, Server-Timing min / median ms:"]
    for name, case in report["cases"].items():
        stages = case["server_ms"]
        total = stages.get("total", {"min": float("nan"), "median": float("nan")})
        parts = ", ".join(f"{stage} {s['median']:.2f}" for stage, s in stages.items() if stage != "total")
        lines.append(f"  {name} ({case['tokens']} tokens in the window): total {total['min']:.2f} / "
                     f"{total['median']:.2f}; medians: {parts}; client round trip median "
                     f"{case['client_ms']['median']:.2f}")
    return lines
