"""Finding a built module and what it was compiled from: the compiled directory's ir.json names
the model (its path as `porter compile` was given it), its window or context, and its labels or
vocabulary. `porter verify`, `porter check` and `porter bench` start here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from porter.check.golden import sha256_of
from porter.errors import PorterError

IR_NAME = "ir.json"
IR_SEARCH_DEPTH = 4  # how many directories above a .wasm to look for the compiled ir.json
ENCODER, DECODER = "encoder", "decoder"


@dataclass(frozen=True)
class Module:
    """A built eval (encoder) or generation (decoder) module and what it was compiled from."""

    wasm: Path
    compiled_dir: Path
    kind: str  # ENCODER or DECODER
    seq: int  # the window; a decoder's context
    labels: int  # an encoder's labels; a decoder's vocabulary
    model: Path
    model_sha256: str
    ort_cpu: str | None = None  # ONNX graphs: the CPU whose onnxruntime arithmetic it reproduces
    eigen_l1d: int | None = None  # TFLite graphs: the L1 size whose Eigen blocking its float products follow
    float_linears: tuple = ()  # (depth, outputs) of its float32 Linear layers
    type_vocab: int = 1  # an encoder's token-type table rows (1: the graph has no token-type input)

    def facts(self) -> dict:
        """What a report says about the module."""
        return {"wasm": str(self.wasm), "wasm_sha256": sha256_of(self.wasm),
                "compiled_dir": str(self.compiled_dir), "model": str(self.model),
                "model_sha256": self.model_sha256, "ort_cpu": self.ort_cpu, "eigen_l1d": self.eigen_l1d}


def locate_module(target: Path, model: Path | None = None) -> Module:
    """target is the compiled directory (ir.json and the built .wasm) or the .wasm itself;
    model, when given, is the file it was compiled from (else ir.json's path is used)."""
    target = Path(target)
    if target.is_dir():
        compiled_dir, wasm_path = target, _single_wasm_in(target)
    elif target.is_file():
        wasm_path, compiled_dir = target, _compiled_dir_above(target)
    else:
        raise PorterError(f"{target}: no such eval module or compiled directory")
    try:
        ir = json.loads((compiled_dir / IR_NAME).read_text())
        if ir.get("kind") == DECODER:  # a generation module: its context and vocabulary
            kind, seq, labels, source = DECODER, int(ir["n_ctx"]), int(ir["vocab"]), ir["source"]
        else:
            kind, seq, labels, source = ENCODER, int(ir["seq"]), int(ir["labels"]), ir["source"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PorterError(f"{compiled_dir / IR_NAME}: not a porter compile output ({e})") from None
    if model is not None and not Path(model).is_file():
        raise PorterError(f"--model {model}: no such file")
    model = Path(model) if model is not None else _resolve_source(Path(source), compiled_dir)
    return Module(wasm_path, compiled_dir, kind, seq, labels, model, sha256_of(model), ir.get("ort_cpu"),
                  ir.get("eigen_l1d"), _float_linears(ir), int(ir.get("type_vocab", 1)))


def _float_linears(ir: dict) -> tuple:
    linears = [s["linear"] for s in ir.get("steps", []) if isinstance(s, dict) and "linear" in s]
    return tuple((int(lin["in_features"]), int(lin["out_features"])) for lin in linears
                 if isinstance(lin, dict) and lin.get("weights") == "float32")


def _single_wasm_in(directory: Path) -> Path:
    # porter build copies the eval module into the crate's top level; the kernel-check module
    # stays in checks/, and cargo's intermediates in its target directory.
    found = sorted(directory.glob("*.wasm"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise PorterError(f"{directory}: no built eval module (.wasm) in it; run `porter build {directory}` first")
    names = ", ".join(p.name for p in found)
    raise PorterError(f"{directory}: {len(found)} .wasm files in it ({names}); name the eval module's")


def _compiled_dir_above(wasm_path: Path) -> Path:
    for directory in list(wasm_path.resolve().parents)[:IR_SEARCH_DEPTH]:
        if (directory / IR_NAME).is_file():
            return directory
    raise PorterError(f"{wasm_path}: no {IR_NAME} in the {IR_SEARCH_DEPTH} directories above it; "
                      f"verify needs the compiled directory to know the module's model")


def _resolve_source(source: Path, compiled_dir: Path) -> Path:
    # ir.json records the graph path as compile was given it: relative to where compile ran
    # (or to the compiled directory, when the two were moved together).
    for candidate in (source, compiled_dir / source):
        if candidate.is_file():
            return candidate
    raise PorterError(f"{compiled_dir / IR_NAME} names the model {source}, which is not there from "
                      f"here: give --model MODEL (verify checks each golden's model sha256 against it)")
