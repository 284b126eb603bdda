"""Codegen: an EncoderProgram -> the Rust forward crate (templates/rust_forward) + model.bin.

The crate is plain cargo: a library (`encoder`, src/lib.rs) that the eval command (main.rs) and
the redaction service call. Its sources are plain Rust but for two generated files: `model.rs`
holds every shape as a const and builds the program's steps from model.bin (each array a slice
into it, at the offset layout.json gives), and `tuning.rs` holds the kernel tile sizes
(porter.codegen.tuning). The forward pass (`forward.rs`) runs the steps; `checks/` is a second
crate that compares every SIMD kernel with its scalar reference (exhaustively over all 2^32 f32
inputs where a kernel takes one float, and in every candidate tile of `porter build --tune`).

The .cargo/config.toml is not written here: it depends on the toolchain of the machine that
builds, so `build_forward_crate` (`porter build`) writes it just before building.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np

from porter import TEMPLATES_DIR
from porter.codegen import pack
from porter.codegen.render import render_crate
from porter.codegen.tuning import Tuning, candidate_variables, tuning_variables
from porter.errors import PorterError
from porter.ir.tensor import TensorStep
from porter.ir.encoder import (INPUT_MASK, ActivationQuant, Attention, Elementwise, ElementwiseStep, Embed,
                               EncoderProgram, Gelu, GeluStep, IntegerDot, KeyRule, L2NormalizeStep, LayerNorm, LinearStep, Lookup,
                               MaskMode, Operand, Reduce, ReduceStep, Reference, Rows, SliceStep,
                               WeightFormat)
from porter.codegen.literals import f32_literal, pad4, strides_for
from porter.codegen.integer import ORT_FLOATS, integer_variables, is_integer_program
from porter.codegen.tensor import tensor_variables, words
from porter.toolchain.cargo import build_crate, cargo_config_toml, shared_target_dir
from porter.reference.ort import cpu as ort_cpus
from porter.reference.litert.floats import EIGEN_L1_BYTES
from porter.toolchain.discover import CrateKind, Toolchain

TEMPLATE = TEMPLATES_DIR / "rust_forward"
CHECKS_DIR = "checks"


def crate_name(source: str, crate_dir: str | Path | None = None) -> str:
    """porter-<model stem>, plus a hash of the crate's directory when given: every crate builds
    in one shared cargo target directory, where two crates of the same package name would hand
    each other's artifact out (cargo re-uses the uplifted binary of a fresh build)."""
    stem = Path(source).name.split(".")[0]
    name = "porter-" + (re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "model")
    if crate_dir is None:
        return name
    return f"{name}-{hashlib.sha256(str(Path(crate_dir).resolve()).encode()).hexdigest()[:8]}"


def _ort_floats(program: EncoderProgram) -> str:
    """AttentionParams.onnxruntime: the CPU's float kernels for onnxruntime's arithmetic."""
    if program.reference != Reference.ONNXRUNTIME_CPU:
        return "None"
    return f"Some(crate::kernels::ort::float::OrtFloats::{ORT_FLOATS[ort_cpus.target(program.ort_cpu).floats]})"


def arithmetic(program: EncoderProgram) -> str:
    """Whose arithmetic a crate reproduces, for its generated sources' header."""
    if program.ort_cpu is None:
        return (f"LiteRT's builtin kernels, float products blocked as Eigen blocks them for a "
                f"{program.eigen_l1d // 1024} KiB L1 data cache")
    return f"onnxruntime 1.32's CPU kernels as on {ort_cpus.target(program.ort_cpu).describe()}"


ROWS = {Rows.ONE: "One", Rows.LIVE: "Live", Rows.KEYS: "Keys", Rows.ALL: "All"}
TABLES = {"int8_rows": "Int8Rows", "int8_tensor": "Int8Tensor", "uint8_tensor": "Uint8Tensor", "float16": "Float16",
          "float32": "Float32"}
FORMS = {"shift": "Shift", "centred": "Centred", "keras": "Keras", "onnx": "Onnx", "onnx_skip": "OnnxSkip",
         "ort_embed": "OrtEmbed"}
GELUS = {Gelu.LITERT: "Litert", Gelu.ORT_ERF_MUL: "OrtErfMul", Gelu.LITERT_TANH: "LitertTanh",
         Gelu.ORT_FAST_GELU: "OrtFastGelu"}
REDUCES = {Reduce.SUM: "Sum", Reduce.MEAN: "Mean", Reduce.MAX: "Max", Reduce.L2: "L2"}
# Elementwise ops with a Rust kernel, per reference (the transcendental ones are each runtime's own)
BINARY = {Elementwise.ADD: "Add", Elementwise.SUB: "Sub", Elementwise.MUL: "Mul", Elementwise.DIV: "Div",
          Elementwise.MAXIMUM: "Maximum", Elementwise.MINIMUM: "Minimum",
          Elementwise.SQUARED_DIFFERENCE: "SquaredDifference"}
UNARY = {Elementwise.NEG: "Neg", Elementwise.ABS: "Abs", Elementwise.SQRT: "Sqrt", Elementwise.RSQRT: "Rsqrt",
         Elementwise.RELU: "Relu", Elementwise.ROUND_HALF: "RoundHalf"}
TRANSCENDENTAL = {(Elementwise.EXP, Reference.LITERT_BUILTIN): "ExpLitert",
                  (Elementwise.TANH, Reference.LITERT_BUILTIN): "TanhLitert",
                  (Elementwise.SIGMOID, Reference.LITERT_BUILTIN): "LogisticLitert",
                  (Elementwise.ERF, Reference.ONNXRUNTIME_CPU): "ErfOrt",
                  (Elementwise.TANH, Reference.ONNXRUNTIME_CPU): "TanhOrt"}


class _Arrays:
    def __init__(self, manifest: dict):
        self.entries = {e["name"]: e for e in manifest["arrays"]}

    def __call__(self, name: str | None) -> dict | None:
        if name is None:
            return None
        e = self.entries[name]
        return {"offset": e["offset"], "len": int(np.prod(e["shape"], dtype=np.int64)), "dtype": e["dtype"],
                "bytes": e["size"]}


def _token_axis(shape, buffer) -> int:
    if not buffer.tokens:
        return 4
    padded = pad4(shape)
    return next((a for a, d in enumerate(padded) if d != 1), 4)


def assign_slots(program: EncoderProgram) -> dict[str, int]:
    """Buffer -> slot: buffers whose lifetimes do not overlap share one allocation (a forward pass
    of a MiniLM-sized model has about ten live at once, against seventy buffers). A step's outputs
    never share a slot with its inputs; the mask and the output keep slots of their own."""
    last_read: dict[str, int] = {}
    for i, step in enumerate(program.steps):
        for name in step.inputs:
            last_read[name] = i
    pinned = {INPUT_MASK: 0, program.output_buffer: 1}
    slot_of, holder = dict(pinned), {}
    free: list[int] = []
    for i, step in enumerate(program.steps):
        in_place = _in_place_input(program, step, i, last_read, pinned)
        if in_place is not None:  # GELU or an add over a buffer nothing reads later: its slot
            slot_of[step.outputs[0]] = slot_of[in_place]
            holder[slot_of[in_place]] = step.outputs[0]
        for name in step.outputs:
            if name not in slot_of:
                slot_of[name] = free.pop() if free else len(pinned) + len(holder)
                holder[slot_of[name]] = name
        for name in step.inputs + step.outputs:  # released once nothing after this step reads them
            slot = slot_of.get(name)
            if name not in pinned and holder.get(slot) == name and last_read.get(name, -1) <= i:
                free.append(slot)
                holder[slot] = None
    return slot_of


def _in_place_input(program: EncoderProgram, step, i: int, last_read: dict, pinned: dict) -> str | None:
    """The input a GELU or an elementwise step may overwrite with its output: the same size, first
    operand, read by nothing after this step."""
    if not isinstance(step, (GeluStep, ElementwiseStep)) or step.outputs[0] in pinned:
        return None
    first = step.inputs[0] if isinstance(step, GeluStep) else step.operands[0].buffer
    if first is None or first in pinned or last_read.get(first) != i or first in step.inputs[1:]:
        return None
    a, out = program.buffers[first], program.buffers[step.outputs[0]]
    if (a.rows, a.cols, a.tokens) != (out.rows, out.cols, out.tokens):
        return None
    if isinstance(step, ElementwiseStep) and tuple(step.operands[0].shape) != tuple(step.shape):
        return None
    return first


class _Variables:
    def __init__(self, program: EncoderProgram, manifest: dict):
        self.p = program
        self.array = _Arrays(manifest)
        self.index = assign_slots(program)

    def rows(self, buffer: str) -> str:
        return ROWS[self.p.buffers[buffer].extent]

    def operand(self, o: Operand, out_shape) -> dict:
        source = {"buffer": self.index[o.buffer]} if o.buffer else {"const": self.array(o.array)}
        return {**source, "strides": strides_for(o.shape, out_shape)}

    def lookup(self, lookup: Lookup) -> dict:
        name = lookup.name
        return {"kind": TABLES[lookup.kind.value], "table": self.array(f"{name}.table"),
                "scale": self.array(f"{name}.scale") if lookup.kind.value not in ("float32", "float16") else None,
                "zero_point": self.array(f"{name}.zero_point") if lookup.kind.value == "uint8_tensor" else None,
                "width": lookup.width}

    def step(self, step) -> dict:
        if isinstance(step, TensorStep):
            return tensor_variables(step, self.index, self.array, self.p.weights, self.p.reference)
        out = step.outputs[0]
        common = {"name": step.name, "out": self.index[out], "rows": self.rows(out)}
        if isinstance(step, Embed):
            terms = [{"kind": "rows", "array": self.array(t.array),
                      "row_stride": step.word.width if self.p.weights[t.array].ndim == 2 else 0}
                     if t.kind == "rows" else
                     {"kind": "positions", "lookup": self.lookup(t.lookup), "pad_id": t.pad_id}
                     if t.kind == "positions" else
                     {"kind": "types", "lookup": self.lookup(t.lookup)}
                     for t in step.terms]
            return {**common, "kind": "embed", "word": self.lookup(step.word), "terms": terms}
        if isinstance(step, LinearStep):
            x = self.p.buffers[step.inputs[0]]
            return {**common, "kind": "linear", "x": self.index[step.inputs[0]], "x_rows": self.rows(step.inputs[0]),
                    "tensor_rows": x.rows * x.cols // step.linear.in_features, "linear": self.linear(step)}
        if isinstance(step, LayerNorm):
            return {**common, "kind": "layer_norm", "x": self.index[step.inputs[0]],
                    "normalised": self.index[step.outputs[1]] if len(step.outputs) == 2 else None,
                    "gamma": self.array(f"{step.name}.gamma") if step.has_gamma else None,
                    "beta": self.array(f"{step.name}.beta") if step.has_beta else None,
                    "eps": f32_literal(step.eps), "form": FORMS[step.form.value], "width": step.width}
        if isinstance(step, Attention):
            return {**common, "kind": "attention", **self.attention(step)}
        if isinstance(step, GeluStep):
            if step.kind not in GELUS:
                raise PorterError(f"{step.name}: no Rust kernel for GELU {step.kind.value!r} yet")
            x = self.p.buffers[step.inputs[0]]
            return {**common, "kind": "gelu", "x": self.index[step.inputs[0]], "gelu": GELUS[step.kind],
                    "row": x.cols if x.tokens else 0, "len": x.rows * x.cols}
        if isinstance(step, ElementwiseStep):
            return {**common, "kind": "elementwise", **self.elementwise(step)}
        if isinstance(step, ReduceStep):
            shape, rank = pad4(step.operand.shape), len(step.operand.shape)
            if rank > 4:
                raise PorterError(f"{step.name}: a reduction over a rank-{rank} tensor")
            axes = [a in set(step.axes) for a in range(rank - 4, rank)]
            last_only = [a for a in range(4) if axes[a] and shape[a] != 1] == [3]
            x_buffer = self.p.buffers.get(step.operand.buffer) if step.operand.buffer else None
            token_axis = _token_axis(step.operand.shape, x_buffer) if x_buffer else 4
            return {**common, "kind": "reduce", "op": REDUCES[step.op],
                    "x": self.operand(step.operand, step.operand.shape), "shape": shape, "axes": axes,
                    "order": self.reduce_order(step, last_only),
                    "token_axis": token_axis if token_axis < 4 and not axes[token_axis] else 4}
        if isinstance(step, L2NormalizeStep):
            if step.operand.buffer is None:
                raise PorterError(f"{step.name}: an L2 normalisation of a constant")
            x = self.p.buffers[step.operand.buffer]
            return {**common, "kind": "l2_normalize", "x": self.index[step.operand.buffer],
                    "cols": x.cols if x.tokens else x.rows * x.cols, "width": step.operand.shape[-1]}
        if isinstance(step, SliceStep):
            rank = len(step.operand.shape)
            if rank > 4:
                raise PorterError(f"{step.name}: a slice of a rank-{rank} tensor")
            ranges = [[0, 1, d] for d in pad4(step.operand.shape)]
            for axis, start, stop, stride in step.slices:
                count = len(range(start, stop, stride))
                ranges[axis + 4 - rank] = [start, stride, count]
            if any(r[1] < 0 for r in ranges):
                raise PorterError(f"{step.name}: a slice with a negative step")
            return {**common, "kind": "slice", "x": self.operand(step.operand, step.operand.shape),
                    "shape": pad4(step.operand.shape), "ranges": ranges}
        raise PorterError(f"{step.name}: no Rust code for {type(step).__name__}")

    def reduce_order(self, step: ReduceStep, last_only: bool) -> str:
        if self.p.reference == Reference.LITERT_BUILTIN:
            return "Litert"
        # onnxruntime sums a last axis in Eigen's packet order (rows whose length is a multiple of
        # 4, which recovery checks)
        return "EigenRows" if last_only and step.op in (Reduce.SUM, Reduce.MEAN) else "InOrder"

    def linear(self, step: LinearStep) -> dict:
        lin = step.linear
        ort = self.p.reference == Reference.ONNXRUNTIME_CPU
        if lin.weights == WeightFormat.FLOAT32:
            kind = "float_ort" if ort else "float32"
        elif lin.weights == WeightFormat.INT4_PER_CHANNEL and lin.activation_quant == ActivationQuant.FLOAT:
            kind = "float_from_int4"  # weight-only int4
        elif lin.weights == WeightFormat.INT4_PER_CHANNEL and not ort:
            kind = "int4"
        elif lin.weights == WeightFormat.FLOAT16:  # weight-only float16
            kind = "float_from_f16"
        elif lin.activation_quant == ActivationQuant.FLOAT:  # weight-only int8
            kind = "float_from_int8"
        elif lin.activation_quant == ActivationQuant.ORT_DYNAMIC_UINT8 and ort:
            kind = "ort_dynamic"
        elif lin.activation_quant in (ActivationQuant.HYBRID_SYMMETRIC, ActivationQuant.HYBRID_ASYMMETRIC) and not ort:
            kind = "int8"
        else:
            raise PorterError(f"{step.name}: no Rust kernel for {lin.activation_quant.value} activations "
                              f"under {self.p.reference.value} arithmetic")
        return {"kind": kind, "weight": self.array(f"{lin.name}.weight"),
                "scale": self.array(f"{lin.name}.scale") if lin.weights.scaled else None,
                "bias": self.array(f"{lin.name}.bias") if lin.has_bias else None,
                "outs": lin.out_features, "k": lin.in_features,
                "asymmetric": lin.activation_quant == ActivationQuant.HYBRID_ASYMMETRIC, "onnxruntime": ort,
                "saturating": lin.integer_dot == IntegerDot.INT16_PAIRS_SATURATED}

    def attention(self, a: Attention) -> dict:
        if a.q_scale is not None and a.score_scale is not None:
            raise PorterError(f"{a.name}: attention scaling both Q and the scores has no Rust kernel yet")
        if a.score_divisor is not None:
            raise PorterError(f"{a.name}: attention that divides its scores has no Rust kernel yet")
        if a.mask == MaskMode.ADD and a.keep_value != 0:
            raise PorterError(f"{a.name}: a mask that adds to kept keys has no Rust kernel yet")
        scale = a.q_scale if a.q_scale is not None else a.score_scale if a.score_scale is not None else 1.0
        return {"q": self.index[a.inputs[0]], "k": self.index[a.inputs[1]], "v": self.index[a.inputs[2]],
                "heads": a.heads, "head_dim": a.head_dim, "scale": f32_literal(scale),
                "scale_on_query": a.q_scale is not None, "softmax_beta": f32_literal(a.softmax_beta),
                "mask_value": f32_literal(a.drop_value if a.mask != MaskMode.NONE else 0.0),
                "masked": a.mask != MaskMode.NONE, "mask_replaces": a.mask == MaskMode.REPLACE,
                "key_scale": f32_literal(a.k_scale if a.k_scale is not None else 1.0),
                "terms": [{"const": self.array(t.array)} if t.array else {"buffer": self.index[t.buffer]} for t in a.terms],
                "query_mask": a.query_mask, "onnxruntime": _ort_floats(self.p), "softmax_body": a.softmax_body}

    def elementwise(self, step: ElementwiseStep) -> dict:
        op = step.op
        rust = BINARY.get(op) or UNARY.get(op) or TRANSCENDENTAL.get((op, self.p.reference))
        if rust is None:
            raise PorterError(f"{step.name}: no Rust kernel for {op.value} under {self.p.reference.value} "
                              "arithmetic yet")
        a, *b = step.operands
        return {"op": rust, "a": self.operand(a, step.shape), "b": self.operand(b[0], step.shape) if b else None,
                "shape": pad4(step.shape), "token_axis": _token_axis(step.shape, self.p.buffers[step.outputs[0]])}


def gemm_depths(program: EncoderProgram) -> list[int]:
    """The two most common Linear depths: the int8 GEMM is compiled for each as a constant."""
    counts = Counter(lin.in_features for lin in program.linears())
    common = [k for k, _ in counts.most_common(2)] or [1]
    return (common + common)[:2]


def template_variables(program: EncoderProgram, manifest: dict, tuning: Tuning = Tuning(),
                       crate_dir: Path | None = None) -> dict:
    v = _Variables(program, manifest)
    integer = is_integer_program(program)  # its steps are rendered by porter.codegen.integer
    steps = [] if integer else [v.step(s) for s in program.steps]
    widths = [b.cols for b in program.buffers.values()] + [lin.in_features for lin in program.linears()]
    head_dims = [a.head_dim for a in program.attentions()] or [1]
    slots = [{"len": 0, "row": 0, "row_all": 0} for _ in range(max(v.index.values()) + 1)]
    for name, b in program.buffers.items():
        slot = slots[v.index[name]]
        every_row = b.tokens and b.extent == Rows.ALL  # computed over the whole window even when inert
        width = b.cols * words(b.dtype)  # an int64 value takes two 32-bit words
        slot["row_all" if every_row else "row"] = max(slot["row_all" if every_row else "row"], width if b.tokens else 0)
        slot["len"] = max(slot["len"], 0 if b.tokens else b.rows * width)
    return {
        "crate_name": crate_name(program.source, crate_dir),
        "source_name": Path(program.source).name,
        "arithmetic": arithmetic(program),
        "eigen_l1d": program.eigen_l1d or EIGEN_L1_BYTES,
        "seq": program.seq, "vocab": program.vocab, "width": program.width,
        "type_vocab": program.type_vocab,
        "output_tokens": program.output_tokens,
        "output_buffer": v.index[program.output_buffer],
        "mask_buffer": v.index[INPUT_MASK],
        "slots": slots,
        "widest": max(widths), "max_head_dim": max(head_dims),
        "uses_mask": any(a.mask != MaskMode.NONE for a in program.attentions()),
        "keys_by_leading_count": _keys_by_leading_count(program),
        "padding_is_inert": program.padding_is_inert,
        "gemm_depths": gemm_depths(program),
        # relaxed_madd for onnxruntime's products (Cargo feature fused-madd); never beside
        # LiteRT's kernels, whose standard SIMD code it would change (kernels/ort/float/)
        "fused_madd": program.reference == Reference.ONNXRUNTIME_CPU,
        "model_bytes": manifest["total_size"], "align": manifest["align"],
        "array_count": len(manifest["arrays"]),
        "steps": steps,
        **(integer_variables(program, manifest) if integer else {"integer": False}),
        **tuning_variables(tuning),
        **candidate_variables(),
    }



def _keys_by_leading_count(program: EncoderProgram) -> bool:
    """Whether the masked attentions keep the first count(mask == 1) keys (KeyRule.LEADING_COUNT)
    rather than the keys the mask keeps: one rule for the whole module, which computes the kept
    keys once per window."""
    rules = {a.key_rule for a in program.attentions() if a.mask != MaskMode.NONE}
    if len(rules) > 1:
        raise PorterError("attention blocks that keep keys by different rules (the mask's own, and "
                          "onnxruntime's leading count) have no Rust kernel yet")
    return rules == {KeyRule.LEADING_COUNT}

def render_forward_crate(program: EncoderProgram, out_dir: str | Path, tuning: Tuning = Tuning()) -> Path:
    """Writes the crate, model.bin, layout.json and ir.json into out_dir, replacing it whole."""
    out = Path(out_dir)
    blob, manifest = pack.pack(program)
    variables = template_variables(program, manifest, tuning, out)
    return render_crate(TEMPLATE, out, variables, compiled_files(blob, manifest, program.summary()))



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
