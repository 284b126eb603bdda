"""The kernels' work per loop iteration (the crate's src/tuning.rs): the default, and the
candidates. Never a result bit, only speed.

The candidates are one list for both of their users: `porter build --tune` (porter/bench/tune.py)
builds and times each, and the kernel-check module (templates/rust_forward/checks, its
tiles.rs.j2) instantiates each and checks it against the scalar references. So a tile added here
is both tuned and checked.
"""

from __future__ import annotations

from dataclasses import dataclass

# GEMM register tiles: (activation rows, output rows) per inner loop; outputs 1, 2 or 4 (eight
# weight vectors held: templates/rust_forward/src/kernels/common/gemm.rs), rows at most 8.
GEMM_TILES = ((4, 4), (8, 2), (8, 4))
# Attention query rows scored together (at most 8: templates/rust_forward/src/kernels/litert/attention.rs
# each_row writes them out).
QUERY_ROWS = (1, 2, 4, 8)
# The activation bytes a GEMM row block of more than 4 rows may span (rows too long for it go in
# blocks of 4): half a 32 KiB L1 (AMD Zen 3 and 4), or all of it with the weights' stream in the
# rest of a 48 KiB one (Intel Xeon since Ice Lake).
GEMM_ROW_BLOCKS = (1 << 14, 1 << 15)


@dataclass(frozen=True)
class Tuning:
    """Work per loop iteration; never changes a result bit. The defaults, chosen from the machine
    code and timed side by side on MiniLM-L6 (issue 32, an Intel Xeon; docs/speed.md): GEMM tiles
    of 8 activation rows x 4 outputs, the outputs' weights held while the rows pass by (one int8
    widening per 64 products, 2.125 vector ALU operations per 8 products where the floor takes 2;
    4 rows where 8 would span more than 16 KiB of activations, half the 32 KiB L1 of AMD Zen 3
    and 4: on the Xeon 32 KiB measured 2-3 % faster, but no Zen was at hand to measure what it costs
    there), and 8 query rows per attention block."""

    tile_rows: int = 8
    tile_outs: int = 4
    query_rows: int = 8
    row_block_bytes: int = GEMM_ROW_BLOCKS[0]


def tuning_variables(tuning: Tuning, tuned: dict | None = None) -> dict:
    """What templates/rust_forward/src/tuning.rs.j2 reads; `tuned` records a --tune run."""
    return {"tile_rows": tuning.tile_rows, "tile_outs": tuning.tile_outs, "query_rows": tuning.query_rows,
            "row_block_bytes": tuning.row_block_bytes, "tuned": tuned}


def candidate_variables() -> dict:
    """What templates/rust_forward/checks/src/tiles.rs.j2 reads: every candidate."""
    return {"candidate_gemm_tiles": GEMM_TILES, "candidate_query_rows": QUERY_ROWS}
