"""Weighted reciprocal rank fusion of ranked lists, normalised to [0, 1].

    rrf(d) = Σ_i w_i / (k + rank_i(d))            (Cormack, Clarke & Büttcher 2009, k = 60)

divided by Σ_i w_i / (k + 1), the score of a document ranked first in every list, so the best possible fused
score is 1.0 and every score lies in [0, 1].
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

# Cormack et al. 2009 ("Reciprocal Rank Fusion outperforms Condorcet and individual rank learning methods").
RRF_K = 60

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[tuple[float, Sequence[K]]], *,
                           k: int = RRF_K) -> list[tuple[K, float]]:
    """Fuse ``rankings`` — ``(weight, ids best first)`` pairs — into ``(id, score)`` best first, scores in [0, 1].

    Lists with weight 0 are ignored; ties keep first-seen order. Returns ``[]`` when every weight is 0.
    """
    weights = [w for w, ids in rankings if w > 0]
    if not weights:
        return []
    best = sum(w / (k + 1) for w in weights)
    scores: dict[K, float] = {}
    for weight, ids in rankings:
        if weight <= 0:
            continue
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    fused = sorted(scores.items(), key=lambda kv: -kv[1])
    return [(item, min(1.0, score / best)) for item, score in fused]
