"""The roofline of `porter bench`: work counted from the IR's shapes (checked against each
fixture's architecture as exported, not against the counting code), and microbenchmarks that
compute what the kernels compute. Their speed is the bench's output, never asserted here."""

import numpy as np
import pytest
import wasmtime

from fixtures import MINILM_DQ8PC_ONNX, MINILM_LITERT_DQ8, recovered, require, spec
from porter.bench import roofline
from porter.reference.litert import floats as litert
from porter.runtime import wasm

TINY = spec.TINY.path("litert-dq8.tflite")
TINY_NOMASK = spec.TINY.path("nomask.litert-dq8.tflite")


def architecture_work(net, rows: int, keys: int) -> dict:
    """A BERT token classifier's arithmetic from its exported architecture: Q, K, V and the
    attention output (hidden x hidden each), the two FFN Linears, the classifier head."""
    per_row = net.layers * (4 * net.hidden * net.hidden + 2 * net.hidden * net.ffn) + net.hidden * net.labels
    scores = net.layers * net.heads * rows * keys
    return {"matmul": {"int8_products": rows * per_row, "f32_multiply_adds": 0},
            "attention": {"f32_multiply_adds": 2 * scores * (net.hidden // net.heads), "exps": scores}}


@pytest.mark.parametrize("path, net", [(TINY, spec.TINY), (MINILM_LITERT_DQ8, spec.MINILM)], ids=lambda p: getattr(p, "name", ""))
def test_work_is_counted_from_the_programs_shapes(path, net):
    ir = recovered(require(path)).summary()
    assert roofline.stage_work(ir, net.seq) == architecture_work(net, net.seq, net.seq)
    # masked padding: a short input computes its live rows over its live keys
    assert roofline.stage_work(ir, 20) == architecture_work(net, 20, 20)


def test_a_program_that_computes_every_row_is_counted_for_the_whole_window():
    ir = recovered(require(TINY_NOMASK)).summary()  # no mask input: padding is load-bearing
    assert roofline.stage_work(ir, 20) == architecture_work(spec.TINY, spec.TINY.seq, spec.TINY.seq)


def test_onnxruntime_programs_count_the_whole_window_and_their_fma_floor():
    ir = recovered(require(MINILM_DQ8PC_ONNX)).summary()
    net = spec.MINILM
    assert roofline.stage_work(ir, 20) == architecture_work(net, net.seq, net.seq)
    assert roofline.float_kernel(ir) is roofline.RELAXED_MADD
    assert roofline.float_kernel(recovered(require(MINILM_LITERT_DQ8)).summary()) is roofline.MUL_ADD


def test_the_exp_microbenchmark_computes_the_softmax_exp_bit_for_bit():
    """Over softmax's inputs, s - max: <= 0 (the subnormal results just above -104 among them) or NaN."""
    x = np.concatenate([np.linspace(-120, 0, 4000, dtype=np.float32), np.linspace(-104, -103.5, 1000, dtype=np.float32),
                        np.float32([0, -0.0, -1e-30, -87.3, -103.9, -104, -104.1, -3.4e38, -np.inf, np.nan])])
    x = np.pad(x, (0, -len(x) % 4)).astype(np.float32)
    engine = wasm.default_runtime()
    store = engine.new_store(10.0)
    module = wasmtime.Module(engine.engine, wasmtime.wat2wasm(roofline.exp_check_wat()))
    exports = engine.linker.instantiate(store, module).exports(store)
    memory = exports["memory"]
    memory.write(store, x.tobytes(), 0)
    exports["run"](store, len(x) // 4)
    got = np.frombuffer(memory.read(store, 0, x.nbytes), np.float32)
    assert np.array_equal(got.view(np.uint32), litert.exp(x).view(np.uint32))


@pytest.mark.parametrize("kernel", [roofline.DOT, roofline.MUL_ADD, roofline.RELAXED_MADD], ids=lambda k: k.name)
def test_each_floor_microbenchmark_runs_under_wasmtime(kernel):
    floor = roofline.measure_floor(kernel, accumulator_counts=(8,), anchor_intervals=(2,))
    assert floor["unit"] == kernel.unit and floor["per_second"] > 0 and floor["accumulators"] == 8


def test_stage_shares_are_work_over_floor_over_time():
    floors = {"int8_products": {"per_second": 2e10}, "exps": {"per_second": 1e9},
              "f32_multiply_adds": {"per_second": 1e10}}
    r = roofline.stage_roofline({"f32_multiply_adds": 10**9, "exps": 10**7}, floors, median_ms=200.0, min_ms=150.0)
    assert r["floor_ms"] == pytest.approx(100 + 10)
    assert (r["of_floor_median"], r["of_floor_min"]) == (pytest.approx(110 / 200), pytest.approx(110 / 150))
    assert r["rate_per_second"] == {"f32_multiply_adds": pytest.approx(5e9), "exps": pytest.approx(5e7)}
