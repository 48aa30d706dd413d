"""The docs say what the tree is: ``docs/architecture.md``'s package map lists exactly the packages under
``chalicelib/`` and ``engram_cli/`` (a new package without a line, or a line naming a package that is gone,
fails here); every file path and dotted module the docs name exists; the scheduled jobs the operations page lists
are the jobs table's."""

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

# ---- what the docs name exists ------------------------------------------------------------------------------

DOCS = [REPO / "README.md", REPO / "infra" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_PATH = re.compile(r"\b((?:chalicelib|engram_cli|benchmarks|infra|tests|examples|\.ci)/[\w./-]*[\w/])")
_MODULE = re.compile(r"`((?:chalicelib|engram_cli)(?:\.\w+)+)")
_PLACEHOLDER = re.compile(r"[A-Z]{3,}|<")  # benchmarks/NAME.py: a pattern, not a file


def test_every_path_and_module_the_docs_name_exists():
    import importlib.util

    missing = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for path in sorted(set(_PATH.findall(text))):
            if not _PLACEHOLDER.search(path) and not (REPO / path).exists():
                missing.append(f"{doc.name}: {path}")
        for dotted in sorted(set(_MODULE.findall(text))):
            module, _, attribute = dotted.rpartition(".")
            found = importlib.util.find_spec(dotted) is not None or (
                importlib.util.find_spec(module) is not None
                and hasattr(importlib.import_module(module), attribute))
            if not found:
                missing.append(f"{doc.name}: {dotted}")
    assert missing == []


def test_the_operations_page_lists_every_scheduled_job():
    from chalicelib.jobs.table import JOBS, LANES

    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("**Scheduled handlers.**", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\w+)`", section))
    assert {job.name for job in JOBS} | {lane.name for lane in LANES} <= named


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
