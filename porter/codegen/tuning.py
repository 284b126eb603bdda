"""The kernels' work per loop iteration (the crate's src/tuning.rs): the default, and the
candidates. Never a result bit, only speed.

The candidates are one list for both of their users: `porter build --tune` (porter/bench/tune.py)
builds and times each, and the kernel-check module (templates/rust_forward/checks, its
tiles.rs.j2) instantiates each and checks it against the scalar references. So a tile added here
is both tuned and checked.
"""

from __future__ import annotations

from dataclasses import dataclass

# GEMM register tiles: (activation rows, output rows) per inner loop.
GEMM_TILES = ((1, 4), (2, 2), (2, 4), (4, 1), (4, 2), (4, 4), (8, 1))
# Attention query rows scored together (at most 8: templates/rust_forward/src/kernels/litert/attention.rs
# each_row writes them out).
QUERY_ROWS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Tuning:
    """Work per loop iteration; never changes a result bit. The defaults are the fastest on
    MiniLM-L6 on this project's machine (AMD EPYC, wasmtime 50), timed side by side: GEMM tiles
    of 2 rows x 4 outputs (matmul 119-126 ms a window against 137-193 for 2x2 and 138 for 4x4,
    whose sixteen accumulators and sixteen activation vectors no longer fit the registers) and
    8 query rows."""

    tile_rows: int = 2
    tile_outs: int = 4
    query_rows: int = 8


def tuning_variables(tuning: Tuning, tuned: dict | None = None) -> dict:
    """What templates/rust_forward/src/tuning.rs.j2 reads; `tuned` records a --tune run."""
    return {"tile_rows": tuning.tile_rows, "tile_outs": tuning.tile_outs, "query_rows": tuning.query_rows,
            "tuned": tuned}


def candidate_variables() -> dict:
    """What templates/rust_forward/checks/src/tiles.rs.j2 reads: every candidate."""
    return {"candidate_gemm_tiles": GEMM_TILES, "candidate_query_rows": QUERY_ROWS}
