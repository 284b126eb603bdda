"""ONNX shape inference, isolated in a child process.

onnx's C++ shape inference trusts node attributes: a GatherND with batch_dims=-100 kills the
interpreter with a segmentation fault. Shapes are only a help to later stages, so inference runs
in a child; if the child crashes, times out or fails, the graph keeps its declared shapes.

Run as `python -m porter.frontends.onnx_shapes MODEL`: writes a serialized GraphProto holding
only the inferred value_info, inputs and outputs to stdout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx

INFERENCE_TIMEOUT_S = 120


def inferred_values(path: Path) -> list[onnx.ValueInfoProto]:
    """Every value whose type ONNX shape inference can tell; [] if inference did not finish."""
    try:
        child = subprocess.run(
            [sys.executable, "-m", __name__, str(path)], capture_output=True, timeout=INFERENCE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return []
    if child.returncode != 0:
        return []
    graph = onnx.GraphProto()
    graph.ParseFromString(child.stdout)
    return [*graph.value_info, *graph.input, *graph.output]


def main(model_path: str) -> None:
    model = onnx.load_model(model_path, load_external_data=False)
    inferred = onnx.shape_inference.infer_shapes(model).graph
    values = onnx.GraphProto(value_info=inferred.value_info, input=inferred.input, output=inferred.output)
    sys.stdout.buffer.write(values.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1])
