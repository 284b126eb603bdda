"""model.bin: every IR array in one flat file, read in place by the generated crate.

Layout: the arrays of `array_order()` of the program (or packed decoder), in that order, each starting at a multiple of
16 bytes (so v128 loads from an aligned base are valid), zero padding between them, little
endian, C order. Nothing else: no header, no names. The JSON layout manifest beside it names
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
DTYPES = {"int8", "uint8", "int32", "float16", "float32"}


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def layout(ir: EncoderProgram) -> list[dict]:
    """Offsets of every array; the single source of truth for packer and codegen."""
    entries, offset = [], 0
    for name in ir.array_order():
        a = ir.weights.get(name)
        if a is None:
            raise PorterError(f"IR array '{name}' has no data")
        if str(a.dtype) not in DTYPES:
            raise PorterError(f"IR array '{name}' has dtype {a.dtype}; model.bin holds "
                              f"{sorted(DTYPES)}")
        entries.append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape),
                        "offset": offset, "size": int(a.nbytes)})
        offset = _aligned(offset + a.nbytes)
    return entries


def pack(ir: EncoderProgram) -> tuple[bytes, dict]:
    entries = layout(ir)
    total = _aligned(entries[-1]["offset"] + entries[-1]["size"]) if entries else 0
    blob = bytearray(total)
    for e in entries:
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
        raw = np.frombuffer(blob, dtype=np.dtype(e["dtype"]).newbyteorder("<"),
                            count=int(np.prod(e["shape"], dtype=np.int64)), offset=e["offset"])
        arrays[e["name"]] = raw.reshape(e["shape"]).astype(e["dtype"])
    return arrays
