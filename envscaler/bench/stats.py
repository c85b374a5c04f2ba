"""Summaries of latency samples (seconds in, milliseconds out)."""

from __future__ import annotations

import math
from collections.abc import Sequence

CDF_POINTS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0)


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted samples (q in [0, 1])."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered),
            "p50_ms": round(percentile(ordered, 0.5) * 1e3, 3),
            "p90_ms": round(percentile(ordered, 0.9) * 1e3, 3),
            "p99_ms": round(percentile(ordered, 0.99) * 1e3, 3),
            "max_ms": round(ordered[-1] * 1e3, 3),
            "mean_ms": round(sum(ordered) / len(ordered) * 1e3, 3)}


def quantiles_ms(seconds: Sequence[float]) -> list[list[float]]:
    """[[q, latency_ms], ...] at `CDF_POINTS`, for plots."""
    ordered = sorted(seconds)
    if not ordered:
        return []
    return [[q, round(percentile(ordered, q) * 1e3, 4)] for q in CDF_POINTS]
