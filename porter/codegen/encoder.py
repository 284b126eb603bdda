"""Codegen: an EncoderIR -> a Rust forward-pass crate (templates/rust_forward) + model.bin.

The crate is plain cargo: `src/model.rs` holds every shape and array offset as generated
consts and load calls; the kernels, the forward pass and the eval command take their sizes from
there. `checks/` is a second small crate that compares every SIMD kernel with its scalar
reference (exhaustively over all 2^32 f32 inputs where the kernel takes one float).

The .cargo/config.toml is not written here: it depends on the toolchain of the machine that
builds, so `build_forward_crate` (`porter build`) writes it just before building.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter import TEMPLATES_DIR

from porter.codegen import pack
from porter.codegen.render import render_crate
from porter.toolchain.cargo import build_crate, cargo_config_toml, shared_target_dir
from porter.errors import PorterError
from porter.ir.encoder import (LITERT_BUILTIN, MASK_INPUT, ONNX_LAYER_NORM_FORMS, ONNXRUNTIME_CPU,
                       ORT_DYNAMIC_UINT8, TFLITE_HYBRID, EncoderIR, LayerNorm, Linear)
from porter.reference import ort_cpu as ort_cpus
from porter.reference.ort_cpu import AVX2_FLOATS, AVX512_FLOATS
from porter.reference.quant import EXACT_DOT, INT16_PAIRS_SATURATED
from porter.toolchain.discover import CrateKind, Toolchain

TEMPLATE = TEMPLATES_DIR / "rust_forward"
CHECKS_DIR = "checks"


@dataclass(frozen=True)
class Tuning:
    """Work per loop iteration; never changes a result bit. The defaults are the fastest on
    MiniLM-L6 on this project's machine (AMD EPYC, wasmtime 50), timed side by side: GEMM tiles
    of 2 rows x 4 outputs (matmul 119-126 ms a window against 137-193 for 2x2 and 138 for 4x4,
    whose sixteen accumulators and sixteen activation vectors no longer fit the registers) and
    8 query rows."""

    tile_rows: int = 2
    tile_outs: int = 4
    query_rows: int = 8


def f32_literal(value: float) -> str:
    """An exact Rust f32 expression: the float32 bit pattern, so nothing rounds twice."""
    bits = int(np.float32(value).view(np.uint32))
    return f"f32::from_bits({bits:#010x})"


def crate_name(source: str, crate_dir: str | Path | None = None) -> str:
    """porter-<model stem>, plus a hash of the crate's directory when given: every crate builds
    in one shared cargo target directory, where two crates of the same package name would hand
    each other's artifact out (cargo re-uses the uplifted binary of a fresh build)."""
    stem = Path(source).name.split(".")[0]
    name = "porter-" + (re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "model")
    if crate_dir is None:
        return name
    return f"{name}-{hashlib.sha256(str(Path(crate_dir).resolve()).encode()).hexdigest()[:8]}"


def _array(entries: dict, name: str) -> dict:
    e = entries[name]
    return {"offset": e["offset"], "len": int(np.prod(e["shape"], dtype=np.int64))}


def _linear_kind(lin: Linear, reference: str) -> str:
    """Which Rust Weights variant runs this layer: int8 (TFLite hybrid), ort_dynamic, float32
    (LiteRT's float FC) or float_ort (onnxruntime's Gemm)."""
    if lin.weight_dtype == "float32":
        return "float_ort" if reference == ONNXRUNTIME_CPU else "float32"
    if lin.weight_dtype != "int8":
        raise PorterError(f"{lin.name}: no Rust kernel for {lin.weight_dtype} weights")
    wanted = TFLITE_HYBRID if reference == LITERT_BUILTIN else ORT_DYNAMIC_UINT8
    if lin.activation_quant != wanted:
        raise PorterError(f"{lin.name}: no Rust kernel for {lin.activation_quant!r} activations "
                          f"under {reference!r} arithmetic")
    if wanted == ORT_DYNAMIC_UINT8 and lin.integer_dot not in (EXACT_DOT, INT16_PAIRS_SATURATED):
        raise PorterError(f"{lin.name}: no Rust kernel for the integer dot product {lin.integer_dot!r}")
    return "int8" if wanted == TFLITE_HYBRID else "ort_dynamic"


def _linear(lin: Linear, entries: dict, reference: str) -> dict:
    kind = _linear_kind(lin, reference)
    return {
        "kind": kind,
        "weight": _array(entries, f"{lin.name}.weight"),
        "scale": _array(entries, f"{lin.name}.scale") if lin.weight_dtype == "int8" else None,
        "bias": _array(entries, f"{lin.name}.bias") if lin.has_bias else None,
        "outs": lin.out_features,
        "k": lin.in_features,
        "asymmetric": lin.asymmetric_inputs,
        "saturating": lin.integer_dot == INT16_PAIRS_SATURATED,
    }


# (onnxruntime arithmetic, IR gelu) -> the crate's Gelu kernel
GELU_KERNELS = {(False, "erf"): "Erf", (False, "tanh"): "Tanh", (True, "erf"): "ErfOrt",
                (True, "erf_mul"): "ErfOrtMul", (True, "tanh"): "Tanh"}
FORMS = {"shift": "Shift", "centred": "Centred", "keras": "Keras", "onnx": "Onnx", "onnx_skip": "OnnxSkip"}
TABLE_KINDS = {"int8_rows": "Int8Rows", "int8_tensor": "Int8Tensor", "uint8_tensor": "Uint8Tensor",
               "float32": "Float32"}


def _layer_norm(ln: LayerNorm, entries: dict) -> dict:
    if ln.form not in FORMS:
        raise PorterError(f"{ln.name}: no Rust kernel for LayerNorm form {ln.form!r}")
    return {
        "gamma": _array(entries, f"{ln.name}.gamma"),
        "beta": _array(entries, f"{ln.name}.beta"),
        "eps": f32_literal(ln.eps),
        "form": FORMS[ln.form],
        "affine_folded": ln.affine_folded,
    }


def _bias_term(ir: EncoderIR, entries: dict, index: int) -> dict:
    term = _array(entries, f"embed.bias{index}")
    if term["len"] == ir.seq * ir.hidden:
        stride = ir.hidden  # one row per position
    elif term["len"] == ir.hidden:
        stride = 0  # the same row for every position
    else:
        raise PorterError(f"embed.bias{index} has {term['len']} values; expected {ir.seq}x{ir.hidden} "
                          f"or {ir.hidden}")
    return {**term, "row_stride": stride}


# porter.reference.ort_cpu's float kernel families -> the crate's ort_float::OrtFloats
ORT_FLOATS = {AVX2_FLOATS: "Avx2", AVX512_FLOATS: "Avx512"}


def _ort_floats(ir: EncoderIR) -> str:
    """AttentionParams.onnxruntime: the CPU's float kernels for onnxruntime's arithmetic."""
    if ir.reference != ONNXRUNTIME_CPU:
        return "None"
    return f"Some(crate::kernels::ort_float::OrtFloats::{ORT_FLOATS[ort_cpus.target(ir.ort_cpu).floats]})"


def arithmetic(ort_cpu: str | None) -> str:
    """Whose arithmetic a crate reproduces, for its generated sources' header."""
    if ort_cpu is None:
        return "LiteRT's builtin kernels, the same on every CPU"
    return f"onnxruntime 1.32's CPU kernels as on {ort_cpus.target(ort_cpu).describe()}"


def require_kernels(ir: EncoderIR) -> None:
    """The Rust kernels reproduce LiteRT's builtin arithmetic and onnxruntime's CPU arithmetic;
    refuse anything else by name (each Linear is checked as it is rendered)."""
    if ir.reference not in (LITERT_BUILTIN, ONNXRUNTIME_CPU):
        raise PorterError(f"{Path(ir.source).name}: no Rust kernels for {ir.reference!r} arithmetic")
    onnx = ir.reference == ONNXRUNTIME_CPU
    for ln in [ir.embeddings.ln] + [n for ly in ir.layers for n in (ly.attn_ln, ly.ffn_ln)]:
        if (ln.form in ONNX_LAYER_NORM_FORMS) != onnx:
            raise PorterError(f"{ln.name}: no Rust kernel for LayerNorm form {ln.form!r} under "
                              f"{ir.reference!r} arithmetic")
    for ly in ir.layers:
        if ly.attn.scale_divisor is not None:
            raise PorterError("attention that divides its scores has no Rust kernel yet")
        if onnx and ly.gelu not in ("erf", "erf_mul"):
            raise PorterError(f"no Rust kernel for GELU {ly.gelu!r} under onnxruntime arithmetic")


def template_variables(ir: EncoderIR, manifest: dict, tuning: Tuning = Tuning(),
                       crate_dir: Path | None = None) -> dict:
    """Everything the templates read: shapes, array offsets and kernel parameters."""
    require_kernels(ir)
    entries = {e["name"]: e for e in manifest["arrays"]}
    head_dims = {ly.attn.head_dim for ly in ir.layers} | {ir.hidden // ir.heads}
    if len(head_dims) != 1 or ir.heads * head_dims.copy().pop() != ir.hidden:
        raise PorterError(f"{ir.heads} heads do not split hidden {ir.hidden} evenly in every layer")
    if ir.embeddings.table_kind not in TABLE_KINDS:
        raise PorterError(f"no Rust kernel for embedding table kind {ir.embeddings.table_kind!r}")
    emb = ir.embeddings
    embeddings = {
        "kind": TABLE_KINDS[emb.table_kind],
        "table": _array(entries, "embed.table"),
        "scale": _array(entries, "embed.scale") if emb.table_kind != "float32" else None,
        "zero_point": _array(entries, "embed.zero_point") if emb.table_kind == "uint8_tensor" else None,
        "bias_terms": [_bias_term(ir, entries, i) for i in range(emb.bias_terms)],
        "ln": _layer_norm(emb.ln, entries),
    }
    layers = []
    for ly in ir.layers:
        a = ly.attn
        if a.scale_on not in ("scores", "query"):
            raise PorterError(f"attention scale on {a.scale_on!r} is not supported")
        layers.append({
            "q": _linear(a.q, entries, ir.reference), "k": _linear(a.k, entries, ir.reference),
            "v": _linear(a.v, entries, ir.reference), "o": _linear(a.o, entries, ir.reference),
            "attention": {"scale": f32_literal(a.scale), "scale_on_query": a.scale_on == "query",
                          "softmax_beta": f32_literal(a.softmax_beta),
                          "mask_value": f32_literal(a.mask_value),
                          "onnxruntime": _ort_floats(ir)},
            "attn_ln": _layer_norm(ly.attn_ln, entries),
            "ffn_in": _linear(ly.ffn_in, entries, ir.reference),
            "ffn_out": _linear(ly.ffn_out, entries, ir.reference),
            "gelu": GELU_KERNELS[ir.reference == ONNXRUNTIME_CPU, ly.gelu],
            "ffn_ln": _layer_norm(ly.ffn_ln, entries),
        })
    return {
        "crate_name": crate_name(ir.source, crate_dir),
        "source_name": Path(ir.source).name,
        "arithmetic": arithmetic(ir.ort_cpu),
        "seq": ir.seq, "hidden": ir.hidden, "heads": ir.heads, "head_dim": head_dims.pop(),
        "ffn": ir.ffn, "vocab": ir.vocab, "labels": ir.labels,
        "uses_mask": ir.mask == MASK_INPUT,
        "padding_is_inert": ir.padding_is_inert(),
        "rows_independent": ir.rows_independent(),
        # relaxed_madd for onnxruntime's products (Cargo feature fused-madd); never beside
        # LiteRT's kernels, whose standard SIMD code it would change (ort_float.rs)
        "fused_madd": ir.reference == ONNXRUNTIME_CPU,
        "model_bytes": manifest["total_size"], "align": manifest["align"],
        "array_count": len(manifest["arrays"]),
        "embeddings": embeddings, "layers": layers, "head": _linear(ir.head, entries, ir.reference),
        **tuning_variables(tuning),
    }


def tuning_variables(tuning: Tuning, tuned: dict | None = None) -> dict:
    """What templates/rust_forward/src/tuning.rs.j2 reads; `tuned` records a --tune run."""
    return {"tile_rows": tuning.tile_rows, "tile_outs": tuning.tile_outs, "query_rows": tuning.query_rows,
            "tuned": tuned}


def render_forward_crate(ir: EncoderIR, out_dir: str | Path, tuning: Tuning = Tuning()) -> Path:
    """Writes the crate, model.bin, layout.json and ir.json into out_dir, replacing it whole.

    The crate is assembled beside out_dir and renamed into place (porter.codegen.render), so
    out_dir never holds a half-written crate.
    """
    out = Path(out_dir)
    blob, manifest = pack.pack(ir)
    variables = template_variables(ir, manifest, tuning, out)
    return render_crate(TEMPLATE, out, variables, compiled_files(blob, manifest, ir.summary()))


def compiled_files(blob: bytes, manifest: dict, summary: dict) -> dict[str, bytes]:
    """What `porter compile` writes beside a crate's sources: model.bin and its two descriptions."""
    return {"model.bin": blob,
            "layout.json": (json.dumps(manifest, indent=1) + "\n").encode(),
            "ir.json": (json.dumps(summary, indent=1, default=float) + "\n").encode()}


def write_cargo_config(crate_dir: Path, toolchain: Toolchain) -> None:
    """The toolchain-specific .cargo/config.toml (the checks crate inherits it from its parent)."""
    config = crate_dir / ".cargo" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text(cargo_config_toml(toolchain, CrateKind.COMMAND))


def build_forward_crate(crate_dir: str | Path, toolchain: Toolchain, checks: bool = False,
                        target_dir: Path | None = None) -> Path:
    """cargo build the eval module (or, with checks=True, the kernel-check module)."""
    crate = Path(crate_dir)
    if not (crate / "Cargo.toml").is_file() or not (crate / "model.bin").is_file():
        raise PorterError(f"{crate} is not a porter forward crate (run `porter compile MODEL -o {crate}`)")
    write_cargo_config(crate, toolchain)
    return build_crate(crate / CHECKS_DIR if checks else crate, toolchain, target_dir)


def standard_library_is_cold(toolchain: Toolchain, target_dir: Path | None = None) -> bool:
    """True when the shared target dir has no wasm32 std yet (the Debian route builds it once)."""
    if toolchain.route != "debian":
        return False
    deps = (target_dir or shared_target_dir()) / "wasm32-wasip1" / "release" / "deps"
    return not any(deps.glob("libstd-*.rlib"))
