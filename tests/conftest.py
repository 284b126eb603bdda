"""Shared fixtures: the discovered toolchain, one build of the smoke crate, one wasm runtime, and
the host that serves the components in the served-component tests.

The smoke crate is built once per session into the shared cargo target directory
(PORTER_CARGO_TARGET or ~/.cache/porter/cargo-target), so the standard library is compiled only
on the first run on a machine.

scripts/test.sh runs the suite on every core (pytest-xdist, each file on one worker, so a module's
builds are made once). Cargo locks a target directory for the whole of a build and porter's crates
link as one codegen unit, one core each: the workers after the first get target directories of
their own beside the shared one, or their builds would queue behind each other's.
"""

import os

from dataclasses import dataclass
from pathlib import Path

import pytest

from porter import TEMPLATES_DIR
from porter.codegen.render import render_and_build
from porter.serve.deploy import HOSTS
from porter.toolchain.cargo import shared_target_dir
from porter.toolchain.discover import Toolchain, find_spin, require_toolchain
from porter.runtime.wasm import WasmRuntime


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker != "gw0":
        # Set in the environment, so the porter commands the tests run inherit it too.
        os.environ["PORTER_CARGO_TARGET"] = f"{shared_target_dir()}-{worker}"


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


# The served-component tests run every task under wasmtime serve; under spin up the default suite
# runs one representative test per service crate family (marked spin_representative, for the
# service it names when the test is parametrised by one), the rest with -m slow: what they check
# does not depend on the host, and each spin server costs seconds to start and requests to warm.
def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("host") != "spin":
            continue
        representative = item.get_closest_marker("spin_representative")
        wanted = representative.kwargs.get("service") if representative else None
        if representative is None or params.get("service", wanted) != wanted:
            item.add_marker(pytest.mark.slow)
