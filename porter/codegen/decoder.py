"""Decoder codegen: a DecoderIR -> a Rust generation crate (templates/rust_decoder) + model.bin.

model.bin holds the arrays of `DecoderIR.array_order()`; with Q8_0 every quantised array (the
Linear weights and the token table, porter.reference.q8_0.quantized_arrays) becomes two: its int8
values `<name>.q` and its per-block scales `<name>.scale`; for q8_0_int8 both are stored in
tiles of ROW_TILE rows (`tile_q8_0_rows`), the layout the crate's integer kernel reads. The
crate reuses the encoder crate's onnxruntime kernels (templates/rust_forward/src/kernels/
ort/float/, Eigen's sums and the float weight view it needs), copied in beside the decoder's
own sources; every choice of arithmetic the IR made becomes a field of model.rs's Model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter import TEMPLATES_DIR, package_path

from porter.codegen import pack
from porter.codegen.render import render_crate
from porter.codegen.encoder import ORT_FLOATS, compiled_files, crate_name, f32_literal
from porter.ir.decoder import (ACT_FAST_GELU, ACT_GELU, ACT_QUICK_GELU, BIAS_GEMM, LAYER_NORM, MASK_ADD, NO_NORM, NORM_ORT, NORM_ORT_SKIP,
                               POSITIONS_ROTARY, RMS_DIVIDE, RMS_NORM, RMS_ORT, RMS_RECIPROCAL, ROTATE_HALF, Activation,
                               Attention, DecoderIR, Instr, Linear, Norm)
from porter.reference.ort import cpu as ort_cpus
from porter.reference.litert.floats import EIGEN_L1_BYTES
from porter.reference.q8_0 import Q8_0_BLOCK, quantize_q8_0, quantized_arrays
from porter.errors import PorterError

TEMPLATE = TEMPLATES_DIR / "rust_decoder"
KERNELS_DIR = "templates/rust_forward/src/kernels"  # in porter's package data
SHARED_KERNELS = ("litert/eigen.rs", "litert/linear_f32.rs")
# onnxruntime's float kernels are copied as a whole module: its mod.rs declares every file beside it
SHARED_KERNEL_MODULES = ("ort/float",)
# float32; Q8_0 weights (dequantised inside onnxruntime's float arithmetic); Q8_0 weights times
# Q8_0-quantised inputs in integers (porter.reference.q8_0.q8_0_int8_linear)
QUANT_MODES = ("float32", "q8_0", "q8_0_int8")
# Rows per tile of q8_0_int8 weights: the same block of four rows side by side, so their four
# scales are one v128 (templates/rust_decoder/src/linear.rs ROW_TILE; the crate checks it).
ROW_TILE = 4


@dataclass
class PackedDecoder:
    """What pack.pack reads: the arrays in model.bin order (quantised ones split in two)."""

    names: list[str]
    weights: dict

    def array_order(self) -> list[str]:
        return self.names

    def int4_arrays(self) -> set[str]:
        return set()  # decoders store no int4 weights


def packed_arrays(ir: DecoderIR, quant: str) -> PackedDecoder:
    if quant not in QUANT_MODES:
        raise PorterError(f"--quant {quant!r}: choose {' or '.join(QUANT_MODES)}")
    names, weights = [], {}
    quantised = quantized_arrays(ir) if quant != "float32" else set()
    for name in ir.array_order():
        if name in quantised:
            q, scale = quantize_q8_0(ir.weights[name])
            if quant == "q8_0_int8":
                q, scale = tile_q8_0_rows(q, scale)
            names += [f"{name}.q", f"{name}.scale"]
            weights.update({f"{name}.q": q, f"{name}.scale": scale})
        else:
            names.append(name)
            weights[name] = ir.weights[name]
    return PackedDecoder(names, weights)


def tile_q8_0_rows(q: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q8_0 values [rows, k] and scales [rows, blocks] -> tiles of ROW_TILE rows holding each
    block of their rows side by side: values [tiles, blocks, ROW_TILE, 32] and scales [tiles,
    blocks, ROW_TILE]. The last tile is padded with zero rows."""
    rows, k = q.shape
    blocks = k // Q8_0_BLOCK
    tiles = -(-rows // ROW_TILE)
    padded_q = np.zeros((tiles * ROW_TILE, k), np.int8)
    padded_scale = np.zeros((tiles * ROW_TILE, blocks), np.float32)
    padded_q[:rows], padded_scale[:rows] = q, scale
    q_tiles = padded_q.reshape(tiles, ROW_TILE, blocks, Q8_0_BLOCK).transpose(0, 2, 1, 3)
    scale_tiles = padded_scale.reshape(tiles, ROW_TILE, blocks).transpose(0, 2, 1)
    return np.ascontiguousarray(q_tiles), np.ascontiguousarray(scale_tiles)


def _array(entries: dict, name: str) -> dict | None:
    if name not in entries:
        return None
    e = entries[name]
    return {"offset": e["offset"], "len": int(np.prod(e["shape"], dtype=np.int64))}


def _weights(entries: dict, name: str) -> dict:
    if f"{name}.q" in entries:
        return {"q8_0": True, "q": _array(entries, f"{name}.q"), "scale": _array(entries, f"{name}.scale")}
    return {"q8_0": False, "w": _array(entries, name)}


def _linear(entries: dict, lin: Linear, weight: str | None = None) -> dict:
    return {**_weights(entries, weight or f"{lin.name}.weight"), "bias": _array(entries, f"{lin.name}.bias"),
            "bias_in_c": lin.bias == BIAS_GEMM, "outs": lin.out_features, "k": lin.in_features}


_NORM_KINDS = {(LAYER_NORM, NORM_ORT): "LayerNorm", (LAYER_NORM, NORM_ORT_SKIP): "LayerNormSkip",
               (RMS_NORM, RMS_RECIPROCAL): "RmsReciprocal", (RMS_NORM, RMS_DIVIDE): "RmsDivide",
               (RMS_NORM, RMS_ORT): "RmsSimplified", (NO_NORM, NO_NORM): "Identity"}


def _norm(entries: dict, norm: Norm) -> dict:
    return {"kind": _NORM_KINDS[(norm.kind, norm.form)], "gamma": _array(entries, f"{norm.name}.gamma"),
            "beta": _array(entries, f"{norm.name}.beta"), "eps": f32_literal(norm.eps), "skip_bias": norm.skip_bias}


# porter.reference.ops' op names -> the crate's kernels/decoder_float.rs Op (pow by its exponent)
_OPS = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Maximum", "minimum": "Minimum",
        "erf": "Erf", "tanh": "Tanh", "sigmoid": "Sigmoid", "neg": "Neg", "sqrt": "Sqrt", "abs": "Abs",
        "relu": "Relu", "reciprocal": "Reciprocal"}
_POWERS = {2.0: "Square", 3.0: "Cube"}
MAX_INSTRUCTIONS = 16  # templates/rust_decoder/src/kernels/decoder_float.rs MAX_INSTRUCTIONS


def _arg(arg) -> str:
    if isinstance(arg, str):
        return "Arg::X" if arg == "x" else f"Arg::T({int(arg[1:])})"
    return f"Arg::C({f32_literal(arg)})"


def _instructions(program: list[Instr]) -> list[dict]:
    """An activation's ops as the crate's Instr values; pow only with an exponent porter
    reproduces (x^2 and x^3, which onnxruntime's Pow multiplies out)."""
    if len(program) > MAX_INSTRUCTIONS:
        raise PorterError(f"an activation of {len(program)} ops; the crate runs at most {MAX_INSTRUCTIONS}")
    out = []
    for instr in program:
        if instr.op == "pow":
            exponent = instr.args[1]
            if isinstance(exponent, str) or float(exponent) not in _POWERS:
                raise PorterError(f"an activation raises to the power {exponent}; porter reproduces onnxruntime's "
                                  "Pow for the exponents 2 and 3 only")
            op, args = _POWERS[float(exponent)], instr.args[:1]
        elif instr.op in _OPS:
            op, args = _OPS[instr.op], instr.args
        else:
            raise PorterError(f"an activation uses {instr.op}, which the crate has no kernel for")
        out.append({"op": op, "a": _arg(args[0]), "b": _arg(args[1]) if len(args) > 1 else "Arg::C(0.0)"})
    return out


# x * ((erf(x / sqrt 2) + 1) * 0.5), operands of + and * in either order: the encoder crate's
# vectorised gelu_erf computes exactly these ops
_GELU_DIV = [("div", ("x", float(np.float32(np.sqrt(2))))), ("erf", ("t0",)), ("add", (1.0, "t1")),
             ("mul", (0.5, "t2")), ("mul", ("t3", "x"))]
_COMMUTATIVE = ("add", "mul")


def _normalised(program: list[Instr]) -> list:
    return [(i.op, tuple(sorted(i.args, key=str)) if i.op in _COMMUTATIVE else tuple(i.args)) for i in program]


def _activation(act: Activation, programs: list, floats: str) -> str:
    if act.kernel == ACT_GELU:
        return "Activation::Gelu"
    if act.kernel == ACT_FAST_GELU:
        return "Activation::FastGelu"
    if act.kernel == ACT_QUICK_GELU:
        return f"Activation::QuickGelu {{ capped: {str(floats == ort_cpus.AVX512_FLOATS).lower()} }}"
    if _normalised(act.program) == _normalised([Instr(op, list(args)) for op, args in _GELU_DIV]):
        return "Activation::GeluDiv"
    programs.append(_instructions(act.program))
    return f"Activation::Ops(ACTIVATION{len(programs) - 1})"


def _at(att: Attention, name: str) -> tuple[int, int]:
    """(projection, first output) of q, k or v."""
    split = next(s for s in att.splits() if s[0] == name)
    return (0, split[1]) if len(att.projections) == 1 else ("qkv".index(name), 0)


def _factor(factor: tuple[str, float] | None) -> str | None:
    if factor is None:
        return None
    kind, value = factor
    return f"Some(Factor::{'Mul' if kind == 'mul' else 'Div'}({f32_literal(value)}))"


def template_variables(ir: DecoderIR, manifest: dict, quant: str, crate_dir: Path | None = None) -> dict:
    entries = {e["name"]: e for e in manifest["arrays"]}
    first = ir.layers[0].attention
    programs: list = []
    layers = []
    for ly in ir.layers:
        a, m = ly.attention, ly.mlp
        layers.append({
            "attention": {"norm": _norm(entries, a.norm), "projections": [_linear(entries, p) for p in a.projections],
                          "o": _linear(entries, a.o), "scale": None if a.scale is None else f32_literal(a.scale),
                          "mask_adds": a.mask == MASK_ADD, "fill": f32_literal(a.fill),
                          "rotary": None if a.rotary is None else ("Half" if a.rotary.style == ROTATE_HALF else "Pairs"),
                          "q_factor": _factor(a.q_factor), "k_factor": _factor(a.k_factor),
                          "keys_broadcast": a.keys_broadcast, "values_broadcast": a.values_broadcast},
            "mlp": {"norm": _norm(entries, m.norm), "gate": _linear(entries, m.gate) if m.gate else None,
                    "up": _linear(entries, m.up), "down": _linear(entries, m.down),
                    "activation": _activation(m.activation, programs, ort_cpus.target(ir.ort_cpu).floats)},
            "parallel": ly.parallel, "mlp_norm_shared": m.norm.name == a.norm.name,
        })
    widths = [p.out_features for p in first.projections]
    widest = max([ir.hidden, ir.ffn, *widths])
    wte = {**_weights(entries, "wte"), "bias": None, "bias_in_c": False, "outs": ir.vocab, "k": ir.hidden}
    return {
        "crate_name": crate_name(ir.source, crate_dir), "source_name": Path(ir.source).name,
        "ort_cpu": ir.ort_cpu, "ort_floats": ORT_FLOATS[ort_cpus.target(ir.ort_cpu).floats],
        "eigen_l1d": EIGEN_L1_BYTES,  # for the shared LiteRT kernels, which a decoder never runs
        "n_ctx": ir.n_ctx, "vocab": ir.vocab, "hidden": ir.hidden, "heads": ir.heads, "kv_heads": ir.kv_heads,
        "head_dim": ir.head_dim, "ffn": ir.ffn, "any_parallel": any(ly.parallel for ly in ir.layers),
        "rotary_dims": first.rotary.dims if first.rotary is not None else ir.head_dim, "projection_widths": widths, "widest": widest,
        "q_at": _at(first, "q"), "k_at": _at(first, "k"), "v_at": _at(first, "v"),
        "weight_format": quant, "int8_dot": quant == "q8_0_int8", "row_tile": ROW_TILE,
        "model_bytes": manifest["total_size"], "align": manifest["align"], "array_count": len(entries),
        "wte": wte, "tied": ir.tied, "head": _linear(entries, ir.head, ir.weight_of(ir.head)),
        "wpe": _array(entries, "wpe"),
        "rope": {"cos": _array(entries, "rope.cos"), "sin": _array(entries, "rope.sin")}
        if ir.positions == POSITIONS_ROTARY else None,
        "layers": layers, "final_norm": _norm(entries, ir.final_norm), "programs": programs,
        "max_instructions": max([len(p) for p in programs] or [1]),
    }


def shared_kernels() -> list[str]:
    """The encoder crate's kernel files the decoder crate takes, relative to KERNELS_DIR."""
    modules = [f"{m}/{f.name}" for m in SHARED_KERNEL_MODULES
               for f in sorted(package_path(f"{KERNELS_DIR}/{m}/mod.rs").parent.glob("*.rs"))]
    return [*SHARED_KERNELS, *modules]


def render_decoder_crate(ir: DecoderIR, out_dir: str | Path, quant: str = "float32") -> Path:
    """Writes the crate, model.bin, layout.json and ir.json into out_dir, replacing it whole."""
    out = Path(out_dir)
    blob, manifest = pack.pack(packed_arrays(ir, quant))
    variables = template_variables(ir, manifest, quant, out)
    files = {f"src/kernels/{name}": package_path(f"{KERNELS_DIR}/{name}").read_bytes() for name in shared_kernels()}
    summary = {**ir.summary(), "weight_format": quant}
    return render_crate(TEMPLATE, out, variables, {**files, **compiled_files(blob, manifest, summary)})
