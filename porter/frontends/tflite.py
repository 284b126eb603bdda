"""Reads a TFLite flatbuffer into a porter Graph, checking every byte it reads before using it.

LiteRT trusts the file: an external buffer whose offset + size wraps past 2^64 crashes it, and a
weight without data loads and fails only at run time. So this reader checks, in order: the
'TFL3' identifier; every table, vtable, field, vector and string against the file as it reads it
(porter.frontends.flatbuffer: nothing runs past the end of the file, no string is longer than
64 KiB, and shared vectors cannot make reading cost more than a few times the file's size);
every Buffer's byte range (inline vectors and external offset/size pairs, counted from the start
of the file); every tensor's buffer index and rank, data size against shape x dtype,
quantisation parameters against the shape; every opcode index and tensor index of every
operator; that every tensor an operator reads is produced by an earlier op, a graph input, a
variable, or backed by data, with no tensor written twice and no cycle; and what the ops porter
knows need of their tensors and options (porter.frontends.op_rules). Anything wrong is one
PorterError line naming the tensor, op, buffer or byte offset.

The `tflite` package supplies the schema: its enums, and the generated accessors from which
porter.frontends.flatbuffer learns each table's fields. Its accessors never read the file.
"""

from __future__ import annotations

import importlib
import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import tflite

from porter.errors import PorterError
from porter.frontends.flatbuffer import Buffer, FlatbufferError, Table, layout
from porter.frontends.graph import MAX_RANK, Graph, Op, Quantization, Storage, Tensor, dataflow_problem, shape_problem
from porter.frontends.op_rules import Rule, axes_operand, axis_attribute, check_op_rules, finite_attribute, permutation_operand, reshape_target

IDENTIFIER = b"TFL3"
# Root table offset (4 bytes) + file identifier (4 bytes).
HEADER_SIZE = 8
# Buffer.offset 0 means "not set" and 1 is the placeholder exporters write for "no data";
# only offsets above 1 point at external data.
FIRST_EXTERNAL_OFFSET = 2
UINT64_LIMIT = 2**64
NAME_LIMIT = 80  # characters of a tensor name quoted in an error message

DTYPES = {
    tflite.TensorType.FLOAT32: "float32",
    tflite.TensorType.FLOAT16: "float16",
    tflite.TensorType.FLOAT64: "float64",
    tflite.TensorType.BFLOAT16: "bfloat16",
    tflite.TensorType.INT4: "int4",
    tflite.TensorType.INT8: "int8",
    tflite.TensorType.INT16: "int16",
    tflite.TensorType.INT32: "int32",
    tflite.TensorType.INT64: "int64",
    tflite.TensorType.UINT8: "uint8",
    tflite.TensorType.UINT16: "uint16",
    tflite.TensorType.UINT32: "uint32",
    tflite.TensorType.UINT64: "uint64",
    tflite.TensorType.BOOL: "bool",
    tflite.TensorType.COMPLEX64: "complex64",
    tflite.TensorType.COMPLEX128: "complex128",
    tflite.TensorType.STRING: "string",
    tflite.TensorType.RESOURCE: "resource",
    tflite.TensorType.VARIANT: "variant",
}
# dtypes whose constants numpy can hold as-is (little-endian, as TFLite stores them).
NUMPY_DTYPES = {
    name: np.dtype(name).newbyteorder("<")
    for name in DTYPES.values()
    if name not in ("bfloat16", "int4", "string", "resource", "variant")
}

# Op inputs that are weights: a constant there must have elements (LiteRT accepts an empty one
# and fails at run time). Maps op type -> input positions.
WEIGHT_INPUTS = {
    "FULLY_CONNECTED": (1,),
    "BATCH_MATMUL": (0, 1),
    "CONV_2D": (1,),
    "DEPTHWISE_CONV_2D": (1,),
    "EMBEDDING_LOOKUP": (1,),
    "GATHER": (0,),
}

_ONE_INPUT = Rule(inputs=(1, 1), outputs=1)
_TWO_INPUTS = Rule(inputs=(2, 2), outputs=1)
# What each op porter's TFLite patterns use needs (ranks as LiteRT's kernels check them).
TFLITE_RULES = {
    # weights [out, in]; the bias is optional (-1 when omitted)
    "FULLY_CONNECTED": Rule(ranks={0: (1, None), 1: (2, 2)}, inputs=(2, 3), outputs=1),
    "BATCH_MATMUL": Rule(ranks={0: (2, 5), 1: (2, 5)}, inputs=(2, 2), outputs=1),
    "SOFTMAX": Rule(ranks={0: (1, None)}, inputs=(1, 1), outputs=1, checks=(finite_attribute("beta"),)),
    "MEAN": Rule(inputs=(2, 2), outputs=1, checks=(axes_operand(1),)),
    "SQUARED_DIFFERENCE": _TWO_INPUTS, "ADD": _TWO_INPUTS, "SUB": _TWO_INPUTS, "MUL": _TWO_INPUTS,
    "LOGICAL_AND": _TWO_INPUTS, "RSQRT": _ONE_INPUT, "GELU": _ONE_INPUT, "CAST": _ONE_INPUT,
    "DEQUANTIZE": _ONE_INPUT,
    "RESHAPE": Rule(inputs=(1, 2), outputs=1, checks=(reshape_target(1, "new_shape"),)),
    "TRANSPOSE": Rule(ranks={0: (0, 6)}, inputs=(2, 2), outputs=1, checks=(permutation_operand(1),)),
    "EMBEDDING_LOOKUP": Rule(ranks={0: (1, 1), 1: (2, None)}, inputs=(2, 2), outputs=1),
    "GATHER": Rule(ranks={0: (1, None)}, inputs=(2, 2), outputs=1, checks=(axis_attribute("axis", 0),)),
    "GATHER_ND": Rule(ranks={0: (1, None), 1: (1, None)}, inputs=(2, 2), outputs=1),
    "SELECT_V2": Rule(inputs=(3, 3), outputs=1),
}


def _enum_names(enum_class) -> dict[int, str]:
    return {v: k for k, v in vars(enum_class).items() if not k.startswith("_")}


OPERATOR_NAMES = _enum_names(tflite.BuiltinOperator)
BUILTIN_OPTIONS_NAMES = _enum_names(tflite.BuiltinOptions)
BUILTIN_OPTIONS2_NAMES = _enum_names(tflite.BuiltinOptions2)
# Option fields that hold enums, decoded to their schema names so options read like the schema.
ENUM_FIELDS = {
    "fused_activation_function": _enum_names(tflite.ActivationFunctionType),
    "weights_format": _enum_names(tflite.FullyConnectedOptionsWeightsFormat),
    "padding": _enum_names(tflite.Padding),
    "in_data_type": DTYPES,
    "out_data_type": DTYPES,
    "quantized_bias_type": DTYPES,
}


def load_tflite(path: str | Path) -> Graph:
    """Reads and validates a .tflite file; raises PorterError naming the first problem found."""
    path = Path(path)
    data = path.read_bytes()
    model = _open_model(path, data)
    graph = _ModelReader(path, data, model).graph()
    check_op_rules(graph, TFLITE_RULES)
    return graph


def _tensor_label(index: int, name: str) -> str:
    """How messages name a tensor. Exporters fuse scope paths into names of hundreds of
    characters; the end of the name says most, so longer names keep only their end."""
    shown = name if len(name) <= NAME_LIMIT else "..." + name[-(NAME_LIMIT - 3):]
    return f"tensor {index} '{shown}'"


def _fail(path: Path, message: str) -> PorterError:
    return PorterError(f"{path}: {message}")


@contextmanager
def _flatbuffer_errors(path: Path, what: str):
    """Names the part of the model being read in a FlatbufferError (which names the byte offset)."""
    try:
        yield
    except FlatbufferError as e:
        raise _fail(path, f"corrupt TFLite flatbuffer while reading {what}: {e}") from None


def _open_model(path: Path, data: bytes) -> Table:
    if len(data) < HEADER_SIZE:
        raise _fail(path, f"file too small to be a TFLite flatbuffer ({len(data)} bytes)")
    if data[4:8] != IDENTIFIER:
        raise _fail(path, f"not a TFLite flatbuffer (identifier {data[4:8]!r}, expected {IDENTIFIER!r})")
    with _flatbuffer_errors(path, "the model table"):
        return Buffer(data).root(tflite.Model)


def _decode_options(op: Table, field: str, union_names: dict[int, str]) -> dict:
    """Decodes a builtin-options union member into {snake_case_field: value}.

    Table-valued fields (only in StableHLO options) take no part: nothing in porter reads them.
    """
    class_name = union_names.get(op.scalar(f"{field}_type"))
    if class_name is None or class_name == "NONE":
        return {}
    options_class = getattr(importlib.import_module(f"tflite.{class_name}"), class_name)
    options = op.union(field, options_class)
    if options is None:
        return {}
    decoded = {}
    for name, kind in ((name, f.kind) for name, f in layout(options_class).items()):
        if kind == "scalar":
            value = options.scalar(name)
        elif kind == "vector":
            value = options.vector(name).tolist()
        elif kind == "string":
            value = options.string(name)
        else:
            continue
        if value is None:
            continue
        if name in ENUM_FIELDS:
            if value not in ENUM_FIELDS[name]:
                raise FlatbufferError(f"{class_name}.{name} is {value}, which the schema does not define")
            value = ENUM_FIELDS[name][value]
        decoded[name] = value
    return decoded


class _ModelReader:
    """Walks one model: buffers, opcodes, then every subgraph's tensors, operators and signatures."""

    def __init__(self, path: Path, data: bytes, model: Table):
        self.path = path
        self.data = data
        self.model = model
        self.variables: set[int] = set()  # indices of tensors flagged is_variable (state, no data)
        self.context = ""  # names the subgraph in messages when it is not the signature's

    def fail(self, message: str) -> PorterError:
        return _fail(self.path, self.context + message)

    def reading(self, what: str):
        return _flatbuffer_errors(self.path, self.context + what)

    def graph(self) -> Graph:
        """The signature's subgraph as a Graph, after checking every subgraph and signature."""
        signatures = self.signatures()
        main = signatures[0][2] if signatures else 0
        with self.reading("the subgraph list"):
            subgraphs = self.model.tables("subgraphs")
        for key, _, index in signatures:
            if not 0 <= index < len(subgraphs):
                raise self.fail(f"signature '{key}' names subgraph {index} but the model has {len(subgraphs)}")
        if not subgraphs:
            raise self.fail("the model has no subgraphs")
        raw_tensors = [self.subgraph_tensors(s, subgraph) for s, subgraph in enumerate(subgraphs)]
        storages = self.buffer_storages(raw_tensors, main)
        self.check_metadata_buffers(len(storages))
        opcodes = self.opcodes()
        # LiteRT reads every subgraph (WHILE/IF bodies too), so every one is checked.
        for s, subgraph in enumerate(subgraphs):
            self.context = f"subgraph {s}: " if s != main else ""
            tensors, ops = self.subgraph_contents(s, subgraph, raw_tensors[s], storages, opcodes)
            inputs, outputs = self.subgraph_io(s, subgraph, signatures, tensors)
            self.check_dataflow(ops, tensors)
            self.check_every_read_has_a_source(ops, tensors, inputs)
            if s == main:
                graph_parts = tensors, ops, inputs, outputs
        self.context = ""
        with self.reading("the model description"):
            schema_version = self.model.scalar("version")
            description = self.model.string("description") or ""
        metadata = {
            "schema_version": schema_version,
            "description": description,
            "signature_key": signatures[0][0] if signatures else None,
            "subgraph": main,
            "subgraph_count": len(subgraphs),
            "file_size": len(self.data),
            # One entry per Buffer in the model (None: no data), all checked against the file.
            "buffers": storages,
        }
        return Graph("tflite", str(self.path), *graph_parts, metadata)

    def signatures(self) -> list[tuple[str, Table, int]]:
        """(signature key, SignatureDef, subgraph index) of every SignatureDef, in file order."""
        with self.reading("the signatures"):
            return [(sig.string("signature_key") or "", sig, sig.scalar("subgraph_index"))
                    for sig in self.model.tables("signature_defs")]

    def subgraph_tensors(self, s: int, subgraph: Table) -> list[Table]:
        with self.reading(f"the tensor list of subgraph {s}"):
            return subgraph.tables("tensors")

    def subgraph_contents(self, s: int, subgraph: Table, raw_tensors, storages, opcodes) -> tuple[list[Tensor], list[Op]]:
        self.variables = set()
        tensors = [self.tensor(i, t, storages) for i, t in enumerate(raw_tensors)]
        with self.reading(f"the operator list of subgraph {s}"):
            raw_ops = subgraph.tables("operators")
        ops = [self.op(k, raw, opcodes, tensors) for k, raw in enumerate(raw_ops)]
        return tensors, ops

    # Buffers ---------------------------------------------------------------------------------

    def buffer_storages(self, raw_tensors: list[list[Table]], main: int) -> list[Storage | None]:
        """Checks every Buffer's byte range (used or not) and says where its data lives.

        Messages name the first tensor using the buffer, preferring the signature's subgraph.
        """
        users: dict[int, str] = {}
        for s in [main] + [s for s in range(len(raw_tensors)) if s != main]:
            prefix = f"subgraph {s} " if s != main else ""
            for i, t in enumerate(raw_tensors[s]):
                with self.reading(f"{prefix}tensor {i}"):
                    users.setdefault(t.scalar("buffer"), f"{prefix}{_tensor_label(i, t.string('name') or '')}")
        with self.reading("the buffer list"):
            buffers = self.model.tables("buffers")
        storages = []
        for b, buffer in enumerate(buffers):
            owner = users.get(b, "no tensor")
            with self.reading(f"buffer {b} (used by {owner})"):
                storages.append(self.buffer_storage(b, buffer, owner))
        return storages

    def buffer_storage(self, index: int, buffer: Table, owner: str) -> Storage | None:
        offset, size, file_size = buffer.scalar("offset"), buffer.scalar("size"), len(self.data)
        inline = buffer.span("data", 1)
        if offset >= FIRST_EXTERNAL_OFFSET:
            if inline is not None and inline[1]:
                raise self.fail(f"{owner}: buffer {index} has both inline data and an external offset {offset}")
            where = f"{owner}: external buffer {index} (offset {offset}, size {size}, file size {file_size})"
            if offset + size >= UINT64_LIMIT:
                raise self.fail(f"{where}: offset + size wraps past 2^64")
            if offset + size > file_size:
                raise self.fail(f"{where} runs past the end of the file")
            return Storage("external", offset, size, index)
        if inline is None or inline[1] == 0:
            return None
        start, length = inline  # checked against the file by span()
        return Storage("inline", start, length, index)

    def check_metadata_buffers(self, buffer_count: int) -> None:
        with self.reading("the metadata list"):
            for entry in self.model.tables("metadata"):
                name, buffer = entry.string("name") or "", entry.scalar("buffer")
                if not 0 <= buffer < buffer_count:
                    raise self.fail(f"metadata '{name}' refers to buffer {buffer} but the model has {buffer_count} buffers")

    # Tensors ---------------------------------------------------------------------------------

    def tensor(self, index: int, t: Table, storages: list[Storage | None]) -> Tensor:
        with self.reading(f"tensor {index}"):
            name = t.string("name") or ""
            where = _tensor_label(index, name)
            dtype = DTYPES.get(t.scalar("type"))
            if dtype is None:
                raise self.fail(f"{where} has unknown TensorType {t.scalar('type')}")
            shape = self.tensor_shape(t, dtype, where)
            if t.table("sparsity") is not None:
                raise self.fail(f"{where} is sparse, which porter does not read")
            quant = self.quantization(t.table("quantization"), shape, where)
            buffer_index = t.scalar("buffer")
            if t.scalar("is_variable"):
                self.variables.add(index)
        if not 0 <= buffer_index < len(storages):
            raise self.fail(f"{where} refers to buffer {buffer_index} but the model has {len(storages)} buffers")
        storage = storages[buffer_index]
        if storage is not None:
            data = self.constant(storage, shape, dtype, where)
        elif shape and 0 in shape and dtype in NUMPY_DTYPES:
            data = self.empty_constant(shape, dtype, where)
        else:
            data = None
        return Tensor(index, name, shape, dtype, quant, data, storage)

    def empty_constant(self, shape: tuple[int, ...], dtype: str, where: str) -> np.ndarray:
        """A constant with a zero dimension needs no bytes; numpy still refuses absurd shapes."""
        try:
            return np.zeros(0, dtype=NUMPY_DTYPES[dtype]).reshape(shape)
        except ValueError:
            raise self.fail(f"{where} has an impossible shape {list(shape)}") from None

    def tensor_shape(self, t: Table, dtype: str, where: str) -> tuple[int, ...]:
        shape = t.vector("shape").tolist()
        if len(shape) > MAX_RANK:
            raise self.fail(f"{where} has rank {len(shape)}; porter reads tensors of rank up to {MAX_RANK}")
        # shape_signature (when present) marks dynamic dims with -1 where `shape` says 1. LiteRT
        # allocates from `shape`, so a signature that disagrees elsewhere is refused.
        signature = t.vector("shape_signature").tolist()
        if len(signature) > MAX_RANK:
            raise self.fail(f"{where} has a shape_signature of rank {len(signature)}; porter reads tensors of rank up to {MAX_RANK}")
        if signature:
            if len(signature) != len(shape) or any(s not in (d, -1) for s, d in zip(signature, shape)):
                raise self.fail(f"{where} has shape_signature {signature} that disagrees with shape {shape}")
            shape = signature
        problem = shape_problem(shape, NUMPY_DTYPES[dtype].itemsize if dtype in NUMPY_DTYPES else 1)
        if problem:
            raise self.fail(f"{where} {problem}")
        return tuple(shape)

    def quantization(self, q: Table | None, shape: tuple[int, ...], where: str) -> Quantization | None:
        scale = np.zeros(0, np.float32) if q is None else q.vector("scale")
        if scale.size == 0:
            return None
        scale = scale.astype(np.float32)
        zero_point = q.vector("zero_point").astype(np.int64)
        if zero_point.size == 0:
            zero_point = np.zeros(scale.size, dtype=np.int64)
        if zero_point.size != scale.size:
            raise self.fail(f"{where} has {scale.size} quantisation scales but {zero_point.size} zero points")
        if not np.all(np.isfinite(scale)) or np.any(scale < 0):
            raise self.fail(f"{where} has a non-finite or negative quantisation scale")
        if scale.size == 1:
            return Quantization(scale, zero_point, None)
        axis = q.scalar("quantized_dimension")
        if not 0 <= axis < len(shape) or shape[axis] != scale.size:
            raise self.fail(
                f"{where} has {scale.size} per-channel scales along dimension {axis}, which does not fit shape {list(shape)}"
            )
        return Quantization(scale, zero_point, axis)

    def constant(self, storage: Storage, shape: tuple[int, ...], dtype: str, where: str) -> np.ndarray:
        if any(d < 0 for d in shape):
            raise self.fail(f"{where} is a constant with a dynamic dimension in shape {list(shape)}")
        if dtype == "int4":
            return self.int4_constant(storage, shape, where)
        numpy_dtype = NUMPY_DTYPES.get(dtype)
        if numpy_dtype is None:
            raise self.fail(f"{where} is a constant of type {dtype}, which porter cannot read")
        count = math.prod(shape)  # Python ints: a hostile shape cannot overflow the check
        expected = count * numpy_dtype.itemsize
        if storage.size != expected:
            raise self.fail(
                f"{where}: buffer {storage.buffer} holds {storage.size} bytes but shape {list(shape)} of {dtype} needs {expected}"
            )
        # A read-only view into the file's bytes: no copy of the weights.
        return np.frombuffer(self.data, dtype=numpy_dtype, count=count, offset=storage.offset).reshape(shape)

    def int4_constant(self, storage: Storage, shape: tuple[int, ...], where: str) -> np.ndarray:
        """An INT4 constant, packed two values per byte (the first in the low nibble, as LiteRT's
        UnpackDenseInt4IntoInt8 reads it; an odd count leaves the last high nibble unused),
        unpacked to one sign-extended int8 per value; the tensor keeps dtype "int4"."""
        count = math.prod(shape)
        expected = (count + 1) // 2
        if storage.size != expected:
            raise self.fail(f"{where}: buffer {storage.buffer} holds {storage.size} bytes but shape "
                            f"{list(shape)} of int4 (two per byte) needs {expected}")
        packed = np.frombuffer(self.data, dtype=np.uint8, count=expected, offset=storage.offset)
        nibbles = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(-1)[:count]
        values = (nibbles.astype(np.int8) ^ 8) - np.int8(8)  # sign-extend: 0..7 stay, 8..15 -> -8..-1
        return values.reshape(shape)

    # Operators -------------------------------------------------------------------------------

    def opcodes(self) -> list[tuple[str, int]]:
        """(op name, version) per OperatorCode."""
        with self.reading("the opcode list"):
            return [self.opcode(code) for code in self.model.tables("operator_codes")]

    @staticmethod
    def opcode(code: Table) -> tuple[str, int]:
        # Old files store the op in the int8 deprecated_builtin_code; newer ones keep that at
        # PLACEHOLDER_FOR_GREATER_OP_CODES (127) and use builtin_code. The larger one is right.
        builtin = max(code.scalar("builtin_code"), code.scalar("deprecated_builtin_code"))
        if builtin == tflite.BuiltinOperator.CUSTOM:
            name = code.string("custom_code") or "CUSTOM"
        else:
            name = OPERATOR_NAMES.get(builtin, f"BUILTIN_{builtin}")
        return name, code.scalar("version")

    def op(self, index: int, raw: Table, opcodes: list[tuple[str, int]], tensors: list[Tensor]) -> Op:
        with self.reading(f"operator {index}"):
            opcode_index = raw.scalar("opcode_index")
            if not 0 <= opcode_index < len(opcodes):
                raise self.fail(f"op {index}: opcode index {opcode_index} out of range (the model has {len(opcodes)} opcodes)")
            name, version = opcodes[opcode_index]
            inputs = raw.vector("inputs").tolist()
            outputs = raw.vector("outputs").tolist()
            options = _decode_options(raw, "builtin_options", BUILTIN_OPTIONS_NAMES)
            options |= _decode_options(raw, "builtin_options2", BUILTIN_OPTIONS2_NAMES)
        for role, indices, lowest in (("input", inputs, -1), ("output", outputs, 0)):
            for position, t in enumerate(indices):
                if not lowest <= t < len(tensors):
                    raise self.fail(
                        f"op {index} ({name}): {role} {position} is tensor index {t}, out of range (the subgraph has {len(tensors)} tensors)"
                    )
        return Op(index, name, inputs, outputs, options, version)

    # Signature and sources -------------------------------------------------------------------

    def subgraph_io(self, s: int, subgraph: Table, signatures, tensors: list[Tensor]) -> tuple[dict[str, int], dict[str, int]]:
        """Inputs and outputs by name: from the subgraph's first SignatureDef, else its own lists.

        Every signature of the subgraph is checked, not only the one used.
        """
        inputs: dict[str, int] | None = None
        for key, signature, index in signatures:
            if index != s:
                continue
            with self.reading(f"signature '{key}'"):
                ins = self.tensor_map(f"signature '{key}' input", signature.tables("inputs"))
                outs = self.tensor_map(f"signature '{key}' output", signature.tables("outputs"))
            for role, mapping in (("input", ins), ("output", outs)):
                for name, t in mapping.items():
                    if not 0 <= t < len(tensors):
                        raise self.fail(
                            f"signature '{key}' {role} '{name}' is tensor index {t}, out of range (the subgraph has {len(tensors)} tensors)"
                        )
            if inputs is None:
                inputs, outputs = ins, outs
        with self.reading(f"the inputs and outputs of subgraph {s}"):
            own_inputs = self.checked_indices("subgraph input", subgraph.vector("inputs"), tensors)
            own_outputs = self.checked_indices("subgraph output", subgraph.vector("outputs"), tensors)
        if inputs is None:
            inputs = self.by_name("subgraph input", own_inputs, tensors)
            outputs = self.by_name("subgraph output", own_outputs, tensors)
        return inputs, outputs

    def by_name(self, role: str, indices: list[int], tensors: list[Tensor]) -> dict[str, int]:
        """Without a signature, inputs and outputs are known by their tensors' names."""
        mapping = {}
        for i in indices:
            if tensors[i].name in mapping and mapping[tensors[i].name] != i:
                raise self.fail(f"{role} tensors {mapping[tensors[i].name]} and {i} are both named '{tensors[i].name}'")
            mapping[tensors[i].name] = i
        return mapping

    def tensor_map(self, role: str, entries: list[Table]) -> dict[str, int]:
        """A signature's name -> tensor index map; every entry needs a name of its own."""
        mapping = {}
        for j, entry in enumerate(entries):
            name = entry.string("name")
            if not name:
                raise self.fail(f"{role} {j} has no name")
            if name in mapping:
                raise self.fail(f"{role} {j} is named '{name}' like an earlier one")
            mapping[name] = entry.scalar("tensor_index")
        return mapping

    def checked_indices(self, role: str, indices: np.ndarray, tensors: list[Tensor]) -> list[int]:
        indices = indices.tolist()
        for i in indices:
            if not 0 <= i < len(tensors):
                raise self.fail(f"{role} tensor index {i} out of range (the subgraph has {len(tensors)} tensors)")
        return indices

    def check_dataflow(self, ops: list[Op], tensors: list[Tensor]) -> None:
        """No tensor written twice, no op reading what it or a later op writes (LiteRT runs the
        operator list in file order, and recovery walks producers: a cycle would never end)."""
        def value(t: int) -> str:
            return _tensor_label(t, tensors[t].name)

        problem = dataflow_problem([[t for t in op.inputs if t >= 0] for op in ops], [op.outputs for op in ops],
                                   lambda k: f"op {k} ({ops[k].type})", value)
        if problem:
            raise self.fail(problem)

    def check_every_read_has_a_source(self, ops: list[Op], tensors: list[Tensor], inputs: dict[str, int]) -> None:
        """Every tensor an op reads must come from an op, a graph input or data of its own."""
        produced = {t for op in ops for t in op.outputs}
        graph_inputs = set(inputs.values())
        for op in ops:
            weight_positions = WEIGHT_INPUTS.get(op.type, ())
            for position, t in enumerate(op.inputs):
                if t < 0 or t in produced or t in graph_inputs:
                    continue
                tensor = tensors[t]
                if tensor.data is None and t not in self.variables:
                    raise self.fail(f"{_tensor_label(t, tensor.name)} read by {op.describe()} has no data and no producer")
                if tensor.data is not None and tensor.data.size == 0 and position in weight_positions:
                    raise self.fail(f"{_tensor_label(t, tensor.name)} read by {op.describe()} is a zero-length constant weight")
