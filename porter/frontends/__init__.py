"""Frontends: read a model file into a validated porter Graph.

`load_graph` picks the reader from the file's content (TFLite flatbuffers carry the 'TFL3'
identifier at byte 4) and, failing that, from its suffix, so that a mislabelled file still gets
the error of the format it claims to be.
"""

from __future__ import annotations

from pathlib import Path

from porter.errors import PorterError
from porter.frontends.graph import Graph

TFLITE_IDENTIFIER_AT = slice(4, 8)


def model_format(path: str | Path) -> str | None:
    """"tflite" or "onnx" as load_graph reads the file (its content's identifier, else its
    suffix), or None for neither."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError:
        head = b""
    if head[TFLITE_IDENTIFIER_AT] == b"TFL3" or path.suffix.lower() == ".tflite":
        return "tflite"
    return "onnx" if path.suffix.lower() == ".onnx" else None


def load_graph(path: str | Path) -> Graph:
    """Reads a .tflite or .onnx model; raises PorterError for missing, unknown or invalid files."""
    path = Path(path)
    if not path.exists():
        raise PorterError(f"{path}: no such file")
    if not path.is_file():
        raise PorterError(f"{path}: not a regular file")
    found = model_format(path)
    if found == "tflite":
        from porter.frontends.tflite import load_tflite

        return load_tflite(path)
    if found == "onnx":
        from porter.frontends.onnx import load_onnx

        return load_onnx(path)
    raise PorterError(f"{path}: unknown model format (expected a TFLite flatbuffer or a .onnx file)")
