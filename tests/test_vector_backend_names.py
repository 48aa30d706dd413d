"""No vector backend's name is tested outside its adapter: a third backend is one adapter module, its entry in
:data:`chalicelib.config.VECTOR_BACKEND_ADAPTERS` and the conformance suite (docs/vector-backends.md).

Checked in every Python module of the service, the CLI and ``app.py``: a comparison (``==``, ``!=``, ``in``,
``not in``, ``is``) with a backend's name as a string literal, or an SQL comparison with it quoted
(``backend = 'qdrant'``, ``<> 'qdrant'``, ``IN ('qdrant', …)``) inside any string. In the migrations from 0026 on
(earlier ones are history), the same SQL comparisons, except migration 0026's single definition of the default
backend (``engram_backend_in_postgres``) and its marked backfill. The adapter's own modules are exempt: for a
backend ``x``, ``chalicelib/search/backends/x.py`` and ``x_*.py``, and the transport package ``chalicelib/x/``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from chalicelib.config import VECTOR_BACKEND_ADAPTERS

ROOT = Path(__file__).resolve().parents[1]
NAMES = tuple(VECTOR_BACKEND_ADAPTERS)
MIGRATIONS = ROOT / "chalicelib" / "store" / "migrations"
FIRST_PORT_MIGRATION = 26


def _sql_tests(text: str) -> list[str]:
    found = []
    for name in NAMES:
        quoted = re.escape(f"'{name}'")
        pattern = rf"(=|<>|!=)\s*{quoted}|{quoted}\s*(=|<>|!=)|\bIN\s*\([^)]*{quoted}"
        found += [m.group(0) for m in re.finditer(pattern, text, re.IGNORECASE)]
    return found


def _exempt(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    for name in NAMES:
        if relative in (f"chalicelib/search/backends/{name}.py",) or relative.startswith(
                (f"chalicelib/search/backends/{name}_", f"chalicelib/{name}/")):
            return True
    return False


def _python_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "chalicelib").rglob("*.py")), *sorted((ROOT / "engram_cli").rglob("*.py"))]


def _literal_tests(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                values = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [operand]
                for value in values:
                    if isinstance(value, ast.Constant) and value.value in NAMES:
                        found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [f"line {getattr(node, 'lineno', '?')}: SQL {hit!r}" for hit in _sql_tests(node.value)]
    return found


def test_no_module_tests_a_backend_name_outside_its_adapter():
    offenders = {}
    for path in _python_files():
        if _exempt(path):
            continue
        hits = _literal_tests(ast.parse(path.read_text(), filename=str(path)))
        if hits:
            offenders[path.relative_to(ROOT).as_posix()] = hits
    assert offenders == {}


def test_no_migration_from_0026_on_tests_a_backend_name():
    offenders = {}
    for path in sorted(MIGRATIONS.glob("*.sql")):
        if int(path.name[:4]) < FIRST_PORT_MIGRATION:
            continue
        text = path.read_text()
        if int(path.name[:4]) == FIRST_PORT_MIGRATION:  # the one definition of the default, and the backfill
            text = re.sub(r"CREATE FUNCTION engram_backend_in_postgres.*?\$\$;", "", text, flags=re.DOTALL)
            text = "\n".join(line for line in text.splitlines() if "-- backfill of versions 23-25" not in line)
        hits = _sql_tests(text)
        if hits:
            offenders[path.name] = hits
    assert offenders == {}


def test_the_check_sees_a_test_of_a_name():
    """The checks above can fail: each kind of test they look for is found in a sample."""
    name = NAMES[-1]
    assert _literal_tests(ast.parse(f"x = store.backend == {name!r}"))
    assert _literal_tests(ast.parse(f"x = backend in ({name!r}, 'other')"))
    assert _literal_tests(ast.parse(f"Q = \"SELECT 1 FROM vector_stores WHERE backend = '{name}'\""))
    assert _sql_tests(f"JOIN vector_stores s ON s.backend IN ('{name}')")
    assert not _literal_tests(ast.parse(f"NAMES = {{{name!r}: 'module:adapter'}}"))
