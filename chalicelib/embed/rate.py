"""How fast each embedder embeds, measured in this process: chunks per second, from the calls Engram makes.

An attach request processes inline only what fits its time budget (``Settings.inline_budget_s``); the estimate is
the chunks still to embed divided by this rate — chunk count, not bytes, because embedding time follows the number
(and length) of texts, and a file's bytes say little about its text (a PDF's fonts, a docx's zip).

The rate is an exponentially weighted ratio estimator: every call ``(n chunks, t seconds)`` updates
``N ← d·N + n`` and ``T ← d·T + t`` with decay ``d`` = :data:`DECAY`, and the rate is ``N / T``. Long calls weigh
more than short ones (a per-call latency is averaged over its chunks), and the last few dozen calls dominate, so the
rate follows a machine getting busier (the local model shares its cores with the pump) within a few calls. The
first call of each embedder is not counted: it may include loading the model (the local model's ONNX session takes
about 4 s, against 15–25 ms for a call of 8 chunks) or opening connections. One meter per embedder (its class and
model), shared by the threads of the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from chalicelib.embed.base import Embedder

__all__ = ["DECAY", "Meter", "chunks_per_s", "embed_timed", "estimate_s", "forget", "record"]

# Weight kept by the history at each new call: about the last 1 / (1 - 0.8) = 5 calls dominate.
DECAY = 0.8


@dataclass(slots=True)
class Meter:
    """Decayed sums for one embedder: ``chunks`` (texts) and ``seconds`` (wall time of the calls); ``calls`` seen
    (the first is not counted)."""

    chunks: float = 0.0
    seconds: float = 0.0
    calls: int = 0

    def add(self, chunks: int, seconds: float) -> None:
        """Count one call of ``chunks`` texts that took ``seconds`` (unless it is the first)."""
        self.calls += 1
        if self.calls == 1:
            return
        self.chunks = DECAY * self.chunks + chunks
        self.seconds = DECAY * self.seconds + max(seconds, 1e-6)

    @property
    def rate(self) -> float | None:
        """Chunks per second, or None before the second call."""
        return self.chunks / self.seconds if self.seconds > 0 else None


_lock = threading.Lock()
_meters: dict[tuple[str, str], Meter] = {}


def _key(embedder: Embedder) -> tuple[str, str]:
    return type(embedder).__qualname__, embedder.model


def record(embedder: Embedder, chunks: int, seconds: float) -> None:
    """Count a call of ``embedder`` that embedded ``chunks`` texts in ``seconds`` (wall time). Empty calls are
    ignored, and so is the first call of each embedder (model loading)."""
    if chunks <= 0:
        return
    with _lock:
        _meters.setdefault(_key(embedder), Meter()).add(chunks, seconds)


def chunks_per_s(embedder: Embedder) -> float | None:
    """The embedder's measured rate (chunks per second), or None when it has not been measured yet."""
    with _lock:
        meter = _meters.get(_key(embedder))
        return meter.rate if meter is not None else None


def estimate_s(embedder: Embedder, chunks: int) -> float | None:
    """Seconds ``embedder`` should take to embed ``chunks`` texts at its measured rate (0 for none); None when it
    has not been measured yet."""
    if chunks <= 0:
        return 0.0
    rate = chunks_per_s(embedder)
    return chunks / rate if rate else None


def embed_timed(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """``embedder.embed(texts)`` (n × dim), its duration recorded (:func:`record`).

    Raises:
        whatever ``embedder.embed`` raises (nothing is recorded then).
    """
    started = time.monotonic()
    vectors = embedder.embed(texts)
    record(embedder, len(texts), time.monotonic() - started)
    return vectors


def forget(embedder: Embedder | None = None) -> None:
    """Drop the measurements of ``embedder`` (every embedder's when None): tests, or a model swapped in place."""
    with _lock:
        if embedder is None:
            _meters.clear()
        else:
            _meters.pop(_key(embedder), None)
