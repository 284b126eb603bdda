"""A flatbuffer reader that checks every offset, length and string against the file before reading.

The `flatbuffers` package's Table reads whatever the bytes say: a vtable offset that points before
the start of the file reads from its end (struct counts negative offsets from there), a string is
sliced as far as its u32 length says (a moved name slot makes every tensor name a copy of the rest
of the file), and a vector's length is taken as given. Here every table, vtable, field, vector and
string is checked to lie inside the file before it is read, strings are limited to STRING_LIMIT
bytes, and the bytes handed out by vectors and strings are counted against a budget of a few
times the file's size, so that tables pointing at the same bytes over and over cannot make
reading cost more than the file is big.

Which fields a table has, and how each is stored, comes from the code flatc generated for the
schema (the `tflite` package for TFLite): `layout(cls)` runs each generated accessor once against a
stand-in table that records the vtable slot it asks for and how it reads what is there. The
generated accessors never touch the file itself.

Failures raise FlatbufferError with a message naming the byte offset; callers add which table
they were reading.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache

import numpy as np

STRING_LIMIT = 64 * 1024
# Vectors and strings may together hand out this many times the file's size (plus the slack):
# real models read their structure once and their weights as views, far below it.
READ_BUDGET_FACTOR = 4
READ_BUDGET_SLACK = 1 << 20
UOFFSET = struct.Struct("<I")
SOFFSET = struct.Struct("<i")
VOFFSET = struct.Struct("<H")
# A vtable holds its own size and the table's size (two u16) before the field offsets.
VTABLE_HEADER = 4


class FlatbufferError(Exception):
    """Bytes that are not the flatbuffer they claim to be; the message names the byte offset."""


@dataclass(frozen=True)
class Field:
    slot: int  # byte offset of the field's entry in the vtable
    kind: str  # "scalar", "string", "vector" (of scalars), "table", "tables", "union" or "strings"
    packer: struct.Struct | None  # scalars and scalar vectors: the little-endian element format
    default: object  # what the generated accessor returns when the field is absent
    table: type | None  # "table" and "tables": the generated class of the element


class Buffer:
    """The file's bytes with bounds-checked reads and the read budget."""

    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)
        self.budget = READ_BUDGET_FACTOR * self.size + READ_BUDGET_SLACK

    def unpack(self, fmt: struct.Struct, at: int, what: str):
        if not 0 <= at <= self.size - fmt.size:
            raise FlatbufferError(f"{what} at byte {at} lies outside the {self.size}-byte file")
        return fmt.unpack_from(self.data, at)[0]

    def spend(self, nbytes: int, at: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise FlatbufferError(
                f"reading the vector at byte {at} makes the tables refer to more than "
                f"{READ_BUDGET_FACTOR} times the file's {self.size} bytes (tables sharing data over and over)")

    def root(self, schema: type) -> "Table":
        return self.table_at(self.unpack(UOFFSET, 0, "the root table offset"), schema)

    def table_at(self, pos: int, schema: type) -> "Table":
        return Table(self, pos, schema)


class Table:
    """One table: its vtable checked on construction, each field checked when read."""

    __slots__ = ("buffer", "pos", "schema", "vtable", "vtable_size", "inline_size")

    def __init__(self, buffer: Buffer, pos: int, schema: type):
        self.buffer, self.pos, self.schema = buffer, pos, schema
        name = schema.__name__
        self.vtable = pos - buffer.unpack(SOFFSET, pos, f"{name} table")
        self.vtable_size = buffer.unpack(VOFFSET, self.vtable, f"the vtable of the {name} table at byte {pos}")
        self.inline_size = buffer.unpack(VOFFSET, self.vtable + 2, f"the vtable of the {name} table at byte {pos}")
        if self.vtable_size < VTABLE_HEADER or self.vtable_size % 2 or self.vtable + self.vtable_size > buffer.size:
            raise FlatbufferError(f"the vtable of the {name} table at byte {pos} (at byte {self.vtable}, "
                                  f"{self.vtable_size} bytes) is malformed or runs past the end of the file")
        if self.inline_size < SOFFSET.size or pos + self.inline_size > buffer.size:
            raise FlatbufferError(f"the {name} table at byte {pos} ({self.inline_size} bytes) runs past the end of the file")

    def describe(self) -> str:
        return f"{self.schema.__name__} table at byte {self.pos}"

    def field(self, name: str) -> Field:
        return layout(self.schema)[name]

    def position(self, name: str, size: int) -> int | None:
        """Where field `name` (of `size` bytes) lies in the file, checked to be inside the table; None if absent."""
        slot = self.field(name).slot
        if slot >= self.vtable_size:
            return None
        offset = self.buffer.unpack(VOFFSET, self.vtable + slot, f"the vtable of the {self.describe()}")
        if offset == 0:
            return None
        if not SOFFSET.size <= offset <= self.inline_size - size:
            raise FlatbufferError(f"field '{name}' of the {self.describe()} at offset {offset} lies "
                                  f"outside the table's {self.inline_size} bytes")
        return self.pos + offset

    def target(self, name: str) -> int | None:
        """Where the object that offset field `name` points to starts; None if absent."""
        at = self.position(name, UOFFSET.size)
        if at is None:
            return None
        target = at + self.buffer.unpack(UOFFSET, at, f"field '{name}' of the {self.describe()}")
        if target >= self.buffer.size:
            raise FlatbufferError(f"field '{name}' of the {self.describe()} points to byte {target}, past the end of the file")
        return target

    def scalar(self, name: str):
        field = self.field(name)
        at = self.position(name, field.packer.size)
        return field.default if at is None else field.packer.unpack_from(self.buffer.data, at)[0]

    def span(self, name: str, element_size: int) -> tuple[int, int] | None:
        """(first byte, element count) of vector or string field `name`, checked to lie in the file."""
        start = self.target(name)
        if start is None:
            return None
        count = self.buffer.unpack(UOFFSET, start, f"the length of '{name}' of the {self.describe()}")
        first = start + UOFFSET.size
        if first + count * element_size > self.buffer.size:
            extent = f"{count} bytes" if element_size == 1 else f"{count} elements of {element_size} bytes"
            raise FlatbufferError(f"'{name}' of the {self.describe()} (at byte {start}, {extent}) runs past "
                                  f"the end of the {self.buffer.size}-byte file")
        return first, count

    def vector(self, name: str) -> np.ndarray:
        """A scalar vector as a read-only view into the file (empty when absent)."""
        dtype = np.dtype(self.field(name).packer.format)
        found = self.span(name, dtype.itemsize)
        if found is None:
            return np.zeros(0, dtype)
        first, count = found
        self.buffer.spend(count * dtype.itemsize, first)
        return np.frombuffer(self.buffer.data, dtype, count=count, offset=first)

    def string(self, name: str, limit: int = STRING_LIMIT) -> str | None:
        found = self.span(name, 1)
        if found is None:
            return None
        first, length = found
        if length > limit:
            raise FlatbufferError(f"string '{name}' of the {self.describe()} (at byte {first - UOFFSET.size}) "
                                  f"is {length} bytes long; porter reads strings of up to {limit}")
        self.buffer.spend(length, first)
        return self.buffer.data[first:first + length].decode("utf-8", "replace")

    def table(self, name: str) -> "Table | None":
        at = self.target(name)
        return None if at is None else self.buffer.table_at(at, self.field(name).table)

    def tables(self, name: str) -> list["Table"]:
        found = self.span(name, UOFFSET.size)
        if found is None:
            return []
        first, count = found
        self.buffer.spend(count * UOFFSET.size, first)
        schema = self.field(name).table
        offsets = np.frombuffer(self.buffer.data, "<u4", count=count, offset=first).tolist()
        return [self.buffer.table_at(first + UOFFSET.size * i + offset, schema) for i, offset in enumerate(offsets)]

    def union(self, name: str, schema: type) -> "Table | None":
        """The union member table of field `name`, read as `schema` (chosen by its type field)."""
        at = self.target(name)
        return None if at is None else self.buffer.table_at(at, schema)


# Layouts from generated code ----------------------------------------------------------------


class _Probe:
    """Stands in for flatbuffers' Table while a generated accessor runs: records the vtable slot
    it asks for, how it reads the field there and what it returns."""

    Bytes = b""
    Pos = 0

    def __init__(self, present: bool):
        self.present = present
        self.slot = self.kind = self.flags = None

    def Offset(self, slot):
        # The first slot asked for is the field's; some accessors then consult another field.
        if self.slot is None:
            self.slot = slot
        return 4 if self.present else 0

    def Get(self, flags, off):
        if self.kind is None:
            self.kind, self.flags = "scalar", flags
        return flags.py_type(0)

    def Vector(self, off):
        self.kind = "vector"
        return 0

    def VectorLen(self, off):
        return 0

    def GetVectorAsNumpy(self, flags, off):
        self.kind, self.flags = "vector", flags
        return np.zeros(0)

    def Indirect(self, off):
        self.kind = "tables" if self.kind == "vector" else "table"
        return 0

    def String(self, off):
        self.kind = "strings" if self.kind == "vector" else "string"
        return b""

    def Union(self, table, off):
        self.kind = "union"


_PLUMBING_SUFFIXES = ("Length", "IsNone")


@cache
def layout(cls: type) -> dict[str, Field]:
    """snake_case field name -> Field, for a flatc-generated Python table class."""
    methods = {k: v for k, v in vars(cls).items() if callable(v) and not k.startswith("_")}
    fields = {}
    for name, method in methods.items():
        if name == "Init" or name.startswith("GetRootAs") or name.endswith(("BufferHasIdentifier",) + _PLUMBING_SUFFIXES):
            continue
        if f"{name}AsNumpy" in methods:  # X(j) reads one element; XAsNumpy says the element type
            continue
        field = _probe(cls, method)
        if field is not None:
            fields[_snake(name.removesuffix("AsNumpy"))] = field
    return fields


def _probe(cls: type, method) -> Field | None:
    arguments = (0,) * (method.__code__.co_argcount - 1)
    absent, present = _Probe(False), _Probe(True)
    instance = cls()
    instance._tab = absent
    default = method(instance, *arguments)
    instance._tab = present
    value = method(instance, *arguments)
    if present.slot is None or present.kind is None:
        return None
    packer = present.flags.packer_type if present.flags is not None else None
    table = type(value) if present.kind in ("table", "tables") else None
    return Field(present.slot, present.kind, packer, default, table)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))
