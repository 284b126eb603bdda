"""The shapes onnxruntime sees in an ONNX file, and the fusion conditions decided on them.

onnxruntime decides some of its arithmetic-changing fusions by the shapes of the values it
fuses, as its graph holds them at load time: declared in the file or inferred, symbolic
dimensions by name. Shared by the encoder and the decoder recognisers.
"""

from __future__ import annotations

from porter.recover.canonical import Canonical

# symbolic dimensions ONNX shape inference makes up (unk__N) carry no name onnxruntime would
# share, unless the file itself declares them (quantize_dynamic writes its inferred shapes)
_GENERATED_DIM = "unk__"


def skip_layer_norm_fuses(c: Canonical, add_op, shapes: dict) -> bool:
    """SkipLayerNormFusion's conditions on the residual Add before a LayerNormalization (the
    caller has checked that the sum is read by the norm alone). `shapes`: value name -> dims
    (int or symbolic name) as onnxruntime sees them (declared, or inferred from the inputs)."""
    file_adds = [c.source.ops[i] for i in c.origin[add_op.index] if c.source.ops[i].type == "Add"]
    if len(file_adds) != 1:
        return False
    add = file_adds[0]
    if any(t in c.source.outputs.values() for t in add.outputs):
        return False
    dims = [shapes.get(c.source.tensor(t).name) for t in add.inputs]
    if any(d is None or len(d) != 3 for d in dims):
        return False
    return all(_same_dim(a, b) for a, b in zip(*dims))


def _same_dim(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b and a > 0
    return isinstance(a, str) and a == b


def value_shapes(path: str) -> dict:
    """Value name -> dims (ints, symbolic names, or None where unknown) for every value ONNX
    shape inference can tell (declared shapes first; run in a child process, as the frontend
    does)."""
    import onnx

    from porter.frontends.onnx_shapes import inferred_values

    g = onnx.load_model(str(path), load_external_data=False).graph
    declared = {d.dim_param for v in [*g.value_info, *g.input, *g.output]
                for d in v.type.tensor_type.shape.dim if d.dim_param}

    def dim(d):
        if d.HasField("dim_value"):
            return d.dim_value
        made_up = d.dim_param.startswith(_GENERATED_DIM) and d.dim_param not in declared
        return None if made_up else (d.dim_param or None)

    shapes = {}
    for value in inferred_values(path):
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
            continue
        shapes[value.name] = [dim(d) for d in tensor_type.shape.dim]
    return shapes
