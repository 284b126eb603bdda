"""`porter deploy` as a user drives it, through the CLI in a fresh interpreter: the mode flags and
their spin command lines (--dry-run), the one-line refusals, and with the real spin program
(skipped without one): `porter deploy OUT --listen ... -- SPIN_ARGS` serving the component, and
`porter deploy OUT --build` remaking it with the manifest's build command. The served-component
suites (test_redact_service.py, test_generate_service.py) run under `spin up` through the `host`
fixture; this file covers what only deploy does.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from fixtures import REPO, assert_one_line_error, minilm_tokenizer_json
from porter.serve.deploy import porter_program
from porter.serve.host import free_port, http_request, parse_server_timing, read_facts, stop_server, wait_until_serving
from porter.serve.redact import serve_build
from porter.toolchain.discover import SPIN_ENV, find_spin

# The smallest committed encoder (2 layers, window 64): the cheapest component to build twice.
MODEL = REPO / "graphs" / "bert-l2-h128-a4-s64-tok3.nomask.litert-dq8.tflite"
START_TIMEOUT_S = 120


def real_spin():
    finding = find_spin()
    if not finding.ok:
        pytest.skip(f"no spin: {finding.install}")
    return finding.path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("spin") / "redact"
    labels_json = out.parent / "labels.json"
    labels_json.write_text(json.dumps({"labels": ["O", "B-GIVEN_NAME", "E-GIVEN_NAME"]}))
    serve_build(MODEL, minilm_tokenizer_json(), labels_json, out, echo=lambda *_: None)
    return out


def deploy(*args, **env):
    """`porter deploy ARGS` in a fresh interpreter, with `env` added to this environment."""
    return subprocess.run([sys.executable, str(REPO / "cli.py"), "deploy", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, **env})


def would_run(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("would run: "))
    return shlex.split(line.removeprefix("would run: "))


def test_each_mode_maps_onto_its_spin_command(built):
    manifest = str(built / "spin.toml")
    assert would_run(deploy(built, "--dry-run")) == ["spin", "up", "--from", manifest]
    assert would_run(deploy(built, "--dry-run", "--up", "--listen", "0.0.0.0:8080", "--", "--quiet")) == [
        "spin", "up", "--from", manifest, "--listen", "0.0.0.0:8080", "--quiet"]
    assert would_run(deploy(built, "--dry-run", "--build", "--", "--up")) == ["spin", "build", "--from", manifest, "--up"]
    assert would_run(deploy(built, "--dry-run", "--cloud")) == ["spin", "aka", "deploy", "--from", manifest]
    assert would_run(deploy(built, "--dry-run", "--cloud", "cloud")) == ["spin", "cloud", "deploy", "--from", manifest]


def test_the_build_command_runs_porter_from_any_directory(built, tmp_path):
    """The manifest's build step is this interpreter's `-m porter`, not a `porter` on PATH."""
    deploy(built, "--dry-run")
    import tomllib

    command = shlex.split(tomllib.loads((built / "spin.toml").read_text())["component"]["redact"]["build"]["command"])
    assert command[:3] == porter_program() and command[3] == "serve-build"
    result = subprocess.run([*command[:3], "--version"], capture_output=True, text=True, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0 and "version" in result.stdout, result.stderr


@pytest.mark.parametrize("args, fragments", [
    (["--up", "--build"], ["choose one of --up, --build, --cloud and --kube", "--build, --up"]),
    (["--build", "--listen", "127.0.0.1:3000"], ["--listen", "does not apply to --build"]),
    (["--listen", "3000"], ["--listen '3000'", "HOST:PORT"]),
    (["--cloud", "heroku"], ["--cloud heroku", "aka, cloud"]),
])
def test_refusals_are_one_line(built, args, fragments):
    assert_one_line_error(deploy(built, "--dry-run", *args), *fragments)


def test_without_spin_deploy_says_how_to_get_it(built, tmp_path):
    result = deploy(built, **{SPIN_ENV: str(tmp_path / "spin")})
    assert_one_line_error(result, "no spin program", "github.com/spinframework/spin/releases")
    assert (built / "spin.toml").is_file()  # written before spin was looked for


def test_cloud_without_the_plugin_names_the_install(built):
    real_spin()
    result = deploy(built, "--cloud", "cloud", XDG_DATA_HOME=str(built.parent / "no-plugins"))
    assert_one_line_error(result, "Spin plugin 'cloud' is not installed", "spin plugins install cloud")


def test_deploy_up_serves_on_the_listen_address(built):
    """`porter deploy OUT --listen ADDR -- --log-dir DIR`: porter becomes `spin up`, which serves
    the component on that address and logs where the passed-through option says."""
    real_spin()
    port = free_port()
    log_path, spin_logs = built / "deploy-up.log", built / "spin-logs"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "deploy", str(built), "--listen",
                                   f"127.0.0.1:{port}", "--", "--log-dir", str(spin_logs)],
                                  stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            wait_until_serving(server, port, log_path, START_TIMEOUT_S, "porter deploy")
            status, headers, body = http_request(port, "POST", "/redact", json.dumps({"text": "Anna in Berlin"}))
            assert status == 200 and json.loads(body)["redactedText"], body
            assert "total" in parse_server_timing(headers["server-timing"])
            status, _, body = http_request(port, "POST", "/redact", "{}")
            assert status == 400 and json.loads(body)["status"] == 400
        finally:
            stop_server(server)
    assert spin_logs.is_dir(), log_path.read_text()  # spin itself got the option


def test_deploy_build_remakes_the_component(built):
    """`porter deploy OUT --build` runs `spin build`, which runs the manifest's build command
    (python -m porter serve-build, paths relative to the manifest): the same component again."""
    real_spin()
    before = read_facts(built)["component_sha256"]
    (built / "redact.wasm").unlink()
    result = deploy(built, "--build")
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert read_facts(built)["component_sha256"] == before
