"""Relevance: one score in [0, 1] per search result that means the same for every query, made from the evidence
the two legs hold about it (:mod:`chalicelib.search.ranking`).

A rank score such as reciprocal rank fusion gives the best row of *any* query a high score, even a query the
collection cannot answer; relevance instead measures each leg's evidence against what unanswerable queries reach:

    z_vector(c)  = (c − m_model) / s_model            c: cosine similarity of query and row, clamped to [0, 1]
    z_keyword(k) = (k − m_kw) / s_kw                  k: the row's BM25 / the query's highest attainable BM25
    z            = (w_e · z_vector + w_t · z_keyword) / (w_e + w_t) + β_model · 4 · w_e · w_t / (w_e + w_t)²
    relevance    = 1 / (1 + e^−z)

``w_e`` and ``w_t`` are the request's weights (OpenAI's ``ranking_options.hybrid_search``); a leg with weight 0
(or that did not run) drops out, so vector-only relevance is the logistic of ``z_vector`` alone and keyword-only
relevance that of ``z_keyword``. Each ``z`` is monotone in its evidence, so within one leg relevance orders rows
as the leg does. Averaging the two legs' log-odds (a weighted logarithmic opinion pool, Genest & Zidek 1986,
"Combining Probability Distributions") is more cautious than either leg — two independent weak signals rarely both
look strong — so ``β`` (largest at equal weights, 0 when one weight is 0) puts the hybrid score's 0.5 back at the
same place as each leg's.

Calibration (``benchmarks/retrieval.py --fit``): ``m`` is the best evidence that unanswerable queries reach at
most 4 % of the time — the 96th percentile, over 1,000 nonsense queries (random dictionary words,
``benchmarks/nonsense.py``, seed :data:`FIT_SEED`), of the best cosine (resp. normalised BM25) in BEIR NFCorpus
(3,633 documents, 8,571 chunks) — so relevance 0.5 means "stronger evidence than 96 % of unanswerable queries find
anywhere"; ``s`` puts the median of that best evidence at relevance 0.1: ``s = (m − median) / ln 9``; ``β`` is
chosen the same way for the equal-weight hybrid score (its 96th percentile over the same queries maps to 0.5). The
fit uses no real query and no relevance judgement; the judged test queries only measure the result (README,
"Scores"). The cosine constants depend on the embedding model (:data:`CALIBRATIONS`; an unknown model gets
:data:`DEFAULT_CALIBRATION`, the bundled model's); the keyword constants do not (:data:`KEYWORD`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CALIBRATIONS", "DEFAULT_CALIBRATION", "FIT_QUANTILE", "FIT_SEED", "KEYWORD", "LegCalibration",
           "ModelCalibration", "Weights", "calibration_for", "relevance"]

# The nonsense queries the constants below were fitted on (benchmarks/nonsense.py) and the quantile of their best
# evidence that maps to relevance 0.5; the median maps to MEDIAN_RELEVANCE.
FIT_SEED = 1501
FIT_QUANTILE = 0.96
MEDIAN_RELEVANCE = 0.1


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each leg counts (≥ 0, not both 0): OpenAI's ``ranking_options.hybrid_search``."""

    embedding: float = 1.0
    text: float = 1.0


@dataclass(frozen=True, slots=True)
class LegCalibration:
    """One leg's evidence → log-odds: ``z = (x − midpoint) / scale`` (``midpoint`` in the evidence's units,
    ``scale`` > 0)."""

    midpoint: float
    scale: float

    def logit(self, x: float) -> float:
        """The log-odds of evidence ``x``."""
        return (x - self.midpoint) / self.scale


@dataclass(frozen=True, slots=True)
class ModelCalibration:
    """An embedding model's constants: its cosine calibration and the hybrid agreement term ``beta`` (log-odds);
    ``source`` says where they came from."""

    cosine: LegCalibration
    beta: float
    source: str


# BM25 normalised by the query's highest attainable score: fitted with the bundled model's run, 2026-11-24
# (`benchmarks/retrieval.py --fit`: median of the best score 0.2065). The keyword leg does not use the embedder, so
# these hold for every model; another embedder's entry fits its own β against them.
KEYWORD = LegCalibration(midpoint=0.458, scale=0.1144)

CALIBRATIONS: dict[str, ModelCalibration] = {
    # The bundled model (ONNX Runtime, int8), 8,571 chunks of ≤ 254 word pieces: median best cosine 0.2432.
    "all-MiniLM-L6-v2": ModelCalibration(
        LegCalibration(midpoint=0.4052, scale=0.0738), beta=0.8516,
        source="benchmarks/retrieval.py --fit on BEIR NFCorpus, 1,000 nonsense queries (seed 1501), 2026-11-24"),
    # The hashing test embedder (tests only), same procedure (`--embedder hashing`: 3,764 chunks of ≤ 512 words;
    # median best cosine 0.2232; β against the shared keyword constants above).
    "hashing-384": ModelCalibration(
        LegCalibration(midpoint=0.3405, scale=0.0534), beta=1.625,
        source="benchmarks/retrieval.py --fit --embedder hashing on BEIR NFCorpus, seed 1501, 2026-11-24"),
}

# Models without an entry (e.g. text-embedding-3-small, Titan v2: not measurable offline) get the bundled model's
# constants. Their cosines run lower (published pairwise measurements put a relevant question near 0.44 for
# text-embedding-3-large and 0.38 for Titan v2, https://afurmanov.com/chunk-size-embedding-similarity), so the
# default is likely too strict for them: fit an entry with `benchmarks/retrieval.py --fit` on that model.
DEFAULT_CALIBRATION = CALIBRATIONS["all-MiniLM-L6-v2"]


def calibration_for(model: str) -> ModelCalibration:
    """The constants of embedding ``model`` (e.g. ``all-MiniLM-L6-v2``), else :data:`DEFAULT_CALIBRATION`."""
    return CALIBRATIONS.get(model, DEFAULT_CALIBRATION)


def relevance(similarity: float | None, keyword: float | None, weights: Weights, model: str) -> float:
    """Relevance in [0, 1] of a row with cosine ``similarity`` and normalised BM25 ``keyword`` (each in [0, 1], None
    when that leg did not run) under the request's ``weights``, for vectors of embedding ``model`` (see the module
    docstring). Returns 0.0 when no leg with positive weight has evidence."""
    w_e = weights.embedding if similarity is not None else 0.0
    w_t = weights.text if keyword is not None else 0.0
    if w_e <= 0 and w_t <= 0:
        return 0.0
    calibration = calibration_for(model)
    z = 0.0
    if w_e > 0 and similarity is not None:
        z += w_e * calibration.cosine.logit(similarity)
    if w_t > 0 and keyword is not None:
        z += w_t * KEYWORD.logit(keyword)
    total = w_e + w_t
    z = z / total + calibration.beta * 4.0 * w_e * w_t / (total * total)
    return _logistic(z)


def _logistic(z: float) -> float:
    """1 / (1 + e^−z), without overflow for large |z|."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)
