"""Shared fixtures: the discovered toolchain, one build of the smoke crate, one wasm runtime, and
the host that serves the components in the served-component tests.

The smoke crate is built once per session into the shared cargo target directory
(PORTER_CARGO_TARGET or ~/.cache/porter/cargo-target), so the standard library is compiled only
on the first run on a machine.
"""

from dataclasses import dataclass
from pathlib import Path

import pytest

from porter import TEMPLATES_DIR
from porter.codegen.render import render_and_build
from porter.serve.deploy import HOSTS
from porter.toolchain.discover import Toolchain, find_spin, require_toolchain
from porter.runtime.wasm import WasmRuntime


@dataclass(frozen=True)
class SmokeBuild:
    wasm: Path
    bias: int  # the template variable the program adds to every dot product


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    return require_toolchain()


@pytest.fixture(scope="session")
def smoke(toolchain, tmp_path_factory) -> SmokeBuild:
    bias = 7  # non-zero, so a test sees whether the template variable reached the program
    crate_dir = tmp_path_factory.mktemp("crates") / "smoke"
    variables = {"crate_name": "porter-smoke", "bias": bias}
    return SmokeBuild(render_and_build(TEMPLATES_DIR / "smoke", crate_dir, variables, toolchain), bias)


@pytest.fixture(scope="session")
def wasm_runtime(tmp_path_factory):
    with WasmRuntime(cache_dir=tmp_path_factory.mktemp("wasm-cache")) as runtime:
        yield runtime


@pytest.fixture(scope="session", params=HOSTS)
def host(request) -> str:
    """Each served-component test runs under `wasmtime serve` and under `spin up`. Session scope
    groups the tests by host, so only one host's servers run at a time. The Spin runs skip when
    there is no spin ($PORTER_SPIN or PATH; .ci/run sets PORTER_SPIN to CI's copy)."""
    if request.param == "spin":
        finding = find_spin()
        if not finding.ok:
            pytest.skip(f"no spin: {finding.install}")
    return request.param


# The redaction tests run every model under wasmtime serve; under spin up the default suite
# runs the trained example's, and the fixture models' only with -m slow (CI's time: the
# host-independent behaviour of those models is what their wasmtime runs check).
SPIN_DEFAULT_MODELS = {"trained"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("host") == "spin" and params.get("service", "trained") not in SPIN_DEFAULT_MODELS:
            item.add_marker(pytest.mark.slow)
