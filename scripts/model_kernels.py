"""How a built module's hot loops fare on CPU kinds not at hand, as llvm-mca models them.

    .venv/bin/python scripts/model_kernels.py TARGET [--cpus sapphirerapids,znver3,znver4]

TARGET is a crate built by `porter build`. Prints, per kernel (porter/bench/mca.py) and CPU, the
modelled cycles per work instruction of its hottest block and of its floor's, and the kernel's
share of the floor: a model of one block's steady state (no cache misses, no branch or call
overhead, no front end), not a measurement, for the CPU kinds that are not at hand and for
seeing which execution ports a block saturates. llvm-mca comes with Debian's llvm packages
(llvm-19 and newer have the Zen 4 model; llvm-14's lacks it, and a CPU it lacks is reported so).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from porter.bench.mca import DEFAULT_CPUS, model, newest_mca


def cell(modelled: tuple[float, float] | None) -> str:
    """A kernel's and its floor's cycles per work instruction, and the kernel's share of the floor."""
    if modelled is None:
        return f"{'(no model)':>22s}"
    kernel, floor = modelled
    return f"{kernel:6.3f} / {floor:5.3f} {floor / kernel:5.0%}"


def fail(message: str) -> None:
    print(f"model_kernels: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--cpus", default=",".join(DEFAULT_CPUS))
    args = parser.parse_args()
    modules = sorted(args.target.glob("porter-*.wasm"))
    mca = newest_mca()
    if not modules:
        fail(f"no porter-*.wasm in {args.target}: build it with `porter build` first")
    if mca is None:
        fail("no llvm-mca: install Debian's llvm-19 (apt-get install llvm-19)")
    cpus = [c for c in args.cpus.split(",") if c]
    with tempfile.TemporaryDirectory(prefix="porter-mca-") as scratch:
        rows = model(modules[-1].read_bytes(), cpus, mca, Path(scratch))
    print(f"{modules[-1].name}, modelled by {Path(mca).name}: cycles per work instruction "
          f"(kernel / floor) and the kernel's share of its floor")
    print(f"  {'kernel':34s} {'block':>13s}  " + "  ".join(f"{cpu:>22s}" for cpu in cpus))
    for row in rows:
        cells = [cell(row["per_cpu"][cpu]) for cpu in cpus]
        print(f"  {row['kernel']:34s} {row['instructions']:5d} ins {row['work']:3d}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
