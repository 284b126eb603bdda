"""Human-readable text for a recovered encoder program (`porter inspect --ir`)."""

from __future__ import annotations

from porter.ir.encoder import (ActivationQuant, Attention, ElementwiseStep, Embed, EncoderProgram, GeluStep,
                               L2NormalizeStep, LayerNorm, LinearStep, MaskMode, ReduceStep, SliceStep,
                               WeightFormat)
from porter.ir.tensor import TensorStep


def _linear(step: LinearStep) -> str:
    lin = step.linear
    if lin.weights in (WeightFormat.FLOAT32, WeightFormat.FLOAT16):
        scheme = lin.weights.value
    else:
        scheme = {WeightFormat.INT8_PER_CHANNEL: "int8 per-channel", WeightFormat.INT8_PER_TENSOR: "int8 per-tensor",
                  WeightFormat.INT4_PER_CHANNEL: "int4 per-channel"}[lin.weights]
        scheme += {ActivationQuant.ORT_DYNAMIC_UINT8: ", activations uint8 per tensor (onnxruntime)",
                   ActivationQuant.HYBRID_ASYMMETRIC: ", activations per row asymmetric",
                   ActivationQuant.HYBRID_SYMMETRIC: ", activations per row symmetric",
                   ActivationQuant.FLOAT: ", widened to float32 (weight-only)"}.get(lin.activation_quant, "")
    bias = "+bias" if lin.has_bias else "no bias"
    return f"linear [{lin.out_features} x {lin.in_features}] {scheme}, {bias}"


def _attention(a: Attention) -> str:
    scale = [f"{name} x {value:.6g}" for name, value in (("Q", a.q_scale), ("K", a.k_scale),
                                                          ("scores", a.score_scale)) if value is not None]
    if a.score_divisor is not None:
        scale.append(f"scores / {a.score_divisor:.6g}")
    mask = {MaskMode.NONE: "no mask", MaskMode.ADD: f"mask adds {a.drop_value:g} to padded keys",
            MaskMode.REPLACE: f"mask sets padded keys to {a.drop_value:g}"}[a.mask]
    constant, computed = len(a.arrays()), len(a.computed_terms)
    terms = "".join(f", + {n} {kind} score term{'s' if n > 1 else ''}"
                    for n, kind in ((constant, "constant"), (computed, "computed")) if n)
    if a.query_mask:
        mask += " (every key, for a padded query)"
    return f"attention {a.heads} heads x {a.head_dim}, {', '.join(scale) or 'unscaled'}{terms}, {mask}"


def _step(step) -> str:
    if isinstance(step, Embed):
        terms = " + ".join(f"token types [{t.lookup.rows} x {t.lookup.width}]" if t.kind == "types" else t.kind
                           for t in step.terms)
        return f"embed {step.word.kind.value} table [{step.word.rows} x {step.word.width}]" + (f" + {terms}" if terms else "")
    if isinstance(step, LinearStep):
        return _linear(step)
    if isinstance(step, LayerNorm):
        affine = "+".join(p for p, has in (("gamma", step.has_gamma), ("beta", step.has_beta)) if has) or "no affine"
        folded = ", pre-affine rows read by the next layers" if len(step.outputs) == 2 else ""
        return f"layer norm {step.form.value}, eps {step.eps:g}, {affine}{folded}"
    if isinstance(step, Attention):
        return _attention(step)
    if isinstance(step, GeluStep):
        return f"gelu ({step.kind.value})"
    if isinstance(step, ElementwiseStep):
        return f"{step.op.value} {list(step.shape)}"
    if isinstance(step, ReduceStep):
        return f"reduce {step.op.value} over axes {list(step.axes)} of {list(step.operand.shape)}"
    if isinstance(step, L2NormalizeStep):
        return f"l2 normalisation of {list(step.operand.shape)}"
    if isinstance(step, SliceStep):
        return f"slice {[list(s) for s in step.slices]} of {list(step.operand.shape)}"
    if isinstance(step, TensorStep):
        return f"{step.op.value} -> {step.dtype} {list(step.shape)}"
    return type(step).__name__


def format_ir(ir: EncoderProgram) -> str:
    attentions = ir.attentions()
    lines = [
        f"{ir.source} ({ir.format}, {ir.reference.value} arithmetic)",
        f"encoder program: {len(ir.steps)} steps, {len(attentions)} attention blocks, vocab {ir.vocab}, "
        f"window {ir.seq}, output '{ir.output}' "
        + (f"{ir.width} values per token" if ir.output_tokens else f"{ir.width} values per window (pooled)"),
        f"inputs: ids '{ir.ids_input}', mask '{ir.mask_input}'",
        "padding: " + ("inert, live rows computed (padded keys masked out)" if ir.padding_is_inert
                       else "every row computed"),
        "arithmetic: " + (f"onnxruntime's CPU kernels as on {ir.ort_cpu} CPUs" if ir.ort_cpu
                          else f"LiteRT's builtin kernels (float products blocked for a {ir.eigen_l1d // 1024} KiB "
                               "L1 data cache)"),
    ]
    for step in ir.steps:
        ops = step.source_ops
        span = f"op {ops[0]}" if len(ops) == 1 else f"ops {ops[0]}..{ops[-1]}" if ops else "no ops"
        lines.append(f"  {step.name:12s} {_step(step)}  ({span}; {', '.join(step.inputs)} -> "
                     f"{', '.join(step.outputs)})")
    return "\n".join(lines)
