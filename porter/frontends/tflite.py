"""Reads a TFLite flatbuffer into a porter Graph, checking every byte range before using it.

LiteRT trusts the file: an external buffer whose offset + size wraps past 2^64 crashes it, and a
weight without data loads and fails only at run time. So this reader checks, in order: the
'TFL3' identifier, every Buffer's byte range against the file (inline vectors and external
offset/size pairs, counted from the start of the file), every tensor's buffer index, data size
against shape x dtype, quantisation parameters against the shape, every opcode index and tensor
index of every operator, and that every tensor an operator reads is either produced by an op, a
graph input, a variable, or backed by data. Anything wrong is one PorterError line naming the
tensor, op, buffer or byte range.

The flatbuffer itself is read with the `tflite` package's generated accessors; they raise low-level
errors (struct.error, IndexError, ValueError) on bytes that are not a flatbuffer, and those are
turned into PorterError too. There is no full flatbuffer verifier here: garbage that still parses
is caught by the semantic checks above.
"""

from __future__ import annotations

import importlib
import math
import re
import struct
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import numpy as np
import tflite

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Quantization, Storage, Tensor

IDENTIFIER = b"TFL3"
# Root table offset (4 bytes) + file identifier (4 bytes).
HEADER_SIZE = 8
# Buffer.offset 0 means "not set" and 1 is the placeholder exporters write for "no data";
# only offsets above 1 point at external data.
FIRST_EXTERNAL_OFFSET = 2
UINT64_LIMIT = 2**64
NAME_LIMIT = 80  # characters of a tensor name quoted in an error message
# Each element of a flatbuffer vector of tables is a 4-byte offset: a vector claiming more
# elements than the file could hold is corrupt (and would make us loop for a very long time).
OFFSET_SIZE = 4

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
    # Each read below has its own, more specific guard; this one catches any read they miss.
    with _flatbuffer_errors(path, "the model"):
        return _ModelReader(path, data, model).graph()


def _tensor_label(index: int, name: str) -> str:
    """How messages name a tensor. Exporters fuse scope paths into names of hundreds of
    characters; the end of the name says most, so longer names keep only their end."""
    shown = name if len(name) <= NAME_LIMIT else "..." + name[-(NAME_LIMIT - 3):]
    return f"tensor {index} '{shown}'"


def _fail(path: Path, message: str) -> PorterError:
    return PorterError(f"{path}: {message}")


@contextmanager
def _flatbuffer_errors(path: Path, what: str):
    """Turns the accessors' low-level failures on malformed bytes into one PorterError line."""
    try:
        yield
    except (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError) as e:
        detail = " ".join(str(e).split()) or type(e).__name__
        raise _fail(path, f"corrupt TFLite flatbuffer while reading {what} ({detail})") from None


def _open_model(path: Path, data: bytes) -> tflite.Model:
    if len(data) < HEADER_SIZE:
        raise _fail(path, f"file too small to be a TFLite flatbuffer ({len(data)} bytes)")
    if data[4:8] != IDENTIFIER:
        raise _fail(path, f"not a TFLite flatbuffer (identifier {data[4:8]!r}, expected {IDENTIFIER!r})")
    root = struct.unpack_from("<I", data, 0)[0]
    if root + OFFSET_SIZE > len(data):
        raise _fail(path, f"corrupt TFLite flatbuffer: root table offset {root} is past the end of the {len(data)}-byte file")
    with _flatbuffer_errors(path, "the model table"):
        return tflite.Model.GetRootAs(data, 0)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@cache
def _option_fields(options_class) -> tuple[tuple[str, str, bool], ...]:
    """(accessor, snake_case field name, is_vector) for each field of a generated options class.

    Scalar fields are zero-argument accessors; vector fields have an `XAsNumpy` companion.
    Table-valued fields (only in StableHLO options) take no part: nothing in porter reads them.
    """
    methods = {k for k, v in vars(options_class).items() if callable(v) and not k.startswith("_")}
    plumbing = {"Init"} | {m for m in methods if m.startswith("GetRootAs") or m.endswith("BufferHasIdentifier")}
    fields = []
    for m in sorted(methods - plumbing):
        if m.endswith(("Length", "IsNone", "AsNumpy")):
            continue
        if f"{m}AsNumpy" in methods:
            fields.append((f"{m}AsNumpy", _snake(m), True))
        elif vars(options_class)[m].__code__.co_argcount == 1:
            fields.append((m, _snake(m), False))
    return tuple(fields)


def _decode_options(table, union_names: dict[int, str], union_type: int) -> dict:
    """Decodes a builtin-options union table into {snake_case_field: value}."""
    class_name = union_names.get(union_type)
    if table is None or class_name is None or class_name == "NONE":
        return {}
    options_class = getattr(importlib.import_module(f"tflite.{class_name}"), class_name)
    options = options_class()
    options.Init(table.Bytes, table.Pos)
    decoded = {}
    for accessor, field, is_vector in _option_fields(options_class):
        value = getattr(options, accessor)()
        if is_vector:
            value = [] if isinstance(value, int) else value.tolist()
        elif not isinstance(value, (bool, int, float, bytes)):
            continue
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if field in ENUM_FIELDS and isinstance(value, int):
            value = ENUM_FIELDS[field].get(value, value)
        decoded[field] = value
    return decoded


class _ModelReader:
    """Walks one model: buffers, opcodes, then every subgraph's tensors, operators and signatures."""

    def __init__(self, path: Path, data: bytes, model: tflite.Model):
        self.path = path
        self.data = data
        self.model = model
        self.variables: set[int] = set()  # indices of tensors flagged is_variable (state, no data)
        self.context = ""  # names the subgraph in messages when it is not the signature's

    def fail(self, message: str) -> PorterError:
        return _fail(self.path, self.context + message)

    def vector_length(self, what: str, length: int) -> int:
        if length * OFFSET_SIZE > len(self.data):
            raise self.fail(f"corrupt TFLite flatbuffer: {what} claims {length} entries, more than the file can hold")
        return length

    def graph(self) -> Graph:
        """The signature's subgraph as a Graph, after checking every subgraph and signature."""
        signatures = self.signatures()
        main = signatures[0][1] if signatures else 0
        with _flatbuffer_errors(self.path, "the subgraph list"):
            subgraph_count = self.vector_length("the subgraph list", self.model.SubgraphsLength())
        for key, index in signatures:
            if not 0 <= index < subgraph_count:
                raise self.fail(f"signature '{key}' names subgraph {index} but the model has {subgraph_count}")
        if subgraph_count == 0:
            raise self.fail("the model has no subgraphs")
        raw_tensors = [self.subgraph_tensors(s) for s in range(subgraph_count)]
        storages = self.buffer_storages(raw_tensors, main)
        self.check_metadata_buffers(len(storages))
        opcodes = self.opcodes()
        # LiteRT reads every subgraph (WHILE/IF bodies too), so every one is checked.
        for s in range(subgraph_count):
            self.context = f"subgraph {s}: " if s != main else ""
            tensors, ops = self.subgraph_contents(s, raw_tensors[s], storages, opcodes)
            inputs, outputs = self.subgraph_io(s, signatures, tensors)
            self.check_every_read_has_a_source(ops, tensors, inputs)
            if s == main:
                graph_parts = tensors, ops, inputs, outputs
        self.context = ""
        with _flatbuffer_errors(self.path, "the model description"):
            schema_version = self.model.Version()
            description = (self.model.Description() or b"").decode("utf-8", "replace")
        metadata = {
            "schema_version": schema_version,
            "description": description,
            "signature_key": signatures[0][0] if signatures else None,
            "subgraph": main,
            "subgraph_count": subgraph_count,
            "file_size": len(self.data),
            # One entry per Buffer in the model (None: no data), all checked against the file.
            "buffers": storages,
        }
        return Graph("tflite", str(self.path), *graph_parts, metadata)

    def signatures(self) -> list[tuple[str, int]]:
        """(signature key, subgraph index) of every SignatureDef, in file order."""
        with _flatbuffer_errors(self.path, "the signatures"):
            count = self.vector_length("the signature list", self.model.SignatureDefsLength())
            return [
                ((sig.SignatureKey() or b"").decode("utf-8", "replace"), sig.SubgraphIndex())
                for sig in (self.model.SignatureDefs(i) for i in range(count))
            ]

    def subgraph_tensors(self, s: int) -> list[tflite.Tensor]:
        with _flatbuffer_errors(self.path, f"subgraph {s}"):
            subgraph = self.model.Subgraphs(s)
            count = self.vector_length(f"the tensor list of subgraph {s}", subgraph.TensorsLength())
            return [subgraph.Tensors(i) for i in range(count)]

    def subgraph_contents(self, s: int, raw_tensors, storages, opcodes) -> tuple[list[Tensor], list[Op]]:
        self.variables = set()
        tensors = [self.tensor(i, t, storages) for i, t in enumerate(raw_tensors)]
        with _flatbuffer_errors(self.path, f"the operator list of subgraph {s}"):
            subgraph = self.model.Subgraphs(s)
            op_count = self.vector_length("the operator list", subgraph.OperatorsLength())
        ops = [self.op(k, subgraph.Operators(k), opcodes, tensors) for k in range(op_count)]
        return tensors, ops

    # Buffers ---------------------------------------------------------------------------------

    def buffer_storages(self, raw_tensors: list[list[tflite.Tensor]], main: int) -> list[Storage | None]:
        """Checks every Buffer's byte range (used or not) and says where its data lives.

        Messages name the first tensor using the buffer, preferring the signature's subgraph.
        """
        users: dict[int, str] = {}
        for s in [main] + [s for s in range(len(raw_tensors)) if s != main]:
            prefix = f"subgraph {s} " if s != main else ""
            for i, t in enumerate(raw_tensors[s]):
                with _flatbuffer_errors(self.path, f"{prefix}tensor {i}"):
                    users.setdefault(t.Buffer(), f"{prefix}{_tensor_label(i, self.tensor_name(t))}")
        with _flatbuffer_errors(self.path, "the buffer list"):
            count = self.vector_length("the buffer list", self.model.BuffersLength())
        storages = []
        for b in range(count):
            owner = users.get(b, "no tensor")
            with _flatbuffer_errors(self.path, f"buffer {b} (used by {owner})"):
                storages.append(self.buffer_storage(b, self.model.Buffers(b), owner))
        return storages

    def buffer_storage(self, index: int, buffer: tflite.Buffer, owner: str) -> Storage | None:
        offset, size, file_size = buffer.Offset(), buffer.Size(), len(self.data)
        inline_length = buffer.DataLength()
        if offset >= FIRST_EXTERNAL_OFFSET:
            if inline_length:
                raise self.fail(f"{owner}: buffer {index} has both inline data and an external offset {offset}")
            where = f"{owner}: external buffer {index} (offset {offset}, size {size}, file size {file_size})"
            if offset + size >= UINT64_LIMIT:
                raise self.fail(f"{where}: offset + size wraps past 2^64")
            if offset + size > file_size:
                raise self.fail(f"{where} runs past the end of the file")
            return Storage("external", offset, size, index)
        if inline_length == 0:
            return None
        # The generated accessor hides where the vector starts; the table slot for `data` is 4.
        start = buffer._tab.Vector(buffer._tab.Offset(4))
        if start + inline_length > file_size:
            raise self.fail(
                f"{owner}: inline buffer {index} (offset {start}, size {inline_length}) runs past the end of the {file_size}-byte file"
            )
        return Storage("inline", start, inline_length, index)

    def check_metadata_buffers(self, buffer_count: int) -> None:
        with _flatbuffer_errors(self.path, "the metadata list"):
            count = self.vector_length("the metadata list", self.model.MetadataLength())
            entries = [self.model.Metadata(i) for i in range(count)]
            for entry in entries:
                name = (entry.Name() or b"").decode("utf-8", "replace")
                if not 0 <= entry.Buffer() < buffer_count:
                    raise self.fail(f"metadata '{name}' refers to buffer {entry.Buffer()} but the model has {buffer_count} buffers")

    # Tensors ---------------------------------------------------------------------------------

    @staticmethod
    def tensor_name(t: tflite.Tensor) -> str:
        return (t.Name() or b"").decode("utf-8", "replace")

    def tensor(self, index: int, t: tflite.Tensor, storages: list[Storage | None]) -> Tensor:
        with _flatbuffer_errors(self.path, f"tensor {index}"):
            name = self.tensor_name(t)
            where = _tensor_label(index, name)
            dtype = DTYPES.get(t.Type())
            if dtype is None:
                raise self.fail(f"{where} has unknown TensorType {t.Type()}")
            shape = self.tensor_shape(t, where)
            if t.Sparsity() is not None:
                raise self.fail(f"{where} is sparse, which porter does not read")
            quant = self.quantization(t.Quantization(), shape, where)
            buffer_index = t.Buffer()
            if t.IsVariable():
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

    def tensor_shape(self, t: tflite.Tensor, where: str) -> tuple[int, ...]:
        shape = [int(d) for d in self.int_vector(t.ShapeAsNumpy())]
        # shape_signature (when present) marks dynamic dims with -1 where `shape` says 1. LiteRT
        # allocates from `shape`, so a signature that disagrees elsewhere is refused.
        signature = [int(d) for d in self.int_vector(t.ShapeSignatureAsNumpy())]
        if signature:
            if len(signature) != len(shape) or any(s not in (d, -1) for s, d in zip(signature, shape)):
                raise self.fail(f"{where} has shape_signature {signature} that disagrees with shape {shape}")
            shape = signature
        if any(d < -1 for d in shape):
            raise self.fail(f"{where} has a negative dimension in shape {shape}")
        return tuple(shape)

    @staticmethod
    def int_vector(value) -> np.ndarray:
        # Absent vectors come back from the accessors as the integer 0.
        return np.zeros(0, dtype=np.int64) if isinstance(value, int) else value

    def quantization(self, q, shape: tuple[int, ...], where: str) -> Quantization | None:
        if q is None or q.ScaleLength() == 0:
            return None
        scale = np.asarray(q.ScaleAsNumpy(), dtype=np.float32)
        zero_point = self.int_vector(q.ZeroPointAsNumpy()).astype(np.int64)
        if zero_point.size == 0:
            zero_point = np.zeros(scale.size, dtype=np.int64)
        if zero_point.size != scale.size:
            raise self.fail(f"{where} has {scale.size} quantisation scales but {zero_point.size} zero points")
        if not np.all(np.isfinite(scale)) or np.any(scale < 0):
            raise self.fail(f"{where} has a non-finite or negative quantisation scale")
        if scale.size == 1:
            return Quantization(scale, zero_point, None)
        axis = q.QuantizedDimension()
        if not 0 <= axis < len(shape) or shape[axis] != scale.size:
            raise self.fail(
                f"{where} has {scale.size} per-channel scales along dimension {axis}, which does not fit shape {list(shape)}"
            )
        return Quantization(scale, zero_point, axis)

    def constant(self, storage: Storage, shape: tuple[int, ...], dtype: str, where: str) -> np.ndarray:
        if any(d < 0 for d in shape):
            raise self.fail(f"{where} is a constant with a dynamic dimension in shape {list(shape)}")
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

    # Operators -------------------------------------------------------------------------------

    def opcodes(self) -> list[tuple[str, int]]:
        """(op name, version) per OperatorCode."""
        with _flatbuffer_errors(self.path, "the opcode list"):
            count = self.vector_length("the opcode list", self.model.OperatorCodesLength())
            return [self.opcode(self.model.OperatorCodes(i)) for i in range(count)]

    @staticmethod
    def opcode(code: tflite.OperatorCode) -> tuple[str, int]:
        # Old files store the op in the int8 deprecated_builtin_code; newer ones keep that at
        # PLACEHOLDER_FOR_GREATER_OP_CODES (127) and use builtin_code. The larger one is right.
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == tflite.BuiltinOperator.CUSTOM:
            name = (code.CustomCode() or b"").decode("utf-8", "replace") or "CUSTOM"
        else:
            name = OPERATOR_NAMES.get(builtin, f"BUILTIN_{builtin}")
        return name, code.Version()

    def op(self, index: int, raw: tflite.Operator, opcodes: list[tuple[str, int]], tensors: list[Tensor]) -> Op:
        with _flatbuffer_errors(self.path, f"operator {index}"):
            opcode_index = raw.OpcodeIndex()
            if not 0 <= opcode_index < len(opcodes):
                raise self.fail(f"op {index}: opcode index {opcode_index} out of range (the model has {len(opcodes)} opcodes)")
            name, version = opcodes[opcode_index]
            inputs = [int(i) for i in self.int_vector(raw.InputsAsNumpy())]
            outputs = [int(i) for i in self.int_vector(raw.OutputsAsNumpy())]
            options = _decode_options(raw.BuiltinOptions(), BUILTIN_OPTIONS_NAMES, raw.BuiltinOptionsType())
            options |= _decode_options(raw.BuiltinOptions2(), BUILTIN_OPTIONS2_NAMES, raw.BuiltinOptions2Type())
        for role, indices, lowest in (("input", inputs, -1), ("output", outputs, 0)):
            for position, t in enumerate(indices):
                if not lowest <= t < len(tensors):
                    raise self.fail(
                        f"op {index} ({name}): {role} {position} is tensor index {t}, out of range (the subgraph has {len(tensors)} tensors)"
                    )
        return Op(index, name, inputs, outputs, options, version)

    # Signature and sources -------------------------------------------------------------------

    def subgraph_io(self, s: int, signatures, tensors: list[Tensor]) -> tuple[dict[str, int], dict[str, int]]:
        """Inputs and outputs by name: from the subgraph's first SignatureDef, else its own lists.

        Every signature of the subgraph is checked, not only the one used.
        """
        inputs: dict[str, int] | None = None
        for i, (key, index) in enumerate(signatures):
            if index != s:
                continue
            with _flatbuffer_errors(self.path, f"signature '{key}'"):
                signature = self.model.SignatureDefs(i)
                n_in = self.vector_length("the signature inputs", signature.InputsLength())
                n_out = self.vector_length("the signature outputs", signature.OutputsLength())
                ins = self.tensor_map([signature.Inputs(j) for j in range(n_in)])
                outs = self.tensor_map([signature.Outputs(j) for j in range(n_out)])
            for role, mapping in (("input", ins), ("output", outs)):
                for name, t in mapping.items():
                    if not 0 <= t < len(tensors):
                        raise self.fail(
                            f"signature '{key}' {role} '{name}' is tensor index {t}, out of range (the subgraph has {len(tensors)} tensors)"
                        )
            if inputs is None:
                inputs, outputs = ins, outs
        with _flatbuffer_errors(self.path, f"the inputs and outputs of subgraph {s}"):
            subgraph = self.model.Subgraphs(s)
            own_inputs = self.checked_indices("subgraph input", subgraph.InputsAsNumpy(), tensors)
            own_outputs = self.checked_indices("subgraph output", subgraph.OutputsAsNumpy(), tensors)
        if inputs is None:
            inputs = {tensors[i].name: i for i in own_inputs}
            outputs = {tensors[i].name: i for i in own_outputs}
        return inputs, outputs

    def tensor_map(self, entries) -> dict[str, int]:
        return {e.Name().decode("utf-8", "replace"): e.TensorIndex() for e in entries}

    def checked_indices(self, role: str, indices, tensors: list[Tensor]) -> list[int]:
        indices = [int(i) for i in self.int_vector(indices)]
        for i in indices:
            if not 0 <= i < len(tensors):
                raise self.fail(f"{role} tensor index {i} out of range (the subgraph has {len(tensors)} tensors)")
        return indices

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

