"""Intervals, paired tests and multiple-comparison correction, on the driver from the small
aggregates Spark computes (scipy for distribution functions)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy import stats

EXACT_WILCOXON_MAX = 50


def t_interval(
    mean: float, std: float | None, n: int, *, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Student-t interval mean ± t_{(1+c)/2, n-1} · std / sqrt(n); (None, None) for n < 2."""
    if n < 2 or std is None or math.isnan(std):
        return None, None
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return mean - half, mean + half


def normal_interval(
    value: float | None,
    std: float | None,
    *,
    bounds: tuple[float, float] = (-math.inf, math.inf),
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """value ± z_{(1+c)/2} · std (a bootstrap standard error), clipped to the statistic's
    ``bounds``; (None, None) without a std."""
    if value is None or std is None or math.isnan(std):
        return None, None
    half = float(stats.norm.ppf((1 + confidence) / 2)) * std
    return max(value - half, bounds[0]), min(value + half, bounds[1])


def paired_t_pvalue(mean: float, std: float | None, n: int) -> float | None:
    """Two-sided paired t-test p = 2 · P(T_{n-1} >= |mean| / (std / sqrt(n))); None when
    n < 2 or std = 0 (the statistic is undefined, as scipy's NaN)."""
    if n < 2 or std is None or math.isnan(std) or std == 0:
        return None
    statistic = mean / (std / math.sqrt(n))
    return float(2 * stats.t.sf(abs(statistic), n - 1))


@dataclass(frozen=True)
class SignedRanks:
    """Wilcoxon signed-rank sufficient statistics of n paired differences: n_nonzero
    non-zero ones, R+ the sum of their average ranks of |d| where d > 0, and the tie term
    sum over tie groups of t^3 - t."""

    n: int
    n_nonzero: int
    rank_plus: float
    tie_term: float


def wilcoxon_pvalue(ranks: SignedRanks) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value, zeros dropped (scipy's default ``wilcox``).

    As scipy's ``method="auto"``: the exact null distribution when n <= 50 and there are no
    zeros and no ties; otherwise the normal approximation without continuity correction,
    z = (R+ - n'(n'+1)/4) / sqrt((n'(n'+1)(2n'+1) - T/2) / 24) with n' = n_nonzero. (For
    n <= 13 with ties or zeros scipy runs a permutation test instead; we keep the normal
    approximation there.) None when every difference is zero.
    """
    m = ranks.n_nonzero
    if m == 0:
        return None
    exact = ranks.n <= EXACT_WILCOXON_MAX and m == ranks.n and ranks.tie_term == 0
    if exact:
        pmf = _signed_rank_pmf(m)
        upper = float(pmf[math.floor(ranks.rank_plus) :].sum())
        lower = float(pmf[: math.ceil(ranks.rank_plus) + 1].sum())
        return min(1.0, 2 * min(upper, lower))
    mean = m * (m + 1) / 4
    variance = (m * (m + 1) * (2 * m + 1) - ranks.tie_term / 2) / 24
    if variance <= 0:
        return None
    z = (ranks.rank_plus - mean) / math.sqrt(variance)
    return float(2 * stats.norm.sf(abs(z)))


@cache
def _signed_rank_pmf(n: int) -> np.ndarray:
    """P(R+ = s), s = 0..n(n+1)/2, under the null: counts of subsets of {1..n} summing to s,
    over 2^n."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return counts / 2.0**n


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment: with p_(1) <= ... <= p_(m), adjusted p_(i) =
    min(1, max_{j <= i} (m - j + 1) p_(j)); None stays None and does not count in m."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(order)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for j, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - j) * p))
        adjusted[i] = running
    return adjusted
