"""What a benchmark ran on, so that figures from different machines can be compared: the CPU (its
model, the microarchitecture its family and model numbers stand for, the SIMD extensions the
engine and the peers may use), its per-core L1 data and L2 caches, and the kernel variant the
module was built with (its src/tuning.rs, and the cache budgets its kernels block by). Cloud
machines often report a bare "AMD EPYC" as their model name; the family and model numbers still
tell Zen 3 from Zen 4.

The variant is fixed when the module is built, the same on every CPU: the hot loops' machine
code is the same on AVX2-only and AVX-512 hosts (wasmtime emits 128-bit VEX instructions for
simd128 on both), and the kernels block by sizes that fit the smallest L1 data cache of the
targets (32 KiB), not by the host's.
"""

from __future__ import annotations

import re
from pathlib import Path

from porter.reference.litert.floats import SYSFS_CPU0_CACHES, cache_sizes

CPUINFO = "/proc/cpuinfo"
# (vendor, family, first model, last model) -> microarchitecture; what is not listed is "unknown".
MICROARCHITECTURES = (
    ("AuthenticAMD", 25, 0x00, 0x0F, "Zen 3"), ("AuthenticAMD", 25, 0x20, 0x2F, "Zen 3"),
    ("AuthenticAMD", 25, 0x40, 0x5F, "Zen 3"), ("AuthenticAMD", 25, 0x10, 0x1F, "Zen 4"),
    ("AuthenticAMD", 25, 0x60, 0x7F, "Zen 4"), ("AuthenticAMD", 25, 0xA0, 0xAF, "Zen 4"),
    ("AuthenticAMD", 26, 0x00, 0xFF, "Zen 5"),
    ("GenuineIntel", 6, 0x55, 0x55, "Skylake-SP / Cascade Lake"), ("GenuineIntel", 6, 0x6A, 0x6C, "Ice Lake-SP"),
    ("GenuineIntel", 6, 0x8F, 0x8F, "Sapphire Rapids"), ("GenuineIntel", 6, 0xCF, 0xCF, "Emerald Rapids"),
    ("GenuineIntel", 6, 0xAD, 0xAE, "Granite Rapids"),
)
# The extensions that decide what wasmtime emits for simd128 and relaxed SIMD, and which kernels
# onnxruntime's MLAS and LiteRT's Eigen pick natively.
SIMD_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")
TUNING_CONSTANT = re.compile(r"pub const (GEMM_TILE_ROWS|GEMM_TILE_OUTS|GEMM_ROW_BLOCK_BYTES|ATTENTION_QUERY_ROWS): "
                             r"usize = (\d+);")
# Cache budgets of the kernels outside src/tuning.rs: (file in the crate, constant, variant key).
KERNEL_BUDGETS = (("src/kernels/litert/attention.rs", "KEY_PANEL", "attention_key_panel"),)


def host_cpu(cpuinfo: str = CPUINFO, caches: str = SYSFS_CPU0_CACHES) -> dict:
    """This machine's CPU as /proc/cpuinfo and sysfs describe its first core."""
    fields = _first_processor(cpuinfo)
    vendor, family, model = fields.get("vendor_id", ""), _number(fields.get("cpu family")), _number(fields.get("model"))
    flags = set(fields.get("flags", "").split())
    return {"model_name": fields.get("model name", "unknown"), "vendor": vendor or "unknown",
            "family": family, "model": model, "microarchitecture": microarchitecture(vendor, family, model),
            "simd": [flag for flag in SIMD_FLAGS if flag in flags], **cache_sizes(caches)}


def microarchitecture(vendor: str, family: int | None, model: int | None) -> str:
    for v, f, first, last, name in MICROARCHITECTURES:
        if v == vendor and f == family and model is not None and first <= model <= last:
            return name
    return "unknown"


def kernel_variant(compiled_dir: Path) -> dict | None:
    """The GEMM tile and attention query rows the module was built with, whether `porter build
    --tune` chose them, and the kernels' cache budgets (None for a crate without src/tuning.rs:
    a decoder's)."""
    try:
        text = (Path(compiled_dir) / "src" / "tuning.rs").read_text()
    except OSError:
        return None
    constants = {name: int(value) for name, value in TUNING_CONSTANT.findall(text)}
    if len(constants) != 4:
        return None
    variant = {"gemm_tile": [constants["GEMM_TILE_ROWS"], constants["GEMM_TILE_OUTS"]],
               "attention_query_rows": constants["ATTENTION_QUERY_ROWS"],
               "chosen_by": "porter build --tune" if "Chosen by `porter build --tune`" in text else "default",
               "gemm_row_block_bytes": constants["GEMM_ROW_BLOCK_BYTES"]}
    for source, name, key in KERNEL_BUDGETS:
        value = _rust_constant(Path(compiled_dir) / source, name)
        if value is not None:
            variant[key] = value
    return variant


def _rust_constant(path: Path, name: str) -> int | None:
    """A `const NAME: usize = N;` of a crate source, N a number."""
    try:
        match = re.search(rf"const {name}: usize = (\d+);", path.read_text())
    except OSError:
        return None
    return None if match is None else int(match.group(1))


def machine_line(cpu: dict, variant: dict | None) -> str:
    """One line a report prints: enough to tell two machines' figures apart."""
    def size(n):
        return "?" if n is None else f"{n // 1024 // 1024} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"

    line = (f"machine: {cpu['model_name']} ({cpu['microarchitecture']}, family {cpu['family']} model "
            f"{cpu['model']}), L1d {size(cpu['l1d_bytes'])}, L2 {size(cpu['l2_bytes'])}, "
            f"{' '.join(cpu['simd']) or 'no AVX2'}")
    if variant:
        rows, outs = variant["gemm_tile"]
        block = variant.get("gemm_row_block_bytes")
        panel = variant.get("attention_key_panel")
        line += (f"; kernels: GEMM tile {rows}x{outs}"
                 + (f" (4 rows where {rows} span over {size(block)} of activations)" if block and rows > 4 else "")
                 + f", {variant['attention_query_rows']} query rows"
                 + (f", key panels of {panel}" if panel else "")
                 + f" ({variant['chosen_by']}; the same on every CPU)")
    return line


def _first_processor(cpuinfo: str) -> dict:
    fields: dict[str, str] = {}
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return fields
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
