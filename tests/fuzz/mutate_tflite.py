"""Structure-aware mutations of a real TFLite flatbuffer.

`sites(data)` walks the fixture with the schema (the `tflite` package's generated classes, as
porter's reader learns it) and lists every place a mutation can aim at: vtable entries and
sizes, table offsets, offset fields, vector and string lengths, vector elements and scalar
fields, each with the path that names it ("Model.subgraphs[0].tensors[12].name"). `mutate(data,
rng)` picks one to three mutations, some aimed at what breaks readers (an op reading its own or
a later op's output, an empty shape vector, a moved or zeroed vtable slot, a name slot aimed at a
length field) and some blind (u32/u64 overwrites, truncation, byte flips).

A mutation is returned as edits, byte writes and truncations that `apply(data, edits)` replays
exactly, so that a crasher is kept as a few bytes of JSON, not as a copy of the model.
"""

from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass

import tflite

from porter.frontends.flatbuffer import Buffer, Table, layout
from porter.frontends.tflite import BUILTIN_OPTIONS2_NAMES, BUILTIN_OPTIONS_NAMES


@dataclass(frozen=True)
class Site:
    at: int  # byte offset in the file
    size: int  # bytes
    kind: str  # vtable-entry, vtable-size, table-size, soffset, uoffset, length, element, scalar
    path: str  # which field of which table
    fmt: str = ""  # struct format of scalars and elements


def sites(data: bytes) -> list[Site]:
    found: list[Site] = []
    buffer = Buffer(data)
    buffer.budget = math.inf  # the fixture is trusted; every site counts
    _walk(buffer.root(tflite.Model), "Model", found, set())
    return found


def _walk(table: Table, path: str, found: list[Site], seen: set[int]) -> None:
    if table.pos in seen:
        return
    seen.add(table.pos)
    found += [Site(table.pos, 4, "soffset", f"{path}.<vtable offset>"),
              Site(table.vtable, 2, "vtable-size", f"{path}.<vtable size>"),
              Site(table.vtable + 2, 2, "table-size", f"{path}.<table size>")]
    for name, field in layout(table.schema).items():
        if field.slot >= table.vtable_size:
            continue
        found.append(Site(table.vtable + field.slot, 2, "vtable-entry", f"{path}.{name}.<slot>", "<H"))
        here = f"{path}.{name}"
        if field.kind == "scalar":
            at = table.position(name, field.packer.size)
            if at is not None:
                found.append(Site(at, field.packer.size, "scalar", here, field.packer.format))
        elif field.kind in ("vector", "string", "tables"):
            _walk_vector(table, name, field, here, found, seen)
        elif field.kind in ("table", "union"):
            at = table.position(name, 4)
            child = table.table(name) if field.kind == "table" else _union_member(table, name)
            if at is not None:
                found.append(Site(at, 4, "uoffset", here))
            if child is not None:
                _walk(child, f"{here}.{child.schema.__name__}", found, seen)


def _walk_vector(table: Table, name: str, field, here: str, found: list[Site], seen: set[int]) -> None:
    at = table.position(name, 4)
    if at is None:
        return
    element_size = {"vector": field.packer.size if field.packer else 1, "string": 1, "tables": 4}[field.kind]
    first, count = table.span(name, element_size)
    found += [Site(at, 4, "uoffset", here), Site(first - 4, 4, "length", here)]
    if field.kind == "vector":
        # Weights and other byte blobs are data, not structure: only their ends are sites.
        shown = range(count) if count <= 64 else (0, count - 1)
        found += [Site(first + i * element_size, element_size, "element", f"{here}[{i}]", field.packer.format)
                  for i in shown]
    elif field.kind == "tables":
        for i, child in enumerate(table.tables(name)):
            found.append(Site(first + 4 * i, 4, "uoffset", f"{here}[{i}]"))
            _walk(child, f"{here}[{i}]", found, seen)


def _union_member(table: Table, name: str) -> Table | None:
    names = BUILTIN_OPTIONS_NAMES if name == "builtin_options" else BUILTIN_OPTIONS2_NAMES
    class_name = names.get(table.scalar(f"{name}_type"))
    if class_name in (None, "NONE"):
        return None
    module = __import__(f"tflite.{class_name}", fromlist=[class_name])
    return table.union(name, getattr(module, class_name))


# Values worth writing -------------------------------------------------------------------------

BOUNDARY_INTS = [0, 1, -1, 2, 3, 7, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, -2**31,
                 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]
FLOATS = [float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 1e-45, 1e30, -1e30]


def _fit(fmt: str, value):
    """`value` packed as `fmt`, wrapping integers into the type's range."""
    code = fmt.lstrip("<>=!")
    if code in "fd":
        return struct.pack("<" + code, float(value) if isinstance(value, float) else float(value % 1000))
    if code == "?":
        return struct.pack("<B", value & 1)
    bits = struct.calcsize(code) * 8
    value &= (1 << bits) - 1
    if code.islower():  # signed
        value -= (1 << bits) if value >= 1 << (bits - 1) else 0
    return struct.pack("<" + code, value)


def _interesting(rng: random.Random, fmt: str, current: int | float, file_size: int):
    if fmt.lstrip("<") in "fd":
        return rng.choice(FLOATS + [current * rng.choice([-1, 2, 0.5])])
    return rng.choice(BOUNDARY_INTS + [current + rng.randint(-3, 3), current * 2, file_size,
                                        file_size - current, rng.getrandbits(32), rng.randint(-300, 300)])


def _read(data: bytes, site: Site):
    return struct.unpack_from(site.fmt or {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[site.size], data, site.at)[0]


def _write(site: Site, raw: bytes) -> dict:
    return {"write": site.at, "bytes": raw.hex(), "path": site.path}


# Mutations ---------------------------------------------------------------------------------------


def _overwrite(rng, data, found) -> list[dict]:
    """A u16/u32/u64 or float overwrite at a table field, length, offset or vtable."""
    site = rng.choice(found)
    fmt = site.fmt or {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[site.size]
    return [_write(site, _fit(fmt, _interesting(rng, fmt, _read(data, site), len(data))))]


def _of_kind(found, *kinds):
    return [s for s in found if s.kind in kinds]


def _vtable(rng, data, found) -> list[dict]:
    """A vtable slot zeroed, moved onto another field of its table, or the vtable resized."""
    entries = _of_kind(found, "vtable-entry")
    site = rng.choice(entries)
    table = site.path.rsplit(".", 2)[0]
    siblings = [s for s in entries if s.path.rsplit(".", 2)[0] == table]
    choice = rng.random()
    if choice < 0.35:
        return [_write(site, b"\0\0")]
    if choice < 0.8:
        other = rng.choice(siblings)
        return [_write(site, struct.pack("<H", _read(data, other)))]
    sizes = _of_kind(found, "vtable-size", "table-size")
    size_site = rng.choice(sizes)
    return [_write(size_site, struct.pack("<H", max(0, _read(data, size_site) + rng.choice([-4, -2, 2, 4, 1000]))))]


def _lengths(rng, data, found) -> list[dict]:
    """A vector or string length: emptied, off by one, or past the end of the file."""
    site = rng.choice(_of_kind(found, "length"))
    current = _read(data, site)
    value = rng.choice([0, current + 1, max(current - 1, 0), 2**32 - 1, 2**31, len(data), current * 1000])
    return [_write(site, _fit("<I", value))]


def _offsets(rng, data, found) -> list[dict]:
    """An offset field aimed elsewhere: a little off, at another table, backwards or far away."""
    site = rng.choice(_of_kind(found, "uoffset", "soffset"))
    current = _read(data, site)
    targets = [s.at - site.at for s in rng.sample(found, 3) if s.at > site.at]
    fmt = "<i" if site.kind == "soffset" else "<I"
    value = rng.choice([current + rng.choice([-8, -4, -1, 1, 4, 8]), 0, -current, 2**31 - 1, 2**32 - 4,
                        len(data)] + targets)
    return [_write(site, _fit(fmt, value))]


def _element(rng, data, found) -> list[dict]:
    """A shape dimension, op tensor index or other vector element set to an edge value."""
    site = rng.choice(_of_kind(found, "element"))
    return [_write(site, _fit(site.fmt, _interesting(rng, site.fmt, _read(data, site), len(data))))]


def _op_vectors(found, op_path: str, name: str) -> list[Site]:
    return [s for s in found if s.kind == "element" and s.path.startswith(f"{op_path}.{name}[")]


def _cycle(rng, data, found) -> list[dict]:
    """An op reading its own output, or a later op's output (a cycle or an order violation)."""
    ops = sorted({s.path.split(".inputs[")[0] for s in found if ".operators[" in s.path and ".inputs[" in s.path})
    k = rng.randrange(len(ops))
    inputs = _op_vectors(found, ops[k], "inputs")
    later = [s for j in range(k, min(len(ops), k + rng.choice([1, 3, 30]))) for s in _op_vectors(found, ops[j], "outputs")]
    if not inputs or not later:
        return []
    return [_write(rng.choice(inputs), struct.pack("<i", _read(data, rng.choice(later))))]


def _rank_zero(rng, data, found) -> list[dict]:
    """An empty shape vector: a scalar where the graph had a tensor."""
    shapes = [s for s in found if s.kind == "length" and s.path.endswith(".shape")]
    return [_write(rng.choice(shapes), struct.pack("<I", 0))]


def _name_slot(rng, data, found) -> list[dict]:
    """A Tensor vtable's name slot moved onto another field (a shared vtable moves every name)."""
    names = [s for s in found if s.kind == "vtable-entry" and s.path.endswith(".name.<slot>") and ".tensors[" in s.path]
    site = rng.choice(names)
    table = site.path.rsplit(".", 2)[0]
    others = [s for s in found if s.kind == "vtable-entry" and s.path.startswith(table + ".") and s is not site]
    return [_write(site, struct.pack("<H", _read(data, rng.choice(others))))] if others else []


def _truncate(rng, data, found) -> list[dict]:
    structure_end = max(s.at for s in found)
    return [{"truncate": rng.choice([rng.randrange(8, structure_end), rng.randrange(len(data)), len(data) - rng.randint(1, 16)])}]


def _flip(rng, data, found) -> list[dict]:
    site = rng.choice(found)
    at = site.at + rng.randrange(site.size)
    return [{"write": at, "bytes": bytes([data[at] ^ (1 << rng.randrange(8))]).hex(), "path": f"bit flip in {site.path}"}]


MUTATIONS = [(_overwrite, 6), (_vtable, 3), (_lengths, 2), (_offsets, 2), (_element, 4), (_cycle, 2),
             (_rank_zero, 1), (_name_slot, 1), (_truncate, 1), (_flip, 2)]


def mutate(data: bytes, rng: random.Random, found: list[Site]) -> list[dict]:
    """One to three mutations of the fixture `data` (whose sites are `found`), as edits."""
    edits = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        mutation = rng.choices([m for m, _ in MUTATIONS], [w for _, w in MUTATIONS])[0]
        edits += mutation(rng, data, found)
    return edits


def apply(data: bytes, edits: list[dict]) -> bytes:
    out = bytearray(data)
    for edit in edits:
        if "truncate" in edit:
            del out[edit["truncate"]:]
        else:
            raw = bytes.fromhex(edit["bytes"])
            if edit["write"] + len(raw) <= len(out):
                out[edit["write"]:edit["write"] + len(raw)] = raw
    return bytes(out)
