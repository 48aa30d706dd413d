"""Probes ``search.py`` runs beside its timings at scale (issue 33 §1): the same hybrid query sent straight to the
embedded Qdrant engine, where a hybrid search's time goes, and how much memory each backend holds.

- :func:`engine_hybrid` — what Engram adds on top of the engine: the query Engram's Qdrant hybrid search sends as
  two legs (a dense and a sparse search of ``depth`` points each, the same filter), sent instead as one engine
  query — both as prefetches, fused by the engine's reciprocal rank fusion (k = 60), the top ``k`` returned. No
  Postgres: its sparse vector (the query's lexemes weighted by idf over the store's statistics) is computed
  beforehand, as the dense vector is.
- :class:`Breakdown` — the hybrid search's parts timed inside one call (the backend's vector leg, its keyword leg
  and, within that, the query's terms read from Postgres, the candidates' exact BM25 and cosine read again, the
  tie-breaking key), by wrapping those functions for a pass of its own (the main timings run unwrapped).
- :func:`postgres_memory` / :func:`process_memory` — resident memory: the Postgres server's processes'
  proportional set size (shared buffers counted once across them), and this process's (the embedded engine runs
  in it: its segments' file pages mapped, and its heap).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chalicelib import deps
from chalicelib.qdrant import DENSE, SPARSE

RRF_K = 60  # chalicelib.search.fusion.RRF_K: the same fusion Engram's ranking starts from


def engine_hybrid(settings: Any, collection: str, dense: Sequence[float], sparse: dict[str, list[Any]],
                  flt: dict[str, Any], depth: int, k: int, hnsw_ef: int) -> list[int]:
    """One hybrid query straight to the embedded engine (module docstring): the ``k`` best point ids.

    Raises:
        RuntimeError: the settings name a Qdrant server (the probe calls the embedded engine only).
    """
    import qdrant_edge as qe

    from chalicelib.qdrant.edge import _filter  # the transport's own REST → Edge filter translation

    if settings.qdrant_url:
        raise RuntimeError("engine_hybrid probes the embedded engine only")
    transport = deps.qdrant(settings)
    shard = transport._existing(collection)  # type: ignore[attr-defined]
    edge_filter = _filter(flt)
    request = qe.QueryRequest(
        limit=k, query=qe.Fusion.Rrf(k=RRF_K),  # type: ignore[arg-type]  # the stub lists Fusion, not its Rrf
        with_payload=False, with_vector=False,
        prefetches=[qe.Prefetch(limit=depth, query=qe.Query.Nearest([float(x) for x in dense], using=DENSE),
                                filter=edge_filter, params=qe.SearchParams(hnsw_ef=hnsw_ef)),
                    qe.Prefetch(limit=depth, query=qe.Query.Nearest(
                        qe.SparseVector(indices=list(sparse["indices"]), values=list(sparse["values"])),
                        using=SPARSE), filter=edge_filter)])
    return [int(p.id) for p in shard.query(request)]


class Breakdown:
    """Milliseconds spent per part of each wrapped call: ``parts[name]`` → one total per hybrid search (the
    search's own ``total`` beside them)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[float]] = {}
        self._current: dict[str, float] = {}

    @contextmanager
    def search(self) -> Iterator[None]:
        """Time one hybrid search (its parts are the wrapped calls made inside it)."""
        self._current = {}
        started = time.perf_counter()
        yield
        self._current["total"] = 1000 * (time.perf_counter() - started)
        for name, ms in self._current.items():
            self.parts.setdefault(name, []).append(ms)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, timed under ``name`` while a :meth:`search` is open."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._current[name] = self._current.get(name, 0.0) + 1000 * (time.perf_counter() - started)
        return timed

    @contextmanager
    def installed(self, adapter: Any) -> Iterator[None]:
        """Wrap the adapter's legs and the ranking's re-reads (module docstring) until the block ends."""
        from chalicelib.search import keyword, ranking
        from chalicelib.search.backends import qdrant as qdrant_backend

        patches: list[tuple[Any, str, Any]] = [
            (adapter, "vector_leg", adapter.vector_leg), (adapter, "keyword_leg", adapter.keyword_leg),
            (adapter, "distances", adapter.distances),
            (ranking, "keyword_scores", ranking.keyword_scores), (ranking, "stable_order", ranking.stable_order),
            (keyword, "query_terms", keyword.query_terms), (qdrant_backend, "query_terms", qdrant_backend.query_terms)]
        names = {"vector_leg": "vector leg", "keyword_leg": "keyword leg", "distances": "cosine re-read",
                 "keyword_scores": "BM25 re-read", "stable_order": "tie keys", "query_terms": "query terms (in kw)"}
        try:
            for owner, attr, fn in patches:
                setattr(owner, attr, self.wrap(names[attr], fn))
            yield
        finally:
            for owner, attr, fn in patches:
                if owner is adapter:
                    vars(owner).pop(attr, None)  # the class's method shows through again
                else:
                    setattr(owner, attr, fn)

    def medians(self) -> dict[str, float]:
        """Median ms per part over the searches (a part a search did not call counts 0)."""
        import numpy as np

        n = len(self.parts.get("total", []))
        return {name: round(float(np.median(values + [0.0] * (n - len(values)))), 2)
                for name, values in self.parts.items()}


def _pss_kb(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


def postgres_memory(url: str) -> dict[str, int | None]:
    """The local Postgres server's resident memory: ``{"pss_bytes", "processes"}`` summed over the postmaster and
    its children (Linux, a server on this machine; None when unreadable)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        data_dir = conn.execute("SHOW data_directory").fetchone()[0]  # type: ignore[index]
    try:
        postmaster = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return {"pss_bytes": None, "processes": None}
    total, count = 0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if int(entry.name) == postmaster or ppid == postmaster:
            pss = _pss_kb(int(entry.name))
            if pss is not None:
                total, count = total + pss, count + 1
    return {"pss_bytes": total * 1024, "processes": count}


def process_memory(shard_folder: Path | None) -> dict[str, int | None]:
    """This process's resident memory: ``{"rss_anon_bytes", "rss_file_bytes", "shard_mapped_bytes"}`` — the last,
    pages of files under ``shard_folder`` (the embedded engine's segments) mapped and resident."""
    out: dict[str, int | None] = {"rss_anon_bytes": None, "rss_file_bytes": None, "shard_mapped_bytes": None}
    try:
        status = Path("/proc/self/status").read_text()
        for line in status.splitlines():
            if line.startswith("RssAnon:"):
                out["rss_anon_bytes"] = int(line.split()[1]) * 1024
            elif line.startswith("RssFile:"):
                out["rss_file_bytes"] = int(line.split()[1]) * 1024
        if shard_folder is not None:
            prefix, mapped, current = str(shard_folder), 0, False
            for line in Path("/proc/self/smaps").read_text().splitlines():
                head = line.split(maxsplit=5)
                if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # a mapping's header line
                    current = len(head) == 6 and head[5].startswith(prefix)
                elif current and line.startswith("Rss:"):
                    mapped += int(line.split()[1]) * 1024
            out["shard_mapped_bytes"] = mapped
    except OSError:
        pass
    return out
