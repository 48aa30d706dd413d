"""Helpers shared by the benchmark scripts: settings for a benchmark run and percentile maths."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def bench_settings(**overrides):
    """Settings from the environment with ``overrides`` applied (``chalicelib.config.Settings`` fields)."""
    from chalicelib.config import Settings

    return dataclasses.replace(Settings.from_env(), **overrides)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of ``values`` by linear interpolation (numpy's default method)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
