"""`porter compile`: graph file -> recovered IR -> model.bin, layout.json and ir.json."""

from __future__ import annotations

import json
from pathlib import Path

from porter import pack
from porter.frontends import load_graph
from porter.ir import EncoderIR
from porter.recover import recover_encoder


def recover(model_path: str | Path) -> EncoderIR:
    return recover_encoder(load_graph(model_path))


def compile_model(model_path: str | Path, out_dir: str | Path) -> EncoderIR:
    out = Path(out_dir)
    ir = recover(model_path)
    pack.write_model(ir, out)
    summary = json.dumps(ir.summary(), indent=1, default=float) + "\n"
    pack.write_atomic(out / "ir.json", summary.encode())
    return ir
