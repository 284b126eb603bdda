"""`porter build --tune`: pick the kernels' work per loop iteration by measuring on the target.

The knobs in src/tuning.rs (GEMM register tile, the activations a GEMM row block may span,
attention query rows) never change a result bit, only speed, and the best values depend on the
runtime's code generator and the CPU (its L1 size, for the row blocks). So porter builds each
candidate, runs a full window (every token live) under wasmtime with epoch interruption, as Spin
runs it, and keeps the fastest: GEMM tiles by the forward pass's matmul time, then (for a tile of
more than 4 rows) the row blocks' span by matmul time, then query rows by its attention time.
The candidates are timed in interleaved rounds and each keeps its fastest round, so a minute of
load on a shared host cannot pick the winner.
Every candidate's logits must equal the default tuning's bit for bit, or tuning stops with an
error. The winner and the measurements are written into src/tuning.rs (as a comment) and
tuning.json, and the crate is built with it. The candidates are porter/codegen/tuning.py's, the
ones the kernel-check module checks.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

import jinja2
import numpy as np

from porter.runtime import evalproto

from porter.runtime import wasm
from porter.bench.bench import make_cases
from porter.codegen.encoder import TEMPLATE, build_forward_crate
from porter.codegen.tuning import GEMM_ROW_BLOCKS, GEMM_TILES, QUERY_ROWS, Tuning, tuning_variables
from porter.errors import PorterError
from porter.fsutil import write_atomic
from porter.toolchain.discover import Toolchain

ROUNDS = 3  # interleaved timing rounds per candidate; each keeps its fastest
TUNING_JSON = "tuning.json"


def write_tuning_rs(crate: Path, tuning: Tuning, tuned: dict | None = None) -> None:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE), undefined=jinja2.StrictUndefined,
                                     keep_trailing_newline=True, autoescape=False)
    text = environment.get_template("src/tuning.rs.j2").render(**tuning_variables(tuning, tuned))
    write_atomic(crate / "src" / "tuning.rs", text.encode())


class Trial:
    """Builds the crate once per tuning (keeping each module) and times the modules; remembers
    the first one's logits."""

    def __init__(self, crate: Path, toolchain: Toolchain, runs: int, modules_dir: Path):
        ir = json.loads((crate / "ir.json").read_text())
        case = make_cases(int(ir["seq"]), int(ir["vocab"]))[0]
        self.crate, self.toolchain, self.modules_dir = crate, toolchain, modules_dir
        self.request = case.request(runs)
        self.modules: dict[Tuning, Path] = {}
        self.reference: list[np.ndarray] | None = None

    def build(self, tuning: Tuning) -> None:
        write_tuning_rs(self.crate, tuning)
        module = build_forward_crate(self.crate, self.toolchain)
        kept = self.modules_dir / f"{tuning.tile_rows}x{tuning.tile_outs}-b{tuning.row_block_bytes}-q{tuning.query_rows}.wasm"
        shutil.copyfile(module, kept)
        self.modules[tuning] = kept

    def run(self, tuning: Tuning) -> dict:
        done = wasm.run_command(self.modules[tuning], stdin=self.request, timeout_s=600)
        if done.exit_code != 0:
            raise PorterError(f"tuning {tuning}: the module exited with {done.exit_code}")
        results, _ = evalproto.decode_reply(done.stdout)
        logits = [r.logits for r in results]
        if self.reference is None:
            self.reference = logits
        elif not all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(logits, self.reference)):
            raise PorterError(f"tuning {tuning} changed the logits: the kernels are not exact under it")
        return {part: statistics.median(getattr(r, f"{part}_ms") for r in results)
                for part in ("matmul", "attention", "forward")}

    def measure(self, candidates: list[Tuning], rounds: int) -> dict[Tuning, dict]:
        """Each candidate's stage times: the fastest of `rounds` interleaved rounds."""
        for tuning in candidates:
            if tuning not in self.modules:
                self.build(tuning)
        timed: dict[Tuning, list[dict]] = {tuning: [] for tuning in candidates}
        for _ in range(rounds):
            for tuning in candidates:
                timed[tuning].append(self.run(tuning))
        return {tuning: {part: min(r[part] for r in rounds_) for part in rounds_[0]}
                for tuning, rounds_ in timed.items()}


def tune(crate_dir: Path, toolchain: Toolchain, runs: int = 3, rounds: int = ROUNDS, echo=print) -> Tuning:
    crate = Path(crate_dir)
    if not (crate / "ir.json").is_file():
        raise PorterError(f"{crate} is not a porter forward crate (run `porter compile MODEL -o {crate}`)")
    modules_dir = Path(tempfile.mkdtemp(prefix=".tune-", dir=crate))
    try:
        best, measured = _choose(Trial(crate, toolchain, runs, modules_dir), rounds, echo)
    finally:
        shutil.rmtree(modules_dir, ignore_errors=True)
    default = Tuning()
    lines = [f"GEMM {t.tile_rows}x{t.tile_outs}, row blocks over {t.row_block_bytes // 1024} KiB, query rows {t.query_rows}: "
             f"matmul {m['matmul']:.2f} ms, attention {m['attention']:.2f} ms, forward {m['forward']:.2f} ms"
             for t, m in measured.items()]
    write_tuning_rs(crate, best, {"runs": runs, "rounds": rounds, "lines": lines})
    build_forward_crate(crate, toolchain)
    record = {"chosen": asdict(best), "runs_per_candidate": runs, "rounds": rounds,
              "candidates": [{**asdict(t), **{f"{k}_ms": v for k, v in m.items()}} for t, m in measured.items()]}
    write_atomic(crate / TUNING_JSON, (json.dumps(record, indent=1) + "\n").encode())
    echo(f"chosen: GEMM tile {best.tile_rows}x{best.tile_outs}, row blocks over {best.row_block_bytes // 1024} KiB, "
         f"attention query rows {best.query_rows} "
         f"(forward {measured[best]['forward']:.2f} ms vs default {measured[default]['forward']:.2f} ms); "
         f"recorded in {crate / 'src' / 'tuning.rs'} and {crate / TUNING_JSON}")
    return best


def _choose(trial: Trial, rounds: int, echo) -> tuple[Tuning, dict[Tuning, dict]]:
    """GEMM tiles by matmul time at the default query rows, then (a tile of more than 4 rows) the
    row blocks' span by matmul time, then query rows by attention time with the fastest of those."""
    default = Tuning()
    tiles = [default] + [t for t in (replace(default, tile_rows=r, tile_outs=o) for r, o in GEMM_TILES) if t != default]
    measured = trial.measure(tiles, rounds)
    for t in tiles:
        echo(f"GEMM tile {t.tile_rows}x{t.tile_outs}: matmul {measured[t]['matmul']:.2f} ms")
    gemm = min(tiles, key=lambda t: measured[t]["matmul"])
    if gemm.tile_rows > 4:
        blocks = [gemm] + [replace(gemm, row_block_bytes=b) for b in GEMM_ROW_BLOCKS if b != gemm.row_block_bytes]
        measured.update(trial.measure(blocks, rounds))
        for t in blocks:
            echo(f"GEMM row blocks over {t.row_block_bytes // 1024} KiB: matmul {measured[t]['matmul']:.2f} ms")
        gemm = min(blocks, key=lambda t: measured[t]["matmul"])
    rows = [replace(gemm, query_rows=q) for q in QUERY_ROWS]
    measured.update(trial.measure(rows, rounds))
    for t in rows:
        echo(f"attention query rows {t.query_rows}: attention {measured[t]['attention']:.2f} ms")
    return min(rows, key=lambda t: measured[t]["attention"]), measured
