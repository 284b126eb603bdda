"""The roofline of `porter bench`: for each stage of porter's forward pass, the work it does (from
the IR's shapes), the rate it reached, and the floor this CPU allows in wasm under wasmtime.

The floors are measured, not assumed: porter writes tiny wasm modules whose inner loop is the
kernels' arithmetic, unrolled over enough independent dependency chains that neither latency
nor the loop limits them, and runs them exactly as the eval module runs (porter's wasmtime
engine, epoch interruption on):

- int8 products: `i32x4.dot_i16x8_s` then `i32x4.add` into the running sum (the int8 GEMM's
  eight products per dot and one add);
- float multiply-adds: `f32x4.mul` then `f32x4.add` (LiteRT's sums, no FMA), or one
  `f32x4.relaxed_madd` (onnxruntime's fma chains, which wasmtime fuses on an FMA CPU);
- exps: the f32x4 exp of porter's softmax, of s - max (Eigen's pexp for inputs <= 0: the
  subtraction, floor, two-step range reduction, degree-6 polynomial, the power of two from
  exponent bits, masks), bit for bit (a test checks it).

Only that arithmetic is in a floor: the kernels' loads, int8 widening, address arithmetic and
stores are what a kernel spends above it. Each floor is the best over chain counts and store
intervals of repeated calls, and bench keeps the best of its rounds (the quietest moment of a
shared machine). A stage's floor time is its work over the floor rates (attention: its
multiply-adds plus its exps); its share of the floor is that time over the stage's time.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from porter.fsutil import write_atomic
from porter.runtime import wasm

TARGET_CALL_S = 0.002  # each timed call runs about this long: shorter than a scheduler slice of a busy machine
CALLS = 25  # timed calls per variant; the fastest counts
OPS_PER_ITERATION = 192  # vector operations unrolled in one loop iteration (exps: a quarter)
ANCHORS = 4096  # where the chains are stored
# The variants each floor is timed in, the fastest kept: independent chains and how often each
# is stored (multiply-adds, int8 dots), or independent exp streams.
ACCUMULATOR_COUNTS = (8, 12, 14)
ANCHOR_INTERVALS = (1, 2, 4)
EXP_STREAMS = (4, 8, 12)
MEMORY_PAGES = 1


@dataclass(frozen=True)
class Kernel:
    """One microbenchmark: `step` is the WAT of one update of an accumulator {acc} by its product
    with a register {x}. The accumulator is the product's other operand so that every update is
    a distinct computation (nothing for the compiler to share or hoist) without a load, which
    Cranelift would place ahead of the arithmetic and spill; the chain is then the product's
    latency plus the add's, covered by enough independent chains."""

    name: str
    unit: str  # what one lane-result counts as
    per_op: int  # units of work per vector operation
    step: str
    instructions: str  # for the report


DOT = Kernel("int8_dot", "int8 products", 8, "(i32x4.add {acc} (i32x4.dot_i16x8_s {acc} {x}))",
             "i32x4.dot_i16x8_s + i32x4.add")
MUL_ADD = Kernel("f32_mul_add", "f32 multiply-adds", 4, "(f32x4.add {acc} (f32x4.mul {acc} {x}))",
                 "f32x4.mul + f32x4.add")
RELAXED_MADD = Kernel("f32_relaxed_madd", "f32 multiply-adds", 4, "(f32x4.relaxed_madd {acc} {x} {acc})",
                      "f32x4.relaxed_madd")


def _splat(bits: int) -> str:
    return f"(v128.const i32x4 {bits:#010x} {bits:#010x} {bits:#010x} {bits:#010x})"


def _madd(a: str, b: str, c: str) -> str:
    return f"(f32x4.add (f32x4.mul {a} {b}) {c})"


# mathfn.rs's constants, as bit patterns: LOG2E, 0.5, LN2_HI, LN2_LO, P2..P6, 1, EXP_LO,
# POW2_PLUS_24_MAGIC (1.5 * 2^23 + 151), TWO_TO_MINUS_24
LOG2E, HALF, LN2_HI, LN2_LO = 0x3fb8aa3b, 0x3f000000, 0xbf318000, 0x395e8083
EXP_P2, EXP_P3, EXP_P4, EXP_P5, EXP_P6 = 0x3efffffc, 0x3e2aaa47, 0x3d2aadcc, 0x3c091de6, 0x3ab42872
ONE, EXP_LO, POW2_PLUS_24_MAGIC, TWO_TO_MINUS_24 = 0x3f800000, 0xc2d00000, 0x4b400000 + 151, (127 - 24) << 23


EXP_TEMPORARIES = ["$c", "$m", "$r", "$r2", "$y"]


def exp_wat(x: str) -> list[str]:
    """porter's softmax exp, exp_nonpositive_x4 (templates' mathfn.rs), of `x` (<= 0 or NaN), as
    WAT statements that leave the result in $y: the same operations (2^(m + 24) from the bits of
    m + 1.5 * 2^23 + 151, then times 2^-24; the mask below EXP_LO and pmax for the NaN rule)."""
    c, m, r, r2 = (f"(local.get {v})" for v in ("$c", "$m", "$r", "$r2"))
    even = _madd(r2, _madd(r2, _splat(EXP_P6), _splat(EXP_P4)), _splat(EXP_P2))
    odd = _madd(r2, _splat(EXP_P5), _splat(EXP_P3))
    y = _madd(r2, _madd(r, odd, even), f"(f32x4.add {r} {_splat(ONE)})")
    pow2 = f"(i32x4.shl (f32x4.add {m} {_splat(POW2_PLUS_24_MAGIC)}) (i32.const 23))"
    return [
        f"(local.set $c {x})",
        f"(local.set $m (f32x4.floor {_madd(c, _splat(LOG2E), _splat(HALF))}))",
        f"(local.set $r {_madd(m, _splat(LN2_LO), _madd(m, _splat(LN2_HI), c))})",
        f"(local.set $r2 (f32x4.mul {r} {r}))",
        f"(local.set $y (v128.and (f32x4.mul (f32x4.mul {y} {pow2}) {_splat(TWO_TO_MINUS_24)})"
        f" (f32x4.le {_splat(EXP_LO)} {c})))",
        f"(local.set $y (f32x4.pmax {c} (local.get $y)))"]


def _loop(body: list[str]) -> list[str]:
    return ["(loop $l", *body, "(br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))"]


def _loaded(names: list[str]) -> list[str]:
    """Each local from its own memory slot (zeros: no value for the compiler to fold, and no
    subnormal, infinity or NaN on the way)."""
    return [f"(local.set {name} (v128.load offset={16 * i} (i32.const 0)))" for i, name in enumerate(names)]


def _folded(names: list[str]) -> str:
    total = f"(local.get {names[0]})"
    for name in names[1:]:
        total = f"(v128.xor {total} (local.get {name}))"
    return f"(i32x4.extract_lane 0 {total})"


def _anchor(slot: int, name: str) -> str:
    """A store of the local: Cranelift places pure arithmetic where it is first used, so without
    stores in between it would emit each chain whole, one after another, and the CPU's scheduler
    would fill with one chain's waiting instructions instead of running the chains side by side."""
    return f"(v128.store offset={ANCHORS + 16 * slot} (i32.const 0) (local.get {name}))"


def accumulate_wat(kernel: Kernel, accumulators: int, anchor_every: int, operands: int = 2) -> str:
    """A module exporting run(n): n iterations of OPS_PER_ITERATION updates, round robin over
    `accumulators` independent chains, each chain stored every `anchor_every` of its updates."""
    accs = [f"$a{i}" for i in range(accumulators)]
    xs = [f"$x{i}" for i in range(operands)]
    body = []
    for op in range(OPS_PER_ITERATION):
        acc, x = accs[op % accumulators], xs[op % operands]
        body.append(f"(local.set {acc} {kernel.step.format(acc=f'(local.get {acc})', x=f'(local.get {x})')})")
        if (op // accumulators + 1) % anchor_every == 0:
            body.append(_anchor(op % accumulators, acc))
    return _module([*accs, *xs], _loaded(accs + xs) + _loop(body) + [_folded(accs)])


def exp_module_wat(streams: int) -> str:
    """run(n): n iterations of OPS_PER_ITERATION / 4 exps of 4 lanes, round robin over `streams`
    independent chains, each exp stored. Each exp is softmax's, of s - max: x = exp(x - 1), which
    keeps x in (0, 1], so every input lies in (-1, 0]."""
    xs = [f"$x{i}" for i in range(streams)]
    body = []
    for op in range(OPS_PER_ITERATION // 4):
        x = xs[op % streams]
        body += exp_wat(f"(f32x4.sub (local.get {x}) {_splat(ONE)})")
        body += [f"(local.set {x} (local.get $y))", _anchor(op % streams, x)]
    return _module(xs + EXP_TEMPORARIES, _loaded(xs) + _loop(body) + [_folded(xs)])


def exp_check_wat() -> str:
    """A module whose run(n) replaces the first n vectors of its memory by their exp, through
    exp_wat: so a test can check the microbenchmark computes the kernels' exp, bit for bit."""
    body = ["(local.set $x0 (v128.load (local.get $p)))", *exp_wat("(local.get $x0)"),
            "(v128.store (local.get $p) (local.get $y))",
            "(local.set $p (i32.add (local.get $p) (i32.const 16)))"]
    return _module(["$x0", *EXP_TEMPORARIES], _loop(body) + ["(i32.const 0)"], pointer=True)


def _module(v128_locals: list[str], body: list[str], pointer: bool = False) -> str:
    locals_ = ("(local $p i32) " if pointer else "") + " ".join(f"(local {name} v128)" for name in v128_locals)
    return "\n".join([
        "(module", f"(memory (export \"memory\") {MEMORY_PAGES})",
        "(func (export \"run\") (param $n i32) (result i32)", locals_,
        *body, "))"])


def _module_path(wat: str) -> Path:
    code = wasmtime.wat2wasm(wat)
    path = wasm.module_cache_dir() / "roofline" / f"{hashlib.sha256(code).hexdigest()[:24]}.wasm"
    if not path.is_file():
        write_atomic(path, bytes(code))
    return path


def time_module(wat: str, ops_per_iteration: int = OPS_PER_ITERATION) -> float:
    """Vector operations per second: the fastest of CALLS calls, each about TARGET_CALL_S long."""
    runtime = wasm.default_runtime()
    path = _module_path(wat)
    store = runtime.new_store(60.0)
    run = runtime.instantiate(path, store).exports(store)["run"]
    iterations, best = 1000, float("inf")
    while True:  # calibrate: long enough that the call's overhead does not count
        start = time.perf_counter()
        run(store, iterations)
        elapsed = time.perf_counter() - start
        if elapsed >= TARGET_CALL_S / 3:
            break
        iterations *= 4
    iterations = max(1, int(iterations * TARGET_CALL_S / elapsed))
    for _ in range(CALLS):
        start = time.perf_counter()
        run(store, iterations)
        best = min(best, time.perf_counter() - start)
    return iterations * ops_per_iteration / best


def measure_floor(kernel: Kernel, accumulator_counts=ACCUMULATOR_COUNTS, anchor_intervals=ANCHOR_INTERVALS) -> dict:
    """The kernel's best rate over accumulator counts and store intervals, in units per second."""
    rates = {(n, k): time_module(accumulate_wat(kernel, n, k)) * kernel.per_op
             for n in accumulator_counts for k in anchor_intervals}
    (n, k) = max(rates, key=rates.get)
    return {"unit": kernel.unit, "per_second": rates[n, k], "accumulators": n, "stored_every": k,
            "instructions": kernel.instructions,
            "variants": {f"{n} chains, stored every {k}": r for (n, k), r in rates.items()}}


def measure_exp_floor(stream_counts=EXP_STREAMS) -> dict:
    rates = {n: time_module(exp_module_wat(n), OPS_PER_ITERATION // 4) * 4 for n in stream_counts}
    best = max(rates, key=rates.get)
    return {"unit": "exps", "per_second": rates[best], "streams": best,
            "instructions": "softmax's f32x4 exp of s - max (Eigen's pexp for inputs <= 0, no FMA)",
            "by_streams": {str(n): r for n, r in rates.items()}}


# --- work from the IR, floors per stage ------------------------------------------------------


def rows_of(extent: str, live: int, seq: int) -> int:
    """The rows a buffer of this extent (porter.recover.rows) has for a right-padded window."""
    return {"one": 1, "live": live, "keys": live, "all": seq}[extent]


def stage_work(ir: dict, live: int) -> dict:
    """The arithmetic of one forward pass with `live` live tokens, counted from ir.json's steps
    and buffer extents: matmul int8 products (or float multiply-adds for float weights);
    attention's float multiply-adds (Q.K^T and P.V over the keys it reads) and exps."""
    seq, buffers = int(ir["seq"]), ir["buffers"]
    work = {"matmul": {"int8_products": 0, "f32_multiply_adds": 0},
            "attention": {"f32_multiply_adds": 0, "exps": 0}}
    for step in ir["steps"]:
        rows = rows_of(buffers[step["outputs"][0]]["extent"], live, seq)
        if step["step"] == "LinearStep":
            linear = step["linear"]
            kind = "f32_multiply_adds" if linear["weights"] == "float32" else "int8_products"
            work["matmul"][kind] += rows * linear["in_features"] * linear["out_features"]
        elif step["step"] == "Attention":
            keys = rows_of(buffers[step["inputs"][1]]["extent"], live, seq)
            scores = step["heads"] * rows * keys
            work["attention"]["f32_multiply_adds"] += 2 * scores * step["head_dim"]
            work["attention"]["exps"] += scores
    return work


def float_kernel(ir: dict) -> Kernel:
    """LiteRT's float sums are a multiply then an add; onnxruntime's are fma chains, which the
    ONNX crates run as relaxed_madd (fused by wasmtime on an FMA CPU)."""
    return MUL_ADD if ir.get("reference") == "litert_builtin" else RELAXED_MADD


def measure_floors(ir: dict) -> dict:
    """Each floor this module's stages need, measured now: unit name -> floor record."""
    return {"int8_products": measure_floor(DOT), "f32_multiply_adds": measure_floor(float_kernel(ir)),
            "exps": measure_exp_floor()}


def best_floors(rounds: list[dict]) -> dict:
    """Per unit, the fastest of the floors measured in each round (the quietest moment)."""
    return {unit: max((r[unit] for r in rounds), key=lambda f: f["per_second"]) for unit in rounds[0]}


def stage_roofline(work: dict, floors: dict, median_ms: float, min_ms: float) -> dict:
    """One stage against its floor; a stage without counted work (other: LayerNorm, GELU,
    quantisation, residual adds: elementwise work bound by memory) has no floor."""
    floor_ms = sum(1000 * count / floors[unit]["per_second"] for unit, count in work.items())
    counted = bool(work) and median_ms > 0 and min_ms > 0
    return {"work": work, "median_ms": median_ms, "min_ms": min_ms, "floor_ms": floor_ms if work else None,
            "rate_per_second": {unit: 1000 * count / median_ms for unit, count in work.items()} if counted else {},
            "of_floor_median": floor_ms / median_ms if counted else None,
            "of_floor_min": floor_ms / min_ms if counted else None}


def case_roofline(ir: dict, live: int, stages: dict, floors: dict) -> dict:
    """stages: the module's own per-run stage times ({"matmul": [ms], ...})."""
    work = {**stage_work(ir, live), "other": {}}
    return {stage: stage_roofline({u: n for u, n in work[stage].items() if n}, floors,
                                  statistics.median(stages[stage]), min(stages[stage]))
            for stage in ("matmul", "attention", "other")}


def roofline_report(ir: dict, live_tokens: dict[str, int], stages: dict, floor_rounds: list[dict]) -> dict:
    """bench.json's roofline: the floors (best round) and, per case, each stage against them.
    live_tokens: case name -> live tokens; stages: case name -> the module's stage times."""
    floors = best_floors(floor_rounds)
    return {"floors": floors, "floor_rounds": len(floor_rounds),
            "cases": {name: case_roofline(ir, live, stages[name], floors) for name, live in live_tokens.items()}}


UNIT_NAMES = {"int8_products": "int8 products", "f32_multiply_adds": "f32 MACs", "exps": "exps"}


def _scaled(value: float) -> str:
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g} "


def _floor_line(unit: str, floor: dict) -> str:
    chains = floor.get("accumulators") or floor.get("streams")
    return f"{UNIT_NAMES[unit]} {_scaled(floor['per_second'])}/s ({floor['instructions']}; {chains} chains)"


def _stage_line(stage: str, r: dict) -> str:
    work = " + ".join(f"{_scaled(n).rstrip()} {UNIT_NAMES[u]}" for u, n in r["work"].items()) or "(not counted)"
    rate = " + ".join(f"{_scaled(v)}/s" for v in r["rate_per_second"].values()) or "-"
    floor = f"{r['floor_ms']:9.2f}" if r["floor_ms"] is not None else f"{'-':>9s}"
    share = (f"{100 * r['of_floor_median']:.0f}% / {100 * r['of_floor_min']:.0f}%"
             if r["of_floor_median"] is not None else "-")
    return f"    {stage:10s} {work:36s} {r['median_ms']:9.2f} {r['min_ms']:8.2f} {rate:>22s} {floor} {share:>13s}"


def roofline_lines(roofline: dict) -> list[str]:
    lines = [f"roofline: floors in wasm under wasmtime (microbenchmarks, best of {roofline['floor_rounds']} rounds):"]
    lines += [f"  {_floor_line(unit, floor)}" for unit, floor in roofline["floors"].items()]
    lines.append(f"  {'stage':12s} {'work':36s} {'median ms':>9s} {'min ms':>8s} {'rate (median)':>22s} "
                 f"{'floor ms':>9s} {'% of floor':>13s}")
    for case, stages in roofline["cases"].items():
        lines.append(f"  {case} (% of floor: at the median / at the min)")
        lines += [_stage_line(stage, r) for stage, r in stages.items()]
    return lines
