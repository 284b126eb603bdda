"""porter: compile small transformer graphs into Rust + wasm simd128 forward passes.

The Python API (docs/api.md, porter/check/api.py) is importable from here, lazily, so that
`import porter` loads nothing but this file:

    porter.compile_model(model, out_dir)       recover, render and build the wasm module
    porter.make_golden(model, golden, ...)     reference outputs from LiteRT / onnxruntime
    porter.verify(compiled_dir, goldens)       the module against goldens: a porter.verify/1 report
    porter.check(model, golden=... | texts=... | random=... | prompts=...)
                                               all of it as CI runs it: JSON, JUnit and Markdown
"""

__version__ = "0.1.0"

# name -> module that defines it; `porter.check` is the callable subpackage porter.check itself.
_API = {"compile_model": "porter.check.api", "make_golden": "porter.check.api",
        "verify": "porter.check.api", "check": "porter.check"}


def _package_dir():
    """What porter reads at run time ships inside the package (pyproject.toml's package-data) and
    is found through importlib.resources, so an installed wheel works from any directory. porter
    is installed as plain files (pip, pipx, an editable checkout): cargo and jinja read the
    templates from disk, so they are a real directory."""
    from importlib.resources import files
    from pathlib import Path

    return Path(str(files(__name__)))


def package_path(relative: str):
    """A file of porter's package data as a Path, e.g. "bench/peers/ort_web.mjs"; one line
    naming the file when the installation lacks it (a wheel built without its package data)."""
    path = _package_dir() / relative
    if not path.is_file():
        from porter.errors import PorterError

        raise PorterError(f"porter's package data has no {relative} (looked in {path.parent}): "
                          "the installation is incomplete; reinstall porter")
    return path


def __getattr__(name: str):
    if name == "TEMPLATES_DIR":  # the crate templates (porter/templates), for codegen and serve
        return _package_dir() / "templates"
    if name not in _API:
        raise AttributeError(f"module 'porter' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(_API[name])
    return module if module.__name__ == f"porter.{name}" else getattr(module, name)


def __dir__():
    return sorted(set(globals()) | set(_API) | {"TEMPLATES_DIR"})
