"""`porter inspect`: what a model file holds, read only through porter's validating frontends.

Nothing else (no LiteRT, no onnxruntime) opens the file: the frontend checks every byte range
against the file size before any data is used, so the report can say so.

`inspect_model(path)` returns the report as a dict (the --json output); `format_report(report)`
renders it as text. JSON schema, version "porter.inspect/1" (keys are always present; values
that do not apply to a format are null):

    {
      "schema": "porter.inspect/1",
      "path": str, "format": "tflite" | "onnx", "file_size": int,
      "signature": str | null,              # TFLite SignatureDef key
      "opsets": {domain: int} | null,       # ONNX opset imports, default domain as ""
      "inputs":  [{"name": str, "dtype": str, "shape": [int]}],   # -1: dynamic dimension
      "outputs": [{"name": str, "dtype": str, "shape": [int]}],
      "op_count": int,
      "op_histogram": {op_type: int},       # most frequent first
      "op_versions": {op_type: [int]},      # TFLite opcode versions / ONNX domain opset
      "tensor_count": int,
      "constant_count": int,
      "buffers": {                          # TFLite: Buffers with data; ONNX: initializers
        "inline":   {"count": int, "bytes": int},
        "external": {"count": int, "bytes": int, "files": [str]},
        "ranges_checked": true              # every range lies inside its file
      },
      "weights": [{                         # constants read as weights or carrying quantisation
        "tensor": int, "name": str, "dtype": str, "shape": [int],
        "storage": "inline" | "external", "bytes": int, "read_by": [op_type],
        "quantization": null | {
          "granularity": "per-tensor" | "per-channel", "axis": int | null, "channels": int,
          "zero_points_all_zero": bool, "scale_min": float, "scale_max": float,
          "scale_tensor": str | null, "zero_point_tensor": str | null}   # ONNX: where they came from
      }],
      "quantization_summary": [{"dtype": str, "granularity": str | null, "axis": int | null,
                                "zero_points_all_zero": bool | null, "count": int}],
      "arithmetic_options": {op_type: {option: [{"value": any, "count": int}]}},
                                            # value null: attribute absent (format default)
      "schemes": {                          # the quantisation scheme, layer by layer
        "layers": [{"op": int, "op_type": str, "weight_tensor": int,
                    "weights": str,         # float32 | float16 | int8 per-channel (axis a) | int4 ...
                    "activations": str,     # float | dynamic int8 | dynamic uint8 | static int8
                                            # | static int8 (QDQ) | float16 | lookup | a float16
                                            # ONNX graph's: "float32 between onnxruntime's Casts
                                            # (float16 graph), on float16 values" (or float32 ones)
                    "activation_quant": str | null}],  # static int8: in / out scale and zero point
        "summary": [{"weights": str, "activations": str, "count": int}],
        "refused": str | null,              # why porter does not reproduce the scheme, or null
        "float16": null | {                 # a float16 ONNX graph: onnxruntime's cast placement
          "float16_kernels": [str],         # LayerNormalization ops it runs in float16
          "float16_ops": int,               # ops it runs with float16 kernels
          "rounded_reads": int, "rounded_outputs": int,  # values rounded to float16
          "softmax_function_bodies": int}   # Softmax run as its function body in float32
      }
    }
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from porter.errors import PorterError
from porter.frontends import load_graph
from porter.frontends.schemes import assert_scheme_reproduced, float16_plan, layer_schemes
from porter.frontends.tflite import WEIGHT_INPUTS as TFLITE_WEIGHT_INPUTS
from porter.frontends.graph import Graph, Tensor

SCHEMA = "porter.inspect/1"

# Op inputs that hold weights, per op vocabulary (TFLite names from the frontend, then ONNX):
# op type -> input positions.
WEIGHT_INPUTS = {
    **TFLITE_WEIGHT_INPUTS,
    "MatMul": (0, 1),
    "Gemm": (0, 1),
    "MatMulInteger": (0, 1),
    "Gather": (0,),
    "DequantizeLinear": (0,),
}

# Options that change the arithmetic a port must reproduce.
ARITHMETIC_OPTIONS = {
    "FULLY_CONNECTED": ("asymmetric_quantize_inputs", "keep_num_dims", "fused_activation_function"),
    "BATCH_MATMUL": ("adj_x", "adj_y", "asymmetric_quantize_inputs"),
    "SOFTMAX": ("beta",),
    "GELU": ("approximate",),
    "Softmax": ("axis",),
    "LayerNormalization": ("axis", "epsilon"),
    "Gelu": ("approximate",),
    "Gemm": ("transA", "transB", "alpha", "beta"),
    "DequantizeLinear": ("axis",),
}


def inspect_model(path: str | Path) -> dict:
    """The inspection report of one model file (see the module docstring for the schema)."""
    graph = load_graph(path)
    weights = [_weight_entry(graph, t) for t in _weight_tensors(graph)]
    return {
        "schema": SCHEMA,
        "path": str(path),
        "format": graph.format,
        "file_size": graph.metadata["file_size"],
        "signature": graph.metadata.get("signature_key"),
        "opsets": graph.metadata.get("opsets"),
        "inputs": [_io_entry(graph, name, t) for name, t in graph.inputs.items()],
        "outputs": [_io_entry(graph, name, t) for name, t in graph.outputs.items()],
        "op_count": len(graph.ops),
        "op_histogram": graph.op_histogram(),
        "op_versions": _op_versions(graph),
        "tensor_count": len(graph.tensors),
        "constant_count": sum(t.is_const for t in graph.tensors),
        "buffers": _buffer_counts(graph),
        "weights": weights,
        "quantization_summary": _quantization_summary(weights),
        "arithmetic_options": _arithmetic_options(graph),
        "schemes": _schemes(graph),
    }


def _schemes(graph: Graph) -> dict:
    layers = layer_schemes(graph)
    counts = Counter((layer.weights, layer.activations) for layer in layers)
    try:
        assert_scheme_reproduced(graph)
        refused = None
    except PorterError as e:
        refused = str(e)
    return {
        "layers": [{"op": layer.op, "op_type": layer.op_type, "weight_tensor": layer.weight_tensor,
                    "weights": layer.weights, "activations": layer.activations,
                    "activation_quant": layer.activation_quant} for layer in layers],
        "summary": [{"weights": w, "activations": a, "count": n} for (w, a), n in counts.most_common()],
        "refused": refused,
        "float16": _float16_report(graph),
    }


def _float16_report(graph: Graph) -> dict | None:
    """Where onnxruntime computes in float16 and rounds to it, in a float16 ONNX graph."""
    plan = float16_plan(graph)
    if plan is None:
        return None
    return {"float16_kernels": [f"op {i} {graph.ops[i].type}" for i in sorted(plan.half_ops)
                                if i in plan.rounded_outputs and graph.ops[i].type == "LayerNormalization"],
            "float16_ops": len(plan.half_ops),
            "rounded_reads": sum(len(v) for v in plan.rounded_reads.values()),
            "rounded_outputs": len(plan.rounded_outputs),
            "softmax_function_bodies": len(plan.softmax_bodies)}


def _io_entry(graph: Graph, name: str, t: int) -> dict:
    tensor = graph.tensor(t)
    return {"name": name, "dtype": tensor.dtype, "shape": list(tensor.shape)}


def _op_versions(graph: Graph) -> dict[str, list[int]]:
    versions: dict[str, set[int]] = {}
    for op in graph.ops:
        versions.setdefault(op.type, set()).add(op.version)
    return {op_type: sorted(versions[op_type]) for op_type in graph.op_histogram()}


def _buffer_counts(graph: Graph) -> dict:
    # TFLite: one entry per Buffer (several tensors may share one); ONNX: one per constant.
    storages = graph.metadata.get("buffers")
    if storages is None:
        storages = [t.storage for t in graph.tensors if t.storage is not None]
    storages = [s for s in storages if s is not None]
    inline = [s for s in storages if s.kind == "inline"]
    external = [s for s in storages if s.kind == "external"]
    files = sorted({s.file or Path(graph.path).name for s in external})
    return {
        "inline": {"count": len(inline), "bytes": sum(s.size for s in inline)},
        "external": {"count": len(external), "bytes": sum(s.size for s in external), "files": files},
        # The frontends refuse to load a file with any range outside it, so this is a fact.
        "ranges_checked": True,
    }


def _weight_tensors(graph: Graph) -> list[Tensor]:
    indices = {t.index for t in graph.tensors if t.is_const and t.quant is not None}
    for op in graph.ops:
        for position in WEIGHT_INPUTS.get(op.type, ()):
            if position < len(op.inputs) and op.inputs[position] >= 0 and graph.tensor(op.inputs[position]).is_const:
                indices.add(op.inputs[position])
    return [graph.tensor(t) for t in sorted(indices)]


def _weight_entry(graph: Graph, tensor: Tensor) -> dict:
    return {
        "tensor": tensor.index,
        "name": tensor.name,
        "dtype": tensor.dtype,
        "shape": list(tensor.shape),
        "storage": tensor.storage.kind if tensor.storage else "inline",
        "bytes": int(tensor.data.nbytes),
        "read_by": sorted({op.type for op in graph.users(tensor.index)}),
        "quantization": _quantization_entry(tensor, _quantization_sources(graph, tensor)),
    }


def _quantization_sources(graph: Graph, tensor: Tensor) -> dict:
    """ONNX: names of the scale and zero-point tensors a weight's Quantization came from."""
    source = graph.metadata.get("quantization_tensors", {}).get(tensor.index, {})
    return {role: graph.tensor(t).name for role, t in source.items() if t is not None}


def _quantization_entry(tensor: Tensor, sources: dict[str, str]) -> dict | None:
    q = tensor.quant
    if q is None:
        return None
    return {
        "scale_tensor": sources.get("scale"),
        "zero_point_tensor": sources.get("zero_point"),
        "granularity": "per-channel" if q.per_channel else "per-tensor",
        "axis": q.axis,
        "channels": int(q.scale.size),
        "zero_points_all_zero": bool(np.all(q.zero_point == 0)),
        "scale_min": float(q.scale.min()),
        "scale_max": float(q.scale.max()),
    }


def _quantization_summary(weights: list[dict]) -> list[dict]:
    def scheme(w: dict) -> tuple:
        q = w["quantization"]
        if q is None:
            return (w["dtype"], None, None, None)
        return (w["dtype"], q["granularity"], q["axis"], q["zero_points_all_zero"])

    counts = Counter(scheme(w) for w in weights)
    keys = ("dtype", "granularity", "axis", "zero_points_all_zero")
    return [dict(zip(keys, s), count=n) for s, n in counts.most_common()]


def _arithmetic_options(graph: Graph) -> dict:
    found: dict[str, dict[str, Counter]] = {}
    for op in graph.ops:
        for option in ARITHMETIC_OPTIONS.get(op.type, ()):
            value = op.options.get(option)
            found.setdefault(op.type, {}).setdefault(option, Counter())[_plain(value)] += 1
    return {
        op_type: {option: [{"value": v, "count": n} for v, n in counter.most_common()] for option, counter in options.items()}
        for op_type, options in found.items()
    }


def _plain(value):
    """JSON-friendly and hashable: numpy scalars become Python numbers, lists tuples."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, np.ndarray)):
        return tuple(np.asarray(value).tolist())
    return value


# Text rendering ----------------------------------------------------------------------------


def format_report(report: dict) -> str:
    """The report as readable text."""
    lines = [f"{report['path']}: {report['format']} model, {_bytes(report['file_size'])}"]
    if report["signature"] is not None:
        lines.append(f"signature: {report['signature']}")
    if report["opsets"] is not None:
        lines.append("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in report["opsets"].items()))
    for role in ("inputs", "outputs"):
        lines.append(f"{role}:")
        lines += [f"  {io['name']}: {io['dtype']}{io['shape']}" for io in report[role]]
    lines.append(f"ops: {report['op_count']}")
    width = max((len(t) for t in report["op_histogram"]), default=0)
    for op_type, count in report["op_histogram"].items():
        versions = ",".join(map(str, report["op_versions"][op_type]))
        lines.append(f"  {op_type:<{width}}  {count:>4}   (version {versions})")
    lines.append(f"tensors: {report['tensor_count']} ({report['constant_count']} constant)")
    lines += _buffer_lines(report["buffers"], report["file_size"])
    lines += _weight_lines(report["weights"], report["quantization_summary"])
    lines += _option_lines(report["arithmetic_options"])
    lines += _scheme_lines(report["schemes"])
    return "\n".join(lines)


def _scheme_lines(schemes: dict) -> list[str]:
    lines = [f"quantisation scheme: {len(schemes['layers'])} layers"]
    lines += [f"  {s['count']:>4} x weights {s['weights']}, activations {s['activations']}"
              for s in schemes["summary"]]
    lines += [f"    op {layer['op']} {layer['op_type']}: weights {layer['weights']} (tensor "
              f"{layer['weight_tensor']}), activations {layer['activations']}"
              + (f" ({layer['activation_quant']})" if layer.get("activation_quant") else "")
              + (f"; onnxruntime runs {layer['onnxruntime_runs']}" if layer.get("onnxruntime_runs") else "")
              for layer in schemes["layers"]]
    half = schemes.get("float16")
    if half:
        lines.append(f"  float16 graph as onnxruntime runs it: {half['float16_ops']} ops with float16 kernels, "
                     f"{half['rounded_reads']} inputs and {half['rounded_outputs']} outputs rounded to float16, "
                     f"{half['softmax_function_bodies']} Softmax as its function body in float32; LayerNormalization "
                     f"in float16: {', '.join(half['float16_kernels']) or 'none'}")
    lines.append(f"  refused: {schemes['refused']}" if schemes["refused"] else
                 "  reproduced by porter")
    return lines


def _buffer_lines(buffers: dict, file_size: int) -> list[str]:
    inline, external = buffers["inline"], buffers["external"]
    lines = [
        "constant data:",
        f"  inline:   {inline['count']:>4} buffers, {_bytes(inline['bytes'])}",
        f"  external: {external['count']:>4} buffers, {_bytes(external['bytes'])}"
        + (f" in {', '.join(external['files'])}" if external["files"] else ""),
    ]
    if buffers["ranges_checked"]:
        lines.append(f"  every byte range checked: inside its file (model file {file_size:,} bytes)")
    return lines


def _weight_lines(weights: list[dict], summary: list[dict]) -> list[str]:
    lines = [f"weights: {len(weights)}"]
    for s in summary:
        lines.append(f"  {s['count']:>4} x {s['dtype']} {_scheme_text(s)}")
    for w in weights:
        q = w["quantization"]
        scales = f", scale {q['scale_min']:.3g}..{q['scale_max']:.3g}" if q else ""
        if q and q["scale_tensor"]:
            scales += f" from '{_short(q['scale_tensor'])}'"
            scales += f", zero point '{_short(q['zero_point_tensor'])}'" if q["zero_point_tensor"] else ""
        lines.append(
            f"    tensor {w['tensor']} '{_short(w['name'])}' {w['dtype']}{w['shape']} {_scheme_text(q)}{scales}"
            f", {w['storage']} {w['bytes']:,} B, read by {', '.join(w['read_by']) or 'nothing'}"
        )
    return lines


def _short(name: str, limit: int = 60) -> str:
    """Exporters fuse scope paths into names hundreds of characters long; the end says most."""
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


def _scheme_text(q: dict | None) -> str:
    if q is None or q["granularity"] is None:
        return "not quantised"
    axis = f" along axis {q['axis']}" if q["granularity"] == "per-channel" else ""
    zero_points = "zero points all 0" if q["zero_points_all_zero"] else "non-zero zero points"
    return f"{q['granularity']}{axis}, {zero_points}"


def _option_lines(options: dict) -> list[str]:
    lines = ["options that change arithmetic:" if options else "options that change arithmetic: none"]
    for op_type, fields in options.items():
        for option, values in fields.items():
            text = ", ".join(f"{_value_text(v['value'])} x{v['count']}" for v in values)
            lines.append(f"  {op_type}.{option}: {text}")
    return lines


def _value_text(value) -> str:
    if value is None:
        return "(default)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(np.float32(value))  # options are float32: 1e-12, not 9.999999960041972e-13
    return str(value)


def _bytes(n: int) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"
