"""Shared fixtures: one embedded Postgres + pgvector for the session (or DATABASE_URL when set), a fresh schema
per test module, the hashing embedder for fast paths, and the shared data folder when present.

Markers: every test that needs no database (none of its fixtures reaches ``database_url``), no real model
(``slow``) and no subprocess or local AWS stack (``integration``) is marked ``unit`` at collection, so
``./dev test -m unit`` runs the quick, pure-Python subset (parsers, chunker, scoring, temporal parsing, the
tables' checks) in well under a minute."""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path

import psycopg
import pytest

from chalicelib.config import Settings

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


# Tests that build deployment layouts, lint templates, run the local AWS stack or spawn processes (the console's
# browser): marked ``integration`` (not quick) by where they live.
INTEGRATION = ("infra/", "local/", "console/", "test_benchmarks.py", "test_embedded.py", "test_outage.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the quick tests ``unit`` (module docstring) and the tests under :data:`INTEGRATION` ``integration``."""
    root = Path(__file__).resolve().parent
    for item in items:
        where = Path(str(item.path)).resolve().relative_to(root).as_posix()
        if where.startswith(INTEGRATION):
            item.add_marker(pytest.mark.integration)
        fixtures = getattr(item, "fixturenames", ())
        if "database_url" in fixtures or item.get_closest_marker("slow") or item.get_closest_marker("integration"):
            continue
        item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def _logs_on_stdout():
    """Log lines on stdout, as in Lambda (an in-process CLI run sends them to stderr; undo that after it)."""
    yield
    from chalicelib import observability

    observability.log_to_stderr(False)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A server URL: $DATABASE_URL, else the embedded server in a temporary folder."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    from chalicelib.store.embedded import embedded_database_url

    return embedded_database_url(tmp_path_factory.mktemp("pg"))


# The vector backends a module runs on when it opts in with ``VECTOR_BACKENDS = BOTH_BACKENDS`` (its tests then run
# once per backend, each on a fresh database and data folder); every other module runs on pgvector.
BOTH_BACKENDS = ("pgvector", "qdrant")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``vector_backend`` with the module's ``VECTOR_BACKENDS`` (see :data:`BOTH_BACKENDS`)."""
    backends = getattr(metafunc.module, "VECTOR_BACKENDS", None)
    if backends and "vector_backend" in metafunc.fixturenames:
        metafunc.parametrize("vector_backend", backends, indirect=True, scope="module")


@pytest.fixture(scope="module")
def vector_backend(request: pytest.FixtureRequest) -> str:
    """The backend new vector stores use in this module's settings (``pgvector`` unless parametrized)."""
    return getattr(request, "param", "pgvector")


@pytest.fixture(scope="module")
def module_database(database_url: str, vector_backend: str) -> str:
    """A fresh database per test module (and per vector backend it runs on): isolated schema and statistics."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return psycopg.conninfo.make_conninfo(database_url, dbname=name)


@pytest.fixture(scope="module")
def settings(module_database: str, vector_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings pointing at the module's database, hashing embedder, exact-scan threshold kept default, new vector
    stores and users' memory histories on the module's backend (the embedded Qdrant under the data folder for
    ``qdrant``)."""
    return dataclasses.replace(Settings(), database_url=module_database, embedding_provider="hashing",
                               embedding_model="hashing-384", data_dir=tmp_path_factory.mktemp("data"),
                               vector_backend=vector_backend, memory_backend=vector_backend)


@pytest.fixture()
def conn(settings: Settings):
    """An autocommit connection to the module's migrated database."""
    from chalicelib.store.db import connect

    connection = connect(settings)
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def hashing_embedder():
    """The deterministic feature-hashing embedder (384 dimensions) — fast, tests only."""
    from chalicelib.embed.hashing import HashingEmbedder

    return HashingEmbedder(dimension=384)


@pytest.fixture(scope="session")
def docs_dir() -> Path:
    """``../shared/data/docs`` (the module skips when it is absent)."""
    path = SHARED_DATA / "docs"
    if not path.is_dir():
        pytest.skip("../shared/data/docs is not present")
    return path
