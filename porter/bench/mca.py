"""llvm-mca's model of a built module's hot loops on CPU kinds not at hand (scripts/model_kernels.py).

The module is compiled by the wasmtime that runs it (Cranelift, epoch interruption on: the machine
code Spin runs), and so are the roofline's floor modules (roofline.py). Cranelift emits the same
128-bit VEX code for simd128 on AVX2-only and AVX-512 hosts, so this machine's compilation stands
for every x86 kind. For each kernel, the basic block of its functions with the most work
instructions (ties: the longest, a loop's steady state over its first step) is handed to
llvm-mca, which models its throughput as a loop body on a CPU's scheduling model (ports,
latencies, the reorder buffer; not caches, not the front end), and likewise the floor modules'
(every variant the roofline times, the fastest kept).
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from porter.bench import roofline
from porter.runtime import wasm

DEFAULT_CPUS = ("sapphirerapids", "znver3", "znver4")
MCA_ITERATIONS = 100


@dataclass(frozen=True)
class Kernel:
    name: str
    function: str  # a fragment of the (mangled) names of the functions that hold it
    work: str  # the instruction one unit of its work is: its count in a block is the block's work
    floor: str  # the floor (floor_variants) it is measured against


def floor_variants() -> dict[str, tuple[list[str], str]]:
    """Each floor's WAT variants as the roofline times them (it keeps the fastest, and so does
    the model), and the instruction its work is counted in."""
    def accumulating(kernel: roofline.Kernel) -> list[str]:
        return [roofline.accumulate_wat(kernel, n, k) for n in roofline.ACCUMULATOR_COUNTS for k in roofline.ANCHOR_INTERVALS]
    return {"int8 dot": (accumulating(roofline.DOT), "vpmaddwd"),
            "f32 mul + add": (accumulating(roofline.MUL_ADD), "vmulps"),
            "exp": ([roofline.exp_module_wat(n) for n in roofline.EXP_STREAMS], "vroundps")}


KERNELS = (
    Kernel("int8 GEMM (row_block)", "4gemm9row_block", "vpmaddwd", "int8 dot"),
    Kernel("attention scores (score tile)", "16score_eight_keys", "vmulps", "f32 mul + add"),
    Kernel("attention context (stepped rows)", "9attention9attention", "vmulps", "f32 mul + add"),
    Kernel("softmax exps", "12exponentiate", "vroundps", "exp"),
)

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\t(.*)$")
ENDS_BLOCK = re.compile(r"^(j\w+|call\w*|ret\w*|ud2)\b")
JUMP_TARGET = re.compile(r"^j\w+\s+([0-9a-f]+)\b")


def machine_code(wasm_bytes: bytes, scratch: Path) -> dict[str, list[tuple[int, str]]]:
    """Each function's x86 instructions (address, text), as wasmtime compiles the module."""
    engine = wasm.default_runtime().engine
    elf = scratch / "module.cwasm"
    elf.write_bytes(wasmtime.Module(engine, wasm_bytes).serialize())
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(elf)], check=True,
                             capture_output=True, text=True).stdout
    functions: dict[str, list[tuple[int, str]]] = {}
    current = None
    for line in listing.splitlines():
        if match := FUNCTION.match(line):
            current = functions.setdefault(match.group(1), [])
        elif current is not None and (match := INSTRUCTION.match(line)):
            current.append((int(match.group(1), 16), re.sub(r"\s+<.*>$", "", match.group(2).strip())))
    return functions


def basic_blocks(instructions: list[tuple[int, str]]) -> list[list[str]]:
    """The function's straight-line runs: split at every jump target and after every branch."""
    targets = {int(m.group(1), 16) for _, text in instructions if (m := JUMP_TARGET.match(text))}
    blocks, block = [], []
    for address, text in instructions:
        if address in targets and block:
            blocks.append(block)
            block = []
        if ENDS_BLOCK.match(text):
            if block:
                blocks.append(block)
            block = []
        else:
            block.append(text)
    return blocks + ([block] if block else [])


def work_of(block: list[str], work: str) -> int:
    return sum(1 for text in block if text.split()[0] == work)


def hottest_block(functions: dict, fragment: str, work: str) -> list[str] | None:
    """The block with the most work instructions among the functions named with `fragment`, the
    longest of those (a loop's steady state, which reads its running sums, over its first step)."""
    candidates = [b for name, code in functions.items() if fragment in name for b in basic_blocks(code)]
    return max(candidates, key=lambda b: (work_of(b, work), len(b)), default=None)


def mca_cycles(mca: str, cpu: str, block: list[str], scratch: Path) -> float | None:
    """llvm-mca's cycles per iteration of the block as a loop body on `cpu` (None: unknown CPU)."""
    source = scratch / "block.s"
    source.write_text("\n".join(block) + "\n")
    run = subprocess.run([mca, f"-mcpu={cpu}", f"-iterations={MCA_ITERATIONS}", str(source)],
                         capture_output=True, text=True)
    match = re.search(r"Total Cycles:\s+(\d+)", run.stdout)
    if run.returncode != 0 or match is None or "not a recognized processor" in run.stderr:
        return None
    return int(match.group(1)) / MCA_ITERATIONS


def newest_mca() -> str | None:
    """The newest llvm-mca installed (Debian installs them as llvm-mca-N), or None."""
    versions = sorted(glob.glob("/usr/bin/llvm-mca-*"), key=lambda p: int(p.rsplit("-", 1)[1]))
    return versions[-1] if versions else shutil.which("llvm-mca")


def floor_blocks(scratch: Path) -> dict[str, tuple[list[list[str]], str]]:
    """Each floor's variants' hottest blocks, and the instruction its work is counted in."""
    return {name: ([hottest_block(machine_code(bytes(wasmtime.wat2wasm(wat)), scratch), "function[0]", work) for wat in wats],
                   work)
            for name, (wats, work) in floor_variants().items()}


def floor_cycles(blocks: list[list[str]], work: str, mca: str, cpu: str, scratch: Path) -> float | None:
    """The fastest variant's modelled cycles per work instruction on `cpu` (None: an unknown CPU)."""
    per_work = [cycles / work_of(block, work) for block in blocks
                if (cycles := mca_cycles(mca, cpu, block, scratch)) is not None]
    return min(per_work, default=None)


def model(wasm_bytes: bytes, cpus: list[str], mca: str, scratch: Path) -> list[dict]:
    """Per kernel found in the module: its block's size and work, and per CPU the modelled cycles
    per work instruction of the block and of its floor (None where llvm-mca has no such CPU)."""
    floors = {name: {cpu: floor_cycles(blocks, work, mca, cpu, scratch) for cpu in cpus}
              for name, (blocks, work) in floor_blocks(scratch).items()}
    code = machine_code(wasm_bytes, scratch)
    rows = []
    for kernel in KERNELS:
        block = hottest_block(code, kernel.function, kernel.work)
        if block is None or work_of(block, kernel.work) == 0:
            continue
        units = work_of(block, kernel.work)
        per_cpu = {}
        for cpu in cpus:
            cycles, floor = mca_cycles(mca, cpu, block, scratch), floors[kernel.floor][cpu]
            per_cpu[cpu] = None if cycles is None or floor is None else (cycles / units, floor)
        rows.append({"kernel": kernel.name, "instructions": len(block), "work": units, "per_cpu": per_cpu})
    return rows
