"""The byte protocol between porter and a generated eval module (a WASI command).

porter writes a request to the module's stdin and reads the reply from its stdout; the module is
a plain wasm32-wasip1 command (`_start`), run under wasmtime with epoch interruption on, so a
verify run exercises exactly what a Spin request would (a fresh instance, nothing cached).

Request (little endian):
    magic  b"PEV3"
    u32    windows          number of windows that follow
    u32    seq              window length (must equal the model's)
    u32    extent           0: compute only the rows up to the last kept token where the model's
                            padding is inert (else every row); 1: every row, as the reference does
    per window:
        u32    live             real tokens at the start of the window (the rest is padding)
        i32    ids[seq]
        i32    types[seq]       token type ids (segment A 0, B 1; the module refuses a type
                                outside its type table, which has one row without that input)
        i32    mask[seq]        attention mask (ignored by whole-window models)

Reply:
    magic  b"PEV3"
    u32    windows
    u32    labels
    per window:
        u32    live
        u32    rows                    rows the encoder layers computed (<= seq)
        f32    logits[live * labels]   only live rows: the last layer computes no others
        f64    ms[3]                   forward time split: matmul, attention, other
    f64    load_ms                     Model::load (walking model.bin) time, once per process
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from porter.errors import PorterError

MAGIC = b"PEV3"
LIVE_ROWS, WHOLE_WINDOW = 0, 1  # the request's extent


@dataclass
class WindowResult:
    logits: np.ndarray  # [live, labels] float32
    rows: int  # rows the encoder layers computed
    matmul_ms: float
    attention_ms: float
    other_ms: float

    @property
    def forward_ms(self) -> float:
        return self.matmul_ms + self.attention_ms + self.other_ms


def encode_request(ids: np.ndarray, mask: np.ndarray, live: np.ndarray, extent: int = LIVE_ROWS,
                   types: np.ndarray | None = None) -> bytes:
    """ids, mask, types [windows, seq] int32 (types: zeros when None); live [windows]; extent
    LIVE_ROWS or WHOLE_WINDOW."""
    ids = np.asarray(ids, dtype="<i4")
    mask = np.asarray(mask, dtype="<i4")
    types = np.zeros_like(ids) if types is None else np.asarray(types, dtype="<i4")
    n, seq = ids.shape
    parts = [MAGIC, struct.pack("<III", n, seq, extent)]
    for w in range(n):
        parts += [struct.pack("<I", int(live[w])), ids[w].tobytes(), types[w].tobytes(), mask[w].tobytes()]
    return b"".join(parts)


def decode_reply(data: bytes) -> tuple[list[WindowResult], float]:
    """Returns (one result per window, model load time in ms)."""
    try:
        if data[:4] != MAGIC:
            raise PorterError(f"eval module reply starts with {data[:4]!r}, expected {MAGIC!r}")
        n, labels = struct.unpack_from("<II", data, 4)
        at, results = 12, []
        for _ in range(n):
            live, rows = struct.unpack_from("<II", data, at)
            at += 8
            logits = np.frombuffer(data, dtype="<f4", count=live * labels, offset=at)
            at += 4 * live * labels
            ms = struct.unpack_from("<3d", data, at)
            at += 24
            results.append(WindowResult(logits.reshape(live, labels).astype(np.float32), rows, *ms))
        (load_ms,) = struct.unpack_from("<d", data, at)
        at += 8
    except struct.error:
        raise PorterError(f"eval module reply is truncated ({len(data)} bytes)") from None
    if at != len(data):
        raise PorterError(f"eval module reply has {len(data) - at} trailing bytes")
    return results, load_ms
