"""Structure-aware mutations of a real ONNX model, made through the onnx package's protobuf classes.

`mutate(model, rng)` picks one to three mutations of the fixture's ModelProto: an attribute's
type or value (axes, epsilon, perms, TENSOR data that no longer fits its dims), an attribute
removed or invented, an initializer's dims, data type or data length, an initializer moved to
external data at a hostile location (NUL bytes, escapes, absolute paths, long names, missing
files, a directory, offsets and lengths that do not fit), a node input aimed at its own or a
later node's output (cycles), inputs and outputs dropped or duplicated, op types and domains
changed, declared shapes and opsets changed, graph outputs dropped; and, after serialising,
truncation and byte flips.

Mutations are returned as edits on field paths ("graph.node[3].attribute[0]") that `apply`
replays exactly on the fixture, so a crasher is kept as a few lines of JSON.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import onnx
from google.protobuf import json_format

ATTRIBUTE = onnx.AttributeProto
INTERESTING_INTS = [0, 1, -1, 2, -2, 3, 4, -4, 5, 7, 100, -100, 2**31 - 1, -2**31, 2**62, -2**63]
# Quoted as protobuf JSON spells the non-finite ones, so that edits stay plain JSON.
INTERESTING_FLOATS = ["NaN", "Infinity", "-Infinity", 0.0, -1.0, 1e-30, 1e30]
OP_TYPES = ["Add", "Mul", "MatMul", "Reshape", "Transpose", "Softmax", "LayerNormalization", "Gather",
            "Cast", "Where", "Erf", "Div", "Concat", "Expand", "Slice", "Identity", "GatherND",
            "ConstantOfShape", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "Unsqueeze",
            "ReduceMean", "Flatten", "Split", "NotAnOp"]
LOCATIONS = ["weights.bin", "../weights.bin", "/etc/hostname", "we\0ights.bin", "x" * 5000, "missing.bin",
             ".", "sub/../../weights.bin", "", "weights.bin/../weights.bin"]
DATA_FILE = "weights.bin"


# Applying edits ----------------------------------------------------------------------------------

_STEP = re.compile(r"(\w+)(?:\[(\d+)\])?")


def _resolve(message, path: str):
    """(container, key) for the last step of `path`: a message and a field name, or a repeated
    field and an index."""
    steps = _STEP.findall(path)
    node = message
    for name, index in steps[:-1]:
        node = getattr(node, name)
        if index:
            node = node[int(index)]
    name, index = steps[-1]
    return (getattr(node, name), int(index)) if index else (node, name)


def _set(message, path: str, value) -> None:
    container, key = _resolve(message, path)
    current = container[key] if isinstance(key, int) else getattr(container, key)
    if isinstance(value, dict):
        current.Clear()
        json_format.ParseDict(value, current)
    elif isinstance(key, int):
        container[key] = bytes.fromhex(value["hex"]) if isinstance(value, dict) else value
    else:
        setattr(container, key, value)


def _delete(message, path: str) -> None:
    container, key = _resolve(message, path)
    if isinstance(key, int):
        del container[key]
    else:
        container.ClearField(key)


def _append(message, path: str, value) -> None:
    container, key = _resolve(message, path)
    field = getattr(container, key)
    if isinstance(value, dict):
        json_format.ParseDict(value, field.add())
    else:
        field.append(value)


def _externalise(model, edit: dict, folder: Path) -> None:
    """Moves an initializer's data into a file beside the model, named by a hostile location."""
    init = model.graph.initializer[edit["initializer"]]
    if init.data_location == onnx.TensorProto.EXTERNAL:  # moved out by an earlier edit
        return
    data = onnx.numpy_helper.to_array(init).tobytes()
    if edit.get("file"):
        (folder / edit["file"]).write_bytes(data[:edit.get("file_bytes", len(data))])
    init.ClearField("raw_data")
    for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        init.ClearField(field)
    init.data_location = onnx.TensorProto.EXTERNAL
    for key in ("location", "offset", "length"):
        if edit.get(key) is not None:
            init.external_data.add(key=key, value=edit[key])


def apply(fixture: onnx.ModelProto, edits: list[dict], folder: Path) -> bytes:
    """The fixture with `edits` applied, serialised; external data files are written to folder."""
    model = onnx.ModelProto()
    model.CopyFrom(fixture)
    for edit in edits:
        try:
            _apply_edit(model, edit, folder)
        except IndexError:  # an earlier edit removed what this one aims at
            continue
    data = model.SerializeToString()
    for edit in edits:
        if "truncate" in edit:
            data = data[:edit["truncate"]]
        elif "flip" in edit and edit["flip"] < len(data):
            data = data[:edit["flip"]] + bytes([data[edit["flip"]] ^ edit["mask"]]) + data[edit["flip"] + 1:]
    return data


def _apply_edit(model, edit: dict, folder: Path) -> None:
    if "set" in edit:
        _set(model, edit["set"], edit["value"])
    elif "delete" in edit:
        _delete(model, edit["delete"])
    elif "append" in edit:
        _append(model, edit["append"], edit["value"])
    elif "resize" in edit:
        container, key = _resolve(model, edit["resize"])
        raw = getattr(container, key)
        setattr(container, key, raw[:edit["to"]] + bytes(max(0, edit["to"] - len(raw))))
    elif "externalise" in edit:
        _externalise(model, edit, folder)


# Mutations -----------------------------------------------------------------------------------------


def _attribute_dict(name: str, kind: int, rng: random.Random) -> dict:
    """An attribute of type `kind` holding an edge value."""
    type_name = ATTRIBUTE.AttributeType.Name(kind)
    if kind == ATTRIBUTE.INT:
        return {"name": name, "type": type_name, "i": str(rng.choice(INTERESTING_INTS))}
    if kind == ATTRIBUTE.FLOAT:
        return {"name": name, "type": type_name, "f": rng.choice(INTERESTING_FLOATS + [1e-5, 0.5])}
    if kind == ATTRIBUTE.INTS:
        n = rng.choice([0, 1, 3, 4, 5])
        values = rng.choice([[rng.choice(INTERESTING_INTS) for _ in range(n)], [n] * n,
                             rng.sample(range(n + 2), n)])
        return {"name": name, "type": type_name, "ints": [str(v) for v in values]}
    if kind == ATTRIBUTE.FLOATS:
        return {"name": name, "type": type_name, "floats": [rng.choice(INTERESTING_FLOATS)]}
    if kind == ATTRIBUTE.STRING:
        text = rng.choice(["", "tanh", "none", "bogus\n\x1b[31m", "x" * 300])
        return json_format.MessageToDict(onnx.helper.make_attribute(name, text, attr_type=kind))
    if kind == ATTRIBUTE.TENSOR:
        return {"name": name, "type": type_name, "t": _tensor_dict(rng)}
    return {"name": name, "type": type_name}


def _tensor_dict(rng: random.Random) -> dict:
    """A TensorProto whose data fits its dims, or not."""
    dims = rng.choice([[1], [2, 3], [], [0], [4], [-1], [2**40, 2**40]])
    count = rng.choice([1, 2, 6, 0, 5])
    tensor = onnx.helper.make_tensor("t", rng.choice([onnx.TensorProto.FLOAT, onnx.TensorProto.INT64]),
                                     [count], np.arange(count).tolist())
    proto = json_format.MessageToDict(tensor)
    proto["dims"] = [str(d) for d in dims]
    return proto


def _nodes_with_attributes(model):
    return [(k, n) for k, n in enumerate(model.graph.node) if n.attribute]


def _attribute_value(model, rng) -> list[dict]:
    k, node = rng.choice(_nodes_with_attributes(model))
    a = rng.randrange(len(node.attribute))
    attr = node.attribute[a]
    return [{"set": f"graph.node[{k}].attribute[{a}]", "value": _attribute_dict(attr.name, attr.type, rng)}]


def _attribute_type(model, rng) -> list[dict]:
    k, node = rng.choice(_nodes_with_attributes(model))
    a = rng.randrange(len(node.attribute))
    kind = rng.choice([ATTRIBUTE.INT, ATTRIBUTE.FLOAT, ATTRIBUTE.INTS, ATTRIBUTE.STRING, ATTRIBUTE.TENSOR,
                       ATTRIBUTE.FLOATS, ATTRIBUTE.GRAPH, ATTRIBUTE.UNDEFINED])
    return [{"set": f"graph.node[{k}].attribute[{a}]", "value": _attribute_dict(node.attribute[a].name, kind, rng)}]


def _attribute_added_or_removed(model, rng) -> list[dict]:
    k = rng.randrange(len(model.graph.node))
    node = model.graph.node[k]
    if node.attribute and rng.random() < 0.5:
        return [{"delete": f"graph.node[{k}].attribute[{rng.randrange(len(node.attribute))}]"}]
    name = rng.choice(["axis", "epsilon", "perm", "to", "batch_dims", "allowzero", "keepdims", "bogus", "value"])
    kind = rng.choice([ATTRIBUTE.INT, ATTRIBUTE.FLOAT, ATTRIBUTE.INTS, ATTRIBUTE.TENSOR])
    return [{"append": f"graph.node[{k}].attribute", "value": _attribute_dict(name, kind, rng)}]


def _initializer_dims(model, rng) -> list[dict]:
    i = rng.randrange(len(model.graph.initializer))
    dims = model.graph.initializer[i].dims
    choice = rng.random()
    if dims and choice < 0.6:
        d = rng.randrange(len(dims))
        return [{"set": f"graph.initializer[{i}].dims[{d}]",
                 "value": rng.choice([0, 1, -1, dims[d] * 2, dims[d] - 1, 2**31, 2**62])}]
    if dims and choice < 0.8:
        return [{"delete": f"graph.initializer[{i}].dims[{rng.randrange(len(dims))}]"}]
    return [{"append": f"graph.initializer[{i}].dims", "value": rng.choice([1, 2, 0])}]


def _initializer_data(model, rng) -> list[dict]:
    i = rng.randrange(len(model.graph.initializer))
    init = model.graph.initializer[i]
    if init.HasField("raw_data") and rng.random() < 0.6:
        size = len(init.raw_data)
        return [{"resize": f"graph.initializer[{i}].raw_data", "to": rng.choice([0, 1, size - 1, size + 1, size * 2])}]
    return [{"set": f"graph.initializer[{i}].data_type", "value": rng.choice([0, 1, 2, 3, 6, 7, 8, 9, 10, 16, 17, 40])}]


def _external(model, rng) -> list[dict]:
    candidates = [i for i, init in enumerate(model.graph.initializer) if init.HasField("raw_data")]
    i = rng.choice(candidates)
    size = len(model.graph.initializer[i].raw_data)
    location = rng.choice(LOCATIONS)
    edit = {"externalise": True, "initializer": i, "location": location if location else None,
            "file": DATA_FILE if rng.random() < 0.9 else None}
    if rng.random() < 0.5:
        edit["file_bytes"] = rng.choice([0, size // 2, size - 1])
    if rng.random() < 0.4:
        edit["offset"] = rng.choice(["0", "-1", "8", str(size), "1e3", "x", str(2**64)])
    if rng.random() < 0.4:
        edit["length"] = rng.choice([str(size), "-5", "0", str(size + 1), str(2**63), "abc"])
    return [edit]


def _node_input(model, rng) -> list[dict]:
    """Aims an input at the node's own output, a later node's output, nothing, or a stranger."""
    nodes = model.graph.node
    k = rng.choice([k for k, n in enumerate(nodes) if n.input])
    node = nodes[k]
    position = rng.randrange(len(node.input))
    later = [o for n in nodes[k:k + rng.choice([1, 2, 10, len(nodes)])] for o in n.output if o]
    choice = rng.random()
    if choice < 0.55:
        return [{"set": f"graph.node[{k}].input[{position}]", "value": rng.choice(later)}]
    if choice < 0.7:
        return [{"set": f"graph.node[{k}].input[{position}]", "value": rng.choice(["", "nowhere", model.graph.input[0].name])}]
    if choice < 0.85:
        return [{"delete": f"graph.node[{k}].input[{position}]"}]
    return [{"append": f"graph.node[{k}].input", "value": rng.choice([node.input[0], "", "nowhere"])}]


def _node_output(model, rng) -> list[dict]:
    nodes = model.graph.node
    k = rng.randrange(len(nodes))
    if not nodes[k].output:
        return []
    position = rng.randrange(len(nodes[k].output))
    others = [o for n in nodes for o in n.output] + [i.name for i in model.graph.initializer[:5]]
    choice = rng.random()
    if choice < 0.5:
        return [{"set": f"graph.node[{k}].output[{position}]", "value": rng.choice(others + [""])}]
    if choice < 0.8:
        return [{"delete": f"graph.node[{k}].output[{position}]"}]
    return [{"append": f"graph.node[{k}].output", "value": rng.choice(["", "extra", others[0]])}]


def _op_type(model, rng) -> list[dict]:
    k = rng.randrange(len(model.graph.node))
    if rng.random() < 0.8:
        return [{"set": f"graph.node[{k}].op_type", "value": rng.choice(OP_TYPES)}]
    return [{"set": f"graph.node[{k}].domain", "value": rng.choice(["com.microsoft", "bogus", "ai.onnx", ""])}]


def _node_removed(model, rng) -> list[dict]:
    return [{"delete": f"graph.node[{rng.randrange(len(model.graph.node))}]"}]


def _declared_shape(model, rng) -> list[dict]:
    lists = [name for name in ("input", "output", "value_info") if getattr(model.graph, name)]
    where = rng.choice(lists)
    i = rng.randrange(len(getattr(model.graph, where)))
    value = getattr(model.graph, where)[i]
    base = f"graph.{where}[{i}].type.tensor_type"
    dims = value.type.tensor_type.shape.dim
    choice = rng.random()
    if dims and choice < 0.6:
        d = rng.randrange(len(dims))
        return [{"set": f"{base}.shape.dim[{d}]", "value": {"dimValue": str(rng.choice([-5, -1, 0, 1, 2**40, 7]))}}]
    if dims and choice < 0.75:
        return [{"delete": f"{base}.shape.dim[{rng.randrange(len(dims))}]"}]
    if choice < 0.9:
        return [{"delete": f"{base}.shape"}]
    return [{"set": f"{base}.elem_type", "value": rng.choice([0, 1, 7, 8, 16, 99])}]


def _opset(model, rng) -> list[dict]:
    i = rng.randrange(len(model.opset_import))
    choice = rng.random()
    if choice < 0.6:
        return [{"set": f"opset_import[{i}].version", "value": rng.choice([1, 11, 12, 13, 17, 21, 30, 10**9])}]
    if choice < 0.8:
        return [{"delete": f"opset_import[{i}]"}]
    return [{"append": "opset_import", "value": {"domain": rng.choice(["bogus", "com.microsoft"]), "version": "1"}}]


def _graph_output(model, rng) -> list[dict]:
    i = rng.randrange(len(model.graph.output))
    if rng.random() < 0.5:
        return [{"delete": f"graph.output[{i}]"}]
    return [{"set": f"graph.output[{i}].name", "value": rng.choice(["nowhere", model.graph.node[0].output[0]])}]


def _bytes(model, rng) -> list[dict]:
    size = model.ByteSize()
    if rng.random() < 0.5:
        return [{"truncate": rng.randrange(size)}]
    return [{"flip": rng.randrange(min(size, 65536)), "mask": 1 << rng.randrange(8)}]


MUTATIONS = [(_attribute_value, 5), (_attribute_type, 3), (_attribute_added_or_removed, 2), (_initializer_dims, 3),
             (_initializer_data, 2), (_external, 3), (_node_input, 4), (_node_output, 2), (_op_type, 2),
             (_node_removed, 1), (_declared_shape, 3), (_opset, 1), (_graph_output, 1), (_bytes, 2)]


def mutate(model: onnx.ModelProto, rng: random.Random) -> list[dict]:
    """One to three mutations of the fixture, as edits (each made on the fixture as it is: later
    ones may find an earlier one's target gone, and then do nothing)."""
    edits = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        mutation = rng.choices([m for m, _ in MUTATIONS], [w for _, w in MUTATIONS])[0]
        edits += mutation(model, rng)
    return edits
