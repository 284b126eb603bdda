"""Run wasm32-wasip1 modules under the wasmtime Python package, as a sandbox would.

Epoch interruption is always on, as in Spin: a background thread advances the engine's epoch
every EPOCH_TICK_S, and each store gets a deadline in ticks, so a module that runs too long
traps instead of hanging the caller. Compiled modules are cached on disk (wasmtime's serialized
form, keyed by the .wasm's SHA-256 and the wasmtime version), so only the first run of a given
.wasm pays for Cranelift.

`WasmRuntime` keeps one Engine and one WASI Linker; `new_store` and `instantiate` are the pieces a
caller needs to drive a module other than through `_start` (e.g. exported functions that read and
write linear memory).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from porter.errors import PorterError
from porter.fsutil import cache_dir, write_atomic

EPOCH_TICK_S = 0.01  # Spin's tick as well: fine enough for sub-second deadlines, cheap to run
DEFAULT_TIMEOUT_S = 30.0
STDERR_TAIL_CHARS = 2000


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


def module_cache_dir() -> Path:
    """PORTER_WASM_CACHE, else ~/.cache/porter/wasmtime."""
    return cache_dir("wasmtime", "PORTER_WASM_CACHE")


class EpochTicker:
    """A daemon thread that advances an engine's epoch at a fixed period until stopped."""

    def __init__(self, engine: wasmtime.Engine, period_s: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(engine, period_s), name="porter-epoch-ticker", daemon=True
        )
        self._thread.start()

    def _run(self, engine: wasmtime.Engine, period_s: float) -> None:
        # wasmtime's ctypes calls release the GIL, so this thread ticks while wasm runs.
        while not self._stop.wait(period_s):
            engine.increment_epoch()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class WasmRuntime:
    """One wasmtime Engine with epoch interruption, a WASI linker and a compiled-module cache."""

    def __init__(self, cache_dir: Path | None = None, tick_s: float = EPOCH_TICK_S, profiler: str | None = None):
        """profiler: wasmtime's, e.g. "jitdump" (porter/bench/profile.py); it does not change the code."""
        config = wasmtime.Config()
        config.epoch_interruption = True
        if profiler is not None:
            config.profiler = profiler
        self.engine = wasmtime.Engine(config)
        self.linker = wasmtime.Linker(self.engine)
        self.linker.define_wasi()
        self.tick_s = tick_s
        # Serialized code is only valid for the same wasmtime build and engine settings.
        version = importlib.metadata.version("wasmtime")
        self.cache_dir = (cache_dir or module_cache_dir()) / f"wasmtime-{version}-epoch{'-' + profiler if profiler else ''}"
        self._modules: dict[str, wasmtime.Module] = {}
        self._ticker = EpochTicker(self.engine, tick_s)

    def close(self) -> None:
        self._ticker.stop()

    def __enter__(self) -> WasmRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def module(self, wasm: Path) -> wasmtime.Module:
        """The compiled module: from memory, else the on-disk cache, else Cranelift."""
        try:
            code = wasm.read_bytes()
        except OSError as e:
            raise PorterError(f"cannot read {wasm}: {e}") from e
        digest = hashlib.sha256(code).hexdigest()
        if digest not in self._modules:
            self._modules[digest] = self._load_or_compile(code, digest, wasm)
        return self._modules[digest]

    def new_store(self, timeout_s: float, wasi: wasmtime.WasiConfig | None = None) -> wasmtime.Store:
        """A store whose wasm traps once timeout_s has passed (rounded up to whole ticks)."""
        store = wasmtime.Store(self.engine)
        store.set_wasi(wasi or wasmtime.WasiConfig())
        store.set_epoch_deadline(max(1, math.ceil(timeout_s / self.tick_s)))
        return store

    def instantiate(self, wasm: Path, store: wasmtime.Store) -> wasmtime.Instance:
        try:
            return self.linker.instantiate(store, self.module(wasm))
        except wasmtime.WasmtimeError as e:
            raise PorterError(f"cannot instantiate {wasm}: {e}") from e

    def run_command(
        self,
        wasm: Path,
        args: Sequence[str] = (),
        stdin: bytes = b"",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> RunResult:
        """Run a WASI command module's _start with args and stdin; capture stdout and stderr.

        A non-zero exit is returned, not raised; a trap (including the deadline) raises PorterError.
        """
        with tempfile.TemporaryDirectory(prefix="porter-wasi-") as scratch:
            stdin_path, stdout_path, stderr_path = (Path(scratch) / n for n in ("stdin", "stdout", "stderr"))
            stdin_path.write_bytes(stdin)
            wasi = wasmtime.WasiConfig()
            wasi.argv = [wasm.stem, *args]
            wasi.stdin_file = str(stdin_path)
            wasi.stdout_file = str(stdout_path)
            wasi.stderr_file = str(stderr_path)
            store = self.new_store(timeout_s, wasi)
            start = self.instantiate(wasm, store).exports(store).get("_start")
            if not isinstance(start, wasmtime.Func):
                raise PorterError(f"{wasm} exports no _start: it is not a WASI command module")
            try:
                start(store)
                exit_code = 0
            except wasmtime.ExitTrap as e:
                exit_code = e.code
            except wasmtime.Trap as trap:
                raise _trap_error(wasm, trap, timeout_s, stderr_path.read_bytes()) from trap
            return RunResult(exit_code, stdout_path.read_bytes(), stderr_path.read_bytes())

    def _load_or_compile(self, code: bytes, digest: str, wasm: Path) -> wasmtime.Module:
        cached = self.cache_dir / f"{digest}.cwasm"
        if cached.is_file():
            try:
                return wasmtime.Module.deserialize_file(self.engine, str(cached))
            except wasmtime.WasmtimeError:
                pass  # stale or damaged: compile again and overwrite it below
        try:
            module = wasmtime.Module(self.engine, code)
        except wasmtime.WasmtimeError as e:
            raise PorterError(f"{wasm} is not a valid wasm module: {e}") from e
        write_atomic(cached, bytes(module.serialize()))
        return module


_default_runtime: WasmRuntime | None = None
_default_runtime_lock = threading.Lock()


def default_runtime() -> WasmRuntime:
    """A process-wide runtime, so every caller shares one engine, ticker and module cache."""
    global _default_runtime
    with _default_runtime_lock:
        if _default_runtime is None:
            _default_runtime = WasmRuntime()
        return _default_runtime


def run_command(
    wasm: Path, args: Sequence[str] = (), stdin: bytes = b"", timeout_s: float = DEFAULT_TIMEOUT_S
) -> RunResult:
    return default_runtime().run_command(wasm, args, stdin, timeout_s)


def _trap_error(wasm: Path, trap: wasmtime.Trap, timeout_s: float, stderr: bytes) -> PorterError:
    if trap.trap_code is wasmtime.TrapCode.INTERRUPT:
        return PorterError(
            f"{wasm.name} exceeded its timeout of {timeout_s:g} s and was interrupted (epoch deadline)"
        )
    detail = stderr.decode(errors="replace")[-STDERR_TAIL_CHARS:].strip()
    return PorterError(f"{wasm.name} trapped: {trap.message}" + (f"; stderr: {detail}" if detail else ""))
