"""Checks porter's emulation of LiteRT's float kernels op by op inside real models.

Each TFLite file runs once under LiteRT's builtin kernels (one thread) with every intermediate
preserved, on a random window; for each op with an emulation below, the op's preserved inputs go
through porter.reference.litert.floats and the result is compared bit for bit with the op's preserved
output. Prints one line per (file, op type, shape): mismatching values / values.

    python graphs/probes/zoo_ops.py FILE.tflite ...     (default: graphs/*.tflite and the zoo)
"""

from __future__ import annotations

import glob
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from porter.frontends import load_graph
from porter.reference.litert import floats as LF

ROOT = Path(__file__).resolve().parents[2]
ZOO = Path("/work/zoo/graphs/zoo")


def _fully_connected(op, ins):
    x, w = ins[0], ins[1]
    if w.dtype != np.float32 or op.options.get("fused_activation_function", "NONE") != "NONE":
        return None
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else None
    # LiteRT runs here: its Eigen blocks deep products by this machine's L1 data cache
    return LF.fully_connected(x.reshape(-1, w.shape[1]), w, bias, LF.host_l1d_bytes())


def _batch_matmul(op, ins):
    a, b = ins
    if op.options.get("adj_x"):
        a = np.swapaxes(a, -1, -2)
    if op.options.get("adj_y"):
        b = np.swapaxes(b, -1, -2)
    return LF.batch_matmul(a, b)


def _reduction(fn):
    def apply(op, ins):
        x, axes = ins
        return fn(x, tuple(int(a) % x.ndim for a in np.ravel(axes)))
    return apply


EMULATIONS = {
    "FULLY_CONNECTED": _fully_connected,
    "BATCH_MATMUL": _batch_matmul,
}
for _name, _attr in [("TANH", "tanh"), ("LOGISTIC", "logistic"), ("EXP", "exp_op"),
                     ("L2_NORMALIZATION", "l2_normalization")]:
    if hasattr(LF, _attr):
        EMULATIONS[_name] = (lambda f: lambda op, ins: f(ins[0]))(getattr(LF, _attr))
for _name, _attr in [("SUM", "reduce_sum"), ("MEAN", "reduce_mean"), ("REDUCE_MAX", "reduce_max")]:
    if hasattr(LF, _attr):
        EMULATIONS[_name] = _reduction(getattr(LF, _attr))


def window(path: Path, details: dict, rng) -> dict:
    """Random ids, a mask with a random number of live tokens, zero token types. Inputs are
    matched to roles by name, else (litert-torch's args_<i>) by the zoo member's input order."""
    sidecar = path.with_name(path.name + ".json")
    spec = json.loads(sidecar.read_text()).get("member_spec", {}) if sidecar.exists() else {}
    vocab = int(spec.get("vocab", 100))
    roles = ["input_ids", "attention_mask"] + (["token_type_ids"] if spec.get("token_type_input") else [])
    feed = {}
    for i, (name, d) in enumerate(details.items()):
        role = roles[int(name[5:])] if name.startswith("args_") and spec else name
        shape = list(d["shape"])
        live = int(rng.integers(1, shape[-1] + 1))
        if "mask" in role:
            value = np.broadcast_to(np.arange(shape[-1]) < live, shape).astype(d["dtype"])
        elif "type" in role:
            value = np.zeros(shape, d["dtype"])
        else:
            value = rng.integers(0, vocab, shape).astype(d["dtype"])
        feed[name] = value
    return feed


def check_file(path: Path, seed: int = 0) -> dict:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    g = load_graph(path)
    it = Interpreter(model_path=str(path), num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                     experimental_preserve_all_tensors=True)
    runner = it.get_signature_runner(next(iter(it.get_signature_list())))
    runner(**window(path, runner.get_input_details(), np.random.default_rng(seed)))
    tally = defaultdict(lambda: [0, 0])
    for op in g.ops:
        emulate = EMULATIONS.get(op.type)
        if emulate is None:
            continue
        ins = [None if t < 0 else it.get_tensor(t) for t in op.inputs]
        if ins[0].dtype != np.float32:
            continue
        ours = emulate(op, ins)
        if ours is None:
            continue
        ref = it.get_tensor(op.outputs[0])
        ours = np.asarray(ours, np.float32).reshape(ref.shape)
        same = (ours.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(ours) & np.isnan(ref))
        key = (op.type, tuple(ins[0].shape), tuple(ins[1].shape) if len(ins) > 1 and ins[1] is not None else ())
        tally[key][0] += int((~same).sum())
        tally[key][1] += same.size
    return tally


def main(paths):
    paths = paths or sorted(glob.glob(str(ROOT / "graphs" / "*.tflite")) + glob.glob(str(ZOO / "*.tflite")))
    total = [0, 0]
    for p in paths:
        for (op, a, b), (bad, n) in sorted(check_file(Path(p)).items()):
            print(f"{Path(p).name:50s} {op:17s} {str(a):16s} {str(b):14s} {bad:7d} / {n}")
            total[0] += bad
            total[1] += n
    print(f"total: {total[0]} mismatching of {total[1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
