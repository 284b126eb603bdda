"""The bundled MiniLM-L6 token classifier (graphs/spec.py MINILM) in every weight scheme that
ai-edge-quantizer writes, for `porter bench`'s rows per scheme (docs/speed.md).

    ~/.cache/porter/export-venv/bin/python graphs/bench_schemes.py [--out DIR] [--force]

Writes DIR/minilm6-tok9-s256.<flavour> (default DIR: ~/.cache/porter/bench-schemes): the float
export (litert-torch, 91 MB, which is why these files are made here rather than committed), and
that file through each ai-edge-quantizer recipe of the zoo's flavours (graphs/zoo/make_zoo.py
aeq_recipe: weight-only int8, float16 casting, dynamic int4, weight-only int4, static int8
calibrated on seeded windows), and two ONNX files made from the dynamo float ONNX export
(DIR/minilm6-tok9-s256.f32.onnx, graphs/export_onnx.py): onnxruntime's static QDQ (`qdq8pc.onnx`:
quantize_static(QuantFormat.QDQ, per_channel=True) calibrated on the same windows) and the float16
file onnxconverter-common makes of it (`f16.onnx`). The committed hybrid int8 files,
graphs/minilm6-tok9-s256.litert-dq8.tflite and graphs/minilm6-tok9-s256.dq8pc.onnx (onnxruntime's
quantize_dynamic), are the rows they are compared with. Files present are kept unless --force.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

GRAPHS = Path(__file__).resolve().parent
sys.path.insert(0, str(GRAPHS))
sys.path.insert(0, str(GRAPHS / "zoo"))

import export_litert  # noqa: E402
import export_onnx  # noqa: E402
import make_zoo  # noqa: E402
import spec  # noqa: E402

FLAVOURS = ["aeq-wo8.tflite", "aeq-f16.tflite", "aeq-dq4.tflite", "aeq-wo4.tflite", "aeq-si8.tflite"]
ONNX_FLAVOURS = ["qdq8pc.onnx", "f16.onnx"]  # from the torch.onnx float export


def calibration_windows(net: spec.Network, count: int = make_zoo.CALIBRATION_WINDOWS) -> list[dict]:
    """Seeded windows of live lengths from 1 to the window, CLS first, padded with PAD."""
    rng = np.random.default_rng(500 + net.seed)
    windows = []
    for live in np.linspace(1, net.seq, count).astype(int):
        ids = np.full((1, net.seq), spec.PAD_ID, np.int32)
        ids[0, :live] = rng.integers(1000, net.vocab, size=live)
        ids[0, 0] = spec.CLS_ID
        windows.append({"input_ids": ids, "attention_mask": (np.arange(net.seq) < live).astype(np.int32)[None]})
    return windows


def quantise(src: Path, out: Path, flavour: str, net: spec.Network) -> None:
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_quantizer import quantizer

    _, configure = make_zoo.aeq_recipe(flavour)
    qt = quantizer.Quantizer(str(src))
    configure(qt)
    calibration = None
    if flavour == "aeq-si8.tflite":
        key = next(iter(Interpreter(model_path=str(src)).get_signature_list()))
        calibration = qt.calibrate({key: calibration_windows(net)})
    result = qt.quantize(calibration)
    export_litert._export_atomic(lambda p: result.export_model(str(p), overwrite=True), out, size_check=False)


def float_onnx(out: Path, net: spec.Network) -> Path:
    """The dynamo float ONNX export beside OUT, made if absent: the source of the ONNX flavours."""
    src = out.with_name(f"{net.name}.f32.onnx")
    if not src.exists():
        seconds = export_onnx.export_float(net, src, dynamo=True, size_check=False)
        print(f"{src}: torch.onnx dynamo float export, {seconds:.0f} s, {src.stat().st_size / 2**20:.1f} MiB")
    return src


def quantise_qdq(out: Path, net: spec.Network) -> None:
    """The dynamo float ONNX export through onnxruntime's quantize_static, QDQ per channel, int8
    activations and weights, calibrated on calibration_windows (int64, as the export takes)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    src = float_onnx(out, net)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.windows = iter(calibration_windows(net))

        def get_next(self):
            w = next(self.windows, None)
            return None if w is None else {k: v.astype(np.int64) for k, v in w.items()}

    quantize_static(str(src), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, use_external_data_format=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path.home() / ".cache/porter/bench-schemes")
    ap.add_argument("--force", action="store_true", help="remake files that exist")
    ap.add_argument("--flavour", nargs="*", default=FLAVOURS + ONNX_FLAVOURS, choices=FLAVOURS + ONNX_FLAVOURS)
    args = ap.parse_args()
    net = spec.MINILM
    args.out.mkdir(parents=True, exist_ok=True)
    src = args.out / f"{net.name}.f32.tflite"
    if any(f.endswith(".tflite") for f in args.flavour) and (args.force or not src.exists()):
        seconds = export_litert.convert_f32(net, src, size_check=False)
        print(f"{src}: litert-torch float export, {seconds:.0f} s, {src.stat().st_size / 2**20:.1f} MiB")
    for flavour in args.flavour:
        out = args.out / f"{net.name}.{flavour}"
        if out.exists() and not args.force:
            print(f"{out}: present")
            continue
        if flavour == "qdq8pc.onnx":
            quantise_qdq(out, net)
        elif flavour == "f16.onnx":
            make_zoo.convert_to_float16(float_onnx(out, net), out)
        else:
            quantise(src, out, flavour, net)
        print(f"{out}: {flavour}, {out.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
