"""Reads an ONNX model into a porter Graph, checking its data and references before using them.

Checked: the protobuf parses and holds a graph; the default-domain opset is one porter reads and
every node's domain is imported; every node of a standard op has the inputs, outputs and
attributes its operator schema declares, each attribute of the declared type (a TENSOR
attribute's data fitting its dims); every initializer's data matches its dims x dtype, and
external data files exist inside the model's folder with the byte range in bounds; every node
input is an initializer, a graph input or an earlier node's output, with no value written twice
and no cycle; declared shapes have no negative dimension; and what the ops porter knows need of
their ranks and attribute values (ONNX_RULES, porter.frontends.op_rules). Anything wrong is one
PorterError line naming the node, input, attribute, initializer, file or byte range.

Tensors are ONNX values, numbered in order: graph inputs, initializers, then node outputs.
Shapes come from the graph's inputs, outputs and value_info, completed by ONNX shape inference
(in a child process, after every check: see onnx_shapes); symbolic dimensions become -1. Initializers fed to DequantizeLinear with constant scale and zero
point get a Quantization (per-tensor or along the node's axis).
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from porter.errors import PorterError
from porter.frontends.onnx_shapes import inferred_values
from porter.frontends.graph import Graph, Op, Quantization, Storage, Tensor, dataflow_problem, shape_problem
from porter.frontends.op_rules import (Rule, axes_attribute, axes_operand, axis_attribute, bounded_result,
                                       check_op_rules, finite_attribute, one_of, permutation_attribute,
                                       rank_of, reshape_target)

# Opset 13 is the first with today's Softmax (one axis, not "flatten from axis") and with axes
# given as inputs for Squeeze/Unsqueeze/ReduceSum; older graphs would need other semantics.
MIN_DEFAULT_OPSET = 13
DEFAULT_DOMAINS = ("", "ai.onnx")
# Other domains whose ops porter may meet: onnxruntime's contrib ops (quantisation tools emit them).
KNOWN_DOMAINS = ("com.microsoft",)

DTYPES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.STRING: "string",
}
UNKNOWN_DTYPE = "unknown"
NAME_LIMIT = 200  # characters of a file-provided name quoted in an error message
PATH_LIMIT = 4096  # Linux's PATH_MAX: a longer external data location cannot name a file
NUMPY_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in DTYPES.values() if name not in ("bfloat16", "string")}
ATTRIBUTE_TYPES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}
CAST_TARGETS = tuple(v for v in onnx.TensorProto.DataType.values() if v != onnx.TensorProto.UNDEFINED)
# Constant folding materialises Expand and ConstantOfShape results: 64 Mi elements is far more
# than any mask or position table of a window porter compiles, and far less than memory.
MAX_FOLDED_ELEMENTS = 1 << 26


def _dequantize_axis(op: Op, g: Graph) -> str | None:
    """DequantizeLinear's axis matters only with a scale per index (a scale with more than one value)."""
    scale = op.inputs[1] if len(op.inputs) > 1 else -1
    if scale < 0 or rank_of(g, scale) in (None, 0) or math.prod(g.tensor(scale).shape) == 1:
        return None
    return axis_attribute("axis", 1)(op, g)


def _gather_nd_batch_dims(op: Op, g: Graph) -> str | None:
    batch_dims = op.options.get("batch_dims", 0)
    ranks = [rank_of(g, t) for t in op.inputs[:2]]
    if None in ranks:
        return None
    if not 0 <= batch_dims < min(ranks):
        return f"attribute 'batch_dims' is {batch_dims}; the op needs 0 <= batch_dims < {min(ranks)} (the inputs' ranks)"
    return None


def _integer_indices(op: Op, g: Graph) -> str | None:
    """A gather's indices are int32 or int64 (the schema's Tind), as onnxruntime checks on load."""
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        return None
    dtype = g.tensor(op.inputs[1]).dtype
    if dtype in ("int32", "int64", UNKNOWN_DTYPE):
        return None
    return f"its indices (input 1) are {dtype}; the op takes int32 or int64 indices"


# What each op porter's ONNX patterns and constant folding use needs beyond its schema.
ONNX_RULES = {
    "LayerNormalization": Rule(ranks={0: (1, None)}, checks=(
        axis_attribute("axis", -1), finite_attribute("epsilon", positive=True))),
    "Softmax": Rule(ranks={0: (1, None)}, checks=(axis_attribute("axis", -1),)),
    "Transpose": Rule(checks=(permutation_attribute("perm"),)),
    "MatMul": Rule(ranks={0: (1, None), 1: (1, None)}),
    "MatMulInteger": Rule(ranks={0: (1, None), 1: (1, None)}),
    "Gather": Rule(ranks={0: (1, None)}, checks=(axis_attribute("axis", 0), _integer_indices)),
    "GatherND": Rule(ranks={0: (1, None), 1: (1, None)}, checks=(_gather_nd_batch_dims, _integer_indices)),
    "GatherElements": Rule(checks=(axis_attribute("axis", 0), _integer_indices)),
    "Concat": Rule(ranks={0: (1, None)}, checks=(axis_attribute("axis"),)),
    "Flatten": Rule(checks=(axis_attribute("axis", 1, past_last=True),)),
    "Split": Rule(ranks={0: (1, None)}, checks=(axis_attribute("axis", 0),)),
    "DequantizeLinear": Rule(checks=(_dequantize_axis,)),
    "ReduceMean": Rule(checks=(axes_attribute("axes"), axes_operand(1), one_of("keepdims", (0, 1)))),
    "Squeeze": Rule(checks=(axes_operand(1),)),
    "Unsqueeze": Rule(checks=(axes_operand(1, inserted=True),)),
    "Reshape": Rule(checks=(reshape_target(1, zero_copies=True), one_of("allowzero", (0, 1)))),
    "Expand": Rule(checks=(bounded_result(1, MAX_FOLDED_ELEMENTS),)),
    "ConstantOfShape": Rule(checks=(bounded_result(0, MAX_FOLDED_ELEMENTS),)),
    "Cast": Rule(checks=(one_of("to", CAST_TARGETS),)),
    "Gelu": Rule(checks=(one_of("approximate", ("none", "tanh")),)),
    # onnxruntime's GELU kernels (its transformers optimizer writes them): x, and a 1-D bias
    "com.microsoft.FastGelu": Rule(inputs=(1, 2), outputs=1, ranks={1: (1, 1)}),
    "com.microsoft.BiasGelu": Rule(inputs=(2, 2), outputs=1, ranks={1: (1, 1)}),
}


def load_onnx(path: str | Path) -> Graph:
    """Reads and validates a .onnx file (and its external data); raises PorterError on problems."""
    path = Path(path)
    model = _parse(path)
    opsets = _check_opsets(path, model)
    declared = _value_types(path, model.graph.value_info, model.graph.input, model.graph.output)
    graph = _GraphBuilder(path, model, opsets, declared).graph()
    _complete_value_types(graph)
    _check_graph_inputs(graph)
    check_op_rules(graph, ONNX_RULES)
    return graph


def _check_graph_inputs(graph: Graph) -> None:
    """Graph inputs are what a compiled module is fed: each needs an element type porter reads
    and a declared shape (porter compiles fixed windows; dimensions may be symbolic)."""
    for name, t in graph.inputs.items():
        tensor = graph.tensor(t)
        if tensor.dtype == UNKNOWN_DTYPE:
            raise _fail(Path(graph.path), f"graph input '{name}' declares no tensor type with a shape")
        if tensor.dtype not in NUMPY_DTYPES:
            raise _fail(Path(graph.path), f"graph input '{name}' has element type {tensor.dtype}, which porter cannot feed")


def _fail(path: Path, message: str) -> PorterError:
    return PorterError(f"{path}: {message}")


def _parse(path: Path) -> onnx.ModelProto:
    try:
        # External data is read (and checked) here, not by onnx, which trusts the paths.
        model = onnx.load_model(str(path), load_external_data=False)
    except DecodeError as e:
        raise _fail(path, f"not a valid ONNX protobuf (truncated or corrupt: {' '.join(str(e).split())})") from None
    # Random bytes can parse as a protobuf of unknown fields: a real model has a version and nodes.
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise _fail(path, "not an ONNX model (no IR version or no graph nodes)")
    _check_names_are_text(path, model)
    return model


def _check_names_are_text(path: Path, model: onnx.ModelProto) -> None:
    """onnx.proto is proto2: a string field holding bytes that are not UTF-8 parses, and comes
    back as bytes, which nothing downstream expects. Every name porter reads must be text."""
    g = model.graph
    named = [(f"opset import {i}", [o.domain]) for i, o in enumerate(model.opset_import)]
    named += [(f"node {k}", [n.op_type, n.domain, n.name, *n.input, *n.output, *(a.name for a in n.attribute)])
              for k, n in enumerate(g.node)]
    named += [(f"initializer {i}", [t.name, *(e.key for e in t.external_data), *(e.value for e in t.external_data)])
              for i, t in enumerate(g.initializer)]
    named += [(f"graph {role} {i}", [v.name]) for role in ("input", "output", "value_info")
              for i, v in enumerate(getattr(g, role))]
    for where, texts in named:
        if not all(isinstance(text, str) for text in texts):
            raise _fail(path, f"{where} has a name or field that is not UTF-8 text")


def _check_opsets(path: Path, model: onnx.ModelProto) -> dict[str, int]:
    """Domain -> opset version, with the default domain under the key ''."""
    opsets = {("" if o.domain in DEFAULT_DOMAINS else o.domain): o.version for o in model.opset_import}
    latest = onnx.defs.onnx_opset_version()
    default = opsets.get("")
    if default is None:
        raise _fail(path, "the model imports no default-domain (ai.onnx) opset")
    if not MIN_DEFAULT_OPSET <= default <= latest:
        raise _fail(path, f"unsupported ai.onnx opset {default} (porter reads opsets {MIN_DEFAULT_OPSET} to {latest})")
    # A declared domain no node uses is ignored (onnxruntime's optimizer declares ai.onnx.ml and
    # others it never uses); a used one porter does not read is refused at its op (check_node).
    return opsets


def _value_types(path: Path, *value_lists) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Value name -> (dtype, shape) for every value with a tensor type and a shape."""
    types = {}
    for values in value_lists:
        for value in values:
            tensor_type = value.type.tensor_type
            if not value.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
                continue
            declared = tensor_type.shape.dim
            negative = [d.dim_value for d in declared if d.HasField("dim_value") and d.dim_value < 0]
            if negative:  # porter's -1 means dynamic; the file's dim_param says that
                raise _fail(path, f"value '{value.name}' is declared with dimension {negative[0]}")
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in declared)
            dtype = _dtype_name(tensor_type.elem_type)
            problem = shape_problem(dims, NUMPY_DTYPES[dtype].itemsize if dtype in NUMPY_DTYPES else 1)
            if problem:
                raise _fail(path, f"value '{value.name}' {problem}")
            types[value.name] = (dtype, dims)
    return types


def _complete_value_types(graph: Graph) -> None:
    """Fills in the types of values the file does not declare, by (isolated) shape inference.

    Runs only on a graph that passed every check above.
    """
    unknown = [t for t in graph.tensors if t.dtype == UNKNOWN_DTYPE]
    if not unknown:
        return
    inferred = _value_types(Path(graph.path), inferred_values(Path(graph.path)))
    for t in unknown:
        if t.name in inferred:
            t.dtype, t.shape = inferred[t.name]


def _dtype_name(elem_type: int) -> str:
    if elem_type in DTYPES:
        return DTYPES[elem_type]
    known = elem_type in onnx.TensorProto.DataType.values()
    return onnx.TensorProto.DataType.Name(elem_type).lower() if known else f"onnx_type_{elem_type}"


@cache
def _schema(op_type: str, domain: str, opset: int):
    """The operator schema onnx knows for the op at the model's opset, or None."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None


def _schema_problem(node: onnx.NodeProto, schema) -> str | None:
    """What the node does against its schema: input and output counts, omitted required inputs
    or outputs, attributes missing, unknown or of another type."""
    Option = onnx.defs.OpSchema.FormalParameterOption
    for role, names, fewest, most, formals in (
            ("inputs", node.input, schema.min_input, schema.max_input, schema.inputs),
            ("outputs", node.output, schema.min_output, schema.max_output, schema.outputs)):
        if not fewest <= len(names) <= most:
            span = str(fewest) if fewest == most else f"{fewest} to {most}"
            return f"has {len(names)} {role}; {schema.name} takes {span}"
        for position, name in enumerate(names):
            formal = formals[min(position, len(formals) - 1)]
            if not name and formal.option != Option.Optional:
                return f"{role[:-1]} {position} ({formal.name}) is omitted, but {schema.name} needs it"
    # porter numbers a node's outputs without the omitted ones, so only trailing ones may be.
    named = [bool(name) for name in node.output]
    if False in named and True in named[named.index(False):]:
        return "omits an output before a named one, which porter does not read"
    given = {attr.name: attr for attr in node.attribute}
    for name, attr in given.items():
        declared = schema.attributes.get(name)
        if declared is None:
            return f"has attribute '{name}', which {schema.name} does not define"
        if attr.type != declared.type.value:
            return (f"attribute '{name}' is {ATTRIBUTE_TYPES[attr.type]}; {schema.name} takes "
                    f"{ATTRIBUTE_TYPES[declared.type.value]}")
    missing = [name for name, declared in schema.attributes.items() if declared.required and name not in given]
    if missing:
        return f"lacks attribute '{missing[0]}', which {schema.name} requires"
    return None


class _GraphBuilder:
    """Numbers the model's values, reads initializers and turns nodes into Ops."""

    def __init__(self, path: Path, model: onnx.ModelProto, opsets: dict[str, int], shapes):
        self.path = path
        self.model = model
        self.opsets = opsets
        self.shapes = shapes
        self.tensors: list[Tensor] = []
        self.index: dict[str, int] = {}
        self.quantization_tensors: dict[int, dict] = {}
        self.local_function_domains = {f.domain for f in model.functions}

    def fail(self, message: str) -> PorterError:
        return _fail(self.path, message)

    def graph(self) -> Graph:
        g = self.model.graph
        if g.sparse_initializer:
            raise self.fail(f"sparse initializer '{g.sparse_initializer[0].values.name}' is not supported")
        initializer_names = {init.name for init in g.initializer}
        # Old exporters also list initializers as graph inputs; those are not real inputs.
        real_inputs = [v.name for v in g.input if v.name not in initializer_names]
        for name in real_inputs:
            self.add_value(name)
        for init in g.initializer:
            self.add_initializer(init)
        self.check_node_inputs()
        ops = []
        for k, node in enumerate(g.node):
            self.check_node(k, node)
            if self.is_constant_node(node):
                self.add_constant_node(k, node)
            else:
                ops.append(self.op(len(ops), k, node))
        self.attach_dequantize_quantization(ops)
        self.attach_matmul_integer_quantization(ops)
        outputs = {}
        for v in g.output:
            if v.name in outputs:
                raise self.fail(f"graph output '{v.name}' is listed twice")
            if v.name not in self.index:
                raise self.fail(f"graph output '{v.name}' is not produced by any node, input or initializer")
            outputs[v.name] = self.index[v.name]
        metadata = {
            "ir_version": self.model.ir_version,
            "opsets": dict(self.opsets),
            "producer": f"{self.model.producer_name} {self.model.producer_version}".strip(),
            "graph_name": g.name,
            "file_size": self.path.stat().st_size,
            # weight tensor -> {"scale": tensor, "zero_point": tensor | None} behind its Quantization
            "quantization_tensors": self.quantization_tensors,
            # graph input -> its dimensions' symbolic names (dim_param), None where fixed or unnamed
            "dim_params": {v.name: [d.dim_param or None for d in v.type.tensor_type.shape.dim]
                           for v in g.input if v.name in real_inputs},
        }
        inputs = {name: self.index[name] for name in real_inputs}
        return Graph("onnx", str(self.path), self.tensors, ops, inputs, outputs, metadata)

    # Values ----------------------------------------------------------------------------------

    def add_value(self, name: str, data: np.ndarray | None = None, storage: Storage | None = None, dtype: str | None = None) -> int:
        if name in self.index:
            raise self.fail(f"value '{name}' is defined twice")
        # Undeclared values stay "unknown" with shape () until shape inference fills them in.
        known_dtype, shape = self.shapes.get(name, (UNKNOWN_DTYPE, ()))
        if data is not None:
            shape = data.shape
        t = Tensor(len(self.tensors), name, tuple(int(d) for d in shape), dtype or known_dtype, None, data, storage)
        self.index[name] = t.index
        self.tensors.append(t)
        return t.index

    def add_initializer(self, init: onnx.TensorProto) -> None:
        data, storage = self.tensor_data(init, f"initializer '{init.name}'", external=True)
        self.add_value(init.name, data, storage, _dtype_name(init.data_type))

    def tensor_data(self, proto: onnx.TensorProto, where: str, external: bool) -> tuple[np.ndarray, Storage]:
        """A TensorProto's value, checked against its dims and dtype (and, if `external` allows
        it to live in a file of its own, that file)."""
        dtype = _dtype_name(proto.data_type)
        numpy_dtype = NUMPY_DTYPES.get(dtype)
        if numpy_dtype is None:
            raise self.fail(f"{where} has type {dtype}, which porter cannot read")
        # -1 means "dynamic" in declared shapes only: a constant's dims are all known.
        problem = shape_problem([max(d, 0) for d in proto.dims], numpy_dtype.itemsize)
        if problem is None and any(d < 0 for d in proto.dims):
            problem = f"has a negative dimension in {list(proto.dims)}"
        if problem:
            raise self.fail(f"{where} {problem}")
        shape = tuple(int(d) for d in proto.dims)
        count = math.prod(shape)  # Python ints: a hostile shape cannot overflow the check
        if proto.data_location != onnx.TensorProto.EXTERNAL:
            return self.inline_data(proto, where, numpy_dtype, shape, count)
        if not external:
            raise self.fail(f"{where} keeps its data in an external file, which porter reads for initializers only")
        return self.external_data(proto, where, numpy_dtype, shape, count)

    def inline_data(self, init, where, numpy_dtype, shape, count):
        expected = count * numpy_dtype.itemsize
        if init.HasField("raw_data") and len(init.raw_data) != expected:
            raise self.fail(f"{where} holds {len(init.raw_data)} bytes but shape {list(shape)} of {numpy_dtype.name} needs {expected}")
        try:
            data = numpy_helper.to_array(init)
        except ValueError:  # typed fields (float_data, int32_data...) whose count does not fit
            raise self.fail(f"{where}: its values do not fit shape {list(shape)}") from None
        # The protobuf has no byte offset to report for inline data.
        return data.astype(numpy_dtype, copy=False).reshape(shape), Storage("inline", -1, expected)

    def external_data(self, init, where, numpy_dtype, shape, count):
        fields = {entry.key: entry.value for entry in init.external_data}
        location = fields.get("location", "")
        shown = location[:NAME_LIMIT]
        if not location or "\0" in location or len(location) > PATH_LIMIT or Path(location).is_absolute():
            raise self.fail(f"{where}: external data location '{shown}' is not a file name inside the model's folder")
        expected = count * numpy_dtype.itemsize
        try:
            offset = int(fields.get("offset", 0))
            length = int(fields.get("length", expected))
        except ValueError:
            raise self.fail(f"{where}: external data offset '{fields.get('offset', '')[:NAME_LIMIT]}' or length "
                            f"'{fields.get('length', '')[:NAME_LIMIT]}' is not an integer") from None
        try:
            folder = self.path.resolve().parent
            file = (folder / location).resolve()
            if not file.is_relative_to(folder):
                raise self.fail(f"{where}: external data location '{shown}' is not a file name inside the model's folder")
            if not file.is_file():
                raise self.fail(f"{where}: external data file '{shown}' does not exist")
            file_size = file.stat().st_size
            span = f"{where}: external data '{shown}' offset {offset} length {length} (file size {file_size})"
            if offset < 0 or length < 0:
                raise self.fail(f"{span} is negative")
            if offset + length > file_size:
                raise self.fail(f"{span} runs past the end of the file")
            if length != expected:
                raise self.fail(f"{span} does not match shape {list(shape)} of {numpy_dtype.name} ({expected} bytes)")
            data = np.fromfile(file, dtype=numpy_dtype, count=count, offset=offset).reshape(shape)
        except OSError as e:
            raise self.fail(f"{where}: cannot read external data '{shown}' ({e.strerror or e})") from None
        return data, Storage("external", offset, length, file=location)

    # Nodes -----------------------------------------------------------------------------------

    def check_node_inputs(self) -> None:
        """Every node input must be a graph input, an initializer or an earlier node's output,
        and no value may be written twice."""
        nodes = self.model.graph.node
        defined = set(self.index)
        produced = {out for node in nodes for out in node.output if out}
        for k, node in enumerate(nodes):
            where = f"node {k} '{node.name}' ({node.op_type})"
            for name in node.output:
                if name in defined:
                    raise self.fail(f"{where}: output '{name}' is already a graph input or an initializer")
            for name in node.input:
                if name and name not in defined and name not in produced:
                    raise self.fail(f"{where}: input '{name}' is neither an initializer, a graph input nor produced by a node")
        problem = dataflow_problem([[name for name in node.input if name] for node in nodes],
                                   [[name for name in node.output if name] for node in nodes],
                                   lambda k: f"node {k} '{nodes[k].name}' ({nodes[k].op_type})",
                                   lambda name: f"value '{name}'")
        if problem:
            raise self.fail(problem)

    def check_node(self, k: int, node: onnx.NodeProto) -> None:
        """A node of a standard op against its operator schema: inputs, outputs, attributes."""
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        where = f"node {k} '{node.name}' ({node.op_type})"
        if domain not in self.opsets:
            raise self.fail(f"{where} uses domain '{domain}', which the model does not import")
        if domain and domain not in KNOWN_DOMAINS and domain not in self.local_function_domains:
            raise self.fail(f"{where} is an op of domain '{domain}' (opset {self.opsets[domain]}), which porter "
                            f"does not read (it reads ai.onnx and {', '.join(KNOWN_DOMAINS)})")
        schema = _schema(node.op_type, domain, self.opsets[domain])
        names = set()
        for attr in node.attribute:
            if attr.type not in ATTRIBUTE_TYPES or attr.type == onnx.AttributeProto.UNDEFINED:
                raise self.fail(f"{where}: attribute '{attr.name}' has no valid type ({attr.type})")
            if attr.name in names:
                raise self.fail(f"{where}: attribute '{attr.name}' is given twice")
            names.add(attr.name)
        if schema is None:
            return  # an op porter's patterns do not know: recovery names it if it matters
        problem = _schema_problem(node, schema)
        if problem:
            raise self.fail(f"{where}: {problem}")

    @staticmethod
    def is_constant_node(node: onnx.NodeProto) -> bool:
        numeric = {"value", "value_float", "value_floats", "value_int", "value_ints"}
        return (
            node.op_type == "Constant"
            and node.domain in DEFAULT_DOMAINS
            and len(node.output) == 1
            and [a.name for a in node.attribute] in [[name] for name in numeric]
        )

    def add_constant_node(self, k: int, node: onnx.NodeProto) -> None:
        """A Constant node becomes a constant tensor, as TFLite constants are: data, no producer."""
        attr = node.attribute[0]
        if attr.name == "value":
            value = onnx.TensorProto()
            value.CopyFrom(attr.t)
            if value.data_location == onnx.TensorProto.EXTERNAL:
                raise self.fail(f"node {k} '{node.name}' (Constant) keeps its value in external data, which porter does not read")
        else:
            dtype = np.float32 if attr.name.startswith("value_float") else np.int64
            value = numpy_helper.from_array(np.asarray(onnx.helper.get_attribute_value(attr), dtype=dtype))
        value.name = node.output[0]
        self.add_initializer(value)

    def op(self, index: int, k: int, node: onnx.NodeProto) -> Op:
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        inputs = [self.index[name] if name else -1 for name in node.input]
        outputs = [self.add_value(name) for name in node.output if name]
        where = f"node {k} '{node.name}' ({node.op_type})"
        options = {attr.name: self.attribute_value(attr, f"{where} attribute '{attr.name}'") for attr in node.attribute}
        op_type = node.op_type if not domain else f"{domain}.{node.op_type}"
        return Op(index, op_type, inputs, outputs, options, self.opsets[domain])

    def attribute_value(self, attr: onnx.AttributeProto, where: str):
        """The attribute as options hold it: numbers, strings (decoded), arrays, lists of them."""
        kind = attr.type
        if kind in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS):
            raise self.fail(f"{where} is a sparse tensor, which porter does not read")
        if kind == onnx.AttributeProto.TENSOR:
            return self.tensor_data(attr.t, where, external=False)[0]
        if kind == onnx.AttributeProto.TENSORS:
            return [self.tensor_data(t, where, external=False)[0] for t in attr.tensors]
        if kind == onnx.AttributeProto.GRAPH:
            return f"<subgraph {attr.g.name}>"
        if kind == onnx.AttributeProto.GRAPHS:
            return [f"<subgraph {g.name}>" for g in attr.graphs]
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, list):
            return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
        return value

    def attach_dequantize_quantization(self, ops: list[Op]) -> None:
        """Gives an initializer read by DequantizeLinear its scale and zero point.

        quantize_dynamic dequantises a quantised embedding table after the lookup,
        Gather(table) -> DequantizeLinear: the table gets the (per-tensor) parameters then.
        """
        producers = {t: op for op in ops for t in op.outputs}
        for op in ops:
            if op.type != "DequantizeLinear":
                continue
            weight, scale, zero_point = (op.inputs + [-1, -1, -1])[:3]
            lookup = producers.get(weight)
            if lookup is not None and lookup.type == "Gather" and lookup.inputs and scale >= 0:
                if self.tensors[scale].data is not None and self.tensors[scale].data.size == 1:
                    weight = lookup.inputs[0]
            if weight >= 0:
                rank = max(len(self.tensors[weight].shape), 1)
                self.attach_quantization(weight, scale, zero_point, op.options.get("axis", 1) % rank)

    def attach_matmul_integer_quantization(self, ops: list[Op]) -> None:
        """Gives a constant MatMulInteger weight its zero point and, where the graph shows it, scale.

        onnxruntime's quantize_dynamic rescales MatMulInteger -> Cast -> Mul(s), where s is
        Mul(activation scale, weight scale) with the weight scale an initializer: that
        initializer is the weight's scale (one value, or one per output column).
        """
        producers = {t: op for op in ops for t in op.outputs}
        users: dict[int, list[Op]] = {}
        for op in ops:
            for t in op.inputs:
                users.setdefault(t, []).append(op)
        for op in ops:
            if op.type != "MatMulInteger" or len(op.inputs) < 2 or not op.outputs:
                continue
            weight = op.inputs[1]
            if weight < 0 or len(self.tensors[weight].shape) != 2:
                continue
            scale = self.matmul_integer_weight_scale(op, producers, users)
            zero_point = op.inputs[3] if len(op.inputs) > 3 else -1
            self.attach_quantization(weight, scale, zero_point, axis=1)

    def attach_quantization(self, weight: int, scale: int, zero_point: int, axis: int) -> None:
        """Sets a constant's Quantization from constant scale and zero-point tensors that fit it.

        axis is the dimension a multi-valued scale runs along. The tensors used are recorded
        in metadata["quantization_tensors"] so reports can name them.
        """
        tensors = self.tensors
        if weight < 0 or scale < 0 or tensors[weight].data is None or tensors[scale].data is None:
            return
        scales = tensors[scale].data.astype(np.float32).ravel()
        if zero_point >= 0 and tensors[zero_point].data is not None:
            zero_points = tensors[zero_point].data.astype(np.int64).ravel()
        else:
            zero_point, zero_points = -1, np.zeros(scales.size, dtype=np.int64)
        shape = tensors[weight].shape
        if zero_points.size != scales.size or scales.size not in (1, shape[axis] if axis < len(shape) else 1):
            return
        tensors[weight].quant = Quantization(scales, zero_points, None if scales.size == 1 else axis)
        self.quantization_tensors[weight] = {"scale": scale, "zero_point": None if zero_point < 0 else zero_point}

    def matmul_integer_weight_scale(self, op: Op, producers, users) -> int:
        """The weight-scale tensor behind MatMulInteger -> Cast -> Mul, or -1."""
        casts = [u for u in users.get(op.outputs[0], []) if u.type == "Cast" and u.outputs]
        muls = [u for c in casts for u in users.get(c.outputs[0], []) if u.type == "Mul"]
        if len(muls) != 1:
            return -1
        cast_output = casts[0].outputs[0]
        factor = next((t for t in muls[0].inputs if t != cast_output), -1)
        if factor < 0 or self.tensors[factor].data is not None:
            return factor
        product = producers.get(factor)
        if product is None or product.type != "Mul":
            return -1
        constants = [t for t in product.inputs if t >= 0 and self.tensors[t].data is not None]
        if len(constants) == 2:
            # Both scales are constant when the activation is itself a quantised constant (an
            # embedding row): quantize_dynamic names a weight's scale after the weight.
            own_name = self.tensors[op.inputs[1]].name.removesuffix("_quantized") + "_scale"
            constants = [t for t in constants if self.tensors[t].name == own_name]
        return constants[0] if len(constants) == 1 else -1
