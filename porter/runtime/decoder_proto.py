"""The byte protocol between porter and a generated decoder module (a WASI command).

Request (little endian): b"PDE1", u32 prompts, u32 flags (bit 0: return logits), then per
prompt u32 length, u32 steps, i32 ids[length].
Reply: b"PDE1", u32 prompts, u32 vocab, then per prompt i32 generated[steps], f64 prompt_ms,
f64 decode_ms (the steps - 1 one-token calls), and with bit 0 f32 prompt_logits[length * vocab],
f32 step_logits[steps * vocab] (row k chose generated token k); finally f64 load_ms.
Decoding is greedy (the first largest logit), one prompt pass and then one token per call.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from porter.runtime import wasm
from porter.errors import PorterError

MAGIC = b"PDE1"


@dataclass
class Generation:
    generated: list[int]
    prompt_ms: float
    decode_ms: float
    prompt_logits: np.ndarray | None = None  # [length, vocab]
    step_logits: np.ndarray | None = None  # [steps, vocab]


def encode_request(prompts: list, steps: int, with_logits: bool) -> bytes:
    parts = [MAGIC, struct.pack("<II", len(prompts), int(with_logits))]
    for ids in prompts:
        ids = np.asarray(ids, dtype="<i4")
        parts += [struct.pack("<II", len(ids), steps), ids.tobytes()]
    return b"".join(parts)


def decode_reply(data: bytes, prompts: list, steps: int, with_logits: bool) -> tuple[list[Generation], float]:
    try:
        if data[:4] != MAGIC:
            raise PorterError(f"decoder module reply starts with {data[:4]!r}, expected {MAGIC!r}")
        count, vocab = struct.unpack_from("<II", data, 4)
        at, out = 12, []
        for ids in prompts[:count]:
            generated = np.frombuffer(data, "<i4", steps, at).tolist()
            at += 4 * steps
            prompt_ms, decode_ms = struct.unpack_from("<2d", data, at)
            at += 16
            g = Generation(generated, prompt_ms, decode_ms)
            if with_logits:
                g.prompt_logits = np.frombuffer(data, "<f4", len(ids) * vocab, at).reshape(len(ids), vocab)
                at += 4 * len(ids) * vocab
                g.step_logits = np.frombuffer(data, "<f4", steps * vocab, at).reshape(steps, vocab)
                at += 4 * steps * vocab
            out.append(g)
        (load_ms,) = struct.unpack_from("<d", data, at)
        at += 8
    except (struct.error, ValueError):
        raise PorterError(f"decoder module reply is truncated ({len(data)} bytes)") from None
    if at != len(data) or count != len(prompts):
        raise PorterError(f"decoder module reply does not match the request ({len(data)} bytes)")
    return out, load_ms


def generate(module, prompts: list, steps: int, with_logits: bool = False,
             timeout_s: float = 600.0) -> tuple[list[Generation], float]:
    done = wasm.run_command(module, stdin=encode_request(prompts, steps, with_logits), timeout_s=timeout_s)
    if done.exit_code != 0:
        raise PorterError(f"{module.name} exited with {done.exit_code}: "
                          f"{done.stderr.decode(errors='replace').strip()[-400:]}")
    return decode_reply(done.stdout, prompts, steps, with_logits)
