"""ONNX shape inference, isolated in a child process.

onnx's C++ shape inference trusts node attributes: a GatherND with batch_dims=-100 kills the
interpreter with a segmentation fault. Shapes are only a help to later stages, so inference runs
in a child; if the child crashes, times out or fails, the graph keeps its declared shapes.

Run as `python -m porter.frontends.onnx_shapes MODEL`: writes a serialized GraphProto holding
only the inferred value_info, inputs and outputs to stdout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx

INFERENCE_TIMEOUT_S = 120


def inferred_values(path: Path) -> list[onnx.ValueInfoProto]:
    """Every value whose type ONNX shape inference can tell; [] if inference did not finish."""
    try:
        child = subprocess.run(
            [sys.executable, "-m", __name__, str(path)], capture_output=True, timeout=INFERENCE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return []
    if child.returncode != 0:
        return []
    graph = onnx.GraphProto()
    graph.ParseFromString(child.stdout)
    return [*graph.value_info, *graph.input, *graph.output]


def main(model_path: str) -> None:
    model = onnx.load_model(model_path, load_external_data=False)
    inferred = onnx.shape_inference.infer_shapes(model).graph
    # onnxruntime's contrib ops have no schema in onnx: their outputs are typed here, from their
    # inputs' types, and inference resumes past them until nothing more is learnt
    while added := _contrib_outputs(model.graph, inferred):
        model.graph.value_info.extend(added)
        inferred = onnx.shape_inference.infer_shapes(model).graph
    values = onnx.GraphProto(value_info=inferred.value_info, input=inferred.input, output=inferred.output)
    sys.stdout.buffer.write(values.SerializeToString())


def _contrib_outputs(graph: onnx.GraphProto, inferred: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """The types of com.microsoft outputs not typed yet whose inputs' types are known, by each
    op's definition in onnxruntime (contrib_ops/cpu/bert): (elem type, dims) per output."""
    known = {v.name: v.type.tensor_type for v in [*inferred.value_info, *inferred.input, *inferred.output]
             if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    known.update({t.name: onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)).tensor_type
                  for t in graph.initializer})
    added = []
    for node in graph.node:
        if node.domain != "com.microsoft" or not node.input or node.input[0] not in known:
            continue
        rule = _CONTRIB_TYPES.get(node.op_type)
        typed = rule(node, known) if rule is not None else None
        for name, (elem, dims) in zip(node.output, typed or []):
            if name and name not in known and elem is not None:
                added.append(onnx.helper.make_tensor_value_info(name, elem, dims))
    return added


def _dims(tensor_type) -> list:
    return [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else None)
            for d in tensor_type.shape.dim]


def _like_first(node, known):
    x = known[node.input[0]]
    return [(x.elem_type, _dims(x))]


def _skip_layer_norm(node, known):
    x = known[node.input[0]]
    dims = _dims(x)
    return [(x.elem_type, dims), (onnx.TensorProto.FLOAT, dims[:-1] + [1]),
            (onnx.TensorProto.FLOAT, dims[:-1] + [1]), (x.elem_type, dims)]


def _attention(node, known):
    x, weights = known[node.input[0]], known.get(node.input[1])
    sizes = next((list(a.ints) for a in node.attribute if a.name == "qkv_hidden_sizes"), None)
    if sizes:
        width = sizes[2]
    elif weights is not None and len(weights.shape.dim) == 2 and weights.shape.dim[1].HasField("dim_value"):
        width = weights.shape.dim[1].dim_value // 3
    else:
        return None
    return [(x.elem_type, _dims(x)[:-1] + [width])]


def _embed_layer_norm(node, known):
    ids, words = known[node.input[0]], known.get(node.input[2])
    if words is None or len(words.shape.dim) != 2:
        return None
    dims = _dims(ids) + [_dims(words)[1]]
    return [(words.elem_type, dims), (onnx.TensorProto.INT32, _dims(ids)[:1]), (words.elem_type, dims)]


_CONTRIB_TYPES = {"SkipLayerNormalization": _skip_layer_norm, "SkipSimplifiedLayerNormalization": _skip_layer_norm,
                  "Attention": _attention, "EmbedLayerNormalization": _embed_layer_norm,
                  **{op: _like_first for op in ("BiasAdd", "BiasGelu", "FastGelu", "Gelu", "QuickGelu")}}


if __name__ == "__main__":
    main(sys.argv[1])
