"""The BM25 top-k's pruning for long queries (migration 0025: the chunks in reach of θ are completed one skipped list
at a time, and drop out as θ rises) against the exhaustive scorer, on a corpus where lists are skipped and the
chunks in reach completed from them (checked with an instrumented copy of the function), including families of
near-duplicates that only the skipped lists rank."""

from __future__ import annotations

import random
import re

import pytest

from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search import keyword
from chalicelib.search.corpus import CHUNKS, store_scope
from chalicelib.search.keyword import keyword_search, query_terms
from chalicelib.store import vector_stores
from chalicelib.store.migrate import migration_files

TENANT = "t23"
VOCABULARY = [f"v{i:04d}" for i in range(1500)]
ZIPF = [1 / (i + 1) ** 0.9 for i in range(len(VOCABULARY))]  # a few common words, many rare ones, as in text


def _load(conn, settings, embedder, rng: random.Random) -> tuple[list[vector_stores.VectorStore], list[str], list[str]]:
    """Two stores of ~1,000 chunks each (searched together: each store has its own lists and bounds): paragraphs of
    40–90 Zipf-distributed words, and families of near-duplicates (:func:`_families`). Returns the stores, the
    Zipf paragraphs and the families' queries."""
    stores = [vector_stores.find_or_create(conn, TENANT, f"long{i}", model=embedder.model, dim=embedder.dimension)
              for i in range(2)]
    paragraphs = []
    families, family_queries = _families(rng)
    for f in range(24):
        mine = [" ".join(rng.choices(VOCABULARY, ZIPF, k=rng.randint(40, 90))) for _ in range(70)]
        paragraphs += mine
        if f < len(families):
            mine += families[f]
        ingest_bytes(conn, settings, TENANT, stores[f % 2], filename=f"f{f}.txt", data="\n\n".join(mine).encode(),
                     embedder=embedder, chunking_strategy={"type": "static", "static": {
                         "max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    return [vector_stores.get(conn, TENANT, s.id) for s in stores], paragraphs, family_queries


def _families(rng: random.Random) -> tuple[list[list[str]], list[str]]:
    """Near-duplicates whose order only the common words decide: per family, 60 paragraphs (one chunk each: 55–95
    words) holding the same 6 rare words and 0–6 of the 6 commonest words, each 1–4 times, padded with
    mid-frequency words; and the family's 12-word query (its rare words and the common ones). The common words'
    lists are skipped and the chunks in reach completed from them. One more "family" of 100 paragraphs repeats the
    common words 5–9 times each: they fill the heads of the common lists, so the first threshold, which reads
    those heads, cannot see how the families rank (the completion must)."""
    common = VOCABULARY[:6]
    families, queries = [], []
    for _ in range(8):
        rare = rng.sample(VOCABULARY[1000:], 6)
        family = []
        for _ in range(60):
            words = list(rare)
            for word in rng.sample(common, rng.randint(0, 6)):
                words += [word] * rng.randint(1, 4)
            family.append(_padded(rng, words))
        families.append(family)
        queries.append(" ".join(rare + common))
    families.append([_padded(rng, [w for w in common for _ in range(rng.randint(5, 9))]) for _ in range(100)])
    return families, queries


def _padded(rng: random.Random, words: list[str]) -> str:
    """``words`` and mid-frequency words, 55–95 in all, shuffled."""
    words = words + rng.choices(VOCABULARY[300:1000], k=max(0, rng.randint(55, 95) - len(words)))
    rng.shuffle(words)
    return " ".join(words)


def _queries(rng: random.Random, paragraphs: list[str]) -> list[str]:
    """12- and 16-word queries of distinct words drawn from one paragraph each (as benchmarks/search.py draws them:
    a model's long query shares many words with what it looks for), and a few of random words."""
    out = []
    for n in (12, 16):
        for _ in range(8):
            words = list(dict.fromkeys(rng.choice(paragraphs).split()))
            out.append(" ".join(rng.sample(words, min(n, len(words)))))
    out += [" ".join(rng.sample(VOCABULARY[:300], 12)) for _ in range(3)]
    return out


def _instrumented(conn) -> None:
    """``pg_temp.topk_counted``: the newest definition of the top-k with two notices: after completing, the chunks
    still in reach of θ and those scored already (``reach {…}``); before returning, how many skipped lists it
    completed (``completed n``)."""
    text = [t for _, t in migration_files() if "FUNCTION engram_chunks_bm25_topk(" in t][-1]
    start = text.rindex("CREATE", 0, text.index("FUNCTION engram_chunks_bm25_topk("))
    body = text[start:text.index("END $$;", start) + len("END $$;")]
    body = re.sub(r"CREATE (OR REPLACE )?FUNCTION engram_chunks_bm25_topk", "CREATE FUNCTION pg_temp.topk_counted",
                  body, count=1)
    exact_step = "    -- d. Exact scores, best upper bound first"
    end = "    RETURN QUERY SELECT unnest(top_ids), unnest(top_scores);"
    assert exact_step in body and end in body and "completed := completed + 1;" in body
    body = body.replace(exact_step, "    RAISE NOTICE 'reach %', coalesce(c_ids, '{}') || scored;\n" + exact_step)
    conn.execute(body.replace(end, "    RAISE NOTICE 'completed %', completed;\n" + end))


def test_long_queries_prune_without_changing_the_top_k(conn, settings, hashing_embedder, monkeypatch):
    """For 12- and 16-word queries, the top-k over postings returns the exhaustive scorer's rows — all ``limit``
    of them, or the exact head of ``exact`` rows and as many rows in all — while it skips lists and completes the
    chunks in reach from them (some queries at least)."""
    rng = random.Random(23)
    stores, paragraphs, family_queries = _load(conn, settings, hashing_embedder, rng)
    assert sum(s.chunk_count for s in stores) > 1500
    scope = store_scope(TENANT, [s.id for s in stores], sum(s.chunk_count for s in stores))
    _instrumented(conn)
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    completed = 0
    for query in family_queries + _queries(rng, paragraphs):
        for limit, exact in ((10, None), (100, None), (100, 20), (40, 10)):
            monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 10**9)
            exhaustive = keyword_search(conn, CHUNKS, scope, query, limit, where=None)
            monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 0)
            top_k = keyword_search(conn, CHUNKS, scope, query, limit, where=None, exact=exact)
            head = exact or limit
            assert exhaustive and [i for i, _ in top_k[:head]] == [i for i, _ in exhaustive[:head]], (query, exact)
            assert [s for _, s in top_k[:head]] == pytest.approx([s for _, s in exhaustive[:head]], rel=1e-9)
            assert len(top_k) == len(exhaustive), (query, limit, exact)
            assert [s for _, s in top_k] == sorted((s for _, s in top_k), reverse=True)
            # The same through the instrumented copy, which shows that no row of the exact head was pruned on the
            # way (not rescued by a later step) and whether skipped lists were completed.
            terms = query_terms(conn, CHUNKS, scope, query)
            assert terms is not None
            notices.clear()
            counted = conn.execute("SELECT * FROM pg_temp.topk_counted(%s, %s, %s, %s, %s, %s)",
                                   ([s.id for s in stores], terms.lexemes, terms.idfs, terms.avgdl, limit, exact)).fetchall()
            assert [(int(i), float(s)) for i, s in counted] == top_k
            reach = [n for n in notices if n.startswith("reach ")]
            assert len(reach) == 1
            in_reach = {int(i) for i in reach[0].removeprefix("reach ").strip("{}").split(",") if i}
            assert {i for i, _ in exhaustive[:head]} <= in_reach, (query, limit, exact)
            completed += sum(int(n.split()[1]) > 0 for n in notices if n.startswith("completed "))
    assert completed >= 10  # the pruning under test ran (skipped lists completed for the chunks in reach)
