"""`porter deploy` and `porter serve`: a built service (redaction or generation) handed to Spin or
served locally by `wasmtime serve`.

Each kind of service is one entry of APPS, keyed by the format its service.json records.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from porter.errors import PorterError
from porter.fsutil import write_atomic
from porter.serve import generate, redact
from porter.serve.host import MAX_COMPONENT_BYTES, read_facts, serve_command, wasmtime_program

SPIN_TOML = "spin.toml"


@dataclass(frozen=True)
class App:
    name: str
    description: str
    build_command: Callable  # (facts, out_dir, here) -> the command that remakes out_dir


APPS = {
    redact.FORMAT: App("redact", redact.DESCRIPTION, redact.build_command),
    generate.FORMAT: App(generate.APP_NAME, generate.DESCRIPTION, generate.build_command),
}


def application(facts: dict) -> App:
    """The kind of service that service.json describes."""
    app = APPS.get(facts.get("format"))
    if app is None:
        raise PorterError(f"service.json has format {facts.get('format')!r}; porter builds "
                          f"{' and '.join(sorted(APPS))}")
    return app


def spin_toml(facts: dict, out_dir: Path, manifest_dir: Path, name: str | None = None) -> str:
    """Spin manifest v2; paths relative to the manifest's directory, where spin runs the build.

    The route must be "/...": "/" matches the root path only. The component may call nothing
    outside (allowed_outbound_hosts = []), so the text it handles cannot leave it."""
    def here(path: Path | str) -> str:
        return os.path.relpath(Path(path).resolve(), manifest_dir.resolve())

    app = application(facts)
    name = name or app.name
    return "\n".join([
        "# Written by `porter deploy` from service.json.",
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
        f"command = {json.dumps(shlex.join(app.build_command(facts, out_dir, here)))}",
        "",
    ])


SPIN_ACTIONS = {"up": ["up"], "deploy": ["deploy"], "aka": ["aka", "deploy"]}


def deploy(out_dir: Path, action: str, manifest: Path | None = None, echo=print) -> int:
    """Writes spin.toml (default: in out_dir); runs `spin <action>` when spin is installed, else
    says what to run."""
    facts = read_facts(out_dir)
    component = out_dir / facts["component"]
    if not component.is_file():
        raise PorterError(f"{component} is missing; run `porter serve-build` again")
    size = component.stat().st_size
    if size >= MAX_COMPONENT_BYTES:
        raise PorterError(f"{component} is {size:,} bytes; Spin's limit is {MAX_COMPONENT_BYTES:,}")
    manifest = manifest or out_dir / SPIN_TOML
    write_atomic(manifest, spin_toml(facts, out_dir, manifest.parent).encode())
    echo(f"wrote {manifest} (component {component.name}, {size:,} bytes, route /..., no outbound hosts)")
    command = ["spin", *SPIN_ACTIONS[action], "--from", str(manifest)]
    spin = shutil.which("spin")
    if spin is None:
        echo("the spin program is not installed (it ships from github.com/fermyon/spin releases, "
             "not from a package registry). With it, run:")
        echo("  " + " ".join(command))
        echo(f"or serve it here: porter serve {out_dir}")
        return 0
    echo("running: " + " ".join(command))
    return subprocess.call([spin, *command[1:]])


def serve(out_dir: Path, port: int, timeout_s: float, echo=print) -> None:
    """Replaces this process with `wasmtime serve`, so that signals reach the server itself."""
    facts = read_facts(out_dir)
    budget_ms = facts.get("request_budget_ms")
    if budget_ms is not None and timeout_s * 1000 <= budget_ms:
        raise PorterError(f"--timeout {timeout_s:g} s is not above the component's request budget of {budget_ms} ms: "
                          "requests would be killed before they could shed load; raise --timeout or rebuild "
                          "with a smaller --request-budget-ms")
    command = serve_command(wasmtime_program(), out_dir / facts["component"], port, timeout_s)
    echo(f"serving on http://127.0.0.1:{port} (try: curl http://127.0.0.1:{port}/ping)")
    sys.stdout.flush()
    os.execv(command[0], command)
