"""Where a built module's time goes on this machine, sampled, and how its hot loops fare on CPU
kinds not at hand, as llvm-mca models them.

    .venv/bin/python scripts/model_kernels.py TARGET [--cpus sapphirerapids,znver3,znver4] [--windows N]

TARGET is an encoder crate built by `porter build`. Prints the module's flat profile (its
functions' shares of the samples, porter/bench/profile.py: perf on the cpu-clock timer, so no
hardware counters needed), then per kernel (porter/bench/mca.py) its basic block with the most
samples, that block's share, and per CPU the modelled cycles per work instruction of the block
and of its floor's, and the kernel's share of the floor: a model of one block's steady state (no
cache misses, no branch or call overhead, no front end), not a measurement, for the CPU kinds
that are not at hand and for seeing which execution ports a block saturates. perf comes with
Debian's linux-perf, llvm-mca with its llvm packages (llvm-19 and newer have the Zen 4 model;
llvm-14's lacks it, and a CPU it lacks is reported so).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from porter.bench.mca import DEFAULT_CPUS, model, newest_mca
from porter.bench.profile import WINDOWS, record
from porter.errors import PorterError

FLAT_PROFILE_ROWS = 12


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
    parser.add_argument("--windows", type=int, default=WINDOWS, help="full windows run under the profiler")
    args = parser.parse_args()
    mca = newest_mca()
    if mca is None:
        fail("no llvm-mca: install Debian's llvm-19 (apt-get install llvm-19)")
    if args.windows < 1:
        fail(f"--windows {args.windows}: at least one window")
    cpus = [c for c in args.cpus.split(",") if c]
    with tempfile.TemporaryDirectory(prefix="porter-profile-") as scratch:
        try:
            profile = record(args.target, Path(scratch), args.windows)
        except PorterError as e:
            fail(str(e))
        rows = model(profile, cpus, mca, Path(scratch))
    print(f"{args.target}: {profile.total} samples in the module's code ({args.windows} full windows)")
    for function, samples in profile.functions()[:FLAT_PROFILE_ROWS]:
        print(f"  {samples / profile.total:6.1%}  {function.split('::', 1)[-1]}")
    print(f"modelled by {Path(mca).name}: cycles per work instruction (kernel / floor) and the kernel's share "
          f"of its floor, for each kernel's block with the most samples")
    print(f"  {'kernel':34s} {'block':>13s} {'samples':>8s}  " + "  ".join(f"{cpu:>22s}" for cpu in cpus))
    for row in rows:
        cells = [cell(row["per_cpu"][cpu]) for cpu in cpus]
        print(f"  {row['kernel']:34s} {row['instructions']:5d} ins {row['work']:3d} {row['share']:8.1%}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
