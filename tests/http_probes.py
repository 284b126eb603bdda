"""Raw-socket requests that no well-behaved HTTP client sends (a stalled or cut body, a missing
Host header, a malformed Content-Length) and what each host is measured to answer to them:
docs/hosts.md writes these replies down, and the service tests check them under both hosts.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: the connection closed without a response
    headers: dict
    body: bytes
    seconds: float


def exchange(port: int, data: bytes, half_close: bool = False, timeout_s: float = 60.0) -> Reply:
    """Sends `data` as it is (optionally then closing our sending side) and reads one response:
    up to its Content-Length, or until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as connection:
        started = time.monotonic()
        connection.sendall(data)
        if half_close:
            connection.shutdown(socket.SHUT_WR)
        raw = b""
        while not _complete(raw):
            try:
                chunk = connection.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            raw += chunk
        seconds = time.monotonic() - started
    if not raw:
        return Reply(None, {}, b"", seconds)
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in header_lines)}
    return Reply(int(status_line.split()[1]), headers, body, seconds)


def _complete(raw: bytes) -> bool:
    head, separator, body = raw.partition(b"\r\n\r\n")
    if not separator:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def post(path: str, headers: list[str], body: bytes) -> bytes:
    """A POST with exactly these header lines (Host first) and body bytes."""
    lines = [f"POST {path} HTTP/1.1", "Host: localhost", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def stalled(path: str, declared: int, sent: bytes) -> bytes:
    """A POST whose Content-Length says `declared` bytes and whose body is only `sent`."""
    return post(path, ["Content-Type: application/json", f"Content-Length: {declared}"], sent)


# The host's HTML error page of `wasmtime serve` (wasmtime 49): a 500 for a request it cannot
# turn into a wasi:http request (no authority), before the component is called.
WASMTIME_HTML_500 = b"<title>500 Internal Server Error</title>"

# (name, request bytes, {host: (status or None, body: b"" | the JSON "status" | HTML marker)}).
# Measured under wasmtime 49.0.3 (`porter serve`) and Spin 4.1.0-pre0 (`spin up`); the component
# never sees these requests, so no porter service can answer them itself.
HOST_REPLIES = [
    ("no Host header, HTTP/1.1", b"GET /ping HTTP/1.1\r\n\r\n",
     {"wasmtime": (500, WASMTIME_HTML_500), "spin": (None, b"")}),
    ("no Host header, HTTP/1.0", b"GET /ping HTTP/1.0\r\n\r\n",
     {"wasmtime": (500, WASMTIME_HTML_500), "spin": (None, b"")}),
    ("Content-Length: abc", post("/", ["Content-Length: abc"], b"{}"),
     {"wasmtime": (400, b""), "spin": (400, b"")}),
    ("Content-Length: -1", post("/", ["Content-Length: -1"], b"{}"),
     {"wasmtime": (400, b""), "spin": (400, b"")}),
    ("Content-Length: 2 and Content-Length: 3", post("/", ["Content-Length: 2", "Content-Length: 3"], b"{}x"),
     {"wasmtime": (400, b""), "spin": (400, b"")}),
    ("Content-Length: 2, 2", post("/", ["Content-Length: 2, 2"], b"{}"),
     {"wasmtime": (400, b""), "spin": (400, b"")}),
]

# Requests that look as odd but that the hosts pass on, so the service answers them in JSON.
SERVICE_REPLIES = [
    ("Host header, HTTP/1.0", b"GET /ping HTTP/1.0\r\nHost: localhost\r\n\r\n", 200),
    ("no Host header, absolute URI", b"GET http://localhost/ping HTTP/1.1\r\n\r\n", 200),
    ("Content-Length: 2 twice", post("/ping", ["Content-Length: 2", "Content-Length: 2"], b"{}"), 405),
    ("Content-Length and chunked", post("/ping", ["Content-Length: 2", "Transfer-Encoding: chunked"],
                                        b"2\r\n{}\r\n0\r\n\r\n"), 405),
]


def check_host_reply(reply: Reply, expected: tuple[int | None, bytes]) -> None:
    status, body = expected
    assert reply.status == status, reply
    if body == WASMTIME_HTML_500:
        assert body in reply.body and reply.headers["content-type"].startswith("text/html"), reply
    else:
        assert reply.body == body, reply
