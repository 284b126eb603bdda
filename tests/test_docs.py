"""The README and docs/*.md name only what exists: every repository path they mention resolves,
every `porter COMMAND` they show is one of the commands `porter --help` lists, and every link
between them lands on a file (and on a heading, where the link names one)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# A path is checked when its first folder is one of the repository's own; folders that .gitignore
# lists are where porter writes its outputs (build/, out/), which a page may name before they exist.
# ci.md and api.md are about porter on the reader's own model: their code blocks run in the
# reader's repository (its golden/model.builtin), so only their prose names this one's files.
READERS_REPOSITORY = {"docs/ci.md", "docs/api.md"}
PATH = re.compile(r"(?<![\w./~$-])(\.?[\w-]+(?:/[\w.*<>…-]+)+/?)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")
INDENTED_CODE = re.compile(r"^ {4,}(\S.*)$", re.M)
# `porter` as a command, options before the command allowed: `porter --debug run`, `.venv/bin/porter doctor`.
COMMAND = re.compile(r"(?:^|(?<=[\s(/]))porter(?: --?[\w-]+)* ([a-z][a-z0-9-]*)")
COMMENT = re.compile(r"(?:^|(?<=\s))#.*$", re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def repository_folders() -> set[str]:
    ignored = {line.strip().strip("/") for line in (REPO / ".gitignore").read_text().splitlines()
               if line.strip().endswith("/") and not any(c in line for c in "*?[")}
    return {p.name for p in REPO.iterdir()} - ignored - {".git"}


def missing_paths(text: str, folders: set[str]) -> list[str]:
    """The repository paths `text` names that do not exist (a `<name>`, `*` or `…` part is a wildcard)."""
    missing = []
    for path in sorted({m.rstrip(".") for m in PATH.findall(text)}):
        if path.split("/", 1)[0] not in folders:
            continue
        pattern = re.sub(r"<[^>]*>|…", "*", path).rstrip("/")
        if not any(REPO.glob(pattern)):
            missing.append(path)
    return missing


def blocks_of(text: str) -> list[str]:
    """The page's code blocks, fenced and indented, without their comments."""
    return [COMMENT.sub("", block) for block in FENCE.findall(text) + INDENTED_CODE.findall(FENCE.sub("", text))]


def without_blocks(text: str) -> str:
    return INDENTED_CODE.sub("", FENCE.sub("", text))


def code_of(text: str) -> list[str]:
    """The page's code: its blocks and its inline code spans."""
    return blocks_of(text) + CODE_SPAN.findall(without_blocks(text))


def unknown_commands(text: str, commands: set[str]) -> list[str]:
    shown = {name for code in code_of(text) for name in COMMAND.findall(code)}
    return sorted(shown - commands)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def broken_links(page: Path, text: str) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue  # a URL, not a link between the docs
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {linked.relative_to(REPO)})")
    return broken


@pytest.fixture(scope="module")
def porter_commands() -> set[str]:
    listing = subprocess.run([sys.executable, "-m", "porter", "--help"], capture_output=True,
                             text=True, check=True).stdout
    commands = listing.split("\nCommands:\n", 1)[1]
    return set(re.findall(r"^  ([a-z][a-z0-9-]*)", commands, re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_a_page_names_exists(page):
    text = page.read_text(encoding="utf-8")
    if str(page.relative_to(REPO)) in READERS_REPOSITORY:
        text = without_blocks(text)
    missing = missing_paths(text, repository_folders())
    assert not missing, f"{page.relative_to(REPO)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_a_page_shows_is_a_porter_command(page, porter_commands):
    unknown = unknown_commands(page.read_text(encoding="utf-8"), porter_commands)
    assert not unknown, f"{page.relative_to(REPO)} shows commands `porter --help` does not list: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_between_the_pages_resolves(page):
    broken = broken_links(page, page.read_text(encoding="utf-8"))
    assert not broken, f"{page.relative_to(REPO)} has broken links: {broken}"


def test_the_checks_find_a_wrong_path_a_wrong_command_and_a_broken_link(porter_commands):
    """Each check, given a page with one mistake of its kind, finds exactly that mistake."""
    page = REPO / "docs" / "layout.md"
    text = ("The canonicaliser (`porter/recover/canonical.py`, old layout) beside "
            "`porter/recover/canonical/fold.py`; run `porter compile` then `porter verfiy DIR`; "
            "see [arithmetic](arithmetic.md#live-rows) and [speed](speeed.md), or "
            "[the CPUs](arithmetic.md#no-such-heading).")
    assert missing_paths(text, repository_folders()) == ["porter/recover/canonical.py"]
    assert unknown_commands(text, porter_commands) == ["verfiy"]
    assert broken_links(page, text) == [
        "speeed.md (no such file)",
        "arithmetic.md#no-such-heading (no heading #no-such-heading in docs/arithmetic.md)"]
