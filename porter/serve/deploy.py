"""`porter deploy` and `porter serve`: a built service (redaction or generation) handed to Spin or
served locally by `wasmtime serve`, and `served`, which runs it under either host for the tests
and `porter bench --service`. `porter deploy --kube` (porter.serve.kube) writes the SpinKube
manifest and pushes the app with `spin registry push`.

Each kind of service is one entry of APPS, keyed by the format its service.json records.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from porter.errors import PorterError
from porter.fsutil import write_atomic
from porter.serve import encoder, generate, kube, redact
from porter.serve.host import (MAX_COMPONENT_BYTES, free_port, read_facts, serve_command, spin_program, stop_server,
                               wait_until_serving, wasmtime_program)

SPIN_TOML = "spin.toml"
HOSTS = ("wasmtime", "spin")
# What `porter deploy` hands to spin: `spin up`, `spin build`, or a deployment plugin's
# `spin PLUGIN deploy` (Spin 4 refuses a bare `spin deploy`). aka is Akamai Functions, where
# Fermyon's hosted platform went; cloud is the Fermyon Cloud plugin.
DEPLOY_PLUGINS = ("aka", "cloud")


@dataclass(frozen=True)
class App:
    name: str
    description: str
    build_command: Callable  # (facts, out_dir, here) -> porter's arguments that remake out_dir


APPS = {
    redact.FORMAT: App("redact", redact.DESCRIPTION, redact.build_command),
    generate.FORMAT: App(generate.APP_NAME, generate.DESCRIPTION, generate.build_command),
    encoder.FORMAT: App(encoder.APP_NAME, encoder.DESCRIPTION, encoder.build_command),
}


def application(facts: dict) -> App:
    """The kind of service that service.json describes."""
    app = APPS.get(facts.get("format"))
    if app is None:
        raise PorterError(f"service.json has format {facts.get('format')!r}; porter builds "
                          f"{' and '.join(sorted(APPS))}")
    return app


def porter_program() -> list[str]:
    """How the manifest's build step runs porter: this interpreter with `-m porter`, which works
    for a pip or pipx installation and a checkout's .venv alike, where a bare `porter` works only
    if spin happens to find one on its PATH. Made absolute but not resolved: a virtual
    environment's python is a symlink to a base interpreter that does not have porter."""
    return [os.path.abspath(sys.executable), "-m", "porter"]


def spin_toml(facts: dict, out_dir: Path, manifest_dir: Path, name: str | None = None) -> str:
    """Spin manifest v2; paths relative to the manifest's directory, where spin runs the build.

    The route must be "/...": "/" matches the root path only. The component may call nothing
    outside (allowed_outbound_hosts = []), so the text it handles cannot leave it."""
    def here(path: Path | str) -> str:
        return os.path.relpath(Path(path).resolve(), manifest_dir.resolve())

    app = application(facts)
    name = name or app.name
    build = porter_program() + app.build_command(facts, out_dir, here)
    return "\n".join([
        "# Written by `porter deploy` from service.json. The build command runs the Python that",
        "# wrote it, which has porter installed.",
        "spin_manifest_version = 2",
        "",
        "[application]",
        f'name = "{name}"',
        'version = "0.1.0"',
        f"description = {json.dumps(app.description)}",
        "",
        "[[trigger.http]]",
        'route = "/..."',
        f'component = "{name}"',
        "",
        f"[component.{name}]",
        f"source = {json.dumps(here(out_dir / facts['component']))}",
        "allowed_outbound_hosts = []",
        "",
        f"[component.{name}.build]",
        f"command = {json.dumps(shlex.join(build))}",
        "",
    ])


def write_manifest(out_dir: Path, manifest: Path | None = None, echo=print, component_needed: bool = True) -> Path:
    """Writes spin.toml for a built service (default: OUT_DIR/spin.toml) and returns its path.
    The component must be there and within Spin's limit, unless the manifest's build step is
    what will make it (component_needed false: `spin build`)."""
    facts = read_facts(out_dir)
    component = out_dir / facts["component"]
    if component_needed and not component.is_file():
        raise PorterError(f"{component} is missing; run `porter serve-build` again, or `porter deploy --build`")
    size = component.stat().st_size if component.is_file() else 0
    if size >= MAX_COMPONENT_BYTES:
        raise PorterError(f"{component} is {size:,} bytes; Spin's limit is {MAX_COMPONENT_BYTES:,}")
    manifest = manifest or out_dir / SPIN_TOML
    write_atomic(manifest, spin_toml(facts, out_dir, manifest.parent).encode())
    echo(f"wrote {manifest} (component {component.name}, {size:,} bytes, route /..., no outbound hosts)")
    return manifest


def spin_arguments(mode: str, manifest: Path, listen: str | None = None, plugin: str = "aka",
                   extra: tuple[str, ...] = ()) -> list[str]:
    """The arguments of `spin` for a deploy mode: up (serve here), build (run the manifest's
    build command), cloud (`spin PLUGIN deploy`); `extra` goes after them unchanged."""
    if listen is not None and mode != "up":
        raise PorterError(f"--listen is an address for `spin up`; it does not apply to --{mode}")
    if mode == "up":
        arguments = ["up", "--from", str(manifest)] + (["--listen", check_listen(listen)] if listen else [])
    elif mode == "build":
        arguments = ["build", "--from", str(manifest)]
    elif mode == "cloud":
        if plugin not in DEPLOY_PLUGINS:
            raise PorterError(f"--cloud {plugin}: porter knows the deployment plugins {', '.join(DEPLOY_PLUGINS)}")
        arguments = [plugin, "deploy", "--from", str(manifest)]
    else:
        raise PorterError(f"unknown deploy mode {mode!r}; choose up, build or cloud")
    return arguments + list(extra)


def check_listen(listen: str) -> str:
    """HOST:PORT as `spin up --listen` takes it, refused here in one line rather than by spin."""
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PorterError(f"--listen {listen!r}: give HOST:PORT, e.g. 127.0.0.1:3000 or 0.0.0.0:8080")
    return listen


def require_plugin(spin: Path, plugin: str) -> None:
    """A deployment plugin must be installed; spin's own refusal is several lines of suggestions."""
    listed = subprocess.run([str(spin), "plugins", "list", "--installed", "--format", "json"],
                            capture_output=True, text=True)
    try:
        installed = {entry["name"] for entry in json.loads(listed.stdout)}
    except (ValueError, TypeError, KeyError):
        raise PorterError(f"`spin plugins list` gave no plugin list: {listed.stderr.strip()[:200]}") from None
    if plugin not in installed:
        raise PorterError(f"the Spin plugin {plugin!r} is not installed: run `spin plugins install {plugin}`, "
                          f"then `spin {plugin} login`")


def deploy(out_dir: Path, mode: str = "up", manifest: Path | None = None, listen: str | None = None,
           plugin: str = "aka", extra: tuple[str, ...] = (), dry_run: bool = False, echo=print) -> None:
    """Writes spin.toml, then replaces this process with spin in the chosen mode (so that
    Ctrl-C and signals reach spin itself); with dry_run, prints that command instead."""
    manifest = write_manifest(out_dir, manifest, echo, component_needed=mode != "build")
    arguments = spin_arguments(mode, manifest, listen, plugin, extra)
    if dry_run:
        echo("would run: " + shlex.join(["spin", *arguments]))
        return
    spin = spin_program()
    if mode == "cloud":
        require_plugin(spin, plugin)
    echo("running: " + shlex.join([str(spin), *arguments]))
    sys.stdout.flush()
    os.execv(spin, [str(spin), *arguments])


def deploy_kube(out_dir: Path, image: str | None, scaling: kube.Scaling, manifest: Path | None = None,
                extra: tuple[str, ...] = (), dry_run: bool = False, echo=print) -> Path:
    """Writes spin.toml and the SpinApp manifest beside it, then pushes the app to `image` with
    `spin registry push` (arguments after `--` go to it, e.g. --insecure); with dry_run, prints
    the manifest and the push command instead. Returns the SpinApp manifest's path."""
    image = kube.check_reference(image)
    kube.check_scaling(scaling)
    manifest = write_manifest(out_dir, manifest, echo)
    spinapp = manifest.parent / kube.SPINAPP_YAML
    text = kube.to_yaml(kube.spinapp_documents(image, scaling))
    write_atomic(spinapp, text.encode())
    arguments = kube.push_arguments(manifest, image, extra)
    if dry_run:
        echo(f"wrote {spinapp}:\n{text.rstrip()}")
        echo("would run: " + shlex.join(["spin", *arguments]))
        return spinapp
    spin = spin_program()
    echo("running: " + shlex.join([str(spin), *arguments]))
    pushed = subprocess.run([str(spin), *arguments], capture_output=True, text=True)
    if pushed.returncode != 0:
        reason = (pushed.stderr.strip() or pushed.stdout.strip()).splitlines()
        raise PorterError(f"spin registry push {image} failed: {reason[-1] if reason else f'exit {pushed.returncode}'}")
    echo(f"pushed {image}; wrote {spinapp}: apply it to a cluster with SpinKube installed: kubectl apply -f {spinapp}")
    return spinapp


def serve(out_dir: Path, port: int, timeout_s: float, echo=print) -> None:
    """Replaces this process with `wasmtime serve`, so that signals reach the server itself."""
    facts = read_facts(out_dir)
    check_timeout(facts, timeout_s)
    command = serve_command(wasmtime_program(), out_dir / facts["component"], port, timeout_s)
    echo(f"serving on http://127.0.0.1:{port} (try: curl http://127.0.0.1:{port}/ping)")
    sys.stdout.flush()
    os.execv(command[0], command)


def check_timeout(facts: dict, timeout_s: float) -> None:
    budget_ms = facts.get("request_budget_ms")
    if budget_ms is not None and timeout_s * 1000 <= budget_ms:
        raise PorterError(f"--timeout {timeout_s:g} s is not above the component's request budget of {budget_ms} ms: "
                          "requests would be killed before they could shed load; raise --timeout or rebuild "
                          "with a smaller --request-budget-ms")


@dataclass(frozen=True)
class Served:
    """A built service answering on 127.0.0.1:port under a host."""

    host: str
    port: int
    start_s: float  # from starting the host to the first answered /ping (compilation included)


@contextmanager
def served(out_dir: Path, host: str, log_path: Path, timeout_s: float, start_timeout_s: float) -> Iterator[Served]:
    """Serves a built service under `host` on a free loopback port until the block ends.

    wasmtime: `wasmtime serve` as `porter serve` runs it, with the epoch deadline `timeout_s`.
    spin: `spin up` from the manifest `porter deploy` writes (OUT_DIR/spin.toml); Spin sets no
    request time limit for wasi:http 0.2 components, so `timeout_s` does not apply there. The
    environment passes through, so Spin's own settings (SPIN_WASMTIME_*, RUNTIME_CONFIG_FILE)
    reach it."""
    facts = read_facts(out_dir)
    port = free_port()
    if host == "wasmtime":
        check_timeout(facts, timeout_s)
        command = serve_command(wasmtime_program(), out_dir / facts["component"], port, timeout_s)
        what = "wasmtime serve"
    elif host == "spin":
        manifest = write_manifest(out_dir, echo=lambda *_: None)
        command = [str(spin_program()), *spin_arguments("up", manifest, f"127.0.0.1:{port}")]
        what = "spin up"
    else:
        raise PorterError(f"unknown host {host!r}; choose from {', '.join(HOSTS)}")
    with open(log_path, "wb") as log:
        started = time.monotonic()
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_serving(server, port, log_path, start_timeout_s, what)
            yield Served(host, port, time.monotonic() - started)
        finally:
            stop_server(server)
