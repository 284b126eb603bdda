"""The package layout: stages import only from stages before them, no module imports another's
private names, there are no import cycles, and docs/layout.md's layout section names every stage."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "porter"

# porter's stages in data-flow order; a module may import from its own stage or an earlier one.
# "" is the package root (porter/__init__.py, errors.py, fsutil.py), which everything may use;
# __main__ (`python -m porter`) only runs the CLI.
STAGES = ["", "frontends", "ir", "reference", "recover", "toolchain", "codegen", "runtime", "check",
          "tokenize", "serve", "bench", "cli", "__main__"]
ROOT_MODULES = {"porter", "porter.errors", "porter.fsutil"}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "templates" in path.relative_to(PACKAGE).parts:
            continue
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def stage_of(module: str) -> str:
    if module in ROOT_MODULES:
        return ""
    return module.split(".")[1]


def porter_imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported porter module, names taken from it, line) for every import in the file,
    including those inside functions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and (node.module == "porter" or node.module.startswith("porter.")):
            found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("porter")]
    return found


def resolved(module: str, name: str, known: dict) -> str:
    """`from porter.x import y` names module porter.x.y when that is a module, else porter.x."""
    return f"{module}.{name}" if f"{module}.{name}" in known else module


def test_every_module_is_in_a_known_stage():
    unknown = {m for m in modules() if stage_of(m) not in STAGES}
    assert not unknown, f"modules outside the stages {STAGES}: {sorted(unknown)}"


def test_imports_point_down_the_data_flow():
    known = modules()
    backwards = []
    for module, path in known.items():
        here = STAGES.index(stage_of(module))
        for imported, names, line in porter_imports(path):
            for target in [resolved(imported, n, known) for n in names] or [imported]:
                there = STAGES.index(stage_of(target))
                if there > here:
                    backwards.append(f"{path.relative_to(REPO)}:{line} ({stage_of(module) or 'root'}) "
                                     f"imports {target} ({stage_of(target)})")
    assert not backwards, "imports against the data flow:\n" + "\n".join(backwards)


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for path in list(PACKAGE.rglob("*.py")) + list((REPO / "tests").rglob("*.py")):
        if "templates" in path.parts:
            continue
        for imported, names, line in porter_imports(path):
            offenders += [f"{path.relative_to(REPO)}:{line}: {imported}.{n}" for n in names
                          if n.startswith("_") and not n.startswith("__")]
    assert not offenders, "private names imported across modules:\n" + "\n".join(offenders)


def test_no_import_cycles():
    known = modules()
    edges = {m: set() for m in known}
    for module, path in known.items():
        for imported, names, _ in porter_imports(path):
            for target in [resolved(imported, n, known) for n in names] or [imported]:
                if target in known and target != module and not module.startswith(target + "."):
                    edges[module].add(target)
    cycles, state = [], {}

    def visit(m, stack):
        state[m] = "open"
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                cycles.append(" -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n, stack + [n])
        state[m] = "done"

    for m in sorted(known):
        if m not in state:
            visit(m, [m])
    # A package's __init__ importing its own submodule is not a cycle of stages.
    cycles = [c for c in cycles if len({stage_of(x) for x in c.split(" -> ")}) > 1 or "__init__" not in c]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_layout_page_names_every_stage():
    readme = (REPO / "docs" / "layout.md").read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`porter/([a-z_]+)/`", section))
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages <= named, f"docs/layout.md does not name {sorted(packages - named)}"
    missing = {n for n in named if not (PACKAGE / n).is_dir()}
    assert not missing, f"docs/layout.md names directories that do not exist: {sorted(missing)}"


# Inside the two crowded stages, layers in data-flow order: a module may import from its own
# layer or an earlier one. recover: what every recogniser shares, then canonicalisation, the
# proof, the encoder's recognisers, the decoder's (which reuse the encoder's attention and
# norms). reference: the quantisation formats and the typed steps both runtimes compute alike,
# then each runtime's kernels (LiteRT's and onnxruntime's never import each other), the op
# vocabulary, the executors.
INNER_LAYERS = {
    "recover": [{"engine", "probe", "boxes", "rows", "schemes", "tokens"}, {"canonical"}, {"prove", "integer", "qdq"},
                {"encoder"}, {"decoder"}],
    "reference": [{"quant", "q8_0", "exact", "typed"}, {"litert"}, {"ort"}, {"ops"}, {"execute", "execute_decoder"}],
}
INDEPENDENT = {"reference": [("litert", "ort")]}


def layer_of(module: str) -> tuple[str, str] | None:
    """(stage, first name below the stage) for modules inside recover/ or reference/."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in INNER_LAYERS:
        return None
    return parts[1], parts[2]


def test_inner_layers_of_recover_and_reference():
    known = modules()
    for stage, layers in INNER_LAYERS.items():
        listed = set().union(*layers)
        present = {layer_of(m)[1] for m in known if layer_of(m) and layer_of(m)[0] == stage}
        assert present == listed, f"porter/{stage}/: modules {sorted(present ^ listed)} are not in INNER_LAYERS"
    backwards = []
    for module, path in known.items():
        here = layer_of(module)
        if here is None:
            continue
        rank = {name: i for i, layer in enumerate(INNER_LAYERS[here[0]]) for name in layer}
        pairs = INDEPENDENT.get(here[0], [])
        for imported, names, line in porter_imports(path):
            for target in [resolved(imported, n, known) for n in names] or [imported]:
                there = layer_of(target)
                if there is None or there[0] != here[0] or there[1] == here[1]:
                    continue
                independent = (here[1], there[1]) in pairs or (there[1], here[1]) in pairs
                if rank[there[1]] > rank[here[1]] or independent:
                    backwards.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not backwards, "imports against the layers inside a stage:\n" + "\n".join(backwards)
