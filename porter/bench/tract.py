"""porter bench's tract peer: tract-onnx compiled into a WASI command module and run the way
porter's own module is run (wasmtime, epoch interruption, a fresh instance per call).

The runner crate (bench/peers/tract/, porter's package data) is built with porter's toolchain
into porter's cache, once per content hash of the crate and its build settings: the first build
downloads and compiles tract from crates.io, which takes minutes. Each call instantiates the
module, which parses and optimises the ONNX file (timed on its own, as a Spin component pays it
per request) and then times each forward pass.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from porter import package_path
from porter.errors import PorterError
from porter.fsutil import cache_dir, copy_atomic, write_atomic
from porter.runtime import wasm

CRATE = "bench/peers/tract"  # in porter's package data
CRATE_FILES = ("Cargo.toml", "Cargo.lock", "src/main.rs")
MAGIC = b"PTR1"
DTYPES = {"int64": 0, "int32": 1}


def tract_cache_dir() -> Path:
    """PORTER_TRACT_CACHE, else ~/.cache/porter/tract-peer."""
    return cache_dir("tract-peer", "PORTER_TRACT_CACHE")


def crate_sources() -> dict[str, bytes]:
    root = package_path(f"{CRATE}/Cargo.toml").parent
    return {name: (root / name).read_bytes() for name in CRATE_FILES}


def rustc_version(rustc: Path) -> str:
    try:
        return subprocess.run([str(rustc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PorterError(f"cannot run {rustc}: {e}") from e


def build_key(sources: dict[str, bytes], config_toml: str, rustc: str) -> str:
    """The content hash a built module is cached under: the crate, its cargo config, rustc."""
    digest = hashlib.sha256()
    for name, data in sorted(sources.items()):
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    digest.update(config_toml.encode() + b"\0" + rustc.encode())
    return digest.hexdigest()[:24]


def ensure_tract_wasm(echo=print) -> Path:
    """The runner module, built on first use; a PorterError saying why it cannot be built."""
    from porter.toolchain.cargo import build_crate, cargo_config_toml
    from porter.toolchain.discover import CrateKind, require_toolchain

    toolchain = require_toolchain()
    config = cargo_config_toml(toolchain, CrateKind.COMMAND)
    sources = crate_sources()
    key = build_key(sources, config, rustc_version(toolchain.rustc))
    built = tract_cache_dir() / f"porter-tract-peer-{key}.wasm"
    if built.is_file():
        return built
    crate = tract_cache_dir() / f"crate-{key}"
    shutil.rmtree(crate, ignore_errors=True)
    for name, data in {**sources, ".cargo/config.toml": config.encode()}.items():
        write_atomic(crate / name, data)
    echo(f"building the tract peer (tract-onnx from crates.io, first time only) in {crate}")
    try:
        return copy_atomic(build_crate(crate, toolchain), built)
    except PorterError as e:
        raise PorterError(f"the tract runner does not build with the {toolchain.route} toolchain "
                          f"({rustc_version(toolchain.rustc).strip()}): {first_error(str(e))}") from e


def first_error(cargo_output: str) -> str:
    """The first line of cargo's output that names an error (the last says only how many)."""
    lines = [line.strip() for line in cargo_output.splitlines()]
    errors = [line for line in lines if "error" in line and not line.startswith("error: could not compile")]
    return (errors or lines[-1:] or ["cargo failed"])[0][:300]


@dataclass
class TractReply:
    load_ms: float  # parse + optimise + make runnable
    run_ms: list[float]  # each forward pass
    output: np.ndarray  # output 0 of the last run, float32


def encode_request(feeds: list[tuple[str, list[int], np.ndarray]], onnx: bytes, runs: int) -> bytes:
    """feeds: (dtype name, dims, values) per graph input, in the graph's input order."""
    parts = [MAGIC, struct.pack("<II", runs, len(feeds))]
    for dtype, dims, values in feeds:
        if dtype not in DTYPES:
            raise PorterError(f"the tract peer feeds int64 or int32 inputs, not {dtype}")
        parts.append(struct.pack(f"<BI{len(dims)}I", DTYPES[dtype], len(dims), *dims))
        parts.append(np.ascontiguousarray(values, dtype=f"<{'i8' if dtype == 'int64' else 'i4'}").tobytes())
    parts += [struct.pack("<Q", len(onnx)), onnx]
    return b"".join(parts)


def decode_reply(data: bytes) -> TractReply:
    try:
        if data[:4] != MAGIC:
            raise PorterError(f"the tract peer's reply starts with {data[:4]!r}, expected {MAGIC!r}")
        (load_ms,), at = struct.unpack_from("<d", data, 4), 12
        (runs,) = struct.unpack_from("<I", data, at)
        run_ms = list(struct.unpack_from(f"<{runs}d", data, at + 4))
        at += 4 + 8 * runs
        (rank,) = struct.unpack_from("<I", data, at)
        dims = struct.unpack_from(f"<{rank}I", data, at + 4)
        at += 4 + 4 * rank
        output = np.frombuffer(data, "<f4", count=int(np.prod(dims)), offset=at).reshape(dims)
    except (struct.error, ValueError):
        raise PorterError(f"the tract peer's reply is truncated ({len(data)} bytes)") from None
    if at + output.nbytes != len(data):
        raise PorterError(f"the tract peer's reply has {len(data) - at - output.nbytes} trailing bytes")
    return TractReply(load_ms, run_ms, output.astype(np.float32))


def run_tract(module: Path, onnx: bytes, feeds: list, runs: int, timeout_s: float) -> TractReply:
    """One fresh instance: load the model, run it `runs` times on the same feeds."""
    done = wasm.default_runtime().run_command(module, stdin=encode_request(feeds, onnx, runs), timeout_s=timeout_s)
    if done.exit_code != 0:
        raise PorterError(f"the tract peer exited with {done.exit_code}: "
                          f"{done.stderr.decode(errors='replace').strip()[-400:]}")
    return decode_reply(done.stdout)
