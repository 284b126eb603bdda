"""Decoder codegen: a DecoderIR -> a Rust generation crate (templates/rust_decoder) + model.bin.

model.bin holds the arrays of `DecoderIR.array_order()`; with Q8_0 every quantised array (the
Linear weights and the tied token table, porter.reference.q8_0.quantized_arrays) becomes two: its int8
values `<name>.q` and its per-block scales `<name>.scale`; for q8_0_int8 both are stored in
tiles of ROW_TILE rows (`tile_q8_0_rows`), the layout the crate's integer kernel reads. The
crate reuses the encoder crate's onnxruntime kernels (templates/rust_forward/src/kernels/
ort_float.rs and the float weight view it needs), copied in beside the decoder's own sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter import TEMPLATES_DIR, package_path

from porter.codegen import pack
from porter.codegen.render import render_crate
from porter.codegen.encoder import ORT_FLOATS, compiled_files, crate_name, f32_literal
from porter.ir.decoder import DecoderIR
from porter.reference import ort_cpu as ort_cpus
from porter.reference.q8_0 import Q8_0_BLOCK, quantize_q8_0, quantized_arrays
from porter.errors import PorterError

TEMPLATE = TEMPLATES_DIR / "rust_decoder"
KERNELS_DIR = "templates/rust_forward/src/kernels"  # in porter's package data
SHARED_KERNELS = ("linear_f32.rs", "ort_float.rs")
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


def _array(entries: dict, name: str) -> dict:
    e = entries[name]
    return {"offset": e["offset"], "len": int(np.prod(e["shape"], dtype=np.int64))}


def _weights(entries: dict, name: str) -> dict:
    if f"{name}.q" in entries:
        return {"q8_0": True, "q": _array(entries, f"{name}.q"), "scale": _array(entries, f"{name}.scale")}
    return {"q8_0": False, "w": _array(entries, name)}


def _linear(entries: dict, lin) -> dict:
    return {**_weights(entries, f"{lin.name}.weight"), "bias": _array(entries, f"{lin.name}.bias"),
            "outs": lin.out_features, "k": lin.in_features}


def _layer_norm(entries: dict, ln) -> dict:
    return {"gamma": _array(entries, f"{ln.name}.gamma"), "beta": _array(entries, f"{ln.name}.beta"),
            "eps": f32_literal(ln.eps)}


def template_variables(ir: DecoderIR, manifest: dict, quant: str, crate_dir: Path | None = None) -> dict:
    entries = {e["name"]: e for e in manifest["arrays"]}
    if ir.heads * ir.head_dim != ir.hidden:
        raise PorterError(f"{ir.heads} heads of {ir.head_dim} do not make hidden {ir.hidden}")
    return {
        "crate_name": crate_name(ir.source, crate_dir), "source_name": Path(ir.source).name,
        "ort_cpu": ir.ort_cpu, "ort_floats": ORT_FLOATS[ort_cpus.target(ir.ort_cpu).floats],
        "n_ctx": ir.n_ctx, "vocab": ir.vocab, "hidden": ir.hidden, "heads": ir.heads,
        "head_dim": ir.head_dim, "ffn": ir.ffn, "scale": f32_literal(ir.scale), "weight_format": quant,
        "int8_dot": quant == "q8_0_int8", "row_tile": ROW_TILE,
        "model_bytes": manifest["total_size"], "align": manifest["align"], "array_count": len(entries),
        "head": {**_weights(entries, "wte"), "bias": None, "outs": ir.vocab, "k": ir.hidden},
        "wpe": _array(entries, "wpe"),
        "layers": [{"ln1": _layer_norm(entries, ly.ln1), "qkv": _linear(entries, ly.qkv),
                    "o": _linear(entries, ly.o), "ln2": _layer_norm(entries, ly.ln2),
                    "fc": _linear(entries, ly.fc), "fc_out": _linear(entries, ly.fc_out)}
                   for ly in ir.layers],
        "final_ln": _layer_norm(entries, ir.final_ln),
    }


def render_decoder_crate(ir: DecoderIR, out_dir: str | Path, quant: str = "float32") -> Path:
    """Writes the crate, model.bin, layout.json and ir.json into out_dir, replacing it whole."""
    out = Path(out_dir)
    blob, manifest = pack.pack(packed_arrays(ir, quant))
    variables = template_variables(ir, manifest, quant, out)
    files = {f"src/kernels/{name}": package_path(f"{KERNELS_DIR}/{name}").read_bytes() for name in SHARED_KERNELS}
    summary = {**ir.summary(), "weight_format": quant}
    return render_crate(TEMPLATE, out, variables, {**files, **compiled_files(blob, manifest, summary)})
