"""Builds and exports every member of the zoo (graphs/zoo/members.py) into graphs/zoo/.

    ~/.cache/porter/export-venv/bin/python graphs/zoo/make_zoo.py [--force] [--only NAME ...]
                                                                  [--flavour FLAVOUR ...]

NAME is a member (`bert-tok`) or a file name (`bert-tok.litert-dq8.tflite`). Files present are
kept unless --force. Every file is written atomically (temp file beside it + rename), checked in
its own runtime against the torch module on the tracing inputs, and gets a sidecar
`<file>.json` (exporter, recipe, versions, export seconds, size, sha256, signature inputs/outputs
with dtypes and shapes, op histogram, that check). Any file over 5 MB stops the run.
Exports run one after another (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

ZOO = Path(__file__).resolve().parent
sys.path.insert(0, str(ZOO))
sys.path.insert(0, str(ZOO.parent))  # graphs/: fixture_info (op histograms, sha256)
sys.path.insert(0, str(ZOO.parent.parent))  # porter: fsutil.write_atomic

import members as zm  # noqa: E402
import fixture_info  # noqa: E402

DYNAMO_OPSET = 18
TS_OPSET = 17
COMMAND = "~/.cache/porter/export-venv/bin/python graphs/zoo/make_zoo.py"


def versions(*packages: str) -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in packages}


TORCH_PACKAGES = ("torch", "transformers", "sentence-transformers")


class TooLarge(SystemExit):
    pass


def check_size(path: Path) -> int:
    size = path.stat().st_size
    if size > zm.MAX_FILE_BYTES:
        raise TooLarge(f"{path.name}: {size / 2**20:.2f} MiB, over the zoo's 5 MB limit")
    return size


def atomic(out: Path, write, suffix: str = "") -> None:
    """write(tmp_path) fills a temp file beside `out`; size-checked, then renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix="." + out.name + ".", suffix=".tmp" + suffix)
    os.close(fd)
    tmp = Path(tmp)
    try:
        tmp.unlink()
        write(tmp)
        check_size(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        for side in out.parent.glob(tmp.name + ".data"):
            side.unlink()


# ---------------------------------------------------------------------------------------------
# Runtimes (the zoo's own checks; make_goldens.py has the golden runners)


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def present(path: Path) -> bool:
    """A file counts as made only with its sidecar (written last, after the checks)."""
    return path.exists() and sidecar_path(path).exists()


def discard(path: Path) -> None:
    """A file whose export or check failed is removed, sidecar and all."""
    path.unlink(missing_ok=True)
    sidecar_path(path).unlink(missing_ok=True)


def litert_io(path: Path) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    key = next(iter(it.get_signature_list()))
    r = it.get_signature_runner(key)

    def d(details):
        return {k: [np.dtype(v["dtype"]).name, [int(x) for x in v["shape"]]] for k, v in details.items()}

    return {"signature": key, "inputs": d(r.get_input_details()), "outputs": d(r.get_output_details())}


def file_io(path: Path) -> dict:
    return litert_io(path) if path.suffix == ".tflite" else fixture_info.onnx_io(path)


def run_file(path: Path, m: zm.Encoder, inputs: tuple[np.ndarray, ...]) -> np.ndarray:
    """The file's single output for one window, through make_goldens' runners (LiteRT builtin
    kernels / onnxruntime CPU)."""
    import make_goldens as mg

    w = {"input_ids": inputs[0][None] if inputs[0].ndim == 1 else inputs[0],
         "attention_mask": inputs[1][None] if inputs[1].ndim == 1 else inputs[1]}
    if m.token_type_input:
        w["token_type_ids"] = np.zeros_like(w["input_ids"])
    if path.suffix == ".tflite":
        return mg.run_litert(path, w, m.input_roles, mode="builtin")[0]
    return mg.run_ort(path, w, m.input_roles)[0]


def torch_out(module, inputs) -> np.ndarray:
    import torch

    with torch.no_grad():
        (out,) = module(*[torch.from_numpy(np.asarray(x)) for x in inputs]).values()
    return out.numpy()


def check_inputs(m: zm.Encoder) -> list[tuple[np.ndarray, ...]]:
    """The tracing window and a 3/4-live seeded one, as int64 [1, seq] arrays."""
    import zoo_torch as zt
    import torch

    a = tuple(t.numpy() for t in zt.sample_inputs(m, torch.int64))
    pad, cls, sep, low = m.ids
    rng = np.random.default_rng(7)
    live = m.seq * 3 // 4
    ids = np.full((1, m.seq), pad, np.int64)
    ids[0, :live] = rng.integers(low, m.vocab, size=live)
    ids[0, 0], ids[0, live - 1] = cls, sep
    mask = np.zeros((1, m.seq), np.int64)
    mask[0, :live] = 1
    b = (ids, mask) + ((np.zeros_like(ids),) if m.token_type_input else ())
    return [a, b]


def compare(path: Path, m: zm.Encoder, module) -> dict:
    """max |Δ| of the file against the torch module on check_inputs (live rows for tokens)."""
    worst, worst_live = 0.0, 0.0
    for x in check_inputs(m):
        ref = torch_out(module, x)[0]
        got = run_file(path, m, x)
        d = np.abs(got.astype(np.float64) - ref)
        worst = max(worst, float(d.max()))
        if m.output_kind == "tokens":
            d = d[x[1][0] == 1]
        worst_live = max(worst_live, float(d.max()))
    return {"inputs": "zoo_torch.sample_inputs and a 3/4-live seeded window",
            "vs_torch_max_abs": worst, "vs_torch_max_abs_live": worst_live}


def sidecar(path: Path, member, flavour: str, **facts) -> dict:
    info = {
        "file": path.name,
        "member": member.name,
        "flavour": flavour,
        "member_spec": {**asdict(member), "kind": member.kind},
        **facts,
        "size_bytes": check_size(path),
        "sha256": fixture_info.sha256(path),
        "io": file_io(path),
        "ops": fixture_info.ops(path),
    }
    fixture_info.write_json_atomic(sidecar_path(path), info)
    return info


# ---------------------------------------------------------------------------------------------
# Exporters: torch


def export_litert_f32(m: zm.Encoder, module, out: Path) -> dict:
    import litert_torch
    import torch
    import zoo_torch as zt

    args = zt.sample_inputs(m, torch.int32)
    t0 = time.perf_counter()
    with torch.no_grad():
        if m.named_inputs:
            edge = litert_torch.convert(module, sample_kwargs=dict(zip(m.input_roles, args)))
        else:
            edge = litert_torch.convert(module, sample_args=args)
    atomic(out, lambda p: edge.export(str(p)))
    call = "sample_kwargs={input_ids, attention_mask, ...}" if m.named_inputs else "sample_args=(ids, mask, ...)"
    return dict(exporter="litert-torch", recipe=f"float32, litert_torch.convert(module, {call})",
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("litert-torch", *TORCH_PACKAGES))


def export_litert_dq8(m: zm.Encoder, module, out: Path, src: Path) -> dict:
    from ai_edge_quantizer import quantizer, recipe

    assert src.exists(), f"{out.name}: needs {src.name} first"
    t0 = time.perf_counter()
    qt = quantizer.Quantizer(str(src))
    qt.load_quantization_recipe(recipe.dynamic_wi8_afp32())
    result = qt.quantize()
    atomic(out, lambda p: result.export_model(str(p), overwrite=True))
    return dict(exporter="litert-torch + ai-edge-quantizer", recipe="recipe.dynamic_wi8_afp32()",
                source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("litert-torch", "ai-edge-quantizer", *TORCH_PACKAGES))


def aeq_recipe(flavour: str):
    """The ai-edge-quantizer recipe of a weight-scheme flavour, as a function of the Quantizer."""
    from ai_edge_quantizer import recipe
    from ai_edge_quantizer.recipe import AlgorithmName, TFLOperationName

    recipes = {
        "aeq-wo8.tflite": ("recipe.weight_only_wi8_afp32()",
                           lambda qt: qt.load_quantization_recipe(recipe.weight_only_wi8_afp32())),
        # ai-edge-quantizer has no float16 recipe: its FLOAT_CASTING algorithm at 16 bits
        "aeq-f16.tflite": ("add_weight_only_config(regex='.*', ALL_SUPPORTED, num_bits=16, "
                           "algorithm_key=AlgorithmName.FLOAT_CASTING)",
                           lambda qt: qt.add_weight_only_config(
                               regex=".*", operation_name=TFLOperationName.ALL_SUPPORTED, num_bits=16,
                               algorithm_key=AlgorithmName.FLOAT_CASTING)),
        "aeq-dq4.tflite": ("recipe.dynamic_wi4_afp32()",
                           lambda qt: qt.load_quantization_recipe(recipe.dynamic_wi4_afp32())),
        "aeq-wo4.tflite": ("recipe.weight_only_wi4_afp32()",
                           lambda qt: qt.load_quantization_recipe(recipe.weight_only_wi4_afp32())),
        "aeq-si8.tflite": ("recipe.static_wi8_ai8(), calibrated on CALIBRATION_WINDOWS seeded windows",
                           lambda qt: qt.load_quantization_recipe(recipe.static_wi8_ai8())),
    }
    return recipes[flavour]


CALIBRATION_WINDOWS = 8


def calibration_windows(m: zm.Encoder) -> list[dict[str, np.ndarray]]:
    """Seeded [1, seq] windows of every live length from 1 to seq, as the static quantisers'
    calibration set (role -> int64 array)."""
    pad, cls, sep, low = m.ids
    rng = np.random.default_rng(500 + m.seed)
    out = []
    for live in np.linspace(1, m.seq, CALIBRATION_WINDOWS).astype(int):
        ids = np.full((1, m.seq), pad, np.int64)
        ids[0, :live] = rng.integers(low, m.vocab, size=live)
        ids[0, 0] = cls
        mask = (np.arange(m.seq) < live).astype(np.int64)[None]
        w = {"input_ids": ids, "attention_mask": mask}
        if m.token_type_input:
            w["token_type_ids"] = np.zeros_like(ids)
        out.append(w)
    return out


def export_aeq(m: zm.Encoder, module, out: Path, src: Path, flavour: str) -> dict:
    """The litert-f32 file through one ai-edge-quantizer recipe (weight-only int8, float16
    casting, dynamic int4, or static int8 with a calibration set)."""
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_quantizer import quantizer

    assert src.exists(), f"{out.name}: needs {src.name} first"
    how, configure = aeq_recipe(flavour)
    t0 = time.perf_counter()
    qt = quantizer.Quantizer(str(src))
    configure(qt)
    calibration = None
    if flavour == "aeq-si8.tflite":
        runner = Interpreter(model_path=str(src)).get_signature_runner()
        ins = runner.get_input_details()
        key = next(iter(Interpreter(model_path=str(src)).get_signature_list()))
        import make_goldens as mg

        role_of = mg._feed_names(list(ins), m.input_roles)
        data = [{n: w[r].astype(ins[n]["dtype"]) for n, r in role_of.items()} for w in calibration_windows(m)]
        calibration = qt.calibrate({key: data})
    result = qt.quantize(calibration)
    atomic(out, lambda p: result.export_model(str(p), overwrite=True))
    return dict(exporter="litert-torch + ai-edge-quantizer", recipe=how,
                source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("litert-torch", "ai-edge-quantizer", *TORCH_PACKAGES))


def export_ort_qdq(m: zm.Encoder, module, out: Path, src: Path, per_channel: bool = True,
                   operators: bool = False) -> dict:
    """The dynamo-f32 file through onnxruntime quantize_static, QDQ format (or, with operators,
    the QOperator format), per channel or per tensor, calibrated on the member's own windows."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    import make_goldens as mg

    assert src.exists(), f"{out.name}: needs {src.name} first"
    sess = mg.ort_session(src)
    role_of = mg._feed_names([i.name for i in sess.get_inputs()], m.input_roles)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.windows = iter(calibration_windows(m))

        def get_next(self):
            w = next(self.windows, None)
            return None if w is None else {n: w[r] for n, r in role_of.items()}

    t0 = time.perf_counter()

    def write(p):
        fmt = QuantFormat.QOperator if operators else QuantFormat.QDQ
        quantize_static(str(src), str(p), Reader(), quant_format=fmt, per_channel=per_channel,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        use_external_data_format=False)
        _onnx_finish(p)

    atomic(out, write, suffix=".onnx")
    return dict(exporter="torch.onnx.export(dynamo=True) + onnxruntime quantize_static",
                recipe=f"quantize_static(QuantFormat.{'QOperator' if operators else 'QDQ'}, per_channel={per_channel}, "
                       f"QInt8 activations and "
                       f"weights, MinMax calibration on {CALIBRATION_WINDOWS} seeded windows)",
                source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxruntime", *TORCH_PACKAGES))


def export_onnx_f16(m: zm.Encoder, module, out: Path, src: Path) -> dict:
    """A float32 file (dynamo-f32, or ts-dyn-f32 for dynamic axes) through onnxconverter-common's
    float16 conversion, float32 inputs and outputs kept."""
    assert src.exists(), f"{out.name}: needs {src.name} first"
    t0 = time.perf_counter()
    patched = []
    atomic(out, lambda p: patched.extend(convert_to_float16(src, p)), suffix=".onnx")
    recipe = FLOAT16_RECIPE
    if patched:
        recipe += (f"; the Casts to float its value_info now declares float16 ({', '.join(patched)}) cast to "
                   "float16, as onnxconverter-common issue #320 has users do (its output does not load otherwise)")
    return dict(exporter=f"{SOURCE_EXPORTER[src.name.split('.', 1)[1]]} + onnxconverter-common float16",
                recipe=recipe,
                source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxruntime", "onnxconverter-common", *TORCH_PACKAGES))


FLOAT16_RECIPE = "float16.convert_float_to_float16(model, keep_io_types=True)"


def convert_to_float16(src: Path, out: Path) -> list[str]:
    """onnxconverter-common's float16 conversion of src into out (float32 inputs and outputs
    kept), made loadable as its users do; returns the Casts that needed it."""
    import onnx
    from onnxconverter_common import float16

    model = float16.convert_float_to_float16(onnx.load(str(src)), keep_io_types=True)
    patched = _cast_targets_as_declared(model)
    onnx.save(model, str(out))
    _onnx_finish(out)
    return patched


def _cast_targets_as_declared(model) -> list[str]:
    """convert_float_to_float16 declares a Cast-to-float's output float16 but leaves its `to` at
    float (onnxconverter-common issue #320), which onnxruntime refuses to load: the users' fix is
    to cast to float16. Returns the Casts changed."""
    from onnx import TensorProto

    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
    patched = []
    for node in model.graph.node:
        to = next((a for a in node.attribute if a.name == "to"), None)
        if node.op_type == "Cast" and to is not None and to.i == TensorProto.FLOAT \
                and declared.get(node.output[0]) == TensorProto.FLOAT16:
            to.i = TensorProto.FLOAT16
            patched.append(node.name)
    return patched


def export_onnx_half(m: zm.Encoder, module, out: Path) -> dict:
    """The torch module after .half() through torch.onnx (dynamo): float16 constants and float16
    arithmetic in the graph, integer inputs, a float16 output."""
    import copy

    import torch
    import zoo_torch as zt

    half = copy.deepcopy(module).half().eval()
    args = zt.sample_inputs(m, torch.int64)
    names = list(m.input_roles) if m.named_inputs else None
    t0 = time.perf_counter()
    atomic(out, lambda p: torch_onnx(half, args, p, True, names, [m.output_name]), suffix=".onnx")
    return dict(exporter="torch.onnx.export(dynamo=True) of module.half()",
                recipe=f"module.half(), then torch.onnx.export(dynamo=True, opset_version={DYNAMO_OPSET})",
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxscript", "onnxruntime", *TORCH_PACKAGES))


def strip_torch_metadata(model) -> int:
    """Drops the torch.onnx exporters' node metadata (`pkg.torch.onnx.*`: stack traces with the
    venv's absolute paths, class hierarchy, namespace, FX node names); returns the bytes dropped.

    The stack traces would tie a file to where the venv lives; the rest is ~100 KB per file
    (a third of a tiny model), which the zoo's size budget cannot carry 50 times over. No runtime
    or reader uses node metadata; examples/tinystories strips the same keys.
    """
    import onnx

    def graphs(g):
        yield g
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from graphs(attr.g)

    dropped = 0
    nodes = [n for g in graphs(model.graph) for n in g.node]
    nodes += [n for f in model.functions for n in f.node]
    for node in nodes:
        keep = [p for p in node.metadata_props if not p.key.startswith("pkg.torch")]
        if len(keep) != len(node.metadata_props):
            dropped += sum(len(p.SerializeToString()) for p in node.metadata_props) - sum(
                len(p.SerializeToString()) for p in keep)
            del node.metadata_props[:]
            node.metadata_props.extend(keep)
    return dropped


def _onnx_finish(tmp: Path) -> None:
    """Folds any external data in, strips the exporter's node metadata, checks the model."""
    import onnx

    model = onnx.load(str(tmp))
    strip_torch_metadata(model)
    onnx.save(model, str(tmp), save_as_external_data=False)
    model = onnx.load(str(tmp), load_external_data=False)
    for init in model.graph.initializer:
        assert init.data_location != onnx.TensorProto.EXTERNAL, init.name
    onnx.checker.check_model(model)


def torch_onnx(module, args, tmp: Path, dynamo: bool, input_names, output_names,
               dynamic_shapes=None, dynamic_axes=None, opset: int = DYNAMO_OPSET) -> None:
    import torch

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            prog = torch.onnx.export(module, args, dynamo=True, opset_version=opset,
                                     input_names=input_names, output_names=output_names,
                                     dynamic_shapes=dynamic_shapes, external_data=False)
            prog.save(str(tmp), external_data=False)
        else:
            torch.onnx.export(module, args, str(tmp), dynamo=False, opset_version=TS_OPSET,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes, do_constant_folding=True)
    _onnx_finish(tmp)


def export_onnx_f32(m: zm.Encoder, module, out: Path, dynamo: bool, opset: int = DYNAMO_OPSET) -> dict:
    import torch
    import zoo_torch as zt

    args = zt.sample_inputs(m, torch.int64)
    names = list(m.input_roles) if m.named_inputs else None
    t0 = time.perf_counter()
    atomic(out, lambda p: torch_onnx(module, args, p, dynamo, names, [m.output_name], opset=opset),
           suffix=".onnx")
    how = (f"torch.onnx.export(dynamo=True, opset_version={opset})" if dynamo else
           f"torch.onnx.export(dynamo=False, opset_version={TS_OPSET}, do_constant_folding=True)")
    how += ", input_names=" + ("the roles" if m.named_inputs else "not given (positional)")
    return dict(exporter=how.split(",")[0] + (")" if not how.split(",")[0].endswith(")") else ""),
                recipe="float32, " + how, export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxscript", "onnxruntime", *TORCH_PACKAGES))


def dynamic_axes_of(m: zm.Encoder) -> tuple[list[str], dict]:
    """The input names and optimum's dynamic axes: batch and sequence on every input, and on the
    output (a pooled output has no sequence axis)."""
    names = list(m.input_roles) if m.named_inputs else [f"input_{i}" for i in range(len(m.input_roles))]
    axes = {n: {0: "batch_size", 1: "sequence_length"} for n in names}
    axes[m.output_name] = {0: "batch_size"} | ({1: "sequence_length"} if m.output_kind == "tokens" else {})
    return names, axes


def export_onnx_dynamic(m: zm.Encoder, module, out: Path, dynamo: bool) -> dict:
    """float32 ONNX with symbolic batch and sequence, int64 inputs (issue 30.1).

    torch.export specialises a size-1 dimension, so the dynamo export traces a batch of two."""
    import torch
    import zoo_torch as zt

    args = zt.sample_inputs(m, torch.int64)
    names, axes = dynamic_axes_of(m)
    t0 = time.perf_counter()
    if dynamo:
        batch = torch.export.Dim("batch_size", min=1, max=64)
        seq = torch.export.Dim("sequence_length", min=2, max=m.seq)
        shapes = tuple({0: batch, 1: seq} for _ in args)
        args = tuple(a.repeat(2, 1) for a in args)
        atomic(out, lambda p: torch_onnx(module, args, p, True, names, [m.output_name],
                                         dynamic_shapes=shapes), suffix=".onnx")
        how = (f"torch.onnx.export(dynamo=True, opset_version={DYNAMO_OPSET}, dynamic_shapes="
               f"{{0: Dim('batch_size', 1, 64), 1: Dim('sequence_length', 2, {m.seq})}} per input)")
    else:
        atomic(out, lambda p: torch_onnx(module, args, p, False, names, [m.output_name],
                                         dynamic_axes=axes), suffix=".onnx")
        how = (f"torch.onnx.export(dynamo=False, opset_version={TS_OPSET}, do_constant_folding=True, "
               f"dynamic_axes={axes})")
    return dict(exporter=how.split("(")[0] + f"(dynamo={dynamo})", recipe="float32, int64 inputs, " + how,
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxscript", "onnxruntime", *TORCH_PACKAGES))


def export_ort_dq8(m: zm.Encoder, module, out: Path, src: Path, per_channel: bool) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    assert src.exists(), f"{out.name}: needs {src.name} first"
    t0 = time.perf_counter()

    def write(p):
        quantize_dynamic(str(src), str(p), weight_type=QuantType.QInt8, per_channel=per_channel,
                         use_external_data_format=False)
        _onnx_finish(p)

    atomic(out, write, suffix=".onnx")
    return dict(exporter=f"{SOURCE_EXPORTER[src.name.split('.', 1)[1]]} + onnxruntime quantize_dynamic",
                recipe=f"quantize_dynamic(weight_type=QuantType.QInt8, per_channel={per_channel})",
                source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxruntime", *TORCH_PACKAGES))


def export_ort_gelu_fusions(m: zm.Encoder, module, out: Path, src: Path) -> dict:
    """onnxruntime.transformers' optimizer with every fusion off but the GELU ones, so the file
    holds com.microsoft FastGelu / BiasGelu (the Linear's bias fused in) among standard ops."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    assert src.exists(), f"{out.name}: needs {src.name} first"
    options = FusionOptions("bert")
    for name in vars(options):
        if name.startswith("enable_") and name not in ("enable_gelu", "enable_bias_gelu"):
            setattr(options, name, False)
    t0 = time.perf_counter()

    def write(p):
        optimize_model(str(src), model_type="bert", num_heads=m.heads, hidden_size=m.hidden,
                       optimization_options=options, opt_level=0).save_model_to_file(str(p))
        _onnx_finish(p)

    atomic(out, write, suffix=".onnx")
    return dict(exporter="torch.onnx.export(dynamo=True) + onnxruntime.transformers optimize_model",
                recipe="optimize_model(model_type='bert', opt_level=0), FusionOptions: only enable_gelu "
                       "and enable_bias_gelu", source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxruntime", *TORCH_PACKAGES))


def export_ort_optimized(m: zm.Encoder, module, out: Path, src: Path, opt_level: int | None = None) -> dict:
    """onnxruntime.transformers' optimizer as a user runs it: model_type 'bert', the member's heads
    and width, its default fusion options, its default opt_level (1: com.microsoft
    SkipLayerNormalization and Gelu beside Gemm) or 2 (MatMulAddFusion off: SkipLayerNormalization
    with the Linear's bias, BiasGelu), the opset domains it declares, no value_info."""
    from onnxruntime.transformers.optimizer import optimize_model

    assert src.exists(), f"{out.name}: needs {src.name} first"
    t0 = time.perf_counter()

    def write(p):
        optimize_model(str(src), model_type="bert", num_heads=m.heads, hidden_size=m.hidden,
                       opt_level=opt_level).save_model_to_file(str(p))
        _onnx_finish(p)

    atomic(out, write, suffix=".onnx")
    exporter = "torch.onnx.export(dynamo=False, dynamic_axes)" if "dyn" in src.name else "torch.onnx.export(dynamo=True)"
    return dict(exporter=f"{exporter} + onnxruntime.transformers optimize_model",
                recipe=f"optimize_model(model_type='bert', num_heads, hidden_size, opt_level={opt_level}), "
                       "default fusion options",
                source=src.name, source_sha256=fixture_info.sha256(src),
                export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxruntime", *TORCH_PACKAGES))


def export_tf(m: zm.Encoder, module, out: Path, keras_layers: bool, float16: bool = False,
              full_integer: bool = False) -> dict:
    import zoo_tf

    return zoo_tf.export(m, module, out, keras_layers, atomic, float16=float16,
                         calibration=calibration_windows(m) if full_integer else None)


ENCODER_EXPORTERS = {
    "litert-f32.tflite": lambda m, mod, out, src: export_litert_f32(m, mod, out),
    "litert-dq8.tflite": export_litert_dq8,
    "dynamo-f32.onnx": lambda m, mod, out, src: export_onnx_f32(m, mod, out, dynamo=True),
    "ts-f32.onnx": lambda m, mod, out, src: export_onnx_f32(m, mod, out, dynamo=False),
    "dynamo20-f32.onnx": lambda m, mod, out, src: export_onnx_f32(m, mod, out, dynamo=True, opset=20),
    "ortgelu-f32.onnx": lambda m, mod, out, src: export_ort_gelu_fusions(m, mod, out, src),
    "ortopt-f32.onnx": lambda m, mod, out, src: export_ort_optimized(m, mod, out, src),
    "ortopt2-f32.onnx": lambda m, mod, out, src: export_ort_optimized(m, mod, out, src, opt_level=2),
    "ortopt-dyn-f32.onnx": lambda m, mod, out, src: export_ort_optimized(m, mod, out, src),
    "dq8pt.onnx": lambda m, mod, out, src: export_ort_dq8(m, mod, out, src, per_channel=False),
    "dq8pc.onnx": lambda m, mod, out, src: export_ort_dq8(m, mod, out, src, per_channel=True),
    "tf-dq8.tflite": lambda m, mod, out, src: export_tf(m, mod, out, keras_layers=False),
    "keras-dq8.tflite": lambda m, mod, out, src: export_tf(m, mod, out, keras_layers=True),
    "ts-dyn-f32.onnx": lambda m, mod, out, src: export_onnx_dynamic(m, mod, out, dynamo=False),
    "dynamo-dyn-f32.onnx": lambda m, mod, out, src: export_onnx_dynamic(m, mod, out, dynamo=True),
    "dyn-dq8pc.onnx": lambda m, mod, out, src: export_ort_dq8(m, mod, out, src, per_channel=True),
    "tf-f16.tflite": lambda m, mod, out, src: export_tf(m, mod, out, keras_layers=False, float16=True),
    "tf-si8.tflite": lambda m, mod, out, src: export_tf(m, mod, out, keras_layers=False, full_integer=True),
    "qdq8pc.onnx": export_ort_qdq,
    "qdq8pt.onnx": lambda m, mod, out, src: export_ort_qdq(m, mod, out, src, per_channel=False),
    "qop8pc.onnx": lambda m, mod, out, src: export_ort_qdq(m, mod, out, src, operators=True),
    "f16.onnx": export_onnx_f16,
    "dyn-f16.onnx": export_onnx_f16,
    "half.onnx": lambda m, mod, out, src: export_onnx_half(m, mod, out),
}
for _f in ("aeq-wo8.tflite", "aeq-f16.tflite", "aeq-dq4.tflite", "aeq-wo4.tflite", "aeq-si8.tflite"):
    ENCODER_EXPORTERS[_f] = lambda m, mod, out, src, _f=_f: export_aeq(m, mod, out, src, _f)
# The quantised flavours read a float file of the same member.
SOURCE = {"litert-dq8.tflite": "litert-f32.tflite", "dq8pc.onnx": "dynamo-f32.onnx",
          "dq8pt.onnx": "dynamo-f32.onnx", "dyn-dq8pc.onnx": "ts-dyn-f32.onnx",
          "ortgelu-f32.onnx": "dynamo-f32.onnx", "ortopt-f32.onnx": "dynamo-f32.onnx",
          "ortopt2-f32.onnx": "dynamo-f32.onnx", "ortopt-dyn-f32.onnx": "ts-dyn-f32.onnx",
          "aeq-wo8.tflite": "litert-f32.tflite",
          "aeq-f16.tflite": "litert-f32.tflite", "aeq-dq4.tflite": "litert-f32.tflite",
          "aeq-si8.tflite": "litert-f32.tflite", "aeq-wo4.tflite": "litert-f32.tflite", "qdq8pc.onnx": "dynamo-f32.onnx",
          "qdq8pt.onnx": "dynamo-f32.onnx", "qop8pc.onnx": "dynamo-f32.onnx", "f16.onnx": "dynamo-f32.onnx", "dyn-f16.onnx": "ts-dyn-f32.onnx"}
SOURCE_EXPORTER = {"dynamo-f32.onnx": "torch.onnx.export(dynamo=True)",
                   "ts-dyn-f32.onnx": "torch.onnx.export(dynamo=False, dynamic_axes)"}
# Sources first.
ORDER = ["litert-f32.tflite", "litert-dq8.tflite", "dynamo-f32.onnx", "dq8pc.onnx", "dq8pt.onnx",
         "ts-f32.onnx", "tf-dq8.tflite", "keras-dq8.tflite", "ts-dyn-f32.onnx", "dyn-dq8pc.onnx",
         "dynamo-dyn-f32.onnx", "dynamo20-f32.onnx", "ortgelu-f32.onnx", "ortopt-f32.onnx",
         "ortopt2-f32.onnx", "ortopt-dyn-f32.onnx", "aeq-wo8.tflite", "aeq-f16.tflite", "tf-f16.tflite", "aeq-dq4.tflite", "aeq-wo4.tflite",
         "aeq-si8.tflite", "tf-si8.tflite", "qdq8pc.onnx", "qdq8pt.onnx", "qop8pc.onnx", "f16.onnx", "dyn-f16.onnx", "half.onnx"]


def make_encoder(m: zm.Encoder, todo: list[str]) -> None:
    import zoo_torch as zt

    module = zt.build_encoder(m)
    with tempfile.TemporaryDirectory() as tmpdir:
        source_checks = {}

        def source(flavour: str) -> Path | None:
            """The float file a quantised flavour reads: the kept one, or one made in tmpdir."""
            if flavour not in SOURCE:
                return None
            f = SOURCE[flavour]
            if f not in m.float_sources_only:
                return m.path(f)
            src = Path(tmpdir) / m.path(f).name
            if not src.exists():
                ENCODER_EXPORTERS[f](m, module, src, None)
                source_checks[f] = compare(src, m, module)
                print(f"{src.name} (source only, not kept): "
                      f"vs torch {source_checks[f]['vs_torch_max_abs_live']:.2g}", flush=True)
            return src

        for flavour in sorted(todo, key=ORDER.index):
            out = m.path(flavour)
            t0 = time.perf_counter()
            try:
                src = source(flavour)
                facts = ENCODER_EXPORTERS[flavour](m, module, out, src)
                facts["hf_class"] = zt.hf_class_name(m)
                facts["checks"] = compare(out, m, module)
                if src is not None and SOURCE[flavour] in source_checks:
                    facts["source_kept"] = False
                    facts["source_checks"] = source_checks[SOURCE[flavour]]
                facts["command"] = COMMAND
                info = sidecar(out, m, flavour, **facts)
            except BaseException:
                discard(out)
                raise
            print(f"{out.name}: {info['size_bytes'] / 2**20:.2f} MiB, {sum(info['ops'].values())} ops, "
                  f"vs torch {facts['checks']['vs_torch_max_abs_live']:.2g} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)


# ---------------------------------------------------------------------------------------------
# Decoders


def export_decoder(d: zm.Decoder, out: Path) -> dict:
    import torch
    import zoo_torch as zt

    module = zt.build_decoder(d)
    ins, outs = zt.decoder_names(d)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, d.vocab, (1, 5), generator=g)
    past = zt.empty_past(d, 7, g)
    dynamo = d.flavour.startswith("dynamo")
    t0 = time.perf_counter()
    if dynamo:
        seq = torch.export.Dim("seq", min=1, max=d.n_ctx)
        pl = torch.export.Dim("past", min=0, max=d.n_ctx - 1)
        shapes = ({1: seq}, tuple({2: pl} for _ in past))
        atomic(out, lambda p: torch_onnx(module, (ids, *past), p, True, ins, outs,
                                         dynamic_shapes=shapes), suffix=".onnx")
        how = f"torch.onnx.export(dynamo=True, opset_version={DYNAMO_OPSET}, dynamic_shapes=seq, past)"
    else:
        axes = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
        for n in ins[1:]:
            axes[n] = {2: "past"}
        for n in outs[1:]:
            axes[n] = {2: "past_plus_seq"}
        atomic(out, lambda p: torch_onnx(module, (ids, *past), p, False, ins, outs,
                                         dynamic_axes=axes), suffix=".onnx")
        how = f"torch.onnx.export(dynamo=False, opset_version={TS_OPSET}, dynamic_axes=seq, past)"
    return dict(module=module, exporter=how.split("(")[0] + ("(dynamo=True)" if dynamo else "(dynamo=False) (TorchScript)"),
                recipe="float32, " + how, export_seconds=round(time.perf_counter() - t0, 2),
                versions=versions("onnx", "onnxscript", "onnxruntime", "torch", "transformers"))


def check_decoder(d: zm.Decoder, path: Path, module) -> dict:
    """ORT against torch on a full pass, and cached steps against the full pass."""
    import torch
    import zoo_torch as zt
    import make_goldens as mg

    sess = mg.ort_session(path)
    ids = list(np.random.default_rng(3).integers(0, d.vocab, size=10))
    with torch.no_grad():
        ref = module(torch.tensor([ids]), *zt.empty_past(d, 0))[0][0].numpy()
    full, _ = mg.decoder_step(sess, d, ids, mg.empty_cache(d))
    past, rows = mg.empty_cache(d), []
    for chunk in ([ids[:4]] + [[t] for t in ids[4:]]):
        lg, past = mg.decoder_step(sess, d, chunk, past)
        rows.append(lg)
    cached = np.concatenate(rows, 0)
    return {"ort_full_vs_torch_max_abs": float(np.abs(full - ref).max()),
            "ort_cached_vs_ort_full_max_abs": float(np.abs(cached - full).max()),
            "inputs": "10 seeded ids; cached: a 4-token prompt pass then one id per call"}


def make_decoder(d: zm.Decoder) -> None:
    out = d.path()
    t0 = time.perf_counter()
    try:
        facts = export_decoder(d, out)
        module = facts.pop("module")
        facts["checks"] = check_decoder(d, out, module)
        facts["command"] = COMMAND
        facts["note"] = d.note
        info = sidecar(out, d, d.flavour, **facts)
    except BaseException:
        discard(out)
        raise
    print(f"{out.name}: {info['size_bytes'] / 2**20:.2f} MiB, {sum(info['ops'].values())} ops, "
          f"checks {json.dumps(facts['checks'])} ({time.perf_counter() - t0:.1f} s)", flush=True)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="remake files that exist")
    ap.add_argument("--only", nargs="*", help="member names or file names")
    ap.add_argument("--flavour", nargs="*", help="only these flavours")
    args = ap.parse_args()
    zm.check()
    only = set(args.only or [])
    for m in zm.MEMBERS:
        todo = []
        for f in m.flavours:
            p = m.path(f)
            if only and m.name not in only and p.name not in only:
                continue
            if args.flavour and f not in args.flavour:
                continue
            if present(p) and not args.force:
                continue
            todo.append(f)
        if not todo:
            continue
        print(f"== {m.name}: {', '.join(todo)}", flush=True)
        if m.kind == "decoder":
            make_decoder(m)
        else:
            make_encoder(m, todo)
    total = sum(p.stat().st_size for _, _, p in zm.files() if p.exists())
    missing = [p.name for _, _, p in zm.files() if not p.exists()]
    print(f"zoo: {len(zm.files()) - len(missing)} files, {total / 2**20:.2f} MiB"
          + (f"; {len(missing)} missing: {' '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}"
             if missing else ""))


if __name__ == "__main__":
    main()
