"""Human-readable text for a recovered EncoderIR (`porter inspect --ir`)."""

from __future__ import annotations

from porter.ir.encoder import EncoderIR, Linear


def _linear(lin: Linear) -> str:
    if lin.weight_dtype == "float32":
        scheme = "float32"
    else:
        scheme = "int8 " + ("per-channel" if lin.per_channel else "per-tensor")
        if lin.activation_quant == "ort_dynamic_uint8":
            scheme += ", activations uint8 per tensor (onnxruntime DynamicQuantizeLinear)"
        else:
            scheme += ", activations per row " + ("asymmetric" if lin.asymmetric_inputs else "symmetric")
    bias = "+bias" if lin.has_bias else "no bias"
    return f"[{lin.out_features} x {lin.in_features}] {scheme}, {bias} (op {lin.source_op})"


def format_ir(ir: EncoderIR) -> str:
    e = ir.embeddings
    lines = [
        f"{ir.source} ({ir.format})",
        f"encoder: {len(ir.layers)} layers, hidden {ir.hidden}, {ir.heads} heads, FFN {ir.ffn}, "
        f"vocab {ir.vocab}, window {ir.seq}, {ir.labels} labels",
        f"inputs: ids '{ir.ids_input}', mask '{ir.mask_input}'; output '{ir.output}'",
        f"padding: {ir.mask} "
        + ("(padded keys masked out: live rows ignore padding)" if ir.mask == "mask_input"
           else "(every key attended: padding is load-bearing)"),
        "arithmetic: " + (f"onnxruntime's CPU kernels as on {ir.ort_cpu} CPUs" if ir.ort_cpu
                          else "LiteRT's builtin kernels (the same on every CPU)"),
        f"embeddings: {e.table_kind} table [{e.vocab} x {e.hidden}] + {e.bias_terms} "
        f"position/type term(s); LayerNorm eps {e.ln.eps:g} ({e.ln.form}"
        f"{', affine folded into the next layers' if e.ln.affine_folded else ''})",
    ]
    for i, ly in enumerate(ir.layers):
        a = ly.attn
        lines.append(f"layer {i}:")
        lines.append(f"  attention: {a.heads} heads x {a.head_dim}, scale {a.scale:.6g} on "
                     f"{a.scale_on}, softmax beta {a.softmax_beta:g}")
        for name in ("q", "k", "v", "o"):
            lines.append(f"    {name}: {_linear(getattr(a, name))}")
        lines.append(f"  attn LayerNorm eps {ly.attn_ln.eps:g} ({ly.attn_ln.form}"
                     f"{', affine folded' if ly.attn_ln.affine_folded else ''})")
        lines.append(f"  ffn: in {_linear(ly.ffn_in)}; GELU {ly.gelu}; out {_linear(ly.ffn_out)}")
        lines.append(f"  ffn LayerNorm eps {ly.ffn_ln.eps:g} ({ly.ffn_ln.form}"
                     f"{', affine folded' if ly.ffn_ln.affine_folded else ''})")
    lines.append(f"head: {_linear(ir.head)}")
    return "\n".join(lines)
