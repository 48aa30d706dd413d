"""The docs say what the tree is: ``docs/architecture.md``'s package map lists exactly the packages under
``chalicelib/`` and ``engram_cli/`` (a new package without a line, or a line naming a package that is gone,
fails here)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"


def _packages() -> set[str]:
    found = set()
    for root in ("chalicelib", "engram_cli"):
        for init in (REPO / root).rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(REPO).parts))
    return found


def _mapped() -> set[str]:
    section = ARCHITECTURE.read_text(encoding="utf-8").split("## Packages", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w.]+)` \|", section, re.M))


def test_the_package_map_lists_exactly_the_packages():
    assert _mapped() == _packages()


def test_the_layer_rule_in_the_docs_is_the_tested_one():
    from tests.test_structure import LAYERS

    text = ARCHITECTURE.read_text(encoding="utf-8")
    for layer in LAYERS:
        for name in layer:
            assert re.search(rf"\b{re.escape(name)}\b", text), name


# ---- the README: a front door whose every code block runs -----------------------------------------------------

README = REPO / "README.md"
# Longest README accepted (issue 26: a front door of at most ~450 lines; details live in docs/).
README_MAX_LINES = 450
_BLOCK = re.compile(r"(?:<!-- readme-test: (?P<name>[\w-]+) -->\s*)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


def test_the_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES


def test_every_readme_code_block_is_run_by_a_test():
    from tests.responses.test_readme_snippets import TESTED

    blocks = [(m["lang"], m["name"], m["code"]) for m in _BLOCK.finditer(README.read_text(encoding="utf-8"))]
    shell = [code for lang, _, code in blocks if lang != "python"]
    # the one shell block is the two set-up commands: ./dev test is what CI runs, ./dev demo the demo test's job
    assert len(shell) == 1
    assert [line.split("#")[0].strip() for line in shell[0].splitlines() if line.startswith("./")] == [
        "./dev demo", "./dev test"]
    assert "./dev test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    named = [name for lang, name, _ in blocks if lang == "python"]
    assert sorted(named) == sorted(TESTED), "every python block needs a <!-- readme-test: NAME --> that a test runs"


def _links(page: Path) -> list[tuple[str, str]]:
    """``(target path, anchor)`` of every relative markdown link on ``page``."""
    found = re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8"))
    return [tuple(link.split("#", 1)) if "#" in link else (link, "") for link in found
            if not link.startswith(("http://", "https://", "mailto:"))]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_link_of_the_readme_and_the_docs_resolves():
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for target, anchor in _links(page):
            path = (page.parent / target).resolve() if target else page
            assert path.exists(), f"{page.name}: {target} does not exist"
            if anchor and path.suffix == ".md":
                assert anchor in _anchors(path), f"{page.name}: no heading #{anchor} in {target or page.name}"
    linked = {(README.parent / target).resolve() for target, _ in _links(README)}
    assert set(pages[1:]) <= linked, "every docs/ page is linked from the README"
