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
