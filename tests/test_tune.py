"""porter build --tune on the small TINY network: every candidate is built and run in wasm, the
choice is recorded in the crate, and the tuned module still gives the executor's bits."""

import json
import re

import pytest

from fixtures import REPO, require, run_porter, spec
from porter.runtime import evalproto
from porter.reference import execute
from porter.codegen.compile import compile_model
from porter.check.golden import load_golden
from porter.codegen.tuning import GEMM_ROW_BLOCKS, GEMM_TILES, QUERY_ROWS

TINY = spec.TINY.path("litert-dq8.tflite")


@pytest.mark.slow  # builds and times every candidate tile: minutes on two cores
def test_tune_records_its_choice_and_keeps_the_bits(toolchain, wasm_runtime, tmp_path):
    crate = tmp_path / "tiny"
    ir = compile_model(require(TINY), crate)
    result = run_porter("build", crate, "--tune")
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((crate / "tuning.json").read_text())
    tried = {(c["tile_rows"], c["tile_outs"]) for c in record["candidates"]}
    chosen = record["chosen"]
    # the row blocks' span is timed for a tile of more than 4 rows only
    spans = len(GEMM_ROW_BLOCKS) - 1 if chosen["tile_rows"] > 4 else 0
    assert set(GEMM_TILES) <= tried and len(record["candidates"]) == len(GEMM_TILES) + spans + len(QUERY_ROWS) - 1
    assert all(c["matmul_ms"] > 0 and c["attention_ms"] > 0 for c in record["candidates"])
    tuning_rs = (crate / "src" / "tuning.rs").read_text()
    assert "Chosen by `porter build --tune`" in tuning_rs
    consts = dict(re.findall(r"pub const (\w+): usize = (\d+);", tuning_rs))
    assert consts == {"GEMM_TILE_ROWS": str(chosen["tile_rows"]), "GEMM_TILE_OUTS": str(chosen["tile_outs"]),
                      "GEMM_ROW_BLOCK_BYTES": str(chosen["row_block_bytes"]), "ATTENTION_QUERY_ROWS": str(chosen["query_rows"])}
    assert "chosen: GEMM tile" in result.stdout
    golden = load_golden(REPO / "golden" / f"{TINY.name}.builtin.npz")
    request = evalproto.encode_request(golden.ids, golden.attention_mask, golden.live)
    windows, _ = evalproto.decode_reply(wasm_runtime.run_command(next(crate.glob("*.wasm")), [], request).stdout)
    for w, ours in enumerate(windows):
        reference = execute.run(ir, golden.ids[w], golden.attention_mask[w])[: int(golden.live[w])]
        assert (ours.logits.view("u4") == reference.view("u4")).all(), f"window {w}"


def test_tune_names_a_directory_that_is_not_a_crate(tmp_path):
    result = run_porter("build", tmp_path, "--tune")
    assert result.returncode == 2 and "not a porter forward crate" in result.stderr
