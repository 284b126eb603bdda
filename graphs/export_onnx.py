"""torch.onnx fixtures, float and onnxruntime dynamic int8.

- `<name>.f32.onnx`: torch.onnx.export, dynamo exporter, opset 18, for MINILM_SMALL_F32 and TINY;
- `<name>.f32-ts.onnx`: the older TorchScript exporter (dynamo=False), opset 17, for TINY;
- `<name>.dq8pc.onnx`: onnxruntime.quantization.quantize_dynamic(QInt8, per_channel=True) of the
  dynamo float export, for MINILM, TINY and SMALL (SMALL: tests/fixtures.py lists it);
- `<name>.dq8pt.onnx`: the same with per_channel=False (one scale per weight tensor), for TINY.

The dynamo exporter's per-node Python stack traces (node metadata `pkg.torch.onnx.stack_trace`,
absolute paths of the export venv) are removed; nothing else is changed.

Inputs `input_ids`, `attention_mask` (int64, [1, seq], the Hugging Face / optimum convention),
output `logits` (float32, [1, seq, labels]); static shapes. Every file is one self-contained
.onnx (no external data) and must stay under 45 MiB. Files are written atomically and each gets
a sidecar graphs/<file>.json (versions, export time, size, sha256, op histogram).

    python graphs/export_onnx.py [--force] [--only NETWORK_NAME ...]

Existing fixtures are kept unless --force. Needs the export environment (graphs/requirements.txt).
"""

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

GRAPHS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(GRAPHS_DIR))

import spec  # noqa: E402
import fixture_info  # noqa: E402

DYNAMO_OPSET = 18
TS_OPSET = 17
F32 = [spec.MINILM_SMALL_F32, spec.TINY]
F32_TS = [spec.TINY]
DQ8_PER_CHANNEL = [spec.MINILM, spec.TINY, spec.SMALL]
DQ8_PER_TENSOR = [spec.TINY]
INPUT_NAMES = ["input_ids", "attention_mask"]
OUTPUT_NAMES = ["logits"]


def _versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "onnx", "onnxscript", "onnxruntime", "transformers")}


def _tmp_beside(out: Path) -> Path:
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix="." + out.name + ".", suffix=".tmp.onnx")
    os.close(fd)
    return Path(tmp)


def _finish(tmp: Path, out: Path, size_check: bool = True) -> None:
    """Checks the file is one self-contained model (no external data) and renames it into place."""
    import onnx

    try:
        model = onnx.load(str(tmp), load_external_data=False)
        for init in model.graph.initializer:
            if init.data_location == onnx.TensorProto.EXTERNAL:
                raise SystemExit(f"{out.name}: initializer {init.name} uses external data")
        onnx.checker.check_model(model)
        if size_check:
            fixture_info.check_size(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()


def export_float(net: spec.Network, out: Path, dynamo: bool, size_check: bool = True) -> float:
    """torch.onnx.export of graphs/torch_model.py's classifier; returns seconds."""
    import onnx
    import torch
    import torch_model

    model = torch_model.build(net)
    args = torch_model.sample_inputs(net, torch.int64)
    tmp = _tmp_beside(out)
    t0 = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            prog = torch.onnx.export(
                model, args, dynamo=True, opset_version=DYNAMO_OPSET,
                input_names=INPUT_NAMES, output_names=OUTPUT_NAMES, external_data=False,
            )
            prog.save(str(tmp), external_data=False)
        else:
            torch.onnx.export(
                model, args, str(tmp), dynamo=False, opset_version=TS_OPSET,
                input_names=INPUT_NAMES, output_names=OUTPUT_NAMES, do_constant_folding=True,
            )
    seconds = time.perf_counter() - t0
    # A float file may come back with its weights in a side file: fold them in.
    m = onnx.load(str(tmp))
    _strip_stack_traces(m)
    onnx.save(m, str(tmp), save_as_external_data=False)
    for side in tmp.parent.glob(tmp.name + ".data"):
        side.unlink()
    _finish(tmp, out, size_check)
    return seconds


STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"


def _strip_stack_traces(model) -> None:
    """Drops the dynamo exporter's per-node Python stack traces (metadata only).

    They hold absolute paths of the export venv, so with them the file would depend on where the
    venv lives; without them a re-export is byte-identical anywhere. Every other node metadata
    (namespace, class hierarchy, FX node) is kept as the exporter wrote it.
    """
    import onnx

    def graphs(g):
        yield g
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from graphs(attr.g)

    nodes = [n for g in graphs(model.graph) for n in g.node]
    nodes += [n for f in model.functions for n in f.node]
    for node in nodes:
        keep = [p for p in node.metadata_props if p.key != STACK_TRACE_KEY]
        if len(keep) != len(node.metadata_props):
            del node.metadata_props[:]
            node.metadata_props.extend(keep)


def quantize(src: Path, out: Path, per_channel: bool) -> float:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _tmp_beside(out)
    t0 = time.perf_counter()
    quantize_dynamic(
        str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=per_channel,
        use_external_data_format=False,
    )
    seconds = time.perf_counter() - t0
    _finish(tmp, out)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="remake fixtures that exist")
    ap.add_argument("--only", nargs="*", help="network names")
    args = ap.parse_args()
    versions = _versions()
    cmd = "python graphs/export_onnx.py"

    def want(net, nets, flavour):
        return net in nets and (args.force or not net.path(flavour).exists())

    for net in spec.NETWORKS:
        if args.only and net.name not in args.only:
            continue
        todo = [f for f, nets in (("f32.onnx", F32), ("f32-ts.onnx", F32_TS),
                                  ("dq8pc.onnx", DQ8_PER_CHANNEL), ("dq8pt.onnx", DQ8_PER_TENSOR))
                if want(net, nets, f)]
        if not todo:
            print(f"{net.name}: onnx fixtures present (--force remakes them)")
            continue
        with tempfile.TemporaryDirectory() as tmpdir:
            keep = net in F32
            f32 = net.path("f32.onnx") if keep else Path(tmpdir) / net.path("f32.onnx").name
            f32_seconds = None
            needs_f32 = "f32.onnx" in todo or any(f.startswith("dq8") for f in todo)
            if needs_f32 and ("f32.onnx" in todo or not f32.exists()):
                f32_seconds = export_float(net, f32, dynamo=True, size_check=keep)
                print(f"{f32.name}: torch.onnx dynamo opset {DYNAMO_OPSET} {f32_seconds:.1f} s, "
                      f"{f32.stat().st_size / 2**20:.2f} MiB")
                if keep:
                    fixture_info.write_sidecar(
                        f32, exporter="torch.onnx.export(dynamo=True)", recipe="float32",
                        command=cmd, versions=versions, export_seconds=round(f32_seconds, 2),
                        io=fixture_info.onnx_io(f32),
                    )
            if "f32-ts.onnx" in todo:
                ts = net.path("f32-ts.onnx")
                s = export_float(net, ts, dynamo=False)
                print(f"{ts.name}: torch.onnx TorchScript opset {TS_OPSET} {s:.1f} s, "
                      f"{ts.stat().st_size / 2**20:.2f} MiB")
                fixture_info.write_sidecar(
                    ts, exporter="torch.onnx.export(dynamo=False) (TorchScript)", recipe="float32",
                    command=cmd, versions=versions, export_seconds=round(s, 2), io=fixture_info.onnx_io(ts),
                )
            for flavour, per_channel in (("dq8pc.onnx", True), ("dq8pt.onnx", False)):
                if flavour not in todo:
                    continue
                out = net.path(flavour)
                s = quantize(f32, out, per_channel)
                print(f"{out.name}: quantize_dynamic QInt8 per_channel={per_channel} {s:.1f} s, "
                      f"{out.stat().st_size / 2**20:.2f} MiB")
                fixture_info.write_sidecar(
                    out, exporter="torch.onnx.export(dynamo=True) + onnxruntime quantize_dynamic",
                    recipe=f"quantize_dynamic(weight_type=QuantType.QInt8, per_channel={per_channel})",
                    command=cmd, versions=versions,
                    float_export_seconds=None if f32_seconds is None else round(f32_seconds, 2),
                    export_seconds=round(s, 2), io=fixture_info.onnx_io(out),
                )


if __name__ == "__main__":
    main()
