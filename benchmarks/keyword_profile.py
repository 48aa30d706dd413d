"""Where the keyword leg's time goes: the BM25 top-k function (migrations 0011, 0018, 0025) step by step, on a
``search.py`` database, for its 2- and 12-word queries.

The function (its newest definition among the migrations) is copied into the session's temporary schema with a
notice after each step (θ₀ from the rarest lists and the heads of the others; the MaxScore read of the lists not
skipped; the completion of the chunks in reach from the skipped ones; the exact scores), so the database is not
changed; each step's milliseconds and counts (lists, lists skipped and their postings, lists completed and their
postings, chunks in reach after the read and after completing, chunks scored exactly) are printed per query, then
medians. The embedded build has no ``auto_explain``, hence the notices; ``--explain`` also prints EXPLAIN (ANALYZE,
BUFFERS) of a statement reading every list whole for the first query. Ends with one JSON line (the medians).

    cd benchmarks && python keyword_profile.py --size 100000 --queries 20
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from importlib import resources

import numpy as np

import search as bench
from common import bench_settings
from textgen import load_source

from chalicelib.search.corpus import CHUNKS, store_scope
from chalicelib.search.keyword import query_terms

STEPS = {
    "    -- a. θ₀ from the": "start",
    "    -- b. Skip what cannot reach θ₀": "seeded",
    "    -- c. Read the other lists whole": "skipped",
    "    -- Complete the chunks in reach of θ": "read",
    "    -- d. Exact scores, best upper bound first": "completed",
    "    -- Fewer than k rows while chunks were never": "scored",
}
# The counters each notice reports (variables of the function).
COUNTERS = ("n_lists, (SELECT count(*) FROM unnest(l_skip) AS x WHERE x), skipped_df, n_cand, n_live, "
            "coalesce(array_length(scored, 1), 0), theta, completed, completed_df")


def instrumented() -> str:
    """The function's text as ``pg_temp.engram_topk_profile`` with a notice (step, clock, counters) per step."""
    folder = resources.files("chalicelib.store") / "migrations"
    definitions = [m.read_text("utf-8") for m in sorted(folder.iterdir(), key=lambda m: m.name)
                   if m.name.endswith(".sql") and "FUNCTION engram_chunks_bm25_topk(" in m.read_text("utf-8")]
    migration = definitions[-1]  # the newest definition is the one in force
    start = migration.index("FUNCTION engram_chunks_bm25_topk(")
    start = migration.rindex("CREATE", 0, start)
    text = migration[start:migration.index("END $$;", start) + len("END $$;")]
    text = re.sub(r"CREATE (OR REPLACE )?FUNCTION engram_chunks_bm25_topk", "CREATE FUNCTION pg_temp.engram_topk_profile",
                  text, count=1)
    for marker, step in STEPS.items():
        if marker not in text:
            raise SystemExit(f"keyword_profile: step marker {marker.strip()!r} not found in the function")
        text = text.replace(marker, _notice(step) + marker, 1)
    end = "    RETURN QUERY SELECT unnest(top_ids), unnest(top_scores);"
    return text.replace(end, _notice("end") + end)


def _notice(step: str) -> str:
    return (f"    RAISE NOTICE 'step {step} % lists % skipped % skipped_df % cand % live % scored % theta % "
            f"completed % completed_df %', extract(epoch FROM clock_timestamp()), {COUNTERS};\n")


_NOTICE = re.compile(r"step (\w+) (\S+) lists (\S+) skipped (\S+) skipped_df (\S+) cand (\S+) live (\S+) "
                     r"scored (\S+) theta (\S+) completed (\S+) completed_df (\S+)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--depth", type=int, default=bench.DEPTH)
    parser.add_argument("--exact", type=int, default=None, help="exact head (default: all of --depth)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    settings = bench_settings()
    source = load_source(args.seed)
    url = bench.database_for(settings, f"engram_bench_search_{args.size}")
    conn = bench.rls_connection(url, settings)
    stores = {s.name: s for s in bench.vector_stores.list_all(conn, bench.TENANT)}
    big = stores.get(f"search-{args.size}-big")
    if big is None:
        raise SystemExit(f"keyword_profile: no search.py data set of {args.size:,} rows; run search.py first")
    scope = store_scope(bench.TENANT, [big.id], big.chunk_count)
    conn.execute(instrumented())
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    q = bench.make_queries(conn, source, args.seed, np.zeros((args.queries, bench.DIM), dtype=np.float32))
    print(f"{args.size:,} chunks (big store {big.chunk_count:,}), depth {args.depth}, exact {args.exact or 'all'}")
    medians: dict[str, dict[str, float]] = {}
    for words in ("2w", "12w"):
        rows = []
        for text in q.texts[words][:args.queries]:
            terms = query_terms(conn, CHUNKS, scope, text)
            if terms is None or not terms.lexemes:
                continue
            notices.clear()
            started = time.perf_counter()
            conn.execute("SELECT * FROM pg_temp.engram_topk_profile(%s, %s, %s, %s, %s, %s)",
                         ([big.id], terms.lexemes, terms.idfs, terms.avgdl, args.depth, args.exact)).fetchall()
            total = 1000 * (time.perf_counter() - started)
            marks = [m.groups() for m in map(_NOTICE.match, notices) if m]
            clock = {m[0]: float(m[1]) for m in marks}
            last = dict(zip(("lists", "skipped", "skipped_df", "cand", "live", "scored", "theta", "completed",
                             "completed_df"), marks[-1][2:]))
            last.pop("theta")

            row = {"total": total, "seed": 1000 * (clock["seeded"] - clock["start"]),
                   "read": 1000 * (clock["read"] - clock["seeded"]),
                   "complete": 1000 * (clock["completed"] - clock["read"]),
                   "score": 1000 * (clock["end"] - clock["completed"]),
                   **{k: float(v) if v not in ("", "<NULL>") else 0.0 for k, v in last.items()}}
            rows.append(row)
            print(f"  {words:3s} {total:7.1f} ms: θ₀ {row['seed']:6.1f}, read {row['read']:6.1f}, complete "
                  f"{row['complete']:6.1f}, exact {row['score']:6.1f} ms | lists {row['lists']:.0f} (skipped "
                  f"{row['skipped']:.0f}: {row['skipped_df']:,.0f} postings; completed from {row['completed']:.0f}: "
                  f"{row['completed_df']:,.0f}), in reach after the read {row['cand']:,.0f}, after completing "
                  f"{row['live']:,.0f}, scored {row['scored']:,.0f} — {text[:50]}")
        if rows:
            medians[words] = {k: round(statistics.median(r[k] for r in rows), 2) for k in rows[0]}
            print(f"  {words} medians: " + ", ".join(f"{k} {v:,.1f}" for k, v in medians[words].items()))
    if args.explain:
        text = q.texts["12w"][0]
        terms = query_terms(conn, CHUNKS, scope, text)
        if terms is None:
            raise SystemExit(f"keyword_profile: the first 12-word query has no lexemes to explain: {text!r}")
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) SELECT p.chunk_id, sum(l.w * p.impact), sum(l.w * p.impact) "
            "FROM unnest(%s::text[], %s::float8[]) AS l(lexeme, w) CROSS JOIN LATERAL ("
            "SELECT cp.chunk_id, cp.impact FROM chunk_postings cp JOIN vector_stores s ON s.partition_key = "
            "cp.partition_key WHERE s.id = %s AND cp.lexeme = l.lexeme) AS p GROUP BY p.chunk_id",
            (terms.lexemes, terms.idfs, big.id)).fetchall()
        print("\nEXPLAIN (ANALYZE, BUFFERS) of the read step (every list read whole), first 12-word query:")
        print("\n".join("  " + r[0] for r in plan))
    conn.close()
    print(json.dumps({"benchmark": "keyword_profile", "size": args.size, "depth": args.depth, "exact": args.exact,
                      "queries": args.queries, "medians_ms_and_counts": medians}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
