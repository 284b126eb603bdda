"""litert-torch fixtures: float (`<name>.f32.tflite`) and dynamic int8 (`<name>.litert-dq8.tflite`).

- f32: `litert_torch.convert(module, sample_kwargs=...)` of graphs/torch_model.py's classifier,
  for MINILM_SMALL_F32 and TINY (float files of other shapes add ~20 MB each and no new path);
- litert-dq8: that float file quantised by ai-edge-quantizer with
  `recipe.dynamic_wi8_afp32()` (int8 weights, float activations, weights as external buffers
  past the flatbuffer), for MINILM, TINY, SMALL.

Signature `serving_default`: inputs `input_ids`, `attention_mask` (int32, [1, seq]),
output `logits` (float32, [1, seq, labels]). Files are written atomically (temp + rename) and
each gets a sidecar graphs/<file>.json (exporter versions, export time, size, sha256, ops).

    python graphs/export_litert.py [--force] [--only NETWORK_NAME ...]

Existing fixtures are kept unless --force. Needs the export environment (graphs/requirements.txt).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

GRAPHS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(GRAPHS_DIR))

import spec  # noqa: E402
import fixture_info  # noqa: E402

F32_NETWORKS = [spec.MINILM_SMALL_F32, spec.TINY]
DQ8_NETWORKS = [spec.MINILM, spec.TINY, spec.SMALL]


def _versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("litert-torch", "ai-edge-quantizer", "torch", "transformers")}


def convert_f32(net: spec.Network, out: Path, size_check: bool = True) -> float:
    import litert_torch
    import torch
    import torch_model

    model = torch_model.LogitsDict(torch_model.build(net)).eval()
    ids, mask = torch_model.sample_inputs(net, torch.int32)
    t0 = time.perf_counter()
    with torch.no_grad():
        edge = litert_torch.convert(model, sample_kwargs={"input_ids": ids, "attention_mask": mask})
    _export_atomic(lambda p: edge.export(str(p)), out, size_check)
    return time.perf_counter() - t0


def quantize_dq8(f32_path: Path, out: Path) -> float:
    from ai_edge_quantizer import quantizer, recipe

    t0 = time.perf_counter()
    qt = quantizer.Quantizer(str(f32_path))
    qt.load_quantization_recipe(recipe.dynamic_wi8_afp32())
    result = qt.quantize()
    _export_atomic(lambda p: result.export_model(str(p), overwrite=True), out)
    return time.perf_counter() - t0


def _export_atomic(write, out: Path, size_check: bool = True) -> None:
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix="." + out.name + ".", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp)
    try:
        tmp.unlink()
        write(tmp)
        if size_check:
            fixture_info.check_size(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()


def _io(path: Path) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    sig = it.get_signature_list()
    key = next(iter(sig))
    runner = it.get_signature_runner(key)
    return {
        "signature": key,
        "inputs": {k: [str(v["dtype"].__name__), [int(d) for d in v["shape"]]]
                   for k, v in runner.get_input_details().items()},
        "outputs": {k: [str(v["dtype"].__name__), [int(d) for d in v["shape"]]]
                    for k, v in runner.get_output_details().items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="remake fixtures that exist")
    ap.add_argument("--only", nargs="*", help="network names")
    args = ap.parse_args()
    versions = _versions()
    for net in spec.NETWORKS:
        if args.only and net.name not in args.only:
            continue
        f32 = net.path("f32.tflite")
        dq8 = net.path("litert-dq8.tflite")
        want_f32 = net in F32_NETWORKS and (args.force or not f32.exists())
        want_dq8 = net in DQ8_NETWORKS and (args.force or not dq8.exists())
        if not (want_f32 or want_dq8):
            print(f"{net.name}: litert fixtures present (--force remakes them)")
            continue
        with tempfile.TemporaryDirectory() as tmpdir:
            keep = net in F32_NETWORKS  # the float file is a fixture, not only a step
            src = f32 if keep else Path(tmpdir) / f32.name
            f32_seconds = None
            if want_f32 or not src.exists():
                f32_seconds = convert_f32(net, src, size_check=keep)
                print(f"{src.name}: litert-torch float export {f32_seconds:.1f} s, "
                      f"{src.stat().st_size / 2**20:.2f} MiB")
                if keep:
                    fixture_info.write_sidecar(
                        src,
                        exporter="litert-torch",
                        recipe="float32",
                        command="python graphs/export_litert.py",
                        versions=versions,
                        export_seconds=round(f32_seconds, 2),
                        io=_io(src),
                    )
            if want_dq8:
                q_seconds = quantize_dq8(src, dq8)
                print(f"{dq8.name}: ai-edge-quantizer dynamic_wi8_afp32 {q_seconds:.1f} s, "
                      f"{dq8.stat().st_size / 2**20:.2f} MiB")
                fixture_info.write_sidecar(
                    dq8,
                    exporter="litert-torch + ai-edge-quantizer",
                    recipe="recipe.dynamic_wi8_afp32()",
                    command="python graphs/export_litert.py",
                    versions=versions,
                    float_export_seconds=None if f32_seconds is None else round(f32_seconds, 2),
                    export_seconds=round(q_seconds, 2),
                    io=_io(dq8),
                )


if __name__ == "__main__":
    main()
