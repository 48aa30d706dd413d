"""Indexes that exist when a user needs them (issue 33 §2), on the embedded engine (Qdrant Edge) with a low
indexing threshold (1 KB: every segment it builds gets an HNSW graph, so "built" can be checked in the engine
itself: an indexed segment counts its dense and its sparse vectors, 2 per point).

- every store's index state is visible — indexed or not, points, files pending — through the generic sync and
  ``engram stores --json`` / ``engram stats --json``;
- after an ingest the state says an index build is owed (the points were written ahead of their commit), and the
  ``sync_vector_index`` job builds it even though it syncs no point itself (before: it built only after upserting
  points, so a store whose points were all written ahead of their commit stayed an exact scan);
- after ``engram ingest`` and after a move (``engram stores reindex``) the index is built before the command ends;
- a pgvector store reports its HNSW index, and its absence.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from typer.testing import CliRunner

from chalicelib import config, deps
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.jobs import housekeeping
from chalicelib.jobs.model import JobContext
from chalicelib.qdrant import collection_name
from chalicelib.search.backends import sync
from chalicelib.search.backends.reindex import move
from chalicelib.store import vector_stores
from engram_cli.main import app

DOCS = {
    "pg.txt": b"Postgres stores rows in heap pages.\n\npgvector adds a vector type and HNSW indexes to Postgres.",
    "fox.txt": b"The quick brown fox jumps over the lazy dog.\n\nDogs bark at night, and foxes are quick and brown.",
    "cats.txt": b"Cats sleep for most of the day. A cat naps in the sun near the window.",
}


@pytest.fixture(scope="module")
def qsettings(settings, tmp_path_factory):
    """New stores on the embedded Qdrant, in a data folder of this module's own, indexing every segment."""
    configured = dataclasses.replace(settings, vector_backend="qdrant", qdrant_indexing_threshold_kb=1,
                                     data_dir=tmp_path_factory.mktemp("data-index"))
    deps.set_settings(configured)
    yield configured
    deps.qdrant(configured).close()
    deps.set_settings(None)


def _engine(qsettings, dimension: int):
    """The collection's state as the engine reports it."""
    state = deps.qdrant(qsettings).status(collection_name(qsettings, dimension))
    assert state is not None
    return state


def _job(qsettings):
    return housekeeping.sync_vector_index(JobContext(settings=qsettings, tenant=None, cursor=None,
                                                     deadline=time.monotonic() + 60))


def test_the_index_is_built_after_ingestion_by_the_job_that_syncs_nothing(conn, qsettings, hashing_embedder):
    store = vector_stores.create(conn, "acme", name="ingested", model=hashing_embedder.model,
                                 dim=hashing_embedder.dimension, backend="qdrant")
    for name, data in DOCS.items():
        assert ingest_bytes(conn, qsettings, "acme", store, filename=name, data=data,
                            embedder=hashing_embedder).status == "completed"
    store = vector_stores.get(conn, "acme", store.id)
    state = sync.index_state(conn, qsettings, "acme", store.id)
    # the points were written ahead of each commit and nothing is queued, but no index was built yet
    assert state["backend"] == "qdrant" and state["points"] == store.chunk_count > 0
    assert state["pending_files"] == 0 and state["indexed"] is False and "index build is owed" in state["detail"]
    engine = _engine(qsettings, store.embedding_dim)
    assert engine.built is False and engine.indexed_vectors < 2 * engine.points

    result = _job(qsettings)
    assert result.counts["points"] == 0  # it synced nothing itself, and still built the index
    state = sync.index_state(conn, qsettings, "acme", store.id)
    assert (state["indexed"], state["points"], state["pending_files"]) == (True, store.chunk_count, 0)
    engine = _engine(qsettings, store.embedding_dim)
    assert engine.built and engine.indexed_vectors == 2 * engine.points  # every point in an indexed segment


def test_the_index_is_built_after_a_move(conn, qsettings, hashing_embedder):
    store = vector_stores.create(conn, "acme", name="moved", model=hashing_embedder.model,
                                 dim=hashing_embedder.dimension, backend="pgvector")
    for name, data in DOCS.items():
        ingest_bytes(conn, qsettings, "acme", store, filename=name, data=data, embedder=hashing_embedder)
    state = sync.index_state(conn, qsettings, "acme", store.id)
    assert state["backend"] == "pgvector" and state["indexed"] is True and "HNSW" in state["detail"]

    moved = move(conn, qsettings, vector_stores.get(conn, "acme", store.id), "qdrant")
    assert moved.finished and moved.backend == "qdrant"
    store = vector_stores.get(conn, "acme", store.id)
    state = sync.index_state(conn, qsettings, "acme", store.id)
    assert (state["indexed"], state["points"], state["pending_files"]) == (True, store.chunk_count, 0)
    engine = _engine(qsettings, store.embedding_dim)
    assert engine.built and engine.indexed_vectors == 2 * engine.points


def test_a_pgvector_store_without_its_hnsw_index_says_so(conn, qsettings, hashing_embedder):
    store = vector_stores.create(conn, "acme", name="plain", model=hashing_embedder.model, dim=8,
                                 backend="pgvector")
    conn.execute("DROP INDEX IF EXISTS chunks_hnsw_8")
    state = sync.index_state(conn, qsettings, "acme", store.id)
    assert state["indexed"] is False and "exact scans" in state["detail"]
    vector_stores.ensure_hnsw_index(conn, 8)
    assert sync.index_state(conn, qsettings, "acme", store.id)["indexed"] is True


def test_engram_ingest_builds_the_index_and_the_cli_shows_its_state(qsettings, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", qsettings.database_url)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(qsettings.data_dir))
    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("ENGRAM_VECTOR_BACKEND", "qdrant")
    monkeypatch.setenv("ENGRAM_QDRANT_INDEXING_THRESHOLD_KB", "1")
    monkeypatch.setenv("ENGRAM_TENANT", "cli-index")
    config.settings.cache_clear()
    deps.set_settings(None)
    try:
        for name, data in DOCS.items():
            (tmp_path / name).write_bytes(data)
        runner = CliRunner()
        result = runner.invoke(app, ["ingest", str(tmp_path), "--store", "cli-docs", "--json"],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        listed = runner.invoke(app, ["stores", "--json"], catch_exceptions=False)
        [row] = [s for s in json.loads(listed.stdout) if s["name"] == "cli-docs"]
        assert row["backend"] == "qdrant" and row["index"]["indexed"] is True
        assert row["index"]["points"] == row["chunks"] > 0 and row["index"]["pending_files"] == 0
        engine = _engine(qsettings, row["embedding_dim"])
        assert engine.built and engine.indexed_vectors == 2 * engine.points
        shown = runner.invoke(app, ["stats", "--json"], catch_exceptions=False)
        [stat] = [s for s in json.loads(shown.stdout)["stores"] if s["name"] == "cli-docs"]
        assert stat["index"] == row["index"]
        wide = runner.invoke(app, ["stats"], catch_exceptions=False, env={"COLUMNS": "250"})
        assert "qdrant: indexed (3 points)" in wide.output, wide.output
    finally:
        config.settings.cache_clear()
        deps.set_settings(qsettings)
