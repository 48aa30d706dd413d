"""BEIR-format retrieval quality and score semantics through Engram's real ingest and search code.

Reads ``corpus.jsonl``, ``queries.jsonl`` and ``qrels_test.tsv``; ingests every document as a ``<doc id>.txt`` file
(title, blank line, text) into one vector store; runs every judged test query vector-only, keyword-only and
hybrid; a document's rank is that of its best chunk. Prints nDCG@10 (linear gain, as pytrec_eval's ``ndcg_cut_10``
used by BEIR) and Recall@100 per mode.

Scores (README, "Scores"): per mode it also runs every test query with ``score_threshold`` 0.5 (nDCG@10 with the
threshold ÷ without it: the share of quality the threshold keeps) and :data:`NONSENSE_QUERIES` nonsense queries
(random dictionary words, ``benchmarks/nonsense.py``, seed :data:`TEST_SEED`) with threshold 0.5 and the API's
default ``max_num_results`` (the share that returns nothing), then a table of both at other thresholds, computed by
filtering the unthresholded results. One JSON line ends the output.

``--backend qdrant`` keeps the store's vectors and keyword index in Qdrant (``ENGRAM_QDRANT_URL``, else the embedded
engine under the data folder; its own store, the same embedding cache), so the two backends' figures compare.

``--keyword-exact-head N`` keeps only the first N rows of hybrid search's keyword leg exact whatever the number
of results asked for (a stress test of ``search.ranking.KEYWORD_EXACT_HEAD``: for the 300 results asked for here,
the head is every row, so the plain run ranks as with an exhaustive keyword leg; with ``N`` = 20, the keyword leg's
rows past 20 of its 600 are the top-k's best guesses, as for a client asking for up to 20 results).

``--fit`` instead fits the relevance calibration (``chalicelib/search/relevance.py``) for the configured embedder on
1,000 nonsense queries of another seed (``FIT_SEED``) and prints the constants; no real query is used.

Embeddings go through the content-hash cache, so a second run embeds nothing. The embedding model is the
configured one (default: the offline all-MiniLM-L6-v2); ``--embedder hashing`` uses the hashing test embedder (its
own store), which is how that embedder's calibration entry was fitted.

    ./dev python benchmarks/retrieval.py ../shared/data/beir/nfcorpus
    ./dev python benchmarks/retrieval.py ../shared/data/beir/nfcorpus --fit
    ./dev python benchmarks/retrieval.py ../shared/data/beir/nfcorpus --backend qdrant
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import SHARED_DATA, bench_settings, percentile
from nonsense import default_vocab, dictionary, nonsense_queries, split_dictionary, without_stop_words

from chalicelib import deps
from chalicelib.config import VECTOR_BACKENDS
from chalicelib.embed import build_embedder
from chalicelib.embed.base import Embedder
from chalicelib.embed.hashing import HashingEmbedder
from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.engine import embed_with_cache
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.qdrant import collection_name
from chalicelib.search import ranking as ranking_module
from chalicelib.search import relevance
from chalicelib.search.corpus import CHUNKS, store_scope
from chalicelib.search.ranking import rank
from chalicelib.search.relevance import FIT_QUANTILE, FIT_SEED, MEDIAN_RELEVANCE, Weights
from chalicelib.search.service import MIN_CANDIDATES, RankingOptions, search
from chalicelib.store import vector_stores
from chalicelib.store.db import connect
from chalicelib.store.vector_stores import VectorStore

MODES = {"vector": RankingOptions(text_weight=0.0), "keyword": RankingOptions(embedding_weight=0.0),
         "hybrid": RankingOptions()}
TENANT = "bench"
WARM_BATCH = 256  # chunk texts per embedding call while warming the cache
THRESHOLD = 0.5  # the threshold the acceptance figures use
TABLE_THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
TEST_SEED = 1502  # nonsense queries of the report (the fit uses relevance.FIT_SEED)
NONSENSE_QUERIES = 500
FIT_QUERIES = 1000
DEPTH_LIMIT = 300  # results per real query (nDCG@10 and Recall@100 need the top 100 documents)


@dataclass
class Bench:
    """What every step needs: a connection, settings, the embedder, the store and the data."""

    conn: Any
    settings: Any
    embedder: Embedder
    store: VectorStore
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load(folder: Path):
    corpus = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            corpus[doc["_id"]] = (doc.get("title") or "").strip() + "\n\n" + (doc.get("text") or "").strip()
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels_test.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, rel = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(rel)
    return corpus, {q: queries[q] for q in qrels if q in queries}, qrels


def ndcg_at(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], rels: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def prepare(args: argparse.Namespace) -> Bench:
    """Load the data set and make sure the store holds it (embedding through the cache, then the normal ingest)."""
    settings = dataclasses.replace(bench_settings(), vector_backend=args.backend)
    corpus, queries, qrels = load(args.folder)
    if args.max_docs:
        corpus = dict(list(corpus.items())[: args.max_docs])
    if args.max_queries:
        queries = dict(list(queries.items())[: args.max_queries])
    embedder: Embedder = HashingEmbedder() if args.embedder == "hashing" else build_embedder(settings)
    suffix = ("-hashing" if args.embedder == "hashing" else "") + ("-qdrant" if args.backend == "qdrant" else "")
    store_name = args.store or f"beir-{args.folder.name}{suffix}"
    conn = connect(settings)
    store = vector_stores.find_or_create(conn, TENANT, store_name, model=embedder.model, dim=embedder.dimension,
                                         backend=args.backend)
    strategy = resolve_chunking_strategy(None, embedder_max_tokens=embedder.max_input_tokens)
    print(f"corpus {len(corpus)} docs, {len(queries)} queries; embedder {embedder.model}; chunking "
          f"{strategy.max_chunk_size_tokens}/{strategy.chunk_overlap_tokens} tokens; store {store.id}", flush=True)

    # Warm the embedding cache in large batches (the model is far faster batched), then ingest every document
    # through the normal path, which finds every vector in the cache (unchanged files are skipped).
    started = time.perf_counter()
    texts: list[str] = []
    for text in corpus.values():
        texts.extend(c.text for c in chunk_document(ParsedDocument(text), strategy, embedder.tokenizer))
    computed = 0
    for i in range(0, len(texts), WARM_BATCH):
        _, n = embed_with_cache(conn, TENANT, embedder, texts[i:i + WARM_BATCH])
        computed += n
        if n:
            print(f"  embedded {min(i + WARM_BATCH, len(texts))}/{len(texts)} chunks "
                  f"({time.perf_counter() - started:.0f}s)", flush=True)
    embed_s = time.perf_counter() - started
    started = time.perf_counter()
    statuses: dict[str, int] = {}
    for doc_id, text in corpus.items():
        result = ingest_bytes(conn, settings, TENANT, store, filename=f"{doc_id}.txt", data=text.encode("utf-8"),
                              embedder=embedder)
        statuses[result.status] = statuses.get(result.status, 0) + 1
    ingest_s = time.perf_counter() - started
    if store.backend == "qdrant":  # the embedded engine builds its indexes only when asked
        started = time.perf_counter()
        deps.qdrant(settings).optimize(collection_name(settings, embedder.dimension))
        print(f"Qdrant indexes built in {time.perf_counter() - started:.0f}s", flush=True)
    store = vector_stores.get(conn, TENANT, store.id)
    print(f"chunks {len(texts)} ({computed} embedded now, {embed_s:.0f}s); ingest {ingest_s:.0f}s {statuses}; "
          f"store holds {store.chunk_count} chunks", flush=True)
    return Bench(conn, settings, embedder, store, corpus, queries, qrels)


def nonsense(bench: Bench, count: int, seed: int) -> list[str]:
    """``count`` nonsense queries for the bench's corpus (``benchmarks/nonsense.py``)."""
    words = without_stop_words(bench.conn, dictionary(default_vocab()))
    inside, outside = split_dictionary(words, bench.corpus.values())
    return nonsense_queries(inside, outside, count, seed)


def documents(hits) -> list[tuple[str, float]]:
    """``(doc id, score)`` per document, at its best chunk's position."""
    seen: dict[str, float] = {}
    for hit in hits:
        seen.setdefault(hit.filename.removesuffix(".txt"), hit.score)
    return list(seen.items())


def evaluate(bench: Bench, mode: str, ranking: RankingOptions, junk: list[str]) -> dict[str, Any]:
    """nDCG@10 / Recall@100 of ``mode``, and what ``score_threshold`` does to real and nonsense queries."""
    def run(text: str, options: RankingOptions, limit: int):
        return search(bench.conn, TENANT, [bench.store], text, embedder=bench.embedder, settings=bench.settings,
                      limit=limit, ranking=options, max_results=1000)

    thresholded = RankingOptions(ranking.ranker, THRESHOLD, ranking.embedding_weight, ranking.text_weight)
    started = time.perf_counter()
    real = {qid: documents(run(text, ranking, DEPTH_LIMIT)) for qid, text in bench.queries.items()}
    ms_per_query = 1000 * (time.perf_counter() - started) / len(bench.queries)
    real_cut = {qid: documents(run(text, thresholded, DEPTH_LIMIT)) for qid, text in bench.queries.items()}
    junk_full = [documents(run(text, ranking, DEPTH_LIMIT)) for text in junk]
    junk_cut = [run(text, thresholded, 10) for text in junk]

    def ndcg(lists: dict[str, list[tuple[str, float]]], threshold: float = 0.0) -> float:
        return sum(ndcg_at([d for d, s in lists[q] if s >= threshold], bench.qrels[q]) for q in lists) / len(lists)

    base = ndcg(real)
    table = {}
    for t in TABLE_THRESHOLDS:  # by filtering the unthresholded top DEPTH_LIMIT
        table[str(t)] = {"nonsense_empty": round(sum(1 for j in junk_full if not any(s >= t for _, s in j))
                                                 / len(junk), 4),
                         "ndcg_retention": round(ndcg(real, t) / base, 4) if base else None}
    scores = [s for lists in real.values() for _, s in lists[:10]]
    top_junk = [j[0][1] for j in junk_full if j]
    return {"ndcg@10": round(base, 4),
            "recall@100": round(sum(recall_at([d for d, _ in real[q]], bench.qrels[q]) for q in real) / len(real), 4),
            "ms_per_query": round(ms_per_query, 1),
            "ndcg@10_at_0.5": round(ndcg(real_cut), 4),
            "ndcg_retention_at_0.5": round(ndcg(real_cut) / base, 4) if base else None,
            "nonsense_empty_at_0.5": round(sum(1 for hits in junk_cut if not hits) / len(junk), 4),
            "real_top10_score_p50": round(percentile(scores, 50), 3),
            "nonsense_top_score_p50": round(percentile(top_junk, 50), 3),
            "nonsense_top_score_p95": round(percentile(top_junk, 95), 3),
            "by_threshold": table}


def fit(bench: Bench) -> dict[str, Any]:
    """Fit the relevance calibration (``chalicelib/search/relevance.py``) on nonsense queries of ``FIT_SEED``."""
    scope = store_scope(TENANT, [bench.store.id], bench.store.chunk_count)
    best_cos, best_kw, candidates = [], [], []
    started = time.perf_counter()
    for text in nonsense(bench, FIT_QUERIES, FIT_SEED):
        ranked = rank(bench.conn, CHUNKS, scope, [text], embedder=bench.embedder, settings=bench.settings,
                      depth=MIN_CANDIDATES, where=None, indexed_rows=bench.store.chunk_count, weights=Weights())
        evidence = [(r.similarity or 0.0, r.keyword or 0.0) for r in ranked]
        best_cos.append(max((c for c, _ in evidence), default=0.0))
        best_kw.append(max((k for _, k in evidence), default=0.0))
        candidates.append(evidence)
    spread = math.log((1 - MEDIAN_RELEVANCE) / MEDIAN_RELEVANCE)
    cosine = relevance.LegCalibration(nearest_rank(best_cos, FIT_QUANTILE),
                                      (nearest_rank(best_cos, FIT_QUANTILE) - nearest_rank(best_cos, 0.5)) / spread)
    keyword = relevance.LegCalibration(nearest_rank(best_kw, FIT_QUANTILE),
                                       (nearest_rank(best_kw, FIT_QUANTILE) - nearest_rank(best_kw, 0.5)) / spread)
    pooled = [max(((cosine.logit(c) + keyword.logit(k)) / 2 for c, k in evidence), default=-math.inf)
              for evidence in candidates]
    beta = -nearest_rank(pooled, FIT_QUANTILE)
    # β for the keyword constants in force (relevance.KEYWORD, fitted with the bundled model): what another
    # embedder's entry needs, as the keyword constants are shared.
    shared = [max(((cosine.logit(c) + relevance.KEYWORD.logit(k)) / 2 for c, k in evidence), default=-math.inf)
              for evidence in candidates]
    return {"benchmark": "relevance-fit", "model": bench.embedder.model, "queries": FIT_QUERIES, "seed": FIT_SEED,
            "quantile": FIT_QUANTILE, "seconds": round(time.perf_counter() - started),
            "cosine": {"midpoint": round(cosine.midpoint, 4), "scale": round(cosine.scale, 4),
                       "median": round(nearest_rank(best_cos, 0.5), 4)},
            "keyword": {"midpoint": round(keyword.midpoint, 4), "scale": round(keyword.scale, 4),
                        "median": round(nearest_rank(best_kw, 0.5), 4)},
            "beta": round(beta, 4), "beta_with_shared_keyword": round(-nearest_rank(shared, FIT_QUANTILE), 4)}


def nearest_rank(values: list[float], q: float) -> float:
    """The ``q``-quantile (0–1) by the nearest-rank method: the ⌈q·n⌉-th smallest value."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=SHARED_DATA / "beir" / "nfcorpus")
    parser.add_argument("--store", default=None, help="vector store name (default beir-<folder name>)")
    parser.add_argument("--embedder", choices=("configured", "hashing"), default="configured")
    parser.add_argument("--backend", choices=VECTOR_BACKENDS, default="pgvector",
                        help="where the store's vectors and keyword index live (its own store per backend)")
    parser.add_argument("--fit", action="store_true", help="fit the relevance calibration and print it")
    parser.add_argument("--max-docs", type=int, default=None, help="only the first N documents (smoke runs)")
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--keyword-exact-head", type=int, default=None, metavar="N",
                        help="hybrid search's keyword leg: only the first N rows exact, whatever the limit")
    parser.add_argument("--nonsense", type=int, default=NONSENSE_QUERIES, help="nonsense queries in the report")
    args = parser.parse_args()
    if args.keyword_exact_head is not None:
        head = args.keyword_exact_head
        ranking_module.keyword_exact_head = (
            lambda limit, *, fused: limit if limit is None or not fused else head)
    bench = prepare(args)
    if args.fit:
        print(json.dumps(fit(bench)))
        return 0
    junk = nonsense(bench, args.nonsense, TEST_SEED)
    results = {}
    for mode, ranking in MODES.items():
        r = results[mode] = evaluate(bench, mode, ranking, junk)
        print(f"{mode:8s} nDCG@10 {r['ndcg@10']:.4f}  Recall@100 {r['recall@100']:.4f}  ({r['ms_per_query']} ms/query)"
              f"  | threshold 0.5: nDCG@10 {r['ndcg@10_at_0.5']:.4f} (kept {r['ndcg_retention_at_0.5']:.1%}), "
              f"nonsense empty {r['nonsense_empty_at_0.5']:.1%}  | top score p50: real top-10 "
              f"{r['real_top10_score_p50']}, nonsense {r['nonsense_top_score_p50']} (p95 "
              f"{r['nonsense_top_score_p95']})", flush=True)
    print("threshold  " + "  ".join(f"{m}: empty / kept" for m in MODES))
    for t in TABLE_THRESHOLDS:
        cells = [f"{results[m]['by_threshold'][str(t)]['nonsense_empty']:.1%} / "
                 f"{results[m]['by_threshold'][str(t)]['ndcg_retention']:.1%}" for m in MODES]
        print(f"{t:9.1f}  " + "  ".join(f"{c:>20s}" for c in cells))
    print(json.dumps({"benchmark": "retrieval", "dataset": args.folder.name, "backend": args.backend,
                      "keyword_exact_head": args.keyword_exact_head,
                      "docs": len(bench.corpus),
                      "queries": len(bench.queries), "nonsense_queries": len(junk), "nonsense_seed": TEST_SEED,
                      "chunks": bench.store.chunk_count, "model": bench.embedder.model, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
