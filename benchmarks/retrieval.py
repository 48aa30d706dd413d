"""BEIR-format retrieval quality through Engram's real ingest and search code.

Reads ``corpus.jsonl``, ``queries.jsonl`` and ``qrels_test.tsv``; ingests every document as a ``<doc id>.txt`` file
(title, blank line, text) into one vector store; runs every judged test query vector-only, keyword-only and
hybrid; a document's rank is that of its best chunk. Prints nDCG@10 (linear gain, as pytrec_eval's ``ndcg_cut_10``
used by BEIR) and Recall@100, then one JSON line.

Embeddings go through the content-hash cache, so a second run embeds nothing. The embedding model is the
configured one (default: the offline all-MiniLM-L6-v2).

    ./dev python benchmarks/retrieval.py ../shared/data/beir/nfcorpus
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from common import SHARED_DATA, bench_settings

from chalicelib.embed import build_embedder
from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.engine import embed_with_cache
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search.service import RankingOptions, search
from chalicelib.store import vector_stores
from chalicelib.store.db import connect

MODES = {"vector": RankingOptions(text_weight=0.0), "keyword": RankingOptions(embedding_weight=0.0),
         "hybrid": RankingOptions()}
TENANT = "bench"
WARM_BATCH = 256  # chunk texts per embedding call while warming the cache


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=SHARED_DATA / "beir" / "nfcorpus")
    parser.add_argument("--store", default=None, help="vector store name (default beir-<folder name>)")
    parser.add_argument("--max-docs", type=int, default=None, help="only the first N documents (smoke runs)")
    parser.add_argument("--max-queries", type=int, default=None)
    args = parser.parse_args()
    settings = bench_settings()
    corpus, queries, qrels = load(args.folder)
    if args.max_docs:
        corpus = dict(list(corpus.items())[: args.max_docs])
    if args.max_queries:
        queries = dict(list(queries.items())[: args.max_queries])
    embedder = build_embedder(settings)
    store_name = args.store or f"beir-{args.folder.name}"
    conn = connect(settings)
    store = vector_stores.find_or_create(conn, TENANT, store_name, model=embedder.model, dim=embedder.dimension)
    strategy = resolve_chunking_strategy(None, embedder_max_tokens=embedder.max_input_tokens)
    print(f"corpus {len(corpus)} docs, {len(queries)} queries; embedder {embedder.model}; chunking "
          f"{strategy.max_chunk_size_tokens}/{strategy.chunk_overlap_tokens} tokens; store {store.id}", flush=True)

    # 1. Warm the embedding cache in large batches (the model is far faster batched), then ingest every document
    #    through the normal path, which finds every vector in the cache.
    started = time.perf_counter()
    texts = []
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
        result = ingest_bytes(conn, settings, TENANT, store, filename=f"{doc_id}.txt", data=text.encode("utf-8"), embedder=embedder)
        statuses[result.status] = statuses.get(result.status, 0) + 1
    ingest_s = time.perf_counter() - started
    store = vector_stores.get(conn, TENANT, store.id)
    print(f"chunks {len(texts)} ({computed} embedded now, {embed_s:.0f}s); ingest {ingest_s:.0f}s {statuses}; "
          f"store holds {store.chunk_count} chunks", flush=True)

    # 2. Evaluate each mode.
    results = {}
    for mode, ranking in MODES.items():
        started = time.perf_counter()
        ndcgs, recalls = [], []
        for qid, text in queries.items():
            hits = search(conn, TENANT, [store], text, embedder=embedder, settings=settings, limit=300,
                          ranking=ranking, max_results=1000)
            ranked: list[str] = []
            for hit in hits:
                doc = hit.filename.removesuffix(".txt")
                if doc not in ranked:
                    ranked.append(doc)
            ndcgs.append(ndcg_at(ranked, qrels[qid]))
            recalls.append(recall_at(ranked, qrels[qid]))
        elapsed = time.perf_counter() - started
        results[mode] = {"ndcg@10": round(sum(ndcgs) / len(ndcgs), 4), "recall@100": round(sum(recalls) / len(recalls), 4),
                         "ms_per_query": round(1000 * elapsed / len(queries), 1)}
        print(f"{mode:8s} nDCG@10 {results[mode]['ndcg@10']:.4f}  Recall@100 {results[mode]['recall@100']:.4f}  "
              f"({results[mode]['ms_per_query']} ms/query)", flush=True)
    print(json.dumps({"benchmark": "retrieval", "dataset": args.folder.name, "docs": len(corpus),
                      "queries": len(queries), "chunks": store.chunk_count, "model": embedder.model,
                      "chunking": [strategy.max_chunk_size_tokens, strategy.chunk_overlap_tokens], **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
