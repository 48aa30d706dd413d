"""Ranking a scope of any corpus for one or more queries: the vector leg and the keyword leg per query, fused
(:mod:`chalicelib.search.fusion`). Shared by vector-store search (chunks) and memory search.

Each result carries the evidence behind it — its cosine ``similarity`` to the
query and its ``keyword`` score (BM25 divided by the query's highest attainable BM25, so in [0, 1]) — and the
``relevance`` made from that evidence (:mod:`chalicelib.search.relevance`). The evidence is exact for every
candidate: a row only one leg returned gets the other leg's score as well (its cosine, one statement over those
rows; its BM25, ``engram_bm25_score`` over those rows with the query's terms), so a row's relevance does not depend
on whether it made the other leg's top ``depth``. With several queries, each value is the best over the queries.

Fusion picks the candidates; relevance orders them. With both legs, the first :data:`FUSION_WINDOW` candidates in
fusion order (or the caller's ``limit``, when larger) are put in relevance order, with the rest when it is read
(too few of the window reach the caller's threshold; the rows the caller keeps are the same either way): relevance
averages the legs' calibrated log-odds, which uses how strong each leg's evidence is where reciprocal-rank fusion
uses only positions (normalised score fusion beats RRF in Bruch, Gai & Ingber 2023, "An Analysis of Fusion
Functions for Hybrid Retrieval"). On BEIR NFCorpus with all-MiniLM-L6-v2 (``benchmarks/retrieval.py``), hybrid
nDCG@10 goes from 0.3551 (RRF order) to 0.3653; reordering the first 10 candidates gives 0.3572, the first 20
0.3628, any window of 40 or more 0.3653. Relevance is calibrated on nonsense queries only (no relevance
judgement), so the order is not fitted to the judged queries. Scores shown to clients are relevances, so a page's
scores descend and ``score_threshold`` cuts it short.

With pgvector, the keyword leg's first rows are the exact BM25 ranking, the rest of its ``depth`` rows the best
exact scores among the chunks its top-k bounded best (:func:`keyword_exact_head`): as many exact rows as the caller
sees when the leg's order is the result's (keyword-only, one query), else :data:`KEYWORD_EXACT_HEAD` (or the
caller's ``limit``, when larger). Every row it returns carries its exact BM25, and every candidate of the window
still gets the other leg's exact evidence, so relevance keeps its meaning; which rows past the head reach fusion may
differ from an exhaustive ranking. Long queries read far fewer postings for it
(migrations/0025_bm25_long_queries.sql). Qdrant's sparse leg is its own ranking, read again exactly.

**Ties** (issue 33 §5). Row ids follow ingestion order, so a leg that breaks ties by id ranks the same documents
differently in two stores ingested in different orders (keyword nDCG@10 moved by 0.0015 on a 1,000-document
subset). So rows of equal score in a leg's list share one rank in fusion (the first position of their run: a
standard competition ranking), whatever order the backend returned them in, and rows the final order cannot tell
apart (equal relevance; or equal score in a single-leg or ``ranker: none`` ranking) are put in the order of the
corpus's stable key (:attr:`Corpus.tie_key`: for chunks, their text, position and file) — only the runs that reach
into the caller's page, so the key is read (one statement) only when the page holds a tie: most hybrid searches
read nothing. A keyword leg whose scores are not exact (Qdrant's, weighted by the average length when each point
was synced, which follows the ingestion order too: rows of equal BM25 differ there by up to ~1e-4) counts scores
within :data:`INEXACT_TIE_RELATIVE` of each other as tied. Rows tied at a leg's ``depth`` cut-off may still be
chosen by the backend. (Two designs were measured and not kept: ordering each leg's ties by the key before fusion
read the key for most keyword lists, 2.5-4 ms a search at 3,000 chunks; reading an inexact leg's exact BM25 for all
its rows before fusion took ~12 ms for a 12-word query, against the ~1 ms a Qdrant leg takes.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from chalicelib import observability
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.search.backends import CandidateLegs
from chalicelib.search.backends.pgvector import PGVECTOR
from chalicelib.search.corpus import Corpus, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.search.fusion import reciprocal_rank_fusion
from chalicelib.search.keyword import KeywordLeg, keyword_scores
from chalicelib.search.relevance import Weights, relevance
from chalicelib.search.vector import VectorScope
from chalicelib.store.vector_stores import HnswIndex, hnsw_index

__all__ = ["FUSION_WINDOW", "KEYWORD_EXACT_HEAD", "Ranked", "Weights", "keyword_exact_head", "rank", "stable_order",
           "tied_ranks"]

# Candidates (in fusion order) reordered by relevance when the caller asks for fewer: the smallest window at which
# NFCorpus' hybrid nDCG@10 stops rising (module docstring). Their other-leg evidence is read in one statement per
# leg (up to 40 rows: ~1 ms at 100k chunks, benchmarks/search.py).
FUSION_WINDOW = 40
# The keyword leg's exact head when its list is fused (hybrid, or several queries), for callers wanting fewer rows:
# half the fusion window, the rows the window takes from the keyword list on its own when the two lists do not
# overlap (ranks past it enter the window only beside a vector rank, where 1 / (60 + r) changes little with r).
# docs/benchmarks.md, "Long queries" (2026-11-27, with migration 0025's top-k): 12-word hybrid at 100,000 chunks
# 42.8 ms p50 against 122 with every keyword row exact (interleaved, one run), the leg's top 10 the exhaustive one
# on 100 % of queries, hybrid's top 10 the same as before on 96–100 % per length; NFCorpus hybrid nDCG@10 0.3662
# (also with only 20 rows exact).
KEYWORD_EXACT_HEAD = FUSION_WINDOW // 2


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked row: its ``id``; the fused ``score`` in [0, 1] (a rank score: it orders one result list and means
    nothing across queries); its cosine ``similarity`` clamped to [0, 1] (None when the vector leg did not run);
    its normalised ``keyword`` score in [0, 1] (None when the keyword leg did not run); its ``relevance`` in [0, 1]
    (:func:`chalicelib.search.relevance.relevance` of that evidence: comparable across queries)."""

    id: int
    score: float
    similarity: float | None
    keyword: float | None
    relevance: float


@dataclass(slots=True)
class _Evidence:
    """One query's evidence: cosine similarity and raw BM25 per row, and whether each leg saw every row it could
    score (then a row missing from it scores 0 on that leg)."""

    similarity: dict[int, float] = field(default_factory=dict)
    vector_complete: bool = True
    vector: Sequence[float] | None = None
    keyword: KeywordLeg | None = None
    bm25: dict[int, float] = field(default_factory=dict)
    rescored: set[int] = field(default_factory=set)  # rows whose exact BM25 was read (a leg with inexact scores)


def rank(conn: psycopg.Connection, corpus: Corpus, scope: Scope, queries: Sequence[str], *, embedder: Embedder,
         settings: Settings, depth: int, where: CompiledFilter | None, weights: Weights,
         indexed_rows: int, vectors: Sequence[Sequence[float]] | None = None, limit: int | None = None,
         threshold: float = 0.0, index: HnswIndex | None = None,
         backend: CandidateLegs = PGVECTOR, rerank: bool = True, similarities: bool = True) -> list[Ranked]:
    """Every row either leg returned for any of ``queries`` (each leg asked for ``depth`` rows per query), best
    first. Vector-only ranking (``weights.text == 0``) orders by cosine similarity, keyword-only by BM25;
    hybrid ranking takes the candidates in reciprocal-rank-fusion order of every leg's list and puts the first
    ``max(limit, FUSION_WINDOW)`` of them (all of them without ``limit``) in relevance order (module docstring);
    when the rest is read too (below), the whole list is in relevance order. ``rerank=False`` (OpenAI's ranker
    ``none``) keeps hybrid ranking in fusion order: every row still carries its relevance, which then need not
    descend along the list. ``similarities=False``: a caller that reads every candidate's similarity itself (memory
    recall, with its ranking rows) skips reading those only the keyword leg found (their ``similarity`` and
    ``relevance`` then count the vector leg's evidence alone). ``index``: the corpus's HNSW index
    when the caller has read it already (:func:`chalicelib.store.vector_stores.hnsw_index`; else it is read here,
    for a corpus that has one). ``vectors`` (one per query,
    ``embedder.dimension`` floats each) are the queries' embeddings when the caller computed them already (memory
    recall reuses its query vector); else they are embedded here. ``backend`` proposes each leg's candidates
    (:mod:`chalicelib.search.backends`; pgvector by default; a user's history: its partition's legs,
    :class:`chalicelib.search.partitions.PartitionLegs`); the evidence and the
    relevance are computed here alike for every backend.

    With ``limit``, only a prefix of that list comes back — one holding ``limit`` rows whose relevance reaches
    ``threshold``, or the whole list when it has fewer: a caller that keeps the first ``limit`` such rows gets
    the same answer, and the other leg's evidence is read for the first window of candidates, then (only when
    too few of them reach ``threshold``) for the rest, instead of for all of them (up to 2 · ``depth`` rows per
    query: ~4 ms at 100k chunks, benchmarks/search.py).

    Raises:
        UpstreamError: embedding the queries failed.
    """
    rankings: list[tuple[float, list[int]]] = []
    ranks: list[Sequence[int] | None] = []  # each list's tied ranks (module docstring, "Ties")
    evidence = [_Evidence() for _ in queries]
    use_vector = weights.embedding > 0 and scope.rows > 0
    vector_scope = VectorScope(corpus, scope, embedder.dimension, indexed_rows)
    if use_vector:
        # Only an indexed corpus can take the HNSW path: what its index is built over decides the cast.
        if corpus.hnsw_prefix is None or not backend.in_postgres:
            index = HnswIndex(kind=None, iterative_scan=False)
        elif index is None:
            index = hnsw_index(conn, embedder.dimension)
        if vectors is None:
            started = time.perf_counter()
            vectors = embedder.embed(list(queries))
            observability.record(observability.QUERY_EMBEDDING_LATENCY, (time.perf_counter() - started) * 1000.0)
        for ev, vector in zip(evidence, vectors, strict=True):
            assert index is not None
            rows = backend.vector_leg(conn, vector_scope, vector, depth, where=where, settings=settings, index=index)
            ev.vector, ev.vector_complete = vector, len(rows) < depth
            ev.similarity = {row_id: _similarity(distance) for row_id, distance in rows}
            rankings.append((weights.embedding, [row_id for row_id, _ in rows]))
            ranks.append(tied_ranks([d for _, d in rows], TIE_RELATIVE))
    if weights.text > 0:
        head = keyword_exact_head(limit, fused=use_vector or len(queries) > 1)
        for ev, q in zip(evidence, queries, strict=True):
            ev.keyword = backend.keyword_leg(conn, corpus, scope, q, depth, where=where, exact_head=head)
            ev.bm25 = dict(ev.keyword.rows)
            rankings.append((weights.text, [row_id for row_id, _ in ev.keyword.rows]))
            ranks.append(tied_ranks([s for _, s in ev.keyword.rows],
                                    TIE_RELATIVE if ev.keyword.exact else INEXACT_TIE_RELATIVE))
    if weights.text > 0:
        fused = reciprocal_rank_fusion(rankings, ranks=ranks)
    else:
        best: dict[int, float] = {}
        for ev in evidence:
            for row_id, value in ev.similarity.items():
                best[row_id] = max(best.get(row_id, 0.0), value)
        fused = sorted(best.items(), key=lambda kv: -kv[1])
    if not fused:
        return []
    window = len(fused) if limit is None else max(limit, FUSION_WINDOW)
    batches = [fused[:window], fused[window:]]
    # One leg's relevance is monotone in its score: its order is unchanged either way.
    reorder = rerank and use_vector and weights.text > 0
    ranked: list[Ranked] = []
    reached = 0
    for batch in batches:
        if not batch or (limit is not None and reached >= limit):
            break
        candidates = [int(row_id) for row_id, _ in batch]
        for ev, q in zip(evidence, queries, strict=True):
            if similarities and use_vector and not ev.vector_complete and ev.vector is not None:
                missing = [c for c in candidates if c not in ev.similarity]
                ev.similarity.update((row_id, _similarity(d)) for row_id, d in
                                     backend.distances(conn, vector_scope, ev.vector, missing).items())
            if ev.keyword is not None and not ev.keyword.exact:  # read every candidate's exact score again
                missing = [c for c in candidates if c not in ev.rescored]
                exact = keyword_scores(conn, corpus, scope, q, ev.keyword, missing, where=where)
                ev.bm25.update({c: exact.get(c, 0.0) for c in missing})
                ev.rescored.update(missing)
            elif ev.keyword is not None and not ev.keyword.complete:
                missing = [c for c in candidates if c not in ev.bm25]
                ev.bm25.update(keyword_scores(conn, corpus, scope, q, ev.keyword, missing, where=where))
        batch_rows = [_ranked(row_id, score, evidence, use_vector, weights, embedder.model)
                      for row_id, score in batch]
        ranked.extend(batch_rows)
        if reorder:  # (stable: ties keep fusion order)
            ranked.sort(key=lambda r: -r.relevance)
        reached += sum(row.relevance >= threshold for row in batch_rows)
    # Rows the order cannot tell apart (equal relevance, or equal fused score / similarity when that is the order)
    # go in the corpus's stable-key order, for the runs that reach into the caller's page.
    order = [(r.id, r.relevance if reorder else r.score) for r in ranked]
    page = len(order) if limit is None else limit
    settled = stable_order(conn, corpus, scope, order, descending=True, upto=page)
    if settled != order:
        by_id = {r.id: r for r in ranked}
        ranked = [by_id[row_id] for row_id, _ in settled]
    return ranked


# Scores within this relative difference are a tie (a BM25 or cosine computed twice from the same inputs agrees to
# the last bit; the margin absorbs float32 round-off in an engine's scores).
TIE_RELATIVE = 1e-9
# The same for a keyword leg whose scores are not exact (Qdrant's: a point's term weights use the average length
# at its sync; rows of equal exact BM25 differed by ≤ 1.2e-4 at 100,000 chunks, docs/benchmarks.md).
INEXACT_TIE_RELATIVE = 1e-3


def tied_ranks(scores: Sequence[float], tolerance: float) -> list[int]:
    """Competition ranks of a list's scores, best first: 1, 2, 3, ..., an item whose score equals (within
    ``tolerance``, relative, of its run's first) the one before it taking that one's rank."""
    out: list[int] = []
    start = 0
    for i, value in enumerate(scores):
        if i and abs(value - scores[start]) > tolerance * max(1.0, abs(scores[start])):
            start = i
        out.append(start + 1)
    return out


def stable_order(conn: psycopg.Connection, corpus: Corpus, scope: Scope, rows: Sequence[tuple[int, float]], *,
                 descending: bool, tolerance: float = TIE_RELATIVE, upto: int | None = None) -> list[tuple[int, float]]:
    """``rows`` (``(row id, score)``, best first: highest score when ``descending``, else lowest distance) with every
    run of equal scores (within ``tolerance`` of the run's first, relative) — those starting before position
    ``upto``, when given — in the order of the corpus's :attr:`~chalicelib.search.corpus.Corpus.tie_key` (read in
    one statement, for the tied rows only); unchanged when nothing ties or the corpus has no key. ``descending``
    says which way the list runs (a run is sorted by key alone either way)."""
    out = list(rows)
    if corpus.tie_key is None or len(out) < 2:
        return out
    limit = len(out) if upto is None else min(upto, len(out))
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(out) + 1):
        if i == len(out) or abs(out[i][1] - out[start][1]) > tolerance * max(1.0, abs(out[start][1])):
            if i - start > 1 and start < limit:
                runs.append((start, i))
            start = i
    if not runs:
        return out
    tied = [int(out[i][0]) for lo, hi in runs for i in range(lo, hi)]
    statement = sql.SQL("SELECT {id}, {key} FROM {table} WHERE tenant_id = ANY(%(tenants)s) AND {id} = ANY(%(ids)s)"
                        ).format(id=corpus.row_id(), key=sql.SQL(corpus.tie_key), table=corpus.identifier())
    keys: dict[int, str] = dict(conn.execute(statement, {"tenants": list(scope.tenant_ids), "ids": tied}).fetchall())
    for lo, hi in runs:
        out[lo:hi] = sorted(out[lo:hi], key=lambda r: (keys.get(r[0]) is None, keys.get(r[0]) or "", r[0]))
    return out


def keyword_exact_head(limit: int | None, *, fused: bool) -> int | None:
    """How many of the keyword leg's first rows must be the exact BM25 ranking for a caller keeping at most
    ``limit`` rows (None: all of them): all without ``limit``; ``limit`` when the leg's order is the result's order
    (keyword-only, one query: the rows past ``limit`` are never shown); else (``fused``: hybrid, or several
    queries) ``max(limit, KEYWORD_EXACT_HEAD)``."""
    if limit is None:
        return None
    return max(limit, KEYWORD_EXACT_HEAD) if fused else limit


def _similarity(distance: float) -> float:
    """Cosine distance (in [0, 2]) → cosine similarity clamped to [0, 1]."""
    return max(0.0, min(1.0, 1.0 - distance))


def _ranked(row_id: int, score: float, evidence: list[_Evidence], use_vector: bool, weights: Weights,
            model: str) -> Ranked:
    similarity: float | None = None
    keyword: float | None = None
    best = 0.0
    for ev in evidence:
        sim = ev.similarity.get(row_id, 0.0) if use_vector else None
        kw = None
        if ev.keyword is not None:
            top = ev.keyword.max_score
            kw = min(1.0, ev.bm25.get(row_id, 0.0) / top) if top > 0 else 0.0
        best = max(best, relevance(sim, kw, weights, model))
        if sim is not None:
            similarity = max(similarity or 0.0, sim)
        if kw is not None:
            keyword = max(keyword or 0.0, kw)
    return Ranked(int(row_id), score, similarity, keyword, best)
