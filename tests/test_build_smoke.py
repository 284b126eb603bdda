"""Render, build and run the smoke crate: simd128 int8 math checked against numpy, exit codes,
the epoch deadline, and the compiled-module cache."""

import time

import numpy as np
import pytest
import wasmtime

from porter.codegen.render import cargo_config_file, render_crate
from porter.toolchain.cargo import build_crate, cargo_config_toml
from porter.errors import PorterError
from porter.toolchain.discover import CrateKind
from porter.runtime.wasm import WasmRuntime


def expected_dot(a: np.ndarray, b: np.ndarray, bias: int) -> int:
    return int((a.astype(np.int64) * b.astype(np.int64)).sum()) + bias


def int8_vectors(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, n, dtype=np.int8)
    b = rng.integers(-128, 128, n, dtype=np.int8)
    return a, b


# 0: only the bias; 15: only the scalar tail; 16 and 4096: only full vectors; the rest mix both.
@pytest.mark.parametrize("n", [0, 15, 16, 17, 1003, 4096])
def test_smoke_dot_product_matches_numpy(smoke, wasm_runtime, n):
    a, b = int8_vectors(n, seed=n)
    result = wasm_runtime.run_command(smoke.wasm, ["dot"], a.tobytes() + b.tobytes())
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout) == expected_dot(a, b, smoke.bias)


def test_smoke_dot_product_at_int8_extremes(smoke, wasm_runtime):
    # -128 * -128 pairs are the largest products i32x4_dot_i16x8 adds; no lane may overflow.
    a = np.full(4099, -128, dtype=np.int8)
    b = np.tile(np.array([-128, 127], dtype=np.int8), 4100)[:4099]
    result = wasm_runtime.run_command(smoke.wasm, ["dot"], a.tobytes() + b.tobytes())
    assert int(result.stdout) == expected_dot(a, b, smoke.bias)


def test_exit_code_and_stderr_are_returned(smoke, wasm_runtime):
    result = wasm_runtime.run_command(smoke.wasm, ["dot"], b"\x01\x02\x03")
    assert result.exit_code == 2
    assert b"even number of bytes" in result.stderr
    assert result.stdout == b""


def test_epoch_deadline_interrupts_an_endless_loop(smoke, wasm_runtime):
    started = time.monotonic()
    with pytest.raises(PorterError, match=r"timeout of 0\.3 s.*epoch deadline"):
        wasm_runtime.run_command(smoke.wasm, ["spin"], timeout_s=0.3)
    assert time.monotonic() - started < 10


def test_compiled_module_is_cached_on_disk_and_reused(smoke, tmp_path, monkeypatch):
    a, b = int8_vectors(100, seed=1)
    stdin = a.tobytes() + b.tobytes()
    with WasmRuntime(cache_dir=tmp_path) as first:
        assert int(first.run_command(smoke.wasm, ["dot"], stdin).stdout) == expected_dot(a, b, smoke.bias)
    assert len(list(tmp_path.rglob("*.cwasm"))) == 1

    def no_compiling(*args, **kwargs):
        raise AssertionError("module compiled again instead of loaded from the cache")

    monkeypatch.setattr(wasmtime.Module, "__init__", no_compiling)
    with WasmRuntime(cache_dir=tmp_path) as second:
        assert int(second.run_command(smoke.wasm, ["dot"], stdin).stdout) == expected_dot(a, b, smoke.bias)


def test_damaged_cache_entry_is_recompiled(smoke, tmp_path):
    with WasmRuntime(cache_dir=tmp_path) as first:
        first.module(smoke.wasm)
    [cached] = tmp_path.rglob("*.cwasm")
    cached.write_bytes(b"not a compiled module")
    with WasmRuntime(cache_dir=tmp_path) as second:
        assert second.run_command(smoke.wasm, ["dot"], b"").exit_code == 0


def test_cargo_config_enables_simd128_for_both_kinds(toolchain):
    command = cargo_config_toml(toolchain, CrateKind.COMMAND)
    component = cargo_config_toml(toolchain, CrateKind.HTTP_COMPONENT)
    for config in (command, component):
        assert '"target-feature=+simd128"' in config
        assert 'target = "wasm32-wasip1"' in config
        assert "[profile.release]" in config
    assert '"link-arg=--wasi-adapter=proxy"' in component
    assert f'linker = "{toolchain.component_linker}"' in component
    assert "--wasi-adapter" not in command


def test_render_replaces_the_crate_whole(tmp_path, toolchain):
    template = tmp_path / "template"
    (template / "src").mkdir(parents=True)
    (template / "src/lib.rs.j2").write_text("pub const N: usize = {{ n }};\n")
    (template / "Cargo.toml").write_text('[package]\nname = "porter-render-test"\n')  # a crate is whole
    (template / "README").write_text("copied as is {{ n }}\n")
    crate = tmp_path / "out/crate"

    render_crate(template, crate, {"n": 3}, {"model.bin": b"\x00\x01", **cargo_config_file(toolchain, CrateKind.COMMAND)})
    assert (crate / "src/lib.rs").read_text() == "pub const N: usize = 3;\n"
    assert (crate / "README").read_text() == "copied as is {{ n }}\n"
    assert (crate / "model.bin").read_bytes() == b"\x00\x01"
    assert "simd128" in (crate / ".cargo/config.toml").read_text()

    render_crate(template, crate, {"n": 4})
    assert (crate / "src/lib.rs").read_text() == "pub const N: usize = 4;\n"
    assert not (crate / "model.bin").exists()  # nothing survives from the previous render
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["crate"]  # no temp dirs left


def test_render_with_a_missing_variable_leaves_nothing_behind(tmp_path, toolchain):
    template = tmp_path / "template"
    template.mkdir()
    (template / "Cargo.toml.j2").write_text('name = "{{ crate_name }}"\n')
    with pytest.raises(PorterError, match="crate_name"):
        render_crate(template, tmp_path / "out/crate", {})
    assert list((tmp_path / "out").iterdir()) == []


def test_build_failure_raises_with_cargo_stderr(tmp_path, toolchain, smoke):
    # Depends on `smoke` so the shared std build is already done and this fails fast.
    template = tmp_path / "template"
    (template / "src").mkdir(parents=True)
    (template / "Cargo.toml.j2").write_text(
        '[package]\nname = "porter-broken"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (template / "src/main.rs.j2").write_text("fn main() { let x: u32 = \"not a number\"; }\n")
    crate = render_crate(template, tmp_path / "broken", {}, cargo_config_file(toolchain, CrateKind.COMMAND))
    with pytest.raises(PorterError, match=r"cargo build failed[\s\S]*mismatched types"):
        build_crate(crate, toolchain)


def test_module_without_start_is_refused(tmp_path, wasm_runtime):
    reactor = tmp_path / "reactor.wasm"
    reactor.write_bytes(wasmtime.wat2wasm('(module (func (export "forward")))'))
    with pytest.raises(PorterError, match="exports no _start"):
        wasm_runtime.run_command(reactor)


def test_invalid_wasm_is_a_porter_error(tmp_path, wasm_runtime):
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"\x00asm but not really")
    with pytest.raises(PorterError, match="not a valid wasm module"):
        wasm_runtime.run_command(junk)
