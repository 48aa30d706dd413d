"""The vector backend port's conformance suite: what every adapter registered in
:data:`chalicelib.config.VECTOR_BACKEND_ADAPTERS` must do, run once per adapter (a fresh database and data folder
each; ``VECTOR_BACKENDS`` below is the whole table, so a new adapter is tested by adding its entry).

Candidate legs: the vector leg returns ``min(limit, rows in scope)`` rows of the scope only, nearest first, with the
exact cosine distance; ``distances`` gives the exact distance of any scope row and nothing for a row outside it;
the keyword leg finds the rows holding the query's words, in the scope only. Writer and sync (through the outbox
and the after-write hook alone, as every call site does): a file is a candidate once it shows ``completed``; a new
version replaces the old one's candidates; a detached file and a deleted store leave the candidates; a write run
twice changes nothing; the outbox is empty once the hook ran. Tenants: a scope naming another tenant's store
finds nothing. Ranking through the search service returns the same files on every backend (exact scores read
again from Postgres). Index state: once settled, the store's points are all there and the index built."""

from __future__ import annotations

import dataclasses
import math

import pytest

from chalicelib import deps
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search.backends import VectorBackend, for_backend, names, sync
from chalicelib.search.corpus import CHUNKS, store_scope
from chalicelib.search.service import search
from chalicelib.search.vector import VectorScope
from chalicelib.store import attachments, vector_stores
from chalicelib.store import vector_index_outbox as outbox
from chalicelib.store.vector_stores import hnsw_index

VECTOR_BACKENDS = names()

DOCS = {
    "fox.txt": b"The quick brown fox jumps over the lazy dog.\n\nDogs bark at night, and foxes are quick and brown.",
    "cats.txt": b"Cats sleep for most of the day. A cat naps in the sun near the window.",
    "tides.txt": b"The harbour master logs every tide.\n\nThe pelican nests on the quay by the harbour.",
}


@pytest.fixture(scope="module")
def bsettings(settings):
    """The module's settings (new stores on the module's backend), installed for the process."""
    deps.set_settings(settings)
    yield settings
    deps.set_settings(None)


@pytest.fixture(scope="module")
def store(bsettings, hashing_embedder):
    """A store of tenant ``acme`` on the module's backend holding :data:`DOCS`."""
    from chalicelib.store.db import connect

    deps.set_embedder(hashing_embedder)
    with connect(bsettings) as conn:
        made = vector_stores.create(conn, "acme", name="conformance", model=hashing_embedder.model,
                                    dim=hashing_embedder.dimension, backend=bsettings.vector_backend)
        for name, data in DOCS.items():
            result = ingest_bytes(conn, bsettings, "acme", made, filename=name, data=data, embedder=hashing_embedder)
            assert result.status == "completed", result.error
        yield vector_stores.get(conn, "acme", made.id)
    deps.set_embedder(None)


def _adapter(settings, store) -> VectorBackend:
    return for_backend(store.backend, settings, store.embedding_dim)


def _scope(tenant, store) -> VectorScope:
    return VectorScope(CHUNKS, store_scope(tenant, [store.id], store.chunk_count), store.embedding_dim,
                       store.chunk_count)


def _cosine_distance(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1.0 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _texts(conn, ids) -> dict[int, str]:
    return dict(conn.execute("SELECT id, text FROM chunks WHERE id = ANY(%s)", (list(ids),)).fetchall())


def test_the_adapter_is_the_one_its_name_registers(bsettings, store):
    adapter = _adapter(bsettings, store)
    assert store.backend == bsettings.vector_backend == adapter.name
    assert isinstance(adapter.in_postgres, bool) and adapter.describe()
    with pytest.raises(ValueError):
        for_backend("no_such_backend", bsettings, store.embedding_dim)


def test_the_vector_leg_returns_the_scope_nearest_first_with_exact_distances(conn, bsettings, store,
                                                                              hashing_embedder):
    adapter = _adapter(bsettings, store)
    query = hashing_embedder.embed(["quick brown fox"])[0]
    index = hnsw_index(conn, store.embedding_dim)
    rows = adapter.vector_leg(conn, _scope("acme", store), query, 100, where=None, settings=bsettings, index=index)
    assert len(rows) == store.chunk_count  # min(limit, rows in scope)
    assert [d for _, d in rows] == sorted(d for _, d in rows)
    texts = _texts(conn, [i for i, _ in rows])
    vectors = hashing_embedder.embed([texts[i] for i, _ in rows])
    for (_, distance), vector in zip(rows, vectors, strict=True):
        assert distance == pytest.approx(_cosine_distance(query, vector), abs=1e-5)
    top = adapter.vector_leg(conn, _scope("acme", store), query, 2, where=None, settings=bsettings, index=index)
    assert top == rows[:2] or [d for _, d in top] == pytest.approx([d for _, d in rows[:2]], abs=1e-6)
    exact = adapter.distances(conn, _scope("acme", store), query, [i for i, _ in rows] + [10**12])
    assert set(exact) == {i for i, _ in rows}
    assert all(exact[i] == pytest.approx(d, abs=1e-5) for i, d in rows)


def test_the_keyword_leg_finds_the_words_in_the_scope(conn, bsettings, store):
    adapter = _adapter(bsettings, store)
    leg = adapter.keyword_leg(conn, CHUNKS, store_scope("acme", [store.id], store.chunk_count), "pelican harbour",
                              10, where=None)
    texts = _texts(conn, [i for i, _ in leg.rows])
    assert leg.rows and all("harbour" in texts[i] or "pelican" in texts[i] for i, _ in leg.rows)
    assert leg.max_score > 0


def test_another_tenant_never_reaches_the_store(conn, bsettings, store, hashing_embedder):
    adapter = _adapter(bsettings, store)
    forged = _scope("globex", store)
    query = hashing_embedder.embed(["quick brown fox"])[0]
    index = hnsw_index(conn, store.embedding_dim)
    assert adapter.vector_leg(conn, forged, query, 10, where=None, settings=bsettings, index=index) == []
    assert adapter.keyword_leg(conn, CHUNKS, forged.scope, "quick brown fox", 10, where=None).rows == []
    assert adapter.distances(conn, forged, query, [1, 2, 3]) == {}


def test_the_writer_follows_versions_detaches_and_deletes_through_the_outbox(conn, bsettings, hashing_embedder):
    made = vector_stores.create(conn, "acme", name="lifecycle", model=hashing_embedder.model,
                                dim=hashing_embedder.dimension, backend=bsettings.vector_backend)
    adapter = _adapter(bsettings, made)
    index = hnsw_index(conn, made.embedding_dim)
    query = hashing_embedder.embed(["lighthouse keeper ships"])[0]

    def candidates() -> set[int]:
        current = vector_stores.get(conn, "acme", made.id)
        rows = adapter.vector_leg(conn, _scope("acme", current), query, 50, where=None, settings=bsettings,
                                  index=index)
        # a candidate counts only once it resolves to a chunk in Postgres (as in ranking)
        return set(_texts(conn, [i for i, _ in rows]))

    first = ingest_bytes(conn, bsettings, "acme", made, filename="notes.txt", embedder=hashing_embedder,
                         data=b"The harbour master logs every tide.")
    old = candidates()
    assert len(old) == 1 and outbox.pending_count(conn, store_id=made.id) == 0  # searchable once completed
    second = ingest_bytes(conn, bsettings, "acme", made, filename="notes.txt", embedder=hashing_embedder,
                          data=b"The lighthouse keeper counts the ships at dawn.")
    assert second.file_id == first.file_id
    new = candidates()
    assert len(new) == 1 and new.isdisjoint(old)

    # writing a file again changes nothing (idempotent)
    row = outbox.store(conn, "acme", made.id)
    assert row is not None
    with conn.transaction():
        adapter.write_file(conn, "acme", made.id, row, first.file_id)
        adapter.write_file(conn, "acme", made.id, row, first.file_id)
    assert candidates() == new

    attachments.detach(conn, "acme", made.id, first.file_id)
    sync.after_write(conn, bsettings, store_id=made.id)
    assert candidates() == set() and outbox.pending_count(conn, store_id=made.id) == 0

    third = ingest_bytes(conn, bsettings, "acme", made, filename="more.txt", embedder=hashing_embedder,
                         data=b"Ships at dawn, a lighthouse keeper.")
    assert third.status == "completed" and candidates()
    assert vector_stores.delete(conn, "acme", made.id)
    sync.after_write(conn, bsettings, tenant_id="acme")
    assert outbox.pending_count(conn, store_id=made.id) == 0
    gone = adapter.vector_leg(conn, _scope("acme", dataclasses.replace(made, chunk_count=10)), query, 10, where=None,
                              settings=bsettings, index=index)
    assert gone == []


def test_ranking_through_the_port_finds_the_right_files(conn, bsettings, store, hashing_embedder):
    for query, expected in (("quick brown fox", "fox.txt"), ("why do cats sleep", "cats.txt"),
                            ("pelican harbour", "tides.txt")):
        hits = search(conn, "acme", [store], query, embedder=hashing_embedder, settings=bsettings, limit=3)
        assert hits and hits[0].filename == expected, (query, [h.filename for h in hits])
        assert all(0.0 <= h.score <= 1.0 for h in hits)


def test_the_index_state_counts_the_stores_points_and_is_built_once_settled(conn, bsettings, store):
    row = outbox.store(conn, "acme", store.id)
    assert row is not None
    sync.settle(conn, bsettings)  # every path that writes ends with it
    state = _adapter(bsettings, store).index_state(conn, "acme", store.id, row)
    assert (state.indexed, state.points) == (True, store.chunk_count) and state.detail
    assert sync.index_state(conn, bsettings, "acme", store.id)["pending_files"] == 0
