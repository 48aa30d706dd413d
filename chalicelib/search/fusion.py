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


def reciprocal_rank_fusion(rankings: Sequence[tuple[float, Sequence[K]]], *, k: int = RRF_K,
                           ranks: Sequence[Sequence[int] | None] | None = None) -> list[tuple[K, float]]:
    """Fuse ``rankings`` — ``(weight, ids best first)`` pairs — into ``(id, score)`` best first, scores in [0, 1].

    ``ranks`` (optional, one per ranking): each id's rank in its list (1 = best), so that tied items share one —
    the first position of their run (standard competition ranking) — and get the same credit whatever order the
    list holds them in; None (the default, or for a list): positions 1, 2, 3, ...
    Lists with weight 0 are ignored; ties keep first-seen order. Returns ``[]`` when every weight is 0.
    """
    weights = [w for w, ids in rankings if w > 0]
    if not weights:
        return []
    best = sum(w / (k + 1) for w in weights)
    scores: dict[K, float] = {}
    for i, (weight, ids) in enumerate(rankings):
        if weight <= 0:
            continue
        given = ranks[i] if ranks is not None else None
        for position, item in enumerate(ids, start=1):
            rank = given[position - 1] if given is not None else position
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    fused = sorted(scores.items(), key=lambda kv: -kv[1])
    return [(item, min(1.0, score / best)) for item, score in fused]
