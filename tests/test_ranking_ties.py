"""Deterministic ties (issue 33 §5): the same documents rank alike in two stores ingested in opposite orders, on
every backend. Row ids follow ingestion order; every leg broke ties by row id, so documents of equal BM25 (the
same words, the same length) swapped places between the stores and moved keyword nDCG@10 by 0.0015 on a
1,000-document subset. Ties are now ordered by the chunk's stable key (text, position, file)."""

from __future__ import annotations

import dataclasses

import pytest

from chalicelib import deps
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search.service import RankingOptions, search
from chalicelib.store import vector_stores
from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS

# Twelve one-line notes of four words each: every note holding "heron" has the same BM25 for it (tf 1, the same
# length), so the keyword leg ties them all; their other words make their vectors differ.
WORDS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heath", "inlet", "juniper", "kestrel", "larch"]
DOCS = {f"note-{w}.txt": f"heron {w} marsh {WORDS[(i + 5) % len(WORDS)]}".encode() for i, w in enumerate(WORDS)}
QUERIES = ["heron", "heron marsh", "grey heron by the marsh"]


@pytest.fixture(scope="module")
def stores(settings, hashing_embedder):
    from chalicelib.store.db import connect

    deps.set_settings(settings)
    deps.set_embedder(hashing_embedder)
    made = []
    with connect(settings) as conn:
        for name, order in (("forward", list(DOCS)), ("backward", list(reversed(DOCS)))):
            store = vector_stores.create(conn, "acme", name=name, model=hashing_embedder.model,
                                         dim=hashing_embedder.dimension, backend=settings.vector_backend)
            for filename in order:
                assert ingest_bytes(conn, settings, "acme", store, filename=filename, data=DOCS[filename],
                                    embedder=hashing_embedder).status == "completed"
            made.append(vector_stores.get(conn, "acme", store.id))
    yield made
    deps.set_embedder(None)
    deps.set_settings(None)


@pytest.mark.parametrize("mode", [(0.0, 1.0), (1.0, 1.0), (1.0, 0.0)], ids=["keyword", "hybrid", "vector"])
def test_the_same_documents_rank_alike_whatever_the_ingestion_order(conn, settings, hashing_embedder, stores, mode):
    ranking = RankingOptions(embedding_weight=mode[0], text_weight=mode[1])
    forward, backward = stores
    for query in QUERIES:
        for limit in (3, 10):
            first, second = (
                [(h.filename, h.chunk_index, round(h.score, 9)) for h in
                 search(conn, "acme", [store], query, embedder=hashing_embedder, settings=settings, limit=limit,
                        ranking=ranking)]
                for store in (forward, backward))
            assert first and first == second, (query, limit)


def test_keyword_ties_follow_the_stable_key_not_the_row_ids(conn, settings, hashing_embedder, stores):
    """All twelve notes tie on "heron": both stores list them in one order, though their ids run opposite ways."""
    ranking = RankingOptions(embedding_weight=0.0, text_weight=1.0)
    for store in stores:
        hits = search(conn, "acme", [store], "heron", embedder=hashing_embedder, settings=settings, limit=12,
                      ranking=ranking)
        assert len(hits) == 12 and len({round(h.score, 9) for h in hits}) == 1
    ids = [[row[0] for row in conn.execute(
        "SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.vector_store_id = %s ORDER BY f.filename",
        (store.id,)).fetchall()] for store in stores]
    assert ids[0] == sorted(ids[0]) and ids[1] == sorted(ids[1], reverse=True)  # ingested in opposite orders


def test_a_corpus_without_a_key_keeps_the_legs_order(conn, settings, stores):
    from chalicelib.search.corpus import CHUNKS
    from chalicelib.search.ranking import stable_order

    scope_store = stores[0]
    from chalicelib.search.corpus import store_scope

    scope = store_scope("acme", [scope_store.id], scope_store.chunk_count)
    rows = [(3, 1.0), (1, 1.0), (2, 0.5)]
    assert stable_order(conn, dataclasses.replace(CHUNKS, tie_key=None), scope, rows, descending=True) == rows
