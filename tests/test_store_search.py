"""Storage and search against real Postgres + pgvector: ingest, replace, statistics, filters, tenants, HNSW."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest

from chalicelib.errors import EmbeddingMismatchError, InvalidRequestError, NotFoundError
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search.corpus import CHUNKS, store_scope
from chalicelib.search.filters import compile_filter
from chalicelib.search.keyword import BM25_B, BM25_K1, keyword_search
from chalicelib.search.service import RankingOptions, search
from chalicelib.store import attachments, vector_stores
from chalicelib.store import files as file_rows

TEXT_A = b"""Postgres stores rows in heap pages.

pgvector adds a vector type and HNSW indexes to Postgres. HNSW is a graph index for nearest neighbours.

The quick brown fox jumps over the lazy dog."""
TEXT_B = b"""Cats sleep for most of the day.

Dogs bark at night, and foxes are quick and brown."""


def _store(conn, tenant, name, embedder):
    return vector_stores.find_or_create(conn, tenant, name, model=embedder.model, dim=embedder.dimension)


def _consistent_stats(conn, store_id):
    """BM25 statistics equal what the chunks imply."""
    rows = conn.execute("SELECT keywords, keyword_length FROM chunks WHERE vector_store_id = %s", (store_id,)).fetchall()
    df = Counter()
    for keywords, _ in rows:
        for lexeme in {part.split(":")[0].strip("'") for part in keywords.split(" ") if part}:
            df[lexeme] += 1
    stored = {lex: n for lex, n in conn.execute(
        "SELECT lexeme, df FROM keyword_stats WHERE vector_store_id = %s AND df > 0", (store_id,)).fetchall()}
    count, length = conn.execute("SELECT chunk_count, keyword_length FROM vector_stores WHERE id = %s",
                                 (store_id,)).fetchone()
    assert count == len(rows)
    assert length == sum(r[1] for r in rows)
    assert stored == dict(df)


def _reference_bm25(conn, store_id, terms, *, rows=None):
    """Okapi BM25 (Lucene idf, k1 = 0.9, b = 0.4) of every chunk of the store (or of ``rows``, ``(id, tsvector
    text)`` pairs) with a positive score, computed here from the stored tsvectors, and the highest score any row
    could reach (Σ idf · (k1 + 1) over ``terms``)."""
    if rows is None:
        rows = conn.execute("SELECT id, keywords::text FROM chunks WHERE vector_store_id = %s",
                            (store_id,)).fetchall()
    tfs = {}
    for cid, kw in rows:
        tf = {}
        for part in kw.split(" "):
            lexeme, _, positions = part.partition(":")
            tf[lexeme.strip("'")] = len(positions.split(","))
        tfs[cid] = tf
    n = len(tfs)
    avgdl = sum(sum(tf.values()) for tf in tfs.values()) / n
    expected = {}
    best = 0.0
    for term in terms:
        df = sum(term in t for t in tfs.values())
        best += math.log(1 + (n - df + 0.5) / (df + 0.5)) * (BM25_K1 + 1)
    for cid, tf in tfs.items():
        score = 0.0
        for term in terms:
            df = sum(term in t for t in tfs.values())
            if term in tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                dl = sum(tf.values())
                score += idf * tf[term] * (BM25_K1 + 1) / (tf[term] + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))
        if score:
            expected[cid] = score
    return expected, best


def test_ingest_search_and_reingest(conn, settings, hashing_embedder):
    store = _store(conn, "t1", "kb", hashing_embedder)
    first = ingest_bytes(conn, settings, "t1", store, filename="a.txt", data=TEXT_A, embedder=hashing_embedder)
    assert first.status == "completed" and first.chunk_count >= 1 and first.embedded == first.chunk_count
    ingest_bytes(conn, settings, "t1", store, filename="b.md", data=TEXT_B, embedder=hashing_embedder,
                 attributes={"kind": "animals", "year": 2024})
    _consistent_stats(conn, store.id)

    # Unchanged content is skipped; nothing is embedded again.
    again = ingest_bytes(conn, settings, "t1", store, filename="a.txt", data=TEXT_A, embedder=hashing_embedder)
    assert again.status == "skipped" and again.file_id == first.file_id

    # Changed content replaces the old chunks under the same file id; unchanged chunks come from the cache.
    changed = TEXT_A + b"\n\nA new closing paragraph about vector databases."
    redo = ingest_bytes(conn, settings, "t1", store, filename="a.txt", data=changed, embedder=hashing_embedder)
    assert redo.status == "completed" and redo.file_id == first.file_id
    n = conn.execute("SELECT count(*) FROM chunks WHERE file_id = %s", (first.file_id,)).fetchone()[0]
    assert n == redo.chunk_count
    assert conn.execute("SELECT count(DISTINCT chunk_index) FROM chunks WHERE file_id = %s",
                        (first.file_id,)).fetchone()[0] == n
    _consistent_stats(conn, store.id)

    store = vector_stores.get(conn, "t1", store.id)
    hits = search(conn, "t1", [store], "HNSW graph index", embedder=hashing_embedder, settings=settings, limit=5)
    assert hits and hits[0].filename == "a.txt" and "HNSW" in hits[0].text
    assert all(0.0 <= h.score <= 1.0 for h in hits)

    only = search(conn, "t1", [store], "quick brown fox", embedder=hashing_embedder, settings=settings, limit=5,
                  filters={"type": "eq", "key": "kind", "value": "animals"})
    assert only and {h.filename for h in only} == {"b.md"}
    assert only[0].attributes == {"kind": "animals", "year": 2024}


def test_failed_file_keeps_no_chunks(conn, settings, hashing_embedder):
    store = _store(conn, "t1", "failing", hashing_embedder)
    result = ingest_bytes(conn, settings, "t1", store, filename="x.exe", data=b"MZ\x00\x01", embedder=hashing_embedder)
    assert result.status == "failed" and result.error["code"] == "unsupported_file"
    row = attachments.get(conn, "t1", store.id, result.file_id)
    assert row.status == "failed" and row.last_error["code"] == "unsupported_file"
    assert conn.execute("SELECT count(*) FROM chunks WHERE file_id = %s", (result.file_id,)).fetchone()[0] == 0


def test_embedding_model_mismatch_is_refused(conn, settings, hashing_embedder):
    vector_stores.create(conn, "t1", name="other-model", model="text-embedding-3-small", dim=1536)
    store = vector_stores.find(conn, "t1", "other-model")
    with pytest.raises(EmbeddingMismatchError) as info:
        ingest_bytes(conn, settings, "t1", store, filename="a.txt", data=TEXT_A, embedder=hashing_embedder)
    assert "text-embedding-3-small" in info.value.message and info.value.status == 400


def test_tenant_isolation_at_the_storage_layer(conn, settings, hashing_embedder):
    a = _store(conn, "tenant-a", "secret", hashing_embedder)
    ingest_bytes(conn, settings, "tenant-a", a, filename="a.txt", data=TEXT_A, embedder=hashing_embedder)
    b = _store(conn, "tenant-b", "secret", hashing_embedder)
    assert a.id != b.id
    with pytest.raises(NotFoundError):
        vector_stores.get(conn, "tenant-b", a.id)
    assert vector_stores.find(conn, "tenant-b", a.id) is None
    assert vector_stores.find(conn, "tenant-b", "secret").id == b.id  # the shared name resolves to B's own store
    # Tenant B naming A's store id directly still sees nothing: every statement filters on tenant_id.
    a_now = vector_stores.get(conn, "tenant-a", a.id)
    assert keyword_search(conn, CHUNKS, store_scope("tenant-b", [a.id], a_now.chunk_count), "HNSW Postgres", 10,
                          where=None) == []
    forged = dataclasses.replace(vector_stores.get(conn, "tenant-a", a.id), tenant_id="tenant-b")
    assert search(conn, "tenant-b", [forged], "HNSW", embedder=hashing_embedder, settings=settings) == []
    with pytest.raises(NotFoundError):
        file_rows.get_file(conn, "tenant-b", attachments.list_all(conn, "tenant-a", a.id)[0].file_id)


def test_bm25_matches_a_reference_implementation(conn, settings, hashing_embedder):
    store = _store(conn, "t1", "bm25", hashing_embedder)
    docs = {f"d{i}.txt": text for i, text in enumerate([
        b"apple banana apple cherry", b"banana banana banana", b"cherry date elderberry fig grape",
        b"apple", b"fig fig fig fig apple banana cherry date"])}
    for name, data in docs.items():
        ingest_bytes(conn, settings, "t1", store, filename=name, data=data, embedder=hashing_embedder)
    store = vector_stores.get(conn, "t1", store.id)
    got = dict(keyword_search(conn, CHUNKS, store_scope("t1", [store.id], store.chunk_count), "apple fig", 10,
                              where=None))
    expected, _ = _reference_bm25(conn, store.id, ("appl", "fig"))
    assert got.keys() == expected.keys()
    for cid in expected:
        assert got[cid] == pytest.approx(expected[cid], rel=1e-9)


def test_filtered_hnsw_search_returns_min_k_matching(conn, settings, hashing_embedder):
    """Force the HNSW path (exact_scan_max_rows=0) on a small store next to a big one: every query still gets
    min(k, matching) rows."""
    big = _store(conn, "t2", "big", hashing_embedder)
    lines = "\n\n".join(f"Paragraph {i} about topic {i % 17} with words w{i} x{i % 5}." for i in range(1500))
    ingest_bytes(conn, settings, "t2", big, filename="big.txt", data=lines.encode(), embedder=hashing_embedder,
                 chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    small = _store(conn, "t2", "small", hashing_embedder)
    for i in range(4):
        ingest_bytes(conn, settings, "t2", small, filename=f"s{i}.txt", data=f"Small document {i} about topic {i}.".encode(),
                     embedder=hashing_embedder, attributes={"n": i, "tag": "even" if i % 2 == 0 else "odd"})
    forced = dataclasses.replace(settings, exact_scan_max_rows=0, hnsw_ef_search=10)
    small = vector_stores.get(conn, "t2", small.id)
    big = vector_stores.get(conn, "t2", big.id)
    assert big.chunk_count > 100
    vector_only = RankingOptions(text_weight=0.0)
    for query in ("topic", "document about topic 3", "zebra"):
        hits = search(conn, "t2", [small], query, embedder=hashing_embedder, settings=forced, limit=10, ranking=vector_only)
        assert len(hits) == 4
        odd = search(conn, "t2", [small], query, embedder=hashing_embedder, settings=forced, limit=10,
                     ranking=vector_only, filters={"type": "eq", "key": "tag", "value": "odd"})
        assert sorted(h.attributes["n"] for h in odd) == [1, 3]
    both = search(conn, "t2", [small, big], "topic 3", embedder=hashing_embedder, settings=forced, limit=50)
    assert len(both) == 50




def test_touch_moves_an_idle_store_and_leaves_a_recent_one(conn, hashing_embedder):
    """A search's touch moves ``last_active_at`` (and ``expires_at``) of a store idle for over a minute, and leaves a
    store active within the minute as it is — on what was loaded, without asking the database."""
    store = vector_stores.create(conn, "t10", name="idle", model=hashing_embedder.model, dim=hashing_embedder.dimension,
                                 expires_after={"anchor": "last_active_at", "days": 1})
    for ago, moves in ((300, True), (20, False)):
        conn.execute("UPDATE vector_stores SET last_active_at = now() - make_interval(secs => %s), expires_at = now() "
                     "WHERE id = %s", (ago, store.id))
        loaded = vector_stores.get(conn, "t10", store.id)
        vector_stores.touch(conn, "t10", [loaded])
        after = vector_stores.get(conn, "t10", store.id)
        assert (after.last_active_at > loaded.last_active_at) is moves
        assert (after.expires_at > loaded.expires_at) is moves
    stale = dataclasses.replace(loaded, last_active_at=loaded.last_active_at.replace(year=2000))
    vector_stores.touch(conn, "t10", [stale])  # an old loaded value sends the UPDATE; its own condition still holds
    assert vector_stores.get(conn, "t10", store.id).last_active_at == loaded.last_active_at


def test_hnsw_settings_hold_for_their_query_and_end_with_it(conn, settings, hashing_embedder):
    """The HNSW scan's settings (ef_search, iterative scan) go out in the query's pipeline: they change what that
    scan returns and are back to the server's defaults right after it."""
    from chalicelib.search import vector

    store = _store(conn, "t9", "settings", hashing_embedder)
    lines = "\n\n".join(f"Paragraph {i} about topic {i % 17} with words w{i} x{i % 5}." for i in range(600))
    ingest_bytes(conn, settings, "t9", store, filename="big.txt", data=lines.encode(), embedder=hashing_embedder,
                 chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    for i in range(4):
        ingest_bytes(conn, settings, "t9", store, filename=f"s{i}.txt", data=f"Small note {i} on harbours.".encode(),
                     embedder=hashing_embedder, attributes={"tag": "rare"})
    store = vector_stores.get(conn, "t9", store.id)
    defaults = conn.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')").fetchone()
    scope = vector.VectorScope(CHUNKS, store_scope("t9", [store.id], store.chunk_count), hashing_embedder.dimension,
                               store.chunk_count)
    where = compile_filter({"type": "eq", "key": "tag", "value": "rare"})
    q = hashing_embedder.embed(["Paragraph about topic with words"])[0]
    index = vector_stores.hnsw_index(conn, hashing_embedder.dimension)
    assert index.iterative_scan, "the embedded pgvector is ≥ 0.8"
    conn.execute("SET enable_seqscan = off; SET enable_sort = off")  # the graph, as on a big store
    try:
        iterative = vector._hnsw(conn, scope, q, 4, where, 10, True, index.halfvec)
        one_pass = vector._hnsw(conn, scope, q, 4, where, 10, False, index.halfvec)
    finally:
        conn.execute("RESET enable_seqscan; RESET enable_sort")
    assert len(iterative) == 4  # relaxed_order kept scanning past ef_search 10 until 4 rows passed the filter
    assert len(one_pass) < 4  # ef_search 10 alone: 10 candidates, nearly all of them filtered out
    after = conn.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')").fetchone()
    assert after == defaults == ("40", "off")


def test_a_filter_narrows_the_scope_to_its_files_without_changing_results(conn, settings, hashing_embedder,
                                                                          monkeypatch):
    """A filter matching few files is answered over those files' chunks (file attributes say which): same hits and
    scores as searching the whole store with the filter; attribute updates are followed at once."""
    from chalicelib.search import service
    from chalicelib.store import attachments

    store = _store(conn, "t4", "narrow", hashing_embedder)
    file_ids = {}
    for i in range(20):
        text = "\n\n".join(f"Note {i}.{j} on harbour topic {(i + j) % 7} with cargo w{i * j % 11}." for j in range(12))
        result = ingest_bytes(conn, settings, "t4", store, filename=f"n{i}.txt", data=text.encode(),
                              embedder=hashing_embedder, attributes={"shard": i, "even": i % 2 == 0},
                              chunking_strategy={"type": "static",
                                                 "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
        file_ids[i] = result.file_id
    store = vector_stores.get(conn, "t4", store.id)
    assert store.chunk_count >= 40
    scans: list[int] = []
    real_matching = attachments.matching_files

    def counting(*args, **kwargs):
        found = real_matching(*args, **kwargs)
        scans.append(sum(found.values()))
        return found

    monkeypatch.setattr(attachments, "matching_files", counting)
    filters = [{"type": "eq", "key": "shard", "value": 7}, {"type": "in", "key": "shard", "value": [1, 2, 3]},
               {"type": "eq", "key": "even", "value": True}, {"type": "eq", "key": "shard", "value": 99}]
    for ranking in (RankingOptions(), RankingOptions(text_weight=0.0), RankingOptions(embedding_weight=0.0)):
        for f in filters:
            def run(ranking=ranking, f=f):
                return [(h.file_id, h.chunk_index, round(h.score, 9))
                        for h in search(conn, "t4", [store], "harbour topic 3 cargo", embedder=hashing_embedder,
                                        settings=settings, limit=15, ranking=ranking, filters=f)]
            monkeypatch.setattr(service, "NARROW_MAX_SHARE", 0.5)
            narrowed = run()
            monkeypatch.setattr(service, "NARROW_MAX_SHARE", -1.0)  # never narrow
            whole = run()
            assert narrowed == whole
            matching = {file_ids[i] for i in range(20) if (f["key"] == "even" and i % 2 == 0)
                        or (f["key"] == "shard" and i in (f["value"] if isinstance(f["value"], list) else [f["value"]]))}
            assert {h[0] for h in narrowed} <= matching
            per_file = store.chunk_count // 20
            assert len(narrowed) == min(15, per_file * len(matching)) or f["key"] == "even"
    assert scans and max(scans) <= store.chunk_count
    monkeypatch.setattr(service, "NARROW_MAX_SHARE", 0.5)
    attachments.update_attributes(conn, "t4", store.id, file_ids[5], {"shard": 99})
    hits = search(conn, "t4", [store], "harbour", embedder=hashing_embedder, settings=settings, limit=10,
                  filters={"type": "eq", "key": "shard", "value": 99})
    assert hits and {h.file_id for h in hits} == {file_ids[5]}


@pytest.mark.parametrize("filters, expected", [
    pytest.param({"type": "eq", "key": "n", "value": 2}, [2], id="eq-number"),
    pytest.param({"type": "ne", "key": "tag", "value": "even"}, [1, 3, 9], id="ne-matches-missing-key"),
    pytest.param({"type": "gt", "key": "n", "value": 1}, [2, 3], id="gt"),
    pytest.param({"type": "lte", "key": "n", "value": 1.5}, [0, 1], id="lte-float"),
    pytest.param({"type": "in", "key": "n", "value": [0, 3, 7]}, [0, 3], id="in"),
    pytest.param({"type": "nin", "key": "n", "value": [0, 3]}, [1, 2, 9], id="nin-matches-missing-key"),
    pytest.param({"type": "eq", "key": "flag", "value": True}, [2], id="eq-bool"),
    pytest.param({"type": "gte", "key": "tag", "value": "f"}, [1, 3], id="gte-string"),
    pytest.param({"type": "or", "filters": [{"type": "eq", "key": "n", "value": 0},
                                            {"type": "and", "filters": [{"type": "eq", "key": "tag", "value": "odd"},
                                                                        {"type": "gt", "key": "n", "value": 2}]}]},
                 [0, 3], id="nested"),
    pytest.param({"type": "eq", "key": "n'); DROP TABLE chunks; --", "value": "x' OR '1'='1"}, [], id="hostile"),
])
def test_filters_select_the_right_files(conn, settings, hashing_embedder, filters, expected):
    store = vector_stores.find(conn, "t3", "filters")
    if store is None:
        store = _store(conn, "t3", "filters", hashing_embedder)
        for i, attrs in enumerate([{"n": 0, "tag": "even"}, {"n": 1, "tag": "odd"},
                                   {"n": 2, "tag": "even", "flag": True}, {"n": 3, "tag": "odd", "flag": False}]):
            ingest_bytes(conn, settings, "t3", store, filename=f"f{i}.txt", data=f"shared words file {i}".encode(),
                         embedder=hashing_embedder, attributes=attrs)
        ingest_bytes(conn, settings, "t3", store, filename="f9.txt", data=b"shared words file nine", embedder=hashing_embedder,
                     attributes={"other": 1})
        store = vector_stores.get(conn, "t3", store.id)
    hits = search(conn, "t3", [store], "shared words", embedder=hashing_embedder, settings=settings, limit=20,
                  filters=filters)
    got = sorted({int(h.filename[1:-4]) if h.filename != "f9.txt" else 9 for h in hits})
    assert got == expected
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0  # the hostile key dropped nothing


@pytest.mark.parametrize("filters, param", [
    pytest.param({"type": "like", "key": "a", "value": 1}, "filters.type", id="bad-type"),
    pytest.param({"type": "eq", "value": 1}, "filters.key", id="no-key"),
    pytest.param({"type": "eq", "key": "a"}, "filters.value", id="no-value"),
    pytest.param({"type": "in", "key": "a", "value": 3}, "filters.value", id="in-not-list"),
    pytest.param({"type": "gt", "key": "a", "value": True}, "filters.value", id="gt-bool"),
    pytest.param({"type": "and", "filters": []}, "filters.filters", id="empty-and"),
    pytest.param({"type": "and", "filters": [{"type": "eq", "key": "k" * 65, "value": 1}]}, "filters.filters[0].key",
                 id="long-key"),
    pytest.param("not an object", "filters", id="string"),
])
def test_filter_grammar_errors_name_the_param(filters, param):
    from chalicelib.search.filters import compile_filter

    with pytest.raises(InvalidRequestError) as info:
        compile_filter(filters)
    assert info.value.param == param and info.value.status == 400


def test_search_validates_limits(conn, settings, hashing_embedder):
    store = _store(conn, "t1", "limits", hashing_embedder)
    for bad in (0, 51, True):
        with pytest.raises(InvalidRequestError) as info:
            search(conn, "t1", [store], "q", embedder=hashing_embedder, settings=settings, limit=bad)
        assert info.value.param == "max_num_results"
    with pytest.raises(InvalidRequestError):
        search(conn, "t1", [store], "   ", embedder=hashing_embedder, settings=settings)


def test_top_k_over_postings_equals_the_exhaustive_scorer(conn, settings, hashing_embedder, monkeypatch):
    """The top-k over impact-ordered postings returns the exhaustive scorer's top-k exactly, also across stores,
    with filters, and after files were replaced and deleted (postings follow the chunks); asked for an exact head
    only, it still returns as many rows, the head exact."""
    import random

    from chalicelib.search import keyword

    rng = random.Random(7)
    vocabulary = [f"w{i:03d}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(300)]  # Zipf-like: a few very common words, many rare ones
    stores = [_store(conn, "t9", f"ta{n}", hashing_embedder) for n in range(2)]
    for store in stores:
        for f in range(12):
            lines = "\n\n".join(" ".join(rng.choices(vocabulary, weights, k=rng.randint(20, 120)))
                                  for _ in range(40))
            ingest_bytes(conn, settings, "t9", store, filename=f"f{f}.txt", data=lines.encode(),
                         embedder=hashing_embedder, attributes={"even": f % 2 == 0},
                         chunking_strategy={"type": "static",
                                            "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    # Churn: one file replaced, one detached, in the first store.
    ingest_bytes(conn, settings, "t9", stores[0], filename="f3.txt", data=b"w001 w002 w299 " * 30,
                 embedder=hashing_embedder)
    file_rows.delete_file(conn, "t9", attachments.find_by_name(conn, "t9", stores[0].id, "f5.txt").file_id)
    stores = [vector_stores.get(conn, "t9", s.id) for s in stores]
    assert sum(s.chunk_count for s in stores) > 400
    scope = store_scope("t9", [s.id for s in stores], sum(s.chunk_count for s in stores))
    even = compile_filter({"type": "eq", "key": "even", "value": True})
    queries = [" ".join(rng.sample(vocabulary[:40], 2)) for _ in range(20)]
    queries += [" ".join(rng.sample(vocabulary, 8)) for _ in range(20)] + ["w000", "w299 w298", "nothing here"]
    for query in queries:
        for where in (None, even):
            for limit in (10, 100):
                monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 10**9)
                exhaustive = keyword_search(conn, CHUNKS, scope, query, limit, where=where)
                monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 0)
                top_k = keyword_search(conn, CHUNKS, scope, query, limit, where=where)
                assert [i for i, _ in top_k] == [i for i, _ in exhaustive], (query, where is not None, limit)
                assert [s for _, s in top_k] == pytest.approx([s for _, s in exhaustive], rel=1e-9)
                # Exact head, best-effort tail: the first 5 rows exact, as many rows as the exhaustive scorer.
                head = keyword_search(conn, CHUNKS, scope, query, limit, where=where, exact=5)
                assert [i for i, _ in head[:5]] == [i for i, _ in exhaustive[:5]], (query, where is not None, limit)
                assert len(head) == len(exhaustive)
                assert [s for _, s in head] == sorted((s for _, s in head), reverse=True)
    rows = conn.execute("SELECT count(*) FROM chunk_postings p JOIN vector_stores s ON s.partition_key = "
                        "p.partition_key WHERE s.tenant_id = 't9'").fetchone()[0]
    lexemes = conn.execute("SELECT sum((SELECT count(*) FROM unnest(keywords))) FROM chunks "
                           "WHERE tenant_id = 't9'").fetchone()[0]
    assert rows == lexemes  # one posting per (chunk, lexeme): none left behind by the replace and the delete


def test_embeddings_are_kept_in_the_row(conn, settings, hashing_embedder):
    """Migration 0019: chunk, memory and exchange vectors are stored MAIN (in the row when it fits), not EXTERNAL
    (pgvector's default, moved out first once a row passes 2 kB): a chunk of a typical text keeps its vector in
    its heap row, which the TOAST table then does not hold."""
    import hashlib

    rows = dict(conn.execute("SELECT c.relname, a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                             "WHERE a.attname = 'embedding' AND c.relname IN ('chunks', 'memories', 'exchanges')"
                             ).fetchall())
    assert rows == {"chunks": "m", "memories": "m", "exchanges": "m"}
    store = _store(conn, "t19", "inline", hashing_embedder)
    # ~120 distinct words (~900 B of text, a tsvector as big): with the 1,540 B vector the row passes 2 kB.
    words = " ".join(f"{hashlib.sha1(str(i).encode()).hexdigest()[:6]}{'xyzw'[i % 4]}" for i in range(120))
    (toast,) = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'chunks'").fetchone()
    (toast_rows_before,) = conn.execute(f"SELECT count(*) FROM {toast}").fetchone()
    ingest_bytes(conn, settings, "t19", store, filename="long.txt", data=words.encode(), embedder=hashing_embedder)
    (vector_bytes,) = conn.execute("SELECT pg_column_size(embedding) FROM chunks WHERE vector_store_id = %s",
                                   (store.id,)).fetchone()
    # The whole chunk (text, tsvector, vector: over 3 kB) stays in its row (toast_tuple_target 8160): nothing of
    # it went to the TOAST table.
    (row_bytes,) = conn.execute("SELECT octet_length(text) + pg_column_size(keywords) + pg_column_size(embedding) "
                                "FROM chunks WHERE vector_store_id = %s", (store.id,)).fetchone()
    (toast_rows_after,) = conn.execute(f"SELECT count(*) FROM {toast}").fetchone()
    assert row_bytes > 3000 and toast_rows_after == toast_rows_before
    # An out-of-line vector is one uncompressed TOAST value of 4 + 4 · dim bytes (pgvector's dim and unused
    # fields, then float4s; the 4-byte length word stays in the row).
    (out_of_line,) = conn.execute(f"SELECT count(*) FROM (SELECT chunk_id FROM {toast} GROUP BY chunk_id "
                                  "HAVING sum(octet_length(chunk_data)) = %s) AS v",
                                  (4 + 4 * hashing_embedder.dimension,)).fetchone()
    assert vector_bytes > 1500 and out_of_line == 0



def test_deleting_stores_deletes_their_postings(conn, settings, hashing_embedder):
    """Migration 0020: postings carry no foreign key to their store (its per-posting check cost 7.6 % of the store
    stage's CPU), and deleting stores still deletes their postings — through the API's role, and through a tenant's
    cascade — while other stores keep theirs."""
    from chalicelib.store.db import tenant_connection

    assert conn.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = 'chunk_postings'::regclass "
                        "AND contype = 'f'").fetchone() == (0,)
    stores = {}
    for tenant, name in (("t12", "gone"), ("t12", "kept"), ("t13", "tenant")):
        store = _store(conn, tenant, name, hashing_embedder)
        ingest_bytes(conn, settings, tenant, store, filename=f"{name}.txt", embedder=hashing_embedder,
                     data=f"Harbour cranes lift {name} containers at dawn.\n\nTides turn twice a day.".encode())
        stores[name] = store

    def postings(name: str) -> int:
        return conn.execute("SELECT count(*) FROM chunk_postings p JOIN vector_stores s USING (partition_key) "
                            "WHERE s.id = %s", (stores[name].id,)).fetchone()[0]

    partitions = {n: conn.execute("SELECT partition_key FROM vector_stores WHERE id = %s", (s.id,)).fetchone()[0]
                  for n, s in stores.items()}
    before = {n: postings(n) for n in stores}
    assert all(before.values()), before

    def left(name: str) -> int:
        return conn.execute("SELECT count(*) FROM chunk_postings WHERE partition_key = %s",
                            (partitions[name],)).fetchone()[0]

    with tenant_connection(settings, "t12") as app:
        assert vector_stores.delete(app, "t12", stores["gone"].id)
    assert left("gone") == 0 and left("kept") == before["kept"] and left("tenant") == before["tenant"]
    conn.execute("DELETE FROM tenants WHERE id = 't13'")
    assert left("tenant") == 0 and left("kept") == before["kept"]


def test_hnsw_indexes_are_halfvec_and_old_vector_ones_are_converted(conn, settings, hashing_embedder):
    """New HNSW indexes are built over halfvec; migration 0011 rebuilds a vector one over halfvec with its own m and
    ef_construction; searches address whichever the index is (HNSW forced) and find the same rows."""
    from importlib import resources

    from chalicelib.store.vector_stores import hnsw_index, hnsw_index_name

    store = _store(conn, "t10", "half", hashing_embedder)
    lines = "\n\n".join(f"Note {i} on subject {i % 13} with marker m{i}." for i in range(300))
    ingest_bytes(conn, settings, "t10", store, filename="notes.txt", data=lines.encode(), embedder=hashing_embedder,
                 chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    store = vector_stores.get(conn, "t10", store.id)
    assert hnsw_index(conn, 384).kind == "halfvec"
    forced = dataclasses.replace(settings, exact_scan_max_rows=0)
    vector_only = RankingOptions(text_weight=0.0)

    def nearest() -> list[int]:
        return [h.chunk_id for h in search(conn, "t10", [store], "subject 7 marker", embedder=hashing_embedder,
                                           settings=forced, limit=5, ranking=vector_only)]

    on_halfvec = nearest()
    name = hnsw_index_name(384)
    conn.execute(f"DROP INDEX {name}")
    conn.execute(f"CREATE INDEX {name} ON chunks USING hnsw ((embedding::vector(384)) vector_cosine_ops) "
                 "WITH (m = 8, ef_construction = 40) WHERE embedding_dim = 384")
    assert hnsw_index(conn, 384).kind == "vector"
    assert nearest() == on_halfvec
    migration = (resources.files("chalicelib.store") / "migrations" / "0011_search_at_scale.sql").read_text("utf-8")
    conn.execute(migration[migration.index("DO $$"):])  # the conversion step
    assert hnsw_index(conn, 384).kind == "halfvec"
    options = conn.execute("SELECT reloptions FROM pg_class WHERE relname = %s", (name,)).fetchone()[0]
    assert sorted(options) == ["ef_construction=40", "m=8"]
    assert nearest() == on_halfvec


def test_a_database_migrated_past_0011_without_it_gets_it(database_url, settings, hashing_embedder, monkeypatch):
    """A database migrated by a build without migration 0011 (every other version applied, up to the newest, but
    those redefining its top-k) gets it on the next start: versions are applied by name, not by the highest one. Its vector HNSW index becomes
    halfvec, and the new top-k reads the postings the older triggers wrote, equal to the exhaustive scorer."""
    import uuid

    import psycopg

    from chalicelib.search import keyword
    from chalicelib.store.db import connect
    from chalicelib.store.migrate import migrate, migration_files
    from chalicelib.store.vector_stores import hnsw_index, hnsw_index_name

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(database_url, dbname=name)
    versions = [version for version, _ in migration_files()]
    assert "0011_search_at_scale" in versions and versions[-1] > "0011_search_at_scale"
    # 0011 and the later versions that redefine its top-k function (0018) came in together.
    missing = ["0011_search_at_scale", *(v for v, text in migration_files()
                                         if v > "0011_search_at_scale" and "FUNCTION engram_chunks_bm25_topk(" in text)]
    assert "0018_bm25_topk_seed" in missing
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL "
                      "DEFAULT now())")
        for version, text in migration_files():
            if version not in missing:
                owner.execute(text)
                owner.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    old = dataclasses.replace(settings, database_url=url, auto_migrate=False)
    conn = connect(old)
    try:
        store = _store(conn, "t11", "old", hashing_embedder)
        lines = "\n\n".join(f"Note {i} on subject {i % 13} with marker m{i % 29} and word{i % 7}." for i in range(400))
        ingest_bytes(conn, old, "t11", store, filename="notes.txt", data=lines.encode(), embedder=hashing_embedder,
                     chunking_strategy={"type": "static",
                                        "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
        index = hnsw_index_name(384)
        conn.execute(f"DROP INDEX {index}")
        conn.execute(f"CREATE INDEX {index} ON chunks USING hnsw ((embedding::vector(384)) vector_cosine_ops) "
                     "WHERE embedding_dim = 384")
        assert hnsw_index(conn, 384).kind == "vector"

        assert migrate(conn) == missing
        assert migrate(conn) == []
        assert hnsw_index(conn, 384).kind == "halfvec"
        store = vector_stores.get(conn, "t11", store.id)
        scope = store_scope("t11", [store.id], store.chunk_count)
        for query in ("subject 7 marker", "word3 m11", "note"):
            monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 10**9)
            exhaustive = keyword_search(conn, CHUNKS, scope, query, 10, where=None)
            monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 0)
            top_k = keyword_search(conn, CHUNKS, scope, query, 10, where=None)
            assert exhaustive and [i for i, _ in top_k] == [i for i, _ in exhaustive], query
    finally:
        conn.close()


def test_every_candidate_carries_exact_evidence_and_its_relevance(conn, settings, hashing_embedder, monkeypatch):
    """Each leg returns only its top ``depth``; every fused candidate still gets the exact cosine and BM25 of the
    other leg, its relevance is the documented function of them, and the order is the documented one (hybrid: the
    candidates of reciprocal rank fusion of the two legs in relevance order, ties in fusion order; vector-only: by
    cosine; keyword-only: by BM25)."""
    import random

    from chalicelib.search.fusion import reciprocal_rank_fusion
    from chalicelib.search.ranking import rank
    from chalicelib.search.relevance import Weights, relevance
    from chalicelib.search.vector import VectorScope, vector_search

    rng = random.Random(11)
    vocabulary = [f"w{i:03d}" for i in range(60)]
    store = _store(conn, "t8", "evidence", hashing_embedder)
    for f in range(36):  # one chunk each
        line = " ".join(rng.choices(vocabulary, k=rng.randint(5, 40)))
        ingest_bytes(conn, settings, "t8", store, filename=f"f{f}.txt", data=line.encode(), embedder=hashing_embedder)
    store = vector_stores.get(conn, "t8", store.id)
    assert store.chunk_count > 30
    scope = store_scope("t8", [store.id], store.chunk_count)
    texts = dict(conn.execute("SELECT id, text FROM chunks WHERE vector_store_id = %s", (store.id,)).fetchall())
    query, depth = "w001 w007 w033 w059", 6
    (q,) = hashing_embedder.embed([query])
    cosine = {cid: max(0.0, min(1.0, sum(a * b for a, b in zip(q, hashing_embedder.embed([t])[0], strict=True))))
              for cid, t in texts.items()}
    bm25, best = _reference_bm25(conn, store.id, tuple(query.split()))  # each word is its own lexeme
    keyword = {cid: bm25.get(cid, 0.0) / best for cid in texts}
    vector_scope = VectorScope(CHUNKS, scope, hashing_embedder.dimension, store.chunk_count)
    vector_ids = [i for i, _ in vector_search(conn, vector_scope, q, depth, where=None, ef_search=40,
                                              exact_scan_max_rows=10**6, iterative_scan=False, halfvec=False)]
    keyword_ids = [i for i, _ in keyword_search(conn, CHUNKS, scope, query, depth, where=None)]
    assert len(vector_ids) == len(keyword_ids) == depth and set(vector_ids) != set(keyword_ids)

    for weights in (Weights(1.0, 1.0), Weights(2.0, 0.5), Weights(1.0, 0.0), Weights(0.0, 1.0)):
        ranked = rank(conn, CHUNKS, scope, [query], embedder=hashing_embedder, settings=settings, depth=depth,
                      where=None, weights=weights, indexed_rows=store.chunk_count)
        if weights.text == 0:
            assert [r.id for r in ranked] == vector_ids
        elif weights.embedding == 0:
            assert [r.id for r in ranked] == keyword_ids
        else:
            fused = [i for i, _ in reciprocal_rank_fusion([(weights.embedding, vector_ids), (weights.text, keyword_ids)])]
            assert sorted(r.id for r in ranked) == sorted(fused)
            assert set(vector_ids) ^ set(keyword_ids) <= {r.id for r in ranked}  # one-leg candidates are there
            by_relevance = sorted(ranked, key=lambda r: (-r.relevance, fused.index(r.id)))
            assert [r.id for r in ranked] == [r.id for r in by_relevance]
            assert [r.id for r in ranked] != fused  # (the legs disagree enough that the order is not fusion's)
        for r in ranked:
            sim = cosine[r.id] if weights.embedding > 0 else None
            kw = keyword[r.id] if weights.text > 0 else None
            assert (r.similarity is None) == (sim is None) and (r.keyword is None) == (kw is None)
            if sim is not None:
                assert r.similarity == pytest.approx(sim, abs=1e-5)
            if kw is not None:
                assert r.keyword == pytest.approx(kw, rel=1e-9, abs=1e-12)
            assert r.relevance == pytest.approx(relevance(sim, kw, weights, hashing_embedder.model), abs=1e-4)
            assert 0.0 <= r.relevance <= 1.0
        if weights.embedding == 0 or weights.text == 0:  # one leg: relevance is monotone in its evidence
            assert [r.relevance for r in ranked] == sorted((r.relevance for r in ranked), reverse=True)
        # With a limit, the evidence is read for a prefix only; the first `limit` rows reaching a threshold are the
        # same rows with the same relevance.
        for limit, threshold in ((3, 0.0), (3, 0.3), (2, 0.5), (4, 0.99)):
            prefix = rank(conn, CHUNKS, scope, [query], embedder=hashing_embedder, settings=settings, depth=depth,
                          where=None, weights=weights, indexed_rows=store.chunk_count, limit=limit,
                          threshold=threshold)
            assert [r.id for r in prefix] == [r.id for r in ranked][:len(prefix)]

    # The window: with a smaller one, its candidates (in fusion order) come first, each part in relevance order.
    from chalicelib.search import ranking

    monkeypatch.setattr(ranking, "FUSION_WINDOW", 3)
    fused = [i for i, _ in reciprocal_rank_fusion([(1.0, vector_ids), (1.0, keyword_ids)])]
    for limit, threshold in ((2, 0.0), (2, 0.99)):
        got = rank(conn, CHUNKS, scope, [query], embedder=hashing_embedder, settings=settings, depth=depth,
                   where=None, weights=Weights(), indexed_rows=store.chunk_count, limit=limit, threshold=threshold)
        assert [r.relevance for r in got] == sorted((r.relevance for r in got), reverse=True)
        if threshold == 0.0:  # the window holds enough rows: only its candidates are read
            assert sorted(r.id for r in got) == sorted(fused[:3])
        else:  # too few reach the threshold: every candidate, in relevance order
            assert sorted(r.id for r in got) == sorted(fused)
            kept = [(r.id, r.relevance) for r in prefix if r.relevance >= threshold][:limit]
            expected = [(r.id, r.relevance) for r in ranked if r.relevance >= threshold][:limit]
            assert [i for i, _ in kept] == [i for i, _ in expected], (weights, limit, threshold)
            assert [s for _, s in kept] == pytest.approx([s for _, s in expected], abs=1e-12)


def test_scope_statistics_evidence_is_exact_too(conn, settings, hashing_embedder):
    """Memories (BM25 statistics over the scope itself): one-leg candidates get the other leg's exact evidence, and
    the keyword score is normalised by the query's highest attainable BM25 over the scope."""
    import random

    from chalicelib import ids
    from chalicelib.memory import store as memory_store
    from chalicelib.memory.model import MemoryScope, text_hash
    from chalicelib.search.corpus import MEMORIES, Scope
    from chalicelib.search.ranking import rank
    from chalicelib.search.relevance import Weights

    rng = random.Random(5)
    vocabulary = [f"w{i:03d}" for i in range(40)]
    vector_stores.ensure_tenant(conn, "t7")
    scope = MemoryScope(user_id="u7")
    for _ in range(30):
        text = " ".join(rng.choices(vocabulary, k=rng.randint(3, 12)))
        memory_store.insert(conn, "t7", ids.new_id(ids.MEMORY), memory_store.NewMemory(
            scope=scope, memory=text, hash=text_hash(text), memory_type="fact", categories=[], confidence=0.8,
            importance=0.5, metadata={}, source_kind="api", source_id=None, valid_from=None, pinned=False,
            expires_at=None, model=hashing_embedder.model, embedding=hashing_embedder.embed([text])[0],
            index_text=text))
    predicate, params = memory_store.scope_predicate(scope)
    rows = conn.execute("SELECT seq, keywords::text, memory FROM memories WHERE tenant_id = 't7'").fetchall()
    query = "w003 w017 w031 nothinglike"
    bm25, best = _reference_bm25(conn, None, ("w003", "w017", "w031", "nothinglik"),
                                 rows=[(seq, kw) for seq, kw, _ in rows])
    (q,) = hashing_embedder.embed([query])
    cosine = {seq: max(0.0, sum(a * b for a, b in zip(q, hashing_embedder.embed([text])[0], strict=True)))
              for seq, _, text in rows}
    ranked = rank(conn, MEMORIES, Scope(tenant_ids=("t7",), predicate=predicate, params=params, rows=1), [query],
                  embedder=hashing_embedder, settings=settings, depth=4, where=None, weights=Weights(),
                  indexed_rows=0)
    assert len(ranked) > 4  # both legs stopped at 4 rows, and differ
    for r in ranked:
        assert r.similarity == pytest.approx(cosine[r.id], abs=1e-5)
        assert r.keyword == pytest.approx(bm25.get(r.id, 0.0) / best, rel=1e-9, abs=1e-12)
