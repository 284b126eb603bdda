"""llvm-mca's model of a built module's hot loops on CPU kinds not at hand (scripts/model_kernels.py).

The hot loops are found by sampling, not by name: profile.py runs the module under perf with
wasmtime's jitdump profiler, and each kernel's basic block with the most samples is the one
modelled. The module's code is compiled by the wasmtime that runs it (Cranelift, epoch
interruption on: the machine code Spin runs), and so are the roofline's floor modules
(roofline.py). Cranelift emits the same 128-bit VEX code for simd128 on AVX2-only and AVX-512
hosts, so this machine's compilation stands for every x86 kind. llvm-mca models each block's
throughput as a loop body on a CPU's scheduling model (ports, latencies, the reorder buffer; not
caches, not the front end), and likewise the floor modules' loops (every variant the roofline
times, the fastest kept).
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
from porter.bench.profile import Profile, disassemble
from porter.runtime import wasm

DEFAULT_CPUS = ("sapphirerapids", "znver3", "znver4")
MCA_ITERATIONS = 100


@dataclass(frozen=True)
class Kernel:
    name: str
    function: str  # a fragment of the (demangled) names of the functions that hold it
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
    Kernel("int8 GEMM (row_block)", "::gemm::row_block::", "vpmaddwd", "int8 dot"),
    Kernel("attention scores (score tile)", "::attention::score_eight_keys::", "vmulps", "f32 mul + add"),
    Kernel("attention context (stepped rows)", "::attention::attention", "vmulps", "f32 mul + add"),
    Kernel("softmax exps", "::attention::exponentiate", "vroundps", "exp"),
)

ENDS_BLOCK = re.compile(r"^(j\w+|call\w*|ret\w*|ud2)\b")
JUMP_TARGET = re.compile(r"^j\w+\s+([0-9a-f]+)\b")


def machine_code(wasm_bytes: bytes, scratch: Path) -> dict[str, list[tuple[int, str]]]:
    """Each function's x86 instructions (address, text), as wasmtime compiles the module."""
    elf = scratch / "module.cwasm"
    elf.write_bytes(wasmtime.Module(wasm.default_runtime().engine, wasm_bytes).serialize())
    return {name: code for name, (_, code) in disassemble(elf).items()}


def basic_blocks(instructions: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """The function's straight-line runs, (address, instruction) each: split at every jump
    target and after every branch."""
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
            block.append((address, text))
    return blocks + ([block] if block else [])


def work_of(block: list[str], work: str) -> int:
    return sum(1 for text in block if text.split()[0] == work)


def loop_body(instructions: list[tuple[int, str]], work: str) -> list[str] | None:
    """A floor module's loop: the block with the most work instructions (the floor modules have
    one function, whose loop is the only block with any)."""
    blocks = [[text for _, text in block] for block in basic_blocks(instructions)]
    return max(blocks, key=lambda b: work_of(b, work), default=None)


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
    return {name: ([loop_body(machine_code(bytes(wasmtime.wat2wasm(wat)), scratch)["wasm[0]::function[0]"], work)
                    for wat in wats], work)
            for name, (wats, work) in floor_variants().items()}


def floor_cycles(blocks: list[list[str]], work: str, mca: str, cpu: str, scratch: Path) -> float | None:
    """The fastest variant's modelled cycles per work instruction on `cpu` (None: an unknown CPU)."""
    per_work = [cycles / work_of(block, work) for block in blocks
                if (cycles := mca_cycles(mca, cpu, block, scratch)) is not None]
    return min(per_work, default=None)


def model(profile: Profile, cpus: list[str], mca: str, scratch: Path) -> list[dict]:
    """Per kernel sampled in the profile: its hottest block's size, work and share of the module's
    samples, and per CPU the modelled cycles per work instruction of the block and of its floor
    (None where llvm-mca has no such CPU)."""
    floors = {name: {cpu: floor_cycles(blocks, work, mca, cpu, scratch) for cpu in cpus}
              for name, (blocks, work) in floor_blocks(scratch).items()}
    rows = []
    for kernel in KERNELS:
        hottest = profile.hottest_block(kernel.function, basic_blocks)
        if hottest is None or work_of(hottest[0], kernel.work) == 0:
            continue
        block, samples = hottest
        units = work_of(block, kernel.work)
        per_cpu = {}
        for cpu in cpus:
            cycles, floor = mca_cycles(mca, cpu, block, scratch), floors[kernel.floor][cpu]
            per_cpu[cpu] = None if cycles is None or floor is None else (cycles / units, floor)
        rows.append({"kernel": kernel.name, "instructions": len(block), "work": units,
                     "share": samples / profile.total, "per_cpu": per_cpu})
    return rows
