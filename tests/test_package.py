"""porter as a user installs it: the wheel holds every file porter reads at run time; installed
into a fresh virtual environment outside the checkout, `porter golden` -> `porter check` run
end to end from a temporary directory on a model copied there (compile, build, verify, the
JUnit file parsed back); and an installation that lost a template refuses to compile instead
of writing half a crate (render_crate checks each crate's module tree and included files).

The wheel is built without build isolation (pip wheel --no-build-isolation, setuptools from the
test extras) and installed without its dependencies; the environment reaches the ones already
installed for the test suite through a .pth file, so nothing is downloaded. The cargo target
directory is the suite's (PORTER_CARGO_TARGET is passed through), so std is not built again.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from fixtures import REPO, minilm_tokenizer_json, require
from porter.codegen.render import render_crate
from porter.errors import PorterError

sys.path.insert(0, str(REPO / "graphs"))
import spec  # noqa: E402

MODEL = spec.TINY.path("litert-dq8.tflite")  # the smallest real fixture: 2 layers, window 64
RUN_TIME_DATA = ("templates", "bench/peers")  # porter/… directories of package data
TEXTS = [
    "Alice Smith lives in Paris and writes to alice@example.com every Tuesday.",
    "",  # the service runs no window for an empty text, and neither does the golden
    "Call Bob Jones at the office. " * 12,  # past one window's 62 text tokens: two windows
]


# A user's environment: Python is not pointed at the checkout (where pip would also find
# porter's egg-info and call the wheel installed already).
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("env", USER_ENV)
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """porter's wheel, built from a copy of the package's sources only (pyproject.toml, README,
    porter/), as an sdist would hold them."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "porter", source / "porter", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", dist, source])
    (built,) = dist.glob("porter-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed; returns its bin directory."""
    root = tmp_path_factory.mktemp("venv") / "env"
    run([sys.executable, "-m", "venv", "--without-pip", root])
    python = root / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel])
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    Path(site, "porter-test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return root / "bin"


@pytest.fixture()
def outside(tmp_path) -> dict:
    """Where a user's run happens: a directory outside the checkout, in the user's environment."""
    work = tmp_path / "work"
    work.mkdir()
    return {"cwd": work, "env": USER_ENV}


def test_the_wheel_holds_every_file_porter_reads_at_run_time(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"porter/{p.relative_to(REPO / 'porter').as_posix()}"
              for directory in RUN_TIME_DATA for p in (REPO / "porter" / directory).rglob("*")
              if p.is_file() and "__pycache__" not in p.parts}
    assert wanted and not wanted - names, sorted(wanted - names)
    assert "porter/cli.py" in names


def test_the_installed_package_is_the_wheels_and_imports_nothing_else(venv, outside):
    probe = ("import sys, porter; print(porter.__file__); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('porter', 'numpy', 'click', 'jinja2')))")
    result = run([venv / "python", "-c", probe], **outside)
    location, loaded = result.stdout.splitlines()
    assert Path(location).is_relative_to(venv.parent), location
    assert loaded == "['porter']"
    api = "import porter; print(all(callable(f) for f in (porter.compile_model, porter.make_golden, porter.verify, porter.check)))"
    assert run([venv / "python", "-c", api], **outside).stdout.strip() == "True"


def test_golden_then_check_from_outside_the_checkout(venv, outside):
    work = outside["cwd"]
    model = shutil.copy(require(MODEL), work / "model.tflite")
    (work / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    tokenizer = shutil.copy(minilm_tokenizer_json(), work / "tokenizer.json")
    made = run([venv / "porter", "golden", "model.tflite", "--texts", "texts.txt", "--tokenizer", "tokenizer.json",
                "-o", "golden/model.builtin"], **outside)
    assert "running 3 windows of 64 tokens" in made.stdout
    manifest = json.loads((work / "golden" / "model.builtin.json").read_text())
    assert manifest["windows"] == 3 and manifest["mode"] == "builtin" and manifest["num_threads"] == 1
    assert Path(tokenizer).name in manifest["tokenizer_file"] and manifest["cpu_flags"]

    checked = run([venv / "porter", "check", model.name, "--golden", "golden/model.builtin.npz", "-o", "ci"],
                  **outside)
    for step in ("compile", "build", "verify"):
        assert f"porter check: {step}: done in" in checked.stdout
    assert "porter check: PASS" in checked.stdout
    report = json.loads((work / "ci" / "report.json").read_text())
    assert report["exit_code"] == 0 and report["verify"]["passed"]
    assert [s["name"] for s in report["steps"]] == ["compile", "build", "verify"]
    assert all(s["ok"] and s["seconds"] > 0 for s in report["steps"])
    assert (work / report["wasm"]["path"]).is_file()  # paths as given, relative to where check ran
    suites = ET.parse(work / "ci" / "junit.xml").getroot()
    cases = suites.findall("testsuite/testcase")
    windows = [c for c in cases if c.get("name").startswith("window ")]
    assert len(windows) == 3 and suites.get("failures") == "0" and suites.get("tests") == str(len(cases))
    assert (work / "ci" / "summary.md").read_text().startswith("## porter check: PASS")


def test_an_installation_without_a_template_refuses_to_compile(venv, outside, tmp_path):
    site = Path(run([venv / "python", "-c", "import porter; print(porter.TEMPLATES_DIR)"], **outside).stdout.strip())
    kernel = site / "rust_forward" / "src" / "kernels" / "common" / "gemm.rs"
    aside = tmp_path / "gemm.rs"
    shutil.move(kernel, aside)
    try:
        result = subprocess.run([str(venv / "porter"), "compile", str(require(MODEL)), "-o", "out"],
                                capture_output=True, text=True, **outside)
    finally:
        shutil.move(aside, kernel)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("porter: error: ")
    assert "src/kernels/common/mod.rs declares module gemm, but neither src/kernels/common/gemm.rs" in result.stderr
    assert "reinstall porter" in result.stderr
    assert not (outside["cwd"] / "out").exists()


@pytest.mark.parametrize("source,missing", [
    ("mod gone;\nfn main() {}\n", "src/main.rs declares module gone, but neither src/gone.rs nor src/gone/mod.rs"),
    ('#[path = "kernels/mod.rs"]\nmod kernels;\nfn main() {}\n', "declares module kernels, but src/kernels/mod.rs is"),
    ('static B: &[u8] = include_bytes!("../weights.bin");\nfn main() {}\n', "includes ../weights.bin"),
], ids=["module", "path-attribute", "include-bytes"])
def test_a_crate_missing_a_source_file_is_refused_and_nothing_is_written(tmp_path, source, missing):
    template = tmp_path / "template"
    (template / "src").mkdir(parents=True)
    (template / "Cargo.toml").write_text('[package]\nname = "porter-incomplete"\n')
    (template / "src/main.rs").write_text(source)
    with pytest.raises(PorterError, match=re.escape(missing)):
        render_crate(template, tmp_path / "out/crate", {})
    assert list((tmp_path / "out").iterdir()) == []


def test_the_module_tree_check_follows_nested_modules_and_path_attributes(tmp_path):
    template = tmp_path / "template"
    for relative, text in {"Cargo.toml": "[package]\n", "src/main.rs": "mod a;\nmod b;\nfn main() {}\n",
                           "src/a.rs": "mod inner;\n", "src/a/inner.rs": "", "src/b/mod.rs": "pub mod c;\n",
                           "src/b/c.rs": "", "checks/Cargo.toml": "[package]\n",
                           "checks/src/main.rs": '#[path = "../../src/b/mod.rs"]\nmod b;\nfn main() {}\n'}.items():
        (template / relative).parent.mkdir(parents=True, exist_ok=True)
        (template / relative).write_text(text)
    render_crate(template, tmp_path / "out/crate", {})
    (template / "src/b/c.rs").unlink()
    with pytest.raises(PorterError, match=re.escape("src/b/mod.rs declares module c, but neither src/b/c.rs nor")):
        render_crate(template, tmp_path / "out/crate", {})
    assert (tmp_path / "out/crate/src/b/c.rs").is_file()  # the earlier crate stays as it was
