"""model.bin: every IR array in one flat file, read in place by the generated crate.

Layout: the arrays of `array_order()` of the program (or packed decoder), in that order, each starting at a multiple of
16 bytes (so v128 loads from an aligned base are valid), zero padding between them, little
endian, C order; int4 arrays (a Linear's int4 weights) two values a byte, as `pack_int4` lays
them out. Nothing else: no header, no names. The JSON layout manifest beside it names
each array with its dtype, shape, offset and size, plus the total size and a SHA-256, and the
generated crate asserts the same total size when it walks the file.

Both files are written to a temporary name and renamed into place, so a failed compile never
leaves a partial model.bin behind.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from porter.errors import PorterError
from porter.fsutil import write_atomic
from porter.ir.encoder import EncoderProgram

ALIGN = 16
LAYOUT_VERSION = "porter.layout/1"
DTYPES = {"int8", "uint8", "int32", "int64", "float16", "float32"}
INT4 = "int4"  # an int8 array of -8..7 stored packed (pack_int4); read back as int8
INT4_BLOCK = 32  # values per 16-byte block of packed int4


def pack_int4(values: np.ndarray) -> np.ndarray:
    """int4 values (int8 in -8..7, C order) two a byte, in blocks of 32: byte i of block j holds
    value 32j + i in its low nibble and value 32j + 16 + i in its high nibble, so one 16-byte load
    unpacks to 32 consecutive values with two shifts and no shuffle (kernels/common/int4.rs).
    The last block is padded with zeros."""
    flat = np.ascontiguousarray(values, dtype=np.int8).reshape(-1)
    if flat.size and (flat.min() < -8 or flat.max() > 7):
        raise PorterError(f"int4 packing: values {flat.min()}..{flat.max()} are not int4")
    padded = np.zeros(-(-flat.size // INT4_BLOCK) * INT4_BLOCK, np.int8)
    padded[:flat.size] = flat
    halves = padded.view(np.uint8).reshape(-1, 2, INT4_BLOCK // 2)
    return ((halves[:, 0] & 0x0F) | (halves[:, 1] << 4)).reshape(-1)


def unpack_int4(packed: np.ndarray, count: int) -> np.ndarray:
    """The first `count` int8 values of `pack_int4`'s bytes, each nibble sign-extended."""
    blocks = np.asarray(packed, np.uint8).view(np.int8).reshape(-1, INT4_BLOCK // 2)
    low, high = (blocks << 4) >> 4, blocks >> 4
    return np.stack([low, high], 1).reshape(-1)[:count]


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def layout(ir: EncoderProgram) -> list[dict]:
    """Offsets of every array; the single source of truth for packer and codegen."""
    entries, offset = [], 0
    int4 = ir.int4_arrays()
    for name in ir.array_order():
        a = ir.weights.get(name)
        if a is None:
            raise PorterError(f"IR array '{name}' has no data")
        if str(a.dtype) not in DTYPES:
            raise PorterError(f"IR array '{name}' has dtype {a.dtype}; model.bin holds "
                              f"{sorted(DTYPES)}")
        dtype, size = (INT4, -(-a.size // INT4_BLOCK) * INT4_BLOCK // 2) if name in int4 else (str(a.dtype), a.nbytes)
        entries.append({"name": name, "dtype": dtype, "shape": list(a.shape), "offset": offset, "size": int(size)})
        offset = _aligned(offset + size)
    return entries


def pack(ir: EncoderProgram) -> tuple[bytes, dict]:
    entries = layout(ir)
    total = _aligned(entries[-1]["offset"] + entries[-1]["size"]) if entries else 0
    blob = bytearray(total)
    for e in entries:
        if e["dtype"] == INT4:
            blob[e["offset"]: e["offset"] + e["size"]] = pack_int4(ir.weights[e["name"]]).tobytes()
            continue
        a = np.ascontiguousarray(ir.weights[e["name"]]).astype(e["dtype"], copy=False)
        blob[e["offset"]: e["offset"] + e["size"]] = a.astype(a.dtype.newbyteorder("<")).tobytes()
    manifest = {"format": LAYOUT_VERSION, "align": ALIGN, "total_size": total,
                "sha256": hashlib.sha256(blob).hexdigest(), "arrays": entries}
    return bytes(blob), manifest


def write_model(ir: EncoderProgram, out_dir: Path) -> dict:
    """Writes model.bin and layout.json into out_dir; returns the manifest."""
    blob, manifest = pack(ir)
    write_atomic(out_dir / "model.bin", blob)
    write_atomic(out_dir / "layout.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def read_model(ir_arrays_dir: Path) -> dict[str, np.ndarray]:
    """Reads model.bin back through its layout (used by tests and by `porter run DIR`)."""
    manifest = json.loads((ir_arrays_dir / "layout.json").read_text())
    blob = (ir_arrays_dir / "model.bin").read_bytes()
    if len(blob) != manifest["total_size"]:
        raise PorterError(f"{ir_arrays_dir / 'model.bin'}: {len(blob)} bytes, layout.json says "
                          f"{manifest['total_size']}")
    arrays = {}
    for e in manifest["arrays"]:
        count = int(np.prod(e["shape"], dtype=np.int64))
        if e["dtype"] == INT4:
            packed = np.frombuffer(blob, np.uint8, count=e["size"], offset=e["offset"])
            arrays[e["name"]] = unpack_int4(packed, count).reshape(e["shape"])
            continue
        raw = np.frombuffer(blob, dtype=np.dtype(e["dtype"]).newbyteorder("<"),
                            count=count, offset=e["offset"])
        arrays[e["name"]] = raw.reshape(e["shape"]).astype(e["dtype"])
    return arrays
