"""Confidence intervals for macro averages (computed on the driver from small aggregates)."""

from __future__ import annotations

import math

from scipy import stats


def t_interval(
    mean: float, std: float | None, n: int, *, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Student-t interval mean ± t_{(1+c)/2, n-1} · std / sqrt(n); (None, None) for n < 2."""
    if n < 2 or std is None or math.isnan(std):
        return None, None
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return mean - half, mean + half
