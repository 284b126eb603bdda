"""What the served-component tests share (tests/test_encoder_service.py, tests/test_redact_service.py):
a built component served by the real `wasmtime serve` or `spin up` (porter.serve.deploy.served)
for the length of a block, and the HTTP helpers that talk to it, every reply parsed as JSON."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from porter.serve.deploy import served
from porter.serve.host import http_request

START_TIMEOUT_S = 120
SERVE_TIMEOUT_S = 30  # wasmtime's per-request epoch deadline (Spin sets none)


@dataclass
class HttpService:
    """A served component on 127.0.0.1:port under `host`."""

    port: int
    host: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: bytes | str | None = None,
                headers: dict | None = None) -> tuple[int, dict, object]:
        """(status, lower-cased headers, parsed JSON body)."""
        status, response_headers, raw = http_request(self.port, method, path, body, headers)
        return status, response_headers, json.loads(raw)

    def post(self, path: str, payload) -> tuple[int, dict, object]:
        return self.request("POST", path, json.dumps(payload), {"content-type": "application/json"})

    def ok(self, path: str, payload):
        status, _, body = self.post(path, payload)
        assert status == 200, body
        return body


@contextmanager
def serving_port(out_dir: Path, host: str):
    """The port of the component built in out_dir, served by `host` until the block ends."""
    with served(out_dir, host, out_dir / f"{host}.log", SERVE_TIMEOUT_S, START_TIMEOUT_S) as server:
        yield server.port
