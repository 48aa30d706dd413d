"""The query-length curve of ``search.py`` (issue 23): the keyword leg and hybrid search, p50 / p95 ms, at several
query lengths (``--lengths``, e.g. 1, 2, 4, 8, 12, 16 words) over the big store, one **column** per search
implementation, timed interleaved (every query runs every length in every column in turn, the columns' order
alternating from query to query), so machine noise and cache state hit the columns alike.

A column is a name and two callables, ``keyword(text)`` and ``hybrid(text, vector)``, each returning the row ids
it found: :func:`pgvector_column` makes today's (Postgres: pgvector and BM25 over postings); :func:`backend_column`
another vector backend's (its own copy of the data: its row ids are mapped to the first column's). ``--baseline VERSION`` adds a column of the keyword top-k as migration ``VERSION``
left it (the newest definition of ``engram_chunks_bm25_topk`` among the migrations up to it, copied into the
session's temporary schema: the database is not changed) with every keyword row exact, as hybrid search ran
before issue 23 — a before/after in one run. Against the first column, each other column also reports the share
of queries whose top 10 is the same (keyword leg and hybrid, in the first round).

Queries: ``textgen.keyword_queries`` per length (distinct lexemes drawn by frequency from one source document; the
2- and 12-word sets are ``search.py``'s), each with a fresh query vector from the data set's distribution.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

import numpy as np
import psycopg

from common import percentile

from chalicelib.search import ranking
from chalicelib.search.corpus import CHUNKS, Corpus, Scope
from chalicelib.search.keyword import keyword_search
from chalicelib.search.ranking import Weights, keyword_exact_head, rank

LENGTHS = (1, 2, 4, 8, 12, 16)
BASELINE_FUNCTION = "engram_chunks_bm25_topk_baseline"


@dataclass(frozen=True)
class Column:
    """One search implementation: ``keyword(text)`` and ``hybrid(text, query vector)`` → row ids, best first."""

    name: str
    keyword: Callable[[str], list[int]]
    hybrid: Callable[[str, Any], list[int]]


@dataclass
class Curve:
    """Timings (ms) and top-10 rows per column, leg (``keyword`` / ``hybrid``), length: ``times[column][leg][n]``
    is a list of rounds, each a list of per-query ms; ``tops[column][leg][n]`` the first round's top 10s."""

    times: dict[str, dict[str, dict[int, list[list[float]]]]] = field(default_factory=dict)
    tops: dict[str, dict[str, dict[int, list[list[int]]]]] = field(default_factory=dict)


def pgvector_column(name: str, conn: psycopg.Connection, scope: Scope, *, settings: Any, indexed: int,
                    embedder: Any, depth: int, k: int, corpus: Corpus = CHUNKS, every_row_exact: bool = False
                    ) -> Column:
    """Postgres' column: the keyword leg as hybrid search runs it (``depth`` rows, the exact head
    ``ranking.keyword_exact_head(k, fused=True)``) and ``ranking.rank`` for ``k`` results with both legs, over
    ``corpus`` (its ``topk_function`` may be a baseline copy); ``every_row_exact``: every keyword row exact, as
    before issue 23. ``embedder`` is the benchmark's stub (its ``vector`` is set per query)."""
    head = None if every_row_exact else keyword_exact_head(k, fused=True)

    def keyword(text: str) -> list[int]:
        return [r for r, _ in keyword_search(conn, corpus, scope, text, depth, where=None, exact=head)]

    def hybrid(text: str, vector: Any) -> list[int]:
        embedder.vector = vector
        with _every_row_exact(every_row_exact):
            ranked = rank(conn, corpus, scope, [text], embedder=embedder, settings=settings, depth=depth, where=None,
                          weights=Weights(), indexed_rows=indexed, limit=k)
        return [r.id for r in ranked]

    return Column(name, keyword, hybrid)


def backend_column(name: str, conn: psycopg.Connection, scope: Scope, backend: Any, *, settings: Any, indexed: int,
                   embedder: Any, depth: int, k: int, same_row: Callable[[list[int]], list[int]]) -> Column:
    """A vector backend's column (``backend``: a :class:`chalicelib.search.backends.VectorBackend`, e.g. Qdrant's):
    its ``keyword_leg`` for ``depth`` rows and ``ranking.rank(..., backend=backend)`` for ``k`` results, over its own
    copy of the data; ``same_row`` maps its row ids to the first column's (the same chunk), so the columns' top 10s
    compare."""

    def keyword(text: str) -> list[int]:
        return same_row([r for r, _ in backend.keyword_leg(conn, CHUNKS, scope, text, depth, where=None).rows])

    def hybrid(text: str, vector: Any) -> list[int]:
        embedder.vector = vector
        ranked = rank(conn, CHUNKS, scope, [text], embedder=embedder, settings=settings, depth=depth, where=None,
                      weights=Weights(), indexed_rows=indexed, limit=k, backend=backend)
        return same_row([r.id for r in ranked])

    return Column(name, keyword, hybrid)


@contextmanager
def _every_row_exact(on: bool) -> Iterator[None]:
    """While ``on``: ``ranking.rank`` asks the keyword leg for every row exact (the ranking before issue 23)."""
    if not on:
        yield
        return
    saved = ranking.keyword_exact_head
    ranking.keyword_exact_head = lambda limit, *, fused: None
    try:
        yield
    finally:
        ranking.keyword_exact_head = saved


def baseline_corpus(conn: psycopg.Connection, version: str) -> Corpus:
    """The chunks corpus with the keyword top-k of migration ``version`` (e.g. ``0024``: the newest definition
    among the migrations whose name sorts up to ``version``), created as ``pg_temp.`` :data:`BASELINE_FUNCTION`
    on ``conn``.

    Raises:
        SystemExit: no migration up to ``version`` defines the function.
    """
    folder = resources.files("chalicelib.store") / "migrations"
    texts = [m.read_text("utf-8") for m in sorted(folder.iterdir(), key=lambda m: m.name)
             if m.name.endswith(".sql") and m.name[:len(version)] <= version]
    definitions = [t for t in texts if "FUNCTION engram_chunks_bm25_topk(" in t]
    if not definitions:
        raise SystemExit(f"length_curve: no migration up to {version} defines engram_chunks_bm25_topk")
    text = definitions[-1]
    start = text.rindex("CREATE", 0, text.index("FUNCTION engram_chunks_bm25_topk("))
    body = text[start:text.index("END $$;", start) + len("END $$;")]
    body = re.sub(r"CREATE (OR REPLACE )?FUNCTION engram_chunks_bm25_topk",
                  f"CREATE OR REPLACE FUNCTION pg_temp.{BASELINE_FUNCTION}", body, count=1)
    conn.execute(body)
    return replace(CHUNKS, topk_function=f"pg_temp.{BASELINE_FUNCTION}")


def measure(columns: Sequence[Column], texts: dict[int, list[str]], vectors: np.ndarray, rounds: int,
            warmup: int, k: int, log: Callable[[str], None]) -> Curve:
    """Time every column's two legs on every length's queries (``texts[n][i]`` with ``vectors[i]``; the last
    ``warmup`` vectors pair with untimed warm-up queries), interleaved (module docstring)."""
    curve = Curve()
    for c in columns:
        curve.times[c.name] = {leg: {n: [] for n in texts} for leg in ("keyword", "hybrid")}
        curve.tops[c.name] = {leg: {n: [] for n in texts} for leg in ("keyword", "hybrid")}
    n_timed = len(vectors) - warmup
    for i in range(warmup):
        for queries in texts.values():
            for c in columns:
                c.keyword(queries[n_timed + i])
                c.hybrid(queries[n_timed + i], vectors[n_timed + i])
    for r in range(rounds):
        for c in columns:
            for leg in ("keyword", "hybrid"):
                for n in texts:
                    curve.times[c.name][leg][n].append([])
        started = time.perf_counter()
        for i in range(n_timed):
            order = list(columns) if i % 2 == 0 else list(reversed(columns))
            for n, queries in texts.items():
                for c in order:
                    for leg in ("keyword", "hybrid"):
                        t0 = time.perf_counter()
                        got = c.keyword(queries[i]) if leg == "keyword" else c.hybrid(queries[i], vectors[i])
                        curve.times[c.name][leg][n][-1].append(1000 * (time.perf_counter() - t0))
                        if r == 0:
                            curve.tops[c.name][leg][n].append(got[:k])
        log(f"    length curve round {r + 1}/{rounds}: {time.perf_counter() - started:.1f}s")
    return curve


def summarise(curve: Curve) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """``{column: {length: {leg: {"p50_ms", "p95_ms"[, "same_top10"]}}}}``: medians over rounds of each round's
    p50 and p95; for columns after the first, the share of queries whose top 10 equals the first column's."""
    names = list(curve.times)
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name in names:
        out[name] = {}
        for leg, by_length in curve.times[name].items():
            for n, rounds in by_length.items():
                row = {"p50_ms": round(float(np.median([percentile(t, 50) for t in rounds])), 2),
                       "p95_ms": round(float(np.median([percentile(t, 95) for t in rounds])), 2)}
                if name != names[0]:
                    mine, first = curve.tops[name][leg][n], curve.tops[names[0]][leg][n]
                    row["same_top10"] = round(float(np.mean([a == b for a, b in zip(mine, first)])), 4)
                out[name].setdefault(str(n), {})[leg] = row
    return out


def print_table(summary: dict[str, dict[str, dict[str, dict[str, float]]]], log: Callable[[str], None]) -> None:
    """One row per length; per column: keyword leg and hybrid p50 / p95 ms; with two or more columns, the first
    column's hybrid p50 and p95 as a ratio to each other column's, and the share of the same top 10s."""
    names = list(summary)
    first = names[0]
    cell = "{:>30s}"
    log("  words | " + " | ".join(cell.format(name[:30]) for name in names)
        + "".join(f" | {first[:12]} ÷ {name[:12]}" for name in names[1:]))
    log("        | " + " | ".join(cell.format("kw p50 / p95, hybrid p50 / p95") for _ in names)
        + "".join(" | hybrid p50, p95; same top 10 kw, hybrid" for _ in names[1:]))
    for n in summary[first]:
        cells = []
        for name in names:
            kw, hy = summary[name][n]["keyword"], summary[name][n]["hybrid"]
            cells.append(cell.format(f"{kw['p50_ms']:.1f} / {kw['p95_ms']:.1f}, {hy['p50_ms']:.1f} / {hy['p95_ms']:.1f}"))
        ratios = ""
        for name in names[1:]:
            mine, other = summary[first][n]["hybrid"], summary[name][n]
            ratios += (f" | {mine['p50_ms'] / other['hybrid']['p50_ms']:.2f}×, "
                       f"{mine['p95_ms'] / other['hybrid']['p95_ms']:.2f}×; "
                       f"{100 * other['keyword']['same_top10']:.0f} %, {100 * other['hybrid']['same_top10']:.0f} %")
        log(f"  {n:>5s} | " + " | ".join(cells) + ratios)
