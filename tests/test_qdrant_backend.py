"""The Qdrant vector backend against real Postgres, on both transports — the embedded engine (Qdrant Edge) and a
Qdrant server over HTTP (tests/fakes/qdrant_server.py: every body checked against Qdrant's OpenAPI models, then
run on the embedded engine): the same documents in a pgvector store and a Qdrant store rank alike with the same
scores; Qdrant's points follow Postgres through re-ingests, attribute updates, deletes and store deletion; no
stale point is ever returned, even while Qdrant is behind; tenants stay apart; the HTTP transport retries what
Qdrant asks it to and fails clearly on what it must not retry."""

from __future__ import annotations

import dataclasses
import time

import pytest

from chalicelib import deps
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.jobs import housekeeping
from chalicelib.jobs.model import JobContext
from chalicelib.qdrant import TENANT_FIELD, collection_name
from chalicelib.search.backends import sync
from chalicelib.search.service import RankingOptions, search
from chalicelib.store import attachments, vector_stores
from chalicelib.store import vector_index_outbox as outbox
from tests.fakes.qdrant_server import FakeQdrantServer

DOCS = {
    "pg.txt": b"Postgres stores rows in heap pages.\n\npgvector adds a vector type and HNSW indexes to Postgres.",
    "fox.txt": b"The quick brown fox jumps over the lazy dog.\n\nDogs bark at night, and foxes are quick and brown.",
    "cats.txt": b"Cats sleep for most of the day. A cat naps in the sun near the window.",
    "bm25.txt": b"BM25 weighs rare words above common ones: an inverse document frequency times a saturating tf.",
}
QUERIES = ["quick brown fox", "vector index", "why do cats sleep", "rare words"]


@pytest.fixture(scope="module", params=["embedded", "http"])
def qsettings(request, settings, tmp_path_factory):
    """The module's settings with new stores on Qdrant: the embedded engine under the module's data folder, or the
    fake server (with an API key) over HTTP."""
    configured = dataclasses.replace(settings, vector_backend="qdrant")
    if request.param == "embedded":
        deps.set_settings(configured)
        yield configured
    else:
        with FakeQdrantServer(tmp_path_factory.mktemp("qdrant-server"), api_key="qk") as fake:
            configured = dataclasses.replace(configured, qdrant_url=fake.url, qdrant_api_key="qk",
                                             data_dir=tmp_path_factory.mktemp("data-http"))
            deps.set_settings(configured)
            yield configured
    deps.set_settings(None)


@pytest.fixture(scope="module")
def stores(qsettings, hashing_embedder):
    """The same four documents in a pgvector store and a Qdrant store of tenant ``acme``."""
    from chalicelib.store.db import connect

    deps.set_embedder(hashing_embedder)
    with connect(qsettings) as conn:
        made = {}
        for backend in ("pgvector", "qdrant"):
            store = vector_stores.create(conn, "acme", name=backend, model=hashing_embedder.model,
                                         dim=hashing_embedder.dimension, backend=backend)
            for name, data in DOCS.items():
                result = ingest_bytes(conn, qsettings, "acme", store, filename=name, data=data,
                                      embedder=hashing_embedder, attributes={"name": name, "size": len(data)})
                assert result.status == "completed", result.error
            made[backend] = vector_stores.get(conn, "acme", store.id)
    yield made
    deps.set_embedder(None)


def _points(settings, store, **match) -> int:
    flt = {"must": [{"key": TENANT_FIELD, "match": {"value": store.tenant_id}},
                    {"key": "vector_store_id", "match": {"value": store.id}}]
           + [{"key": k, "match": {"value": v}} for k, v in match.items()]}
    return deps.qdrant(settings).count(collection_name(settings, store.embedding_dim), flt)


def _rounded(hits):
    return [(f, i, round(score, 4)) for f, i, score in hits]


def _hits(conn, settings, embedder, store, query, **options):
    """``(filename, chunk index, score)`` of each hit, best first; hits of equal score (to 1e-5) in name order, so
    two backends that break a tie differently compare equal."""
    found = search(conn, store.tenant_id, [store], query, embedder=embedder, settings=settings, limit=10, **options)
    return sorted(((h.filename, h.chunk_index, h.score) for h in found), key=lambda h: (-round(h[2], 5), h[0], h[1]))


def test_the_qdrant_store_keeps_vectors_out_of_postgres_and_in_qdrant(conn, qsettings, stores):
    store = stores["qdrant"]
    assert store.backend == "qdrant" and stores["pgvector"].backend == "pgvector"
    with_vectors = conn.execute("SELECT count(*) FILTER (WHERE embedding IS NOT NULL), count(*) FROM chunks "
                                "WHERE vector_store_id = %s", (store.id,)).fetchone()
    assert with_vectors == (0, store.chunk_count) and store.chunk_count >= 4
    assert conn.execute("SELECT count(*) FROM chunk_postings p JOIN vector_stores s ON s.partition_key = "
                        "p.partition_key WHERE s.id = %s", (store.id,)).fetchone()[0] == 0
    assert _points(qsettings, store) == store.chunk_count
    assert outbox.pending_count(conn, store_id=store.id) == 0  # synced right after each swap


@pytest.mark.parametrize("mode", [(1.0, 1.0), (1.0, 0.0), (0.0, 1.0)], ids=["hybrid", "vector", "keyword"])
def test_both_backends_rank_alike_with_the_same_scores(conn, qsettings, hashing_embedder, stores, mode):
    ranking = RankingOptions(embedding_weight=mode[0], text_weight=mode[1])
    for query in QUERIES:
        pg = _hits(conn, qsettings, hashing_embedder, stores["pgvector"], query, ranking=ranking)
        qd = _hits(conn, qsettings, hashing_embedder, stores["qdrant"], query, ranking=ranking)
        assert pg and [(f, i) for f, i, _ in qd] == [(f, i) for f, i, _ in pg], query
        assert [s for *_, s in qd] == pytest.approx([s for *_, s in pg], abs=1e-5), query


@pytest.mark.parametrize("flt", [
    {"type": "eq", "key": "name", "value": "fox.txt"},
    {"type": "ne", "key": "name", "value": "fox.txt"},
    {"type": "in", "key": "name", "value": ["cats.txt", "pg.txt"]},
    {"type": "nin", "key": "name", "value": ["cats.txt", "pg.txt"]},
    {"type": "gt", "key": "size", "value": 80},
    {"type": "lte", "key": "size", "value": 80},
    {"type": "eq", "key": "size", "value": len(DOCS["cats.txt"])},
    {"type": "gte", "key": "name", "value": "c"},  # a string range: Qdrant widens, Postgres checks
    {"type": "or", "filters": [{"type": "eq", "key": "name", "value": "bm25.txt"},
                               {"type": "and", "filters": [{"type": "gt", "key": "size", "value": 10},
                                                           {"type": "lt", "key": "name", "value": "d"}]}]},
    {"type": "eq", "key": "missing", "value": 1},
])
def test_filters_mean_the_same_on_both_backends(conn, qsettings, hashing_embedder, stores, flt):
    for query in QUERIES:
        pg = _hits(conn, qsettings, hashing_embedder, stores["pgvector"], query, filters=flt)
        qd = _hits(conn, qsettings, hashing_embedder, stores["qdrant"], query, filters=flt)
        assert [(f, i) for f, i, _ in qd] == [(f, i) for f, i, _ in pg], (query, flt)


def test_points_follow_reingests_attribute_updates_and_deletes(conn, qsettings, hashing_embedder):
    store = vector_stores.create(conn, "acme", name="lifecycle", model=hashing_embedder.model,
                                 dim=hashing_embedder.dimension, backend="qdrant")
    first = ingest_bytes(conn, qsettings, "acme", store, filename="notes.txt", embedder=hashing_embedder,
                         data=b"The harbour master logs every tide.\n\nThe pelican nests on the quay.")
    old_ids = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE file_id = %s", (first.file_id,)).fetchall()}
    assert _points(qsettings, store, file_id=first.file_id) == len(old_ids)

    # a new version under the same file id: new chunk ids, the old points gone, nothing stale returned
    second = ingest_bytes(conn, qsettings, "acme", store, filename="notes.txt", embedder=hashing_embedder,
                          data=b"The lighthouse keeper counts the ships at dawn.")
    assert second.file_id == first.file_id
    new_ids = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE file_id = %s", (first.file_id,)).fetchall()}
    assert new_ids.isdisjoint(old_ids) and _points(qsettings, store, file_id=first.file_id) == len(new_ids)
    store = vector_stores.get(conn, "acme", store.id)  # its chunk count now
    hits = search(conn, "acme", [store], "pelican harbour tide", embedder=hashing_embedder, settings=qsettings)
    assert all("pelican" not in h.text for h in hits)
    assert [h.file_id for h in search(conn, "acme", [store], "lighthouse ships", embedder=hashing_embedder,
                                      settings=qsettings)] == [first.file_id]

    # attributes reach the payload: a filter on the new value finds the file
    attachments.update_attributes(conn, "acme", store.id, first.file_id, {"kind": "log"})
    sync.sync_pending(conn, qsettings)
    kept = search(conn, "acme", [store], "lighthouse ships", embedder=hashing_embedder, settings=qsettings,
                  filters={"type": "eq", "key": "kind", "value": "log"})
    assert [h.file_id for h in kept] == [first.file_id]

    # detached: the chunks go at once (never returned), the points with the next sync
    attachments.detach(conn, "acme", store.id, first.file_id)
    assert search(conn, "acme", [store], "lighthouse ships", embedder=hashing_embedder, settings=qsettings) == []
    assert outbox.pending_count(conn, store_id=store.id) == 1
    result = housekeeping.sync_vector_index(JobContext(settings=qsettings, tenant=None, cursor=None,
                                                       deadline=time.monotonic() + 60))
    assert result.counts["synced_files"] >= 1 and result.counts["failed_files"] == 0
    assert _points(qsettings, store) == 0


def test_a_deleted_store_takes_its_points_along(conn, qsettings, hashing_embedder):
    store = vector_stores.create(conn, "acme", name="doomed", model=hashing_embedder.model,
                                 dim=hashing_embedder.dimension, backend="qdrant")
    ingest_bytes(conn, qsettings, "acme", store, filename="a.txt", data=b"Short-lived words.",
                 embedder=hashing_embedder)
    assert _points(qsettings, store) == 1
    assert vector_stores.delete(conn, "acme", store.id)
    sync.sync_pending(conn, qsettings)
    assert _points(qsettings, store) == 0 and outbox.pending_count(conn, store_id=store.id) == 0


def test_another_tenant_never_reaches_a_qdrant_store(conn, qsettings, hashing_embedder, stores):
    from chalicelib.errors import InvalidRequestError

    store = stores["qdrant"]
    with pytest.raises(InvalidRequestError):
        search(conn, "globex", [store], "quick brown fox", embedder=hashing_embedder, settings=qsettings)
    # even a forged scope naming acme's store from globex's tenant finds nothing: every query carries the tenant
    from chalicelib.search.backends.qdrant import QdrantBackend
    from chalicelib.search.corpus import CHUNKS, store_scope
    from chalicelib.search.vector import VectorScope

    backend = QdrantBackend(qsettings, store.embedding_dim)
    forged = store_scope("globex", [store.id], store.chunk_count)
    vector = hashing_embedder.embed(["quick brown fox"])[0]
    assert backend.vector_leg(conn, VectorScope(CHUNKS, forged, store.embedding_dim, 0), vector, 10, where=None,
                              settings=qsettings, index=None) == []  # type: ignore[arg-type]
    assert backend.keyword_leg(conn, CHUNKS, forged, "quick brown fox", 10, where=None).rows == []


class _Down:
    """A Qdrant that fails every call (an outage)."""

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            from chalicelib.qdrant import QdrantError

            raise QdrantError("Qdrant is down (test)")
        return fail


def test_while_qdrant_is_behind_nothing_stale_is_returned_and_the_job_catches_up(conn, qsettings, hashing_embedder):
    store = vector_stores.create(conn, "acme", name="behind", model=hashing_embedder.model,
                                 dim=hashing_embedder.dimension, backend="qdrant")
    first = ingest_bytes(conn, qsettings, "acme", store, filename="tides.txt", embedder=hashing_embedder,
                         data=b"The pelican nests on the quay by the harbour.")
    deps.set_qdrant(_Down())
    try:  # a new version while Qdrant is down: committed in Postgres, its sync queued with the error
        second = ingest_bytes(conn, qsettings, "acme", store, filename="tides.txt", embedder=hashing_embedder,
                              data=b"The lighthouse keeper counts the ships at dawn.")
        assert second.status == "completed" and second.file_id == first.file_id
        [entry] = conn.execute("SELECT attempts, last_error FROM vector_index_outbox WHERE vector_store_id = %s",
                               (store.id,)).fetchall()
        assert entry[0] == 1 and "Qdrant is down" in entry[1]
    finally:
        deps.set_qdrant(None)
    store = vector_stores.get(conn, "acme", store.id)
    # Qdrant still holds the first version's point: it is a candidate, but never a result
    assert _points(qsettings, store, file_id=first.file_id) == 1
    stale = search(conn, "acme", [store], "pelican quay harbour", embedder=hashing_embedder, settings=qsettings)
    assert all("pelican" not in h.text for h in stale)
    housekeeping.sync_vector_index(JobContext(settings=qsettings, tenant=None, cursor=None,
                                              deadline=time.monotonic() + 60))
    found = search(conn, "acme", [store], "lighthouse ships dawn", embedder=hashing_embedder, settings=qsettings)
    assert [h.file_id for h in found] == [first.file_id] and "lighthouse" in found[0].text
    assert outbox.pending_count(conn, store_id=store.id) == 0


class _NoDeletes:
    """Qdrant that takes upserts but fails every delete: the sync after an ingest's commit fails."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        if name != "delete":
            return getattr(self._inner, name)

        def fail(*args, **kwargs):
            from chalicelib.qdrant import QdrantError

            raise QdrantError("Qdrant refuses deletes (test)")
        return fail


def test_a_file_is_searchable_once_it_shows_completed(conn, qsettings, hashing_embedder):
    """The swap's own transaction writes the new version's points: with the sync after the commit failing, the
    file already finds its new text and never its old one; the job then deletes only the old version's point."""
    store = vector_stores.create(conn, "acme", name="ahead", model=hashing_embedder.model,
                                 dim=hashing_embedder.dimension, backend="qdrant")
    first = ingest_bytes(conn, qsettings, "acme", store, filename="tides.txt", embedder=hashing_embedder,
                         data=b"The pelican nests on the quay by the harbour.")
    deps.set_qdrant(_NoDeletes(deps.qdrant(qsettings)))
    try:
        second = ingest_bytes(conn, qsettings, "acme", store, filename="tides.txt", embedder=hashing_embedder,
                              data=b"The lighthouse keeper counts the ships at dawn.")
        assert second.status == "completed" and second.file_id == first.file_id
        [entry] = conn.execute("SELECT written_seq = seq, attempts FROM vector_index_outbox "
                               "WHERE vector_store_id = %s", (store.id,)).fetchall()
        assert entry == (True, 1)  # written before the commit; the stale delete after it failed
        store = vector_stores.get(conn, "acme", store.id)
        found = search(conn, "acme", [store], "lighthouse ships dawn", embedder=hashing_embedder, settings=qsettings)
        assert [h.file_id for h in found] == [first.file_id] and "lighthouse" in found[0].text
        assert all("pelican" not in h.text for h in search(conn, "acme", [store], "pelican quay harbour",
                                                           embedder=hashing_embedder, settings=qsettings))
    finally:
        deps.set_qdrant(None)
    assert _points(qsettings, store, file_id=first.file_id) == 2  # the old version's point is still there
    result = housekeeping.sync_vector_index(JobContext(settings=qsettings, tenant=None, cursor=None,
                                                       deadline=time.monotonic() + 60))
    assert result.counts["points"] == 0  # nothing upserted again: only the stale point deleted
    assert _points(qsettings, store, file_id=first.file_id) == 1
    assert outbox.pending_count(conn, store_id=store.id) == 0


def _pgvector_store_of_docs(conn, settings, embedder, name):
    """A new pgvector store of tenant ``acme`` holding :data:`DOCS`, as read back after the ingests."""
    store = vector_stores.create(conn, "acme", name=name, model=embedder.model, dim=embedder.dimension,
                                 backend="pgvector")
    for filename, data in DOCS.items():
        ingest_bytes(conn, settings, "acme", store, filename=filename, data=data, embedder=embedder)
    return vector_stores.get(conn, "acme", store.id)


def test_a_store_moves_to_qdrant_and_back_without_reembedding(conn, qsettings, hashing_embedder):
    from chalicelib.search.backends.reindex import move

    store = _pgvector_store_of_docs(conn, qsettings, hashing_embedder, "mover")
    before = {q: _rounded(_hits(conn, qsettings, hashing_embedder, store, q)) for q in QUERIES}

    seen = []
    moved = move(conn, qsettings, store, "qdrant", progress=lambda done, total: seen.append((done, total)))
    assert (moved.backend, moved.files, moved.changed, moved.embedded, moved.resumed) == ("qdrant", 4, 0, 0, False)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    store = vector_stores.get(conn, "acme", store.id)
    assert store.backend == "qdrant" and _points(qsettings, store) == store.chunk_count
    assert conn.execute("SELECT count(*) FROM chunks WHERE vector_store_id = %s AND embedding IS NOT NULL",
                        (store.id,)).fetchone()[0] == 0
    assert {q: _rounded(_hits(conn, qsettings, hashing_embedder, store, q)) for q in QUERIES} == before

    # back to pgvector, after a vector the cache no longer holds (re-embedded) and a file added meanwhile
    ingest_bytes(conn, qsettings, "acme", store, filename="extra.txt", embedder=hashing_embedder,
                 data=b"Harbour seals rest on the rocks at low tide.")
    conn.execute("DELETE FROM embedding_cache WHERE sha256 = sha256(convert_to(%s, 'UTF8'))",
                 ("Harbour seals rest on the rocks at low tide.",))
    moved = move(conn, qsettings, vector_stores.get(conn, "acme", store.id), "pgvector")
    assert (moved.backend, moved.files, moved.embedded) == ("pgvector", 5, 1)
    store = vector_stores.get(conn, "acme", store.id)
    assert store.backend == "pgvector" and _points(qsettings, store) == 0
    assert conn.execute("SELECT count(*) FROM chunks WHERE vector_store_id = %s AND embedding IS NULL",
                        (store.id,)).fetchone()[0] == 0
    after = {q: _rounded(_hits(conn, qsettings, hashing_embedder, store, q)) for q in QUERIES}
    # a fifth file changes the store's statistics a little: the same documents in the same order
    assert {q: [h[:2] for h in hits if h[0] != "extra.txt"] for q, hits in after.items()} == {
        q: [h[:2] for h in hits] for q, hits in before.items()}
    assert any(h[0] == "extra.txt" for h in _hits(conn, qsettings, hashing_embedder, store, "harbour seals"))


def test_an_interrupted_move_resumes_where_it_stopped(conn, qsettings, hashing_embedder):
    from chalicelib.search.backends.reindex import move

    store = _pgvector_store_of_docs(conn, qsettings, hashing_embedder, "halfway")

    def crash_after_two(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        move(conn, qsettings, store, "qdrant", progress=crash_after_two)
    assert vector_stores.get(conn, "acme", store.id).backend == "pgvector"  # searches stayed on pgvector
    assert _hits(conn, qsettings, hashing_embedder, vector_stores.get(conn, "acme", store.id), "quick brown fox")
    moved = move(conn, qsettings, store, "qdrant")
    assert (moved.files, moved.resumed, moved.backend) == (2, True, "qdrant")
    assert _points(qsettings, vector_stores.get(conn, "acme", store.id)) == store.chunk_count
