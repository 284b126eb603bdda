"""`porter compile`: graph file -> recovered IR -> a Rust crate with model.bin, layout.json and
ir.json beside its sources: the encoder forward pass (porter.codegen), or for a GPT-style decoder
with a KV cache the generation crate (porter.codegen.decoder)."""

from __future__ import annotations

from pathlib import Path

from porter.codegen.encoder import render_forward_crate
from porter.ir.decoder import DecoderIR
from porter.recover.decoder import is_decoder_graph, recover_decoder
from porter.codegen.decoder import render_decoder_crate
from porter.errors import PorterError
from porter.frontends import load_graph
from porter.ir.encoder import EncoderProgram
from porter.reference.ort.cpu import AUTO
from porter.recover.encoder import recover_encoder


def recover(model_path: str | Path, ort_cpu: str = AUTO, l1d: str = AUTO, window: int | None = None) -> EncoderProgram:
    return recover_encoder(load_graph(model_path), ort_cpu, l1d, window)


def compile_model(model_path: str | Path, out_dir: str | Path, quant: str | None = None,
                  ort_cpu: str = AUTO, context: int | None = None, l1d: str = AUTO,
                  window: int | None = None) -> EncoderProgram | DecoderIR:
    """ort_cpu: for ONNX graphs, the CPU whose onnxruntime arithmetic the crate reproduces
    (porter.reference.ort.cpu; auto: this machine's). l1d: for TFLite graphs, the L1 data cache
    size whose Eigen blocking LiteRT's float products follow (auto: this machine's). context: a
    decoder's longest prompt + generation (porter.recover.decoder). window: an encoder's tokens per
    window where its graph leaves the sequence dimension symbolic (None: the position table's rows)."""
    g = load_graph(model_path)
    if is_decoder_graph(g):
        if window is not None:
            raise PorterError(f"--window {window}: a decoder's length is its --context")
        if l1d != AUTO:
            raise PorterError(f"--l1d {l1d}: the L1 cache size sets LiteRT's float blocking; a decoder's CPU is --ort-cpu")
        ir = recover_decoder(g, str(model_path), ort_cpu, context=context)
        render_decoder_crate(ir, out_dir, quant or "float32")
        return ir
    if context is not None:
        raise PorterError("--context: encoders run the window their graph was exported with")
    if quant not in (None, "hybrid"):
        raise PorterError(f"--quant {quant}: encoders keep the quantisation their graph was exported with")
    ir = recover_encoder(g, ort_cpu, l1d, window)
    render_forward_crate(ir, out_dir)
    return ir
