"""Load tests of a built redaction service: many maximal /redact requests at once, inside the real
`wasmtime serve` with epoch interruption on (as Spin runs it), a fresh instance per request.

A maximal request is a text of exactly max_windows windows of tokens (the largest a service
accepts). Under more load than the machine carries, the component sheds requests that would
overrun their budget (503 with Retry-After and a JSON body) instead of being killed at the host's
timeout (wasmtime's HTML 500 "guest timed out"). `load_test` serves the component, answers one
maximal request alone, then fires each concurrency level's requests at once and reports per
level: the statuses, whether every 200 equals the request served alone, whether every 503 is
the JSON error with Retry-After, and the slowest reply. The sustained concurrency is the largest
level at which every request got its 200.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from porter.bench.service import redaction_facts, text_of_tokens
from porter.serve.host import free_port, http_request, serve_command, stop_server, wait_until_serving, wasmtime_program

START_TIMEOUT_S = 120.0
# The client waits well past the host's timeout: a reply that never comes is a failure too.
CLIENT_MARGIN_S = 60.0


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict
    body: bytes
    seconds: float

    def is_shed(self) -> bool:
        """A 503 as the component sends it: JSON with error and status, and Retry-After."""
        if self.status != 503 or not self.headers.get("content-type", "").startswith("application/json"):
            return False
        try:
            body = json.loads(self.body)
        except ValueError:
            return False
        return body.get("status") == 503 and bool(body.get("error")) and self.headers.get("retry-after", "").isdigit()


def maximal_text(facts: dict) -> str:
    """A text of exactly max_windows windows of tokens."""
    chunk = facts["window"] - len(facts["prefix_ids"]) - len(facts["suffix_ids"])
    return text_of_tokens(Path(facts["tokenizer"]), chunk * facts["max_windows"])


def post(port: int, body: bytes, timeout_s: float) -> Reply:
    started = time.monotonic()
    status, headers, raw = http_request(port, "POST", "/redact", body, {"content-type": "application/json"}, timeout_s)
    return Reply(status, headers, raw, time.monotonic() - started)


def at_once(port: int, body: bytes, count: int, timeout_s: float) -> list[Reply]:
    """`count` identical requests sent together (one thread each)."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: post(port, body, timeout_s), range(count)))


def level_report(replies: list[Reply], alone: Reply) -> dict:
    statuses: dict[int, int] = {}
    for r in replies:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "requests": len(replies),
        "statuses": dict(sorted(statuses.items())),
        "identical_200s": all(r.body == alone.body for r in replies if r.status == 200),
        "json_503s": all(r.is_shed() for r in replies if r.status == 503),
        "slowest_s": round(max(r.seconds for r in replies), 2),
        "slowest_200_s": round(max((r.seconds for r in replies if r.status == 200), default=0.0), 2),
    }


def load_test(out_dir: Path, levels: list[int], timeout_s: float, echo=print) -> dict:
    """Serves out_dir's component with a `timeout_s` epoch deadline and runs every level."""
    facts = redaction_facts(out_dir)
    body = json.dumps({"text": maximal_text(facts)}).encode()
    log_path = out_dir / "load-serve.log"
    port = free_port()
    report = {"component": str(out_dir / facts["component"]), "max_windows": facts["max_windows"],
              "request_budget_ms": facts.get("request_budget_ms"), "timeout_s": timeout_s, "levels": {}}
    with open(log_path, "wb") as log:
        server = subprocess.Popen(serve_command(wasmtime_program(), out_dir / facts["component"], port, timeout_s),
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_serving(server, port, log_path, START_TIMEOUT_S)
            post(port, body, timeout_s + CLIENT_MARGIN_S)  # warms the code cache and the weights' pages
            alone = post(port, body, timeout_s + CLIENT_MARGIN_S)
            report["alone"] = {"status": alone.status, "seconds": round(alone.seconds, 2)}
            echo(f"one maximal request ({facts['max_windows']} windows) alone: {alone.status} in {alone.seconds:.2f} s")
            for level in levels:
                result = level_report(at_once(port, body, level, timeout_s + CLIENT_MARGIN_S), alone)
                report["levels"][level] = result
                echo(f"  {level:>3} at once: {result['statuses']}, slowest {result['slowest_s']} s, "
                     f"200s identical to alone: {result['identical_200s']}, 503s JSON with Retry-After: "
                     f"{result['json_503s']}")
        finally:
            stop_server(server)
    report["sustained"] = max((n for n, r in report["levels"].items() if r["statuses"] == {200: n}), default=0)
    echo(f"sustained: {report['sustained']} maximal requests at once, every one answered 200")
    return report
