"""Where a built module's time goes, sampled on this machine: the eval module runs a full window
again and again under `perf record`, sampling on the cpu-clock timer (no hardware counters
needed, so it works in a VM), with wasmtime's jitdump profiler on, so that every sample lands in
a wasm function's machine code. `perf inject --jit` writes each function's code out as an ELF
file; objdump lists it. scripts/model_kernels.py prints the flat profile and hands each kernel's
basic block with the most samples to llvm-mca (mca.py).

The code sampled is the code Spin runs: the same engine settings as porter's runtime (Cranelift,
epoch interruption on), the profiler only registering each function with perf.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from porter.bench.bench import make_cases
from porter.check.modules import ENCODER, locate_module
from porter.errors import PorterError
from porter.runtime.wasm import WasmRuntime

SAMPLE_HZ = 2000  # each sample is a timer interrupt, a VM exit under KVM: modest, or it slows the run
WINDOWS = 20  # full windows run under the profiler (a few seconds for a MiniLM-sized model)
WINDOW_TIMEOUT_S = 60.0  # the sampled run's epoch deadline, per window (as porter bench allows)

SAMPLE = re.compile(r"^\s*[0-9a-f]+ (.+)\+0x([0-9a-f]+) \((.*)\)$")
FUNCTION = re.compile(r"^([0-9a-f]+) <(.*)>:$")
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")


@dataclass
class Profile:
    """Samples per (function, address) in the module's jitted code, and the code of every
    function that has any: (address, instruction) in address order, as objdump lists it."""

    samples: Counter
    code: dict[str, list[tuple[int, str]]]

    @property
    def total(self) -> int:
        return sum(self.samples.values())

    def functions(self) -> list[tuple[str, int]]:
        """Each function's samples, most first."""
        per_function: Counter = Counter()
        for (function, _), n in self.samples.items():
            per_function[function] += n
        return per_function.most_common()

    def hottest_block(self, fragment: str, blocks_of) -> tuple[list[str], int] | None:
        """The basic block (blocks_of splits a function's code) with the most samples among the
        functions whose names contain `fragment`, and its samples."""
        best = None
        for function, code in self.code.items():
            if fragment not in function:
                continue
            for block in blocks_of(code):
                addresses = {address for address, _ in block}
                n = sum(self.samples[(function, a)] for a in addresses)
                if n and (best is None or n > best[1]):
                    best = ([text for _, text in block], n)
        return best


def perf() -> str:
    found = shutil.which("perf")
    if found is None:
        raise PorterError("no perf: install Debian's linux-perf (the profile samples the module with it)")
    return found


def record(target: Path, scratch: Path, windows: int = WINDOWS) -> Profile:
    """Sample `windows` full-window forward passes of the encoder eval module built in target."""
    module = locate_module(target)
    if module.kind != ENCODER:
        raise PorterError(f"{module.wasm.name}: the profile runs encoder windows; this is a {module.kind} module")
    vocab = int(json.loads((module.compiled_dir / "ir.json").read_text())["vocab"])
    case = make_cases(module.seq, vocab)[0]
    request = scratch / "request.bin"
    request.write_bytes(case.request(windows))
    data, injected = scratch / "perf.data", scratch / "perf.jit.data"
    _run([perf(), "record", "-q", "-e", "cpu-clock", "-F", str(SAMPLE_HZ), "-k", "1", "-o", str(data), "--",
          sys.executable, "-m", "porter.bench.profile", str(module.wasm.resolve()), str(request), str(windows)], scratch)
    _run([perf(), "inject", "--jit", "-i", str(data), "-o", str(injected)], scratch)
    listing = _run([perf(), "script", "-i", str(injected), "-F", "ip,sym,symoff,dso"], scratch)
    offsets: dict[str, Counter] = {}
    elf_of: dict[str, Path] = {}
    for line in listing.splitlines():
        match = SAMPLE.match(line)
        if match and "/jitted-" in match.group(3):  # a wasm function's code, as perf inject wrote it
            function = match.group(1)
            offsets.setdefault(function, Counter())[int(match.group(2), 16)] += 1
            elf_of[function] = Path(match.group(3))
    samples: Counter = Counter()
    code = {}
    for function, elf in elf_of.items():
        start, code[function] = disassemble(elf)[function]
        for offset, n in offsets[function].items():
            samples[(function, start + offset)] += n
    if not samples:
        raise PorterError(f"perf recorded no samples in {module.wasm.name}'s code (is perf allowed to sample here?)")
    return Profile(samples, code)


def disassemble(elf: Path) -> dict[str, tuple[int, list[tuple[int, str]]]]:
    """Each function in an ELF file: its start address and its (address, instruction) list."""
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(elf)], check=True, capture_output=True,
                             text=True).stdout
    functions: dict[str, tuple[int, list[tuple[int, str]]]] = {}
    current = None
    for line in listing.splitlines():
        if match := FUNCTION.match(line):
            current = functions.setdefault(match.group(2), (int(match.group(1), 16), []))[1]
        elif current is not None and (match := INSTRUCTION.match(line)):
            current.append((int(match.group(1), 16), re.sub(r"\s+<.*>$", "", match.group(2).strip())))
    return functions


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PorterError(f"{Path(command[0]).name} {command[1]} failed: {last[-300:]}")
    return done.stdout


def _run_profiled(wasm_path: Path, request: Path, windows: int) -> None:
    """The sampled process: the eval module on the request, as porter's runtime runs it, with
    wasmtime's jitdump on (written to the working directory, where perf inject finds it)."""
    with WasmRuntime(profiler="jitdump") as runtime:
        done = runtime.run_command(wasm_path, stdin=request.read_bytes(), timeout_s=WINDOW_TIMEOUT_S * windows)
    if done.exit_code != 0:
        raise PorterError(f"{wasm_path.name} exited with {done.exit_code}: {done.stderr.decode(errors='replace')[-300:]}")


if __name__ == "__main__":
    _run_profiled(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
