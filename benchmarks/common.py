"""Helpers shared by the benchmark scripts: settings for a benchmark run and percentile maths."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from chalicelib.config import Settings
    from chalicelib.wire import StaticChunkingStrategy

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def bench_settings(**overrides: Any) -> Settings:
    """Settings from the environment with ``overrides`` applied (``chalicelib.config.Settings`` fields)."""
    from chalicelib.config import Settings

    return dataclasses.replace(Settings.from_env(), **overrides)


def generated_chunking() -> StaticChunkingStrategy:
    """The chunking strategy a benchmark's file records when the benchmark writes its chunks to the store itself
    (generated, or chunked before the timed store stage): OpenAI's default static strategy (800 / 400 tokens), in
    the wire shape every file row holds."""
    from chalicelib.ingest.chunk import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS, ChunkingStrategy

    return ChunkingStrategy(DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS).to_openai()


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of ``values`` by linear interpolation (numpy's default method)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class ServerMeter:
    """What the Postgres server spent between two :meth:`read` calls: CPU seconds of the postmaster and all its
    processes (from ``/proc``: live processes' own times plus the reaped children's; Linux and a local server only,
    else None) and WAL activity (``pg_stat_wal``, Postgres ≥ 14: ``wal_sync`` flushes to disk, ``wal_records``,
    ``wal_fpi`` full-page images, ``wal_bytes``). Counters are cluster-wide: other databases' work counts too."""

    _WAL = "SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_write, wal_sync FROM pg_stat_wal"

    def __init__(self, url: str) -> None:
        import psycopg

        from chalicelib.store.db import one

        self._url = url
        with psycopg.connect(url, autocommit=True) as conn:
            data_dir = one(conn.execute("SHOW data_directory"))[0]
        self._postmaster: int | None
        try:
            self._postmaster = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            self._postmaster = None

    def read(self) -> dict[str, float | None]:
        """``{"cpu_s", "wal_records", "wal_fpi", "wal_bytes", "wal_write", "wal_sync"}`` totals so far."""
        import psycopg

        from chalicelib.store.db import one

        with psycopg.connect(self._url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
            records, fpi, size, writes, syncs = one(conn.execute(self._WAL))
        return {"cpu_s": self._cpu_s(), "wal_records": records, "wal_fpi": fpi, "wal_bytes": size,
                "wal_write": writes, "wal_sync": syncs}

    @staticmethod
    def delta(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float | None]:
        """``after − before`` per counter (None when either is None)."""
        out: dict[str, float | None] = {}
        for k, was in before.items():
            now = after[k]
            out[k] = None if was is None or now is None else now - was
        return out

    def _cpu_s(self) -> float | None:
        if self._postmaster is None:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        try:
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue  # exited meanwhile
                pid, ppid = int(entry.name), int(fields[1])
                if pid == self._postmaster:
                    total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime (reaped children)
                elif ppid == self._postmaster:
                    total += int(fields[11]) + int(fields[12])
        except OSError:
            return None
        return total / tick
