"""Rendering a crate from a template directory: the one way porter assembles a crate.

A template directory is a crate in which every `*.j2` file is a jinja2 template (rendered, the
suffix dropped) and every other file is copied as it is. `render_crate` renders one into a
sibling staging directory, adds the extra files (model.bin, layout.json, a .cargo/config.toml …),
checks that the crate is whole, and swaps the finished directory in, so a crate directory never
holds half a crate.

"Whole" is read off the crate itself rather than a list of template files that would have to
follow every change to the templates: each crate root's module tree (`mod name;`, `#[path]`)
and every `include_bytes!` / `include_str!` must name a file that is there. A template missing
from porter's installed package data is then an error at `porter compile`, not at cargo build.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import jinja2

from porter.errors import PorterError
from porter.fsutil import replace_dir
from porter.toolchain.cargo import build_crate, cargo_config_toml
from porter.toolchain.discover import CrateKind, Toolchain

TEMPLATE_SUFFIX = ".j2"
CRATE_ROOTS = ("src/main.rs", "src/lib.rs")
# `mod name;` (a declaration, not an inline `mod name { … }`), with the #[path] just above it
MOD_DECLARATION = re.compile(r'^[ \t]*(?:#\[path\s*=\s*"([^"]+)"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;',
                             re.MULTILINE)
INCOMPLETE = "porter's package data is incomplete: reinstall porter"
INCLUDED_FILE = re.compile(r'\binclude_(?:bytes|str)!\(\s*"([^"]+)"\s*\)')


def render_crate(template_dir: Path, crate_dir: Path, variables: Mapping[str, object],
                 extra_files: Mapping[str, bytes] | None = None) -> Path:
    """Render template_dir into crate_dir, replacing it whole.

    extra_files (relative path -> bytes) are written beside the rendered files, e.g. a model.bin
    that the crate embeds with include_bytes!, or the crate's .cargo/config.toml.
    """
    if not template_dir.is_dir():
        raise PorterError(f"template directory {template_dir} does not exist ({INCOMPLETE})")
    crate_dir = Path(crate_dir)
    crate_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{crate_dir.name}.", dir=crate_dir.parent))
    os.chmod(staging, 0o755)  # mkdtemp's 0700 would make the crate private to its builder
    try:
        render_templates(template_dir, staging, variables)
        for relative, data in (extra_files or {}).items():
            _write_file(staging / relative, data)
        require_whole_crate(staging, template_dir)
        replace_dir(staging, crate_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return crate_dir


def cargo_config_file(toolchain: Toolchain, kind: CrateKind) -> dict[str, bytes]:
    """The extra file that makes a rendered crate buildable with this toolchain by plain cargo."""
    return {".cargo/config.toml": cargo_config_toml(toolchain, kind).encode()}


def render_and_build(template_dir: Path, crate_dir: Path, variables: Mapping[str, object],
                     toolchain: Toolchain, kind: CrateKind = CrateKind.COMMAND,
                     extra_files: Mapping[str, bytes] | None = None,
                     target_dir: Path | None = None) -> Path:
    files = {**(extra_files or {}), **cargo_config_file(toolchain, kind)}
    render_crate(template_dir, crate_dir, variables, files)
    return build_crate(crate_dir, toolchain, target_dir)


def render_templates(template_dir: Path, out_dir: Path, variables: Mapping[str, object]) -> None:
    """Every file of template_dir into out_dir: `*.j2` rendered (suffix dropped), others copied."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        undefined=jinja2.StrictUndefined,  # a misspelt variable must fail, not render as ""
        keep_trailing_newline=True,
        autoescape=False,
    )
    for source in sorted(p for p in template_dir.rglob("*") if p.is_file()):
        relative = source.relative_to(template_dir)
        if source.name.endswith(TEMPLATE_SUFFIX):
            text = _render_one(environment, relative, variables)
            _write_file(out_dir / str(relative).removesuffix(TEMPLATE_SUFFIX), text.encode())
        else:
            _write_file(out_dir / relative, source.read_bytes())


def require_whole_crate(crate_dir: Path, template_dir: Path) -> None:
    """Every crate under crate_dir (a Cargo.toml with a src/main.rs or src/lib.rs) has every
    source file its module tree declares and every file it includes; else one line naming it."""
    crate_dir = crate_dir.resolve()
    manifests = sorted(crate_dir.rglob("Cargo.toml"))
    if not manifests:
        raise PorterError(f"template {template_dir} rendered no Cargo.toml ({INCOMPLETE})")
    for manifest in manifests:
        roots = [manifest.parent / root for root in CRATE_ROOTS if (manifest.parent / root).is_file()]
        if not roots:
            raise PorterError(f"template {template_dir}: {manifest.relative_to(crate_dir)} has no "
                              f"src/main.rs or src/lib.rs beside it ({INCOMPLETE})")
        for root in roots:
            _require_module_files(root, True, crate_dir, template_dir)


def _require_module_files(source: Path, owns_directory: bool, crate_dir: Path, template_dir: Path) -> None:
    """Rust's module paths: `mod m;` in a file that owns its directory (a crate root, a mod.rs,
    a #[path] file) is m.rs or m/mod.rs beside it; in any other file f.rs, f/m.rs or f/m/mod.rs."""
    text = source.read_text(encoding="utf-8")
    where = source.parent if owns_directory else source.with_suffix("")
    for path_attribute, name in MOD_DECLARATION.findall(text):
        if path_attribute:
            candidates = [((source.parent / path_attribute).resolve(), True)]
        else:
            candidates = [(where / f"{name}.rs", False), (where / name / "mod.rs", True)]
        found = next(((path, owns) for path, owns in candidates if path.is_file()), None)
        if found is None:
            names = " nor ".join(str(path.relative_to(crate_dir)) for path, _ in candidates)
            raise PorterError(f"template {template_dir}: {source.relative_to(crate_dir)} declares "
                              f"module {name}, but {'neither ' if len(candidates) > 1 else ''}{names} "
                              f"is there ({INCOMPLETE})")
        _require_module_files(*found, crate_dir, template_dir)
    for included in INCLUDED_FILE.findall(text):
        if not (source.parent / included).is_file():
            raise PorterError(f"template {template_dir}: {source.relative_to(crate_dir)} includes "
                              f"{included}, which is not there ({INCOMPLETE})")


def _render_one(environment: jinja2.Environment, relative: Path, variables: Mapping[str, object]) -> str:
    try:
        return environment.get_template(relative.as_posix()).render(**variables)
    except jinja2.TemplateError as e:
        raise PorterError(f"cannot render template {relative}: {e}") from e


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
