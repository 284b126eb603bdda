"""The sectioned blob both tokenizer formats use (tokenizer.bin, bpe.bin): one writer.

    magic (4 bytes) | fields (u32 each) | section count u32 | count x (offset u32, length u32)
    | the sections, in order, each starting on an ALIGN-byte boundary

Little-endian throughout. Offsets count from the start of the blob, so a reader indexes the
embedded bytes in place; a field given as TOTAL_SIZE is written as the blob's final size.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

ALIGN = 8  # every section starts here, so a reader may view any of them as u32 or u64 words
TOTAL_SIZE = object()  # placeholder field: replaced by the size of the whole blob


def u32s(values: Iterable[int]) -> bytes:
    values = list(values)
    return struct.pack(f"<{len(values)}I", *values)


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def sectioned_blob(magic: bytes, fields: Sequence, sections: Sequence[bytes]) -> bytes:
    header_size = aligned(len(magic) + 4 * (len(fields) + 1 + 2 * len(sections)))
    directory, body = [], bytearray()
    for data in sections:
        directory += [header_size + len(body), len(data)]
        body += data + bytes(aligned(len(data)) - len(data))
    total = header_size + len(body)
    words = [total if f is TOTAL_SIZE else f for f in fields]
    header = magic + u32s([*words, len(sections), *directory])
    return header + bytes(header_size - len(header)) + bytes(body)
