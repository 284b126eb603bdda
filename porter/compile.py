"""`porter compile`: graph file -> recovered IR -> a Rust forward-pass crate with model.bin,
layout.json and ir.json beside its sources (porter.codegen)."""

from __future__ import annotations

from pathlib import Path

from porter.codegen import render_forward_crate
from porter.frontends import load_graph
from porter.ir import EncoderIR
from porter.recover import recover_encoder


def recover(model_path: str | Path) -> EncoderIR:
    return recover_encoder(load_graph(model_path))


def compile_model(model_path: str | Path, out_dir: str | Path) -> EncoderIR:
    ir = recover(model_path)
    render_forward_crate(ir, out_dir)
    return ir
