"""How long an attach request holds its client: a 100-file batch (≈ 150 KB of NFCorpus documents, under the 1 MiB
inline limit) attached through the official SDK with the configured embedder (default: the local model), for each
inline time budget given (``ENGRAM_INLINE_BUDGET_S``; a huge one reproduces the old bytes-only rule). Target: the
request answers within a few seconds whatever the embedder's speed; the files then complete by polling.

Printed per budget: seconds the ``file_batches.create`` request took, files completed inside it, seconds until the
whole batch completed (``file_batches.poll``), and a one-file attach's request time (it should stay inline,
``completed``). Each round uses a new tenant, so the embedding cache does not carry vectors between rounds; the
embedder's measured rate (``chalicelib.embed.rate``) does carry over, as it would in a running server.

The server is ``engram_cli.server.start`` in this process (Chalice's local server, one background worker: what
``engram serve`` does without the queue), on ``DATABASE_URL`` or the embedded Postgres under ``ENGRAM_DATA_DIR``.

    ./dev python benchmarks/attach.py                       # budgets 2.5 (the default) and unbounded
    ./dev python benchmarks/attach.py --budgets 1,2.5 --files 100 --json
"""

from __future__ import annotations

import os

os.environ.setdefault("ENGRAM_METRICS", "off")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

import argparse
import json
import logging
import time
import uuid
from typing import Any

from common import SHARED_DATA, bench_settings


def documents(count: int) -> list[tuple[str, bytes]]:
    """``count`` NFCorpus documents as ``(filename, bytes)`` (title + text); synthetic sentences when the corpus is
    absent."""
    corpus = SHARED_DATA / "beir" / "nfcorpus" / "corpus.jsonl"
    docs: list[tuple[str, bytes]] = []
    if corpus.exists():
        with corpus.open() as lines:
            for line in lines:
                doc = json.loads(line)
                docs.append((f"{doc['_id']}.txt", f"{doc['title']}\n\n{doc['text']}".encode()))
                if len(docs) == count:
                    break
    while len(docs) < count:
        i = len(docs)
        docs.append((f"synthetic-{i}.txt", " ".join(f"Sentence {j} of document {i} about topic {i % 17}."
                                                    for j in range(20)).encode()))
    return docs


def round_(url: str, settings: Any, docs: list[tuple[str, bytes]]) -> dict[str, Any]:
    """One batch attach and one single-file attach for a new tenant; their timings."""
    import openai

    from chalicelib.store import api_keys
    from chalicelib.store.db import connect
    from chalicelib.store.vector_stores import ensure_tenant

    tenant = f"bench-attach-{uuid.uuid4().hex[:8]}"
    with connect(settings) as conn:
        ensure_tenant(conn, tenant)
        key = api_keys.create_key(conn, tenant)[1]
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=600)
    ids = [client.files.create(file=doc, purpose="assistants").id for doc in docs]
    store = client.vector_stores.create(name="attach-bench")
    started = time.monotonic()
    batch = client.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=ids)
    held = time.monotonic() - started
    done = client.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id, poll_interval_ms=200)
    total = time.monotonic() - started
    single = client.files.create(file=("single.txt", b"One more short document about vitamin D and bone health."),
                                 purpose="assistants")
    started = time.monotonic()
    row = client.vector_stores.files.create(vector_store_id=store.id, file_id=single.id)
    return {"files": len(ids), "bytes": sum(len(d[1]) for d in docs), "request_s": round(held, 2),
            "inline_completed": batch.file_counts.completed, "all_completed_s": round(total, 2),
            "completed": done.file_counts.completed, "failed": done.file_counts.failed,
            "single_request_s": round(time.monotonic() - started, 3), "single_status": row.status}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--budgets", default="2.5,1e9", help="comma-separated inline budgets, seconds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    from chalicelib.embed import build_embedder, rate
    from engram_cli import server

    docs = documents(args.files)
    embedder = build_embedder(bench_settings())  # one model for every round, as in a running server
    embedder.embed(["warm-up"])  # loaded before the first request, as `engram serve` does (engram_cli/server.py)
    report = []
    for budget in (float(b) for b in args.budgets.split(",")):
        settings = bench_settings(inline_budget_s=budget, poll_after_ms=200)
        running = server.start(settings, port=0, embedder=embedder, worker_threads=1)
        try:
            result = {"budget_s": budget, **round_(running.url, settings, docs)}
        finally:
            running.stop()
        result["measured_chunks_per_s"] = round(rate.chunks_per_s(embedder) or 0.0, 1)
        report.append(result)
        if not args.json:
            print(f"budget {budget:g} s: {result['files']} files ({result['bytes'] / 1024:.0f} KB) — request "
                  f"{result['request_s']:.2f} s, {result['inline_completed']} completed inline, all completed after "
                  f"{result['all_completed_s']:.1f} s ({result['failed']} failed); one-file attach "
                  f"{result['single_request_s']:.3f} s → {result['single_status']}; measured "
                  f"{result['measured_chunks_per_s']} chunks/s", flush=True)
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
