"""Facts about a fixture file, for its sidecar graphs/<fixture>.json and for reports.

Needs only numpy, the `tflite` flatbuffer package and `onnx` (porter's own dependencies), never
torch or TensorFlow.

    python graphs/fixture_info.py            # size, sha256 and op histogram of every fixture
"""

import hashlib
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

GRAPHS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(GRAPHS_DIR))
import spec  # noqa: E402

MAX_FIXTURE_BYTES = 45 * 1024 * 1024


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def onnx_io(path: Path) -> dict:
    """An ONNX file's opset, producer and graph inputs and outputs (element type, dims), as the
    fixtures' and the zoo's JSON records them."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    init = {i.name for i in m.graph.initializer}

    def desc(v):
        t = v.type.tensor_type
        return [onnx.TensorProto.DataType.Name(t.elem_type).lower(),
                [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]]

    return {
        "opset": {o.domain or "ai.onnx": o.version for o in m.opset_import},
        "producer": f"{m.producer_name} {m.producer_version}",
        "inputs": {v.name: desc(v) for v in m.graph.input if v.name not in init},
        "outputs": {v.name: desc(v) for v in m.graph.output},
    }


def network_of(path: Path) -> "spec.Network | None":
    """The spec network a fixture file belongs to (`<net.name>.<flavour>`), by its name."""
    for net in sorted(spec.NETWORKS, key=lambda n: -len(n.name)):
        if path.name.startswith(net.name + "."):
            return net
    return None


def tflite_ops(path: Path) -> dict[str, int]:
    import tflite

    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    model = tflite.Model.GetRootAsModel(Path(path).read_bytes(), 0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        name = names.get(code, f"OP_{code}")
        if name == "CUSTOM":
            name = "CUSTOM:" + (oc.CustomCode() or b"").decode()
        codes.append(name)
    hist: Counter = Counter()
    for s in range(model.SubgraphsLength()):
        sg = model.Subgraphs(s)
        for o in range(sg.OperatorsLength()):
            hist[codes[sg.Operators(o).OpcodeIndex()]] += 1
    return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


def onnx_ops(path: Path) -> dict[str, int]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    hist: Counter = Counter()

    def walk(graph):
        for node in graph.node:
            hist[(node.domain + "::" if node.domain not in ("", "ai.onnx") else "") + node.op_type] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(model.graph)
    return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


def ops(path: Path) -> dict[str, int]:
    return tflite_ops(path) if path.suffix == ".tflite" else onnx_ops(path)


def check_size(path: Path) -> int:
    size = path.stat().st_size
    if size >= MAX_FIXTURE_BYTES:
        raise SystemExit(f"{path.name}: {size / 2**20:.1f} MiB, at or over the 45 MiB fixture limit")
    return size


def write_json_atomic(path: Path, obj) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_sidecar(path: Path, **facts) -> dict:
    """graphs/<fixture>.json: how the fixture was made, its size, sha256 and op histogram."""
    net = network_of(path)
    info = {
        "file": path.name,
        "network": None if net is None else {k: getattr(net, k) for k in net.__dataclass_fields__},
        **facts,
        "size_bytes": check_size(path),
        "sha256": sha256(path),
        "ops": ops(path),
    }
    write_json_atomic(path.with_name(path.name + ".json"), info)
    return info


def fixtures() -> list[Path]:
    return sorted(p for p in GRAPHS_DIR.iterdir() if p.suffix in (".tflite", ".onnx"))


if __name__ == "__main__":
    for p in fixtures():
        hist = ops(p)
        print(f"{p.name}: {p.stat().st_size / 2**20:.2f} MiB, {sum(hist.values())} ops")
        print("   " + ", ".join(f"{k} {v}" for k, v in hist.items()))
