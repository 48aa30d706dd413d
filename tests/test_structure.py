"""The house's rules, checked on the code itself: the tables that wire background work agree with ``app.py``,
``.chalice/config.json`` and each other, and no module imports a layer above its own (imports made inside
functions count too)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from chalicelib.dispatch.table import MESSAGES, QUEUES
from chalicelib.entrypoints import resolve
from chalicelib.jobs.table import JOBS, LANES, lane, tick_s

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "chalicelib"

# Layers, lowest first (packages or modules under chalicelib). A module may import its own layer and those below,
# never one above. jobs.model holds plain value types (a job's context and result) every layer may use.
LAYERS = [
    {"errors", "ids", "config", "wire", "validation", "http_retry", "aws", "entrypoints", "observability",
     "access", "jobs.model"},
    {"embed", "chat", "store", "dispatch", "qdrant"},
    {"deps"},
    {"search", "ingest", "responses", "memory"},
    {"jobs", "events"},
    {"api"},
]


def _layer(module: str) -> int:
    parts = module.split(".")[1:]
    for depth in (2, 1):  # the most specific entry wins: "jobs.model" before "jobs"
        key = ".".join(parts[:depth])
        for level, names in enumerate(LAYERS):
            if len(parts) >= depth and key in names:
                return level
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("chalicelib.")}


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _known(name: str) -> bool:
    candidate = REPO / Path(*name.split("."))
    return candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists()


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        if module == "chalicelib":
            continue
        mine = _layer(module)
        for imported in _imports(path):
            if _known(imported) and imported != "chalicelib" and _layer(imported) > mine:
                upward.append(f"{module} -> {imported}")
    assert upward == []


def test_queues_and_lanes_are_app_functions_with_their_config() -> None:
    import app

    sources = {source.name: source for source in app.app.event_sources}
    assert set(sources) == {q.function for q in QUEUES} | {lane.name for lane in LANES}
    for queue in QUEUES:
        assert sources[queue.function].queue == queue.name
        assert sources[queue.function].batch_size == queue.batch_size
    stage = json.loads((REPO / ".chalice" / "config.json").read_text())["stages"]["prod"]["lambda_functions"]
    for queue in QUEUES:
        assert stage[queue.function] == {"lambda_memory_size": queue.memory_mb,
                                         "lambda_timeout": queue.timeout_s}, queue.function
    for row in LANES:
        assert stage[row.name] == {"lambda_memory_size": row.memory_mb, "lambda_timeout": row.timeout_s}, row.name
        rate = sources[row.name].schedule_expression.to_string()
        minutes = int(tick_s(row.name) // 60)
        assert rate in (f"rate({minutes} minutes)", f"rate({minutes // 60} hour)", f"rate({minutes // 60} hours)")


@pytest.mark.parametrize("row", JOBS, ids=lambda row: row.name)
def test_every_job_resolves_and_fits_its_lane(row) -> None:
    assert callable(resolve(row.function))
    assert 0 < row.budget_s <= lane(row.lane).budget_s
    assert row.cadence_s >= 60


def test_names_are_unique() -> None:
    assert len({row.name for row in JOBS}) == len(JOBS)
    assert len({row.name for row in LANES}) == len(LANES)
    assert len(MESSAGES) == len({row.message for row in MESSAGES.values()})


def _outside_memory() -> list[Path]:
    inside = PACKAGE / "memory"
    return [p for p in [*sorted(PACKAGE.rglob("*.py")), *sorted((REPO / "engram_cli").rglob("*.py")), REPO / "app.py"]
            if inside not in p.parents]


def test_memory_is_reached_only_through_its_public_face() -> None:
    """Outside ``chalicelib/memory/`` (the rest of chalicelib, the CLI, app.py), code imports the package
    ``chalicelib.memory`` and only names of its ``__all__``; no submodule, not even inside a function."""
    import chalicelib.memory as memory

    public = set(memory.__all__)
    wrong = []
    for path in _outside_memory():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("chalicelib.memory")]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chalicelib.memory"):
                if node.module != "chalicelib.memory":
                    wrong.append(f"{path.name}: from {node.module}")
                wrong += [f"{path.name}: {a.name}" for a in node.names if a.name not in public]
    assert wrong == []


def test_tables_name_memory_entry_points_by_its_public_face() -> None:
    import chalicelib.memory as memory

    paths = [p for row in MESSAGES.values() for p in (row.message, row.handler, row.give_up)]
    paths += [row.function for row in JOBS]
    named = [p for p in paths if p and p.startswith("chalicelib.memory")]
    assert named, "the memory queue's handler is in the message table"
    assert [p for p in named if p.partition(":")[0] != "chalicelib.memory"
            or p.partition(":")[2] not in memory.__all__] == []


def test_the_memory_package_exports_what_it_says() -> None:
    import chalicelib.memory as memory

    assert sorted(set(memory.__all__)) == sorted(memory.__all__)
    assert all(hasattr(memory, name) for name in memory.__all__)
