"""model.bin: aligned, complete, read back identically, never half-written."""

import json

import numpy as np
import pytest

from fixtures import require, run_porter, spec
from porter.codegen import pack
from porter.codegen.compile import recover
from porter.errors import PorterError


@pytest.fixture(scope="module")
def ir():
    return recover(require(spec.SMALL.path("tf-dq8.tflite")))


def test_layout_is_aligned_ordered_and_complete(ir):
    blob, manifest = pack.pack(ir)
    entries = manifest["arrays"]
    assert [e["name"] for e in entries] == ir.array_order()
    assert all(e["offset"] % pack.ALIGN == 0 for e in entries)
    for a, b in zip(entries, entries[1:]):
        assert a["offset"] + a["size"] <= b["offset"] < a["offset"] + a["size"] + pack.ALIGN
    assert len(blob) == manifest["total_size"]


def test_round_trip_through_the_files(ir, tmp_path):
    pack.write_model(ir, tmp_path)
    arrays = pack.read_model(tmp_path)
    assert set(arrays) == set(ir.array_order())
    for name, a in arrays.items():
        assert a.dtype == ir.weights[name].dtype and np.array_equal(a, ir.weights[name])


def test_truncated_model_bin_is_refused(ir, tmp_path):
    pack.write_model(ir, tmp_path)
    data = (tmp_path / "model.bin").read_bytes()
    (tmp_path / "model.bin").write_bytes(data[:-16])
    with pytest.raises(PorterError, match="bytes, layout.json says"):
        pack.read_model(tmp_path)


def test_failed_pack_leaves_no_file(ir, tmp_path):
    bad = dict(ir.weights)
    bad[ir.array_order()[3]] = bad[ir.array_order()[3]].astype(np.float64)
    broken = type(ir)(**{**ir.__dict__, "weights": bad})
    with pytest.raises(PorterError, match="float64"):
        pack.write_model(broken, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_porter_compile_writes_model_layout_and_ir(tmp_path):
    path = require(spec.TINY.path("litert-dq8.tflite"))
    result = run_porter("compile", path, "-o", tmp_path)
    assert result.returncode == 0, result.stderr
    layout = json.loads((tmp_path / "layout.json").read_text())
    summary = json.loads((tmp_path / "ir.json").read_text())
    assert (tmp_path / "model.bin").stat().st_size == layout["total_size"]
    assert summary["layers"] == spec.TINY.layers and summary["labels"] == spec.TINY.labels
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_porter_compile_on_a_non_encoder_gives_one_line(tmp_path):
    bogus = tmp_path / "bogus.tflite"
    bogus.write_bytes(b"\x00" * 64)
    result = run_porter("compile", bogus, "-o", tmp_path / "out")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_int4_packing_round_trips_and_refuses_values_out_of_range():
    values = np.random.default_rng(4).integers(-8, 8, 77).astype(np.int8)  # two blocks and a part
    packed = pack.pack_int4(values)
    assert packed.dtype == np.uint8 and packed.size == 48
    assert np.array_equal(pack.unpack_int4(packed, values.size), values)
    assert packed[0] == (values[0] & 0x0F) | ((values[16] & 0x0F) << 4)  # value 16 in the high nibble
    with pytest.raises(PorterError, match="not int4"):
        pack.pack_int4(np.int8([7, 8]))
