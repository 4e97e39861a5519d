"""Intervals, paired tests and multiple-comparison correction, on the driver from the small
aggregates Spark computes (scipy for distribution functions).

Every metric interval stays inside the metric's range (``bounds`` in receval_spark.registry,
docs/statistics.md): the Wilson score interval for means of 0/1 values (the registry's ``binary``),
otherwise the t-interval (or the bootstrap normal interval) clipped to the bounds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy import optimize, stats

from receval_spark.registry import UNBOUNDED, Bounds, definitions

EXACT_WILCOXON_MAX = 50


def metric_bounds(metric: str, *, protocol: str = "full") -> Bounds:
    """The range of ``metric`` under ``protocol`` (the registry's ``bounds``); unbounded for a
    metric not in the registry."""
    found = definitions(protocol).get(metric)
    return UNBOUNDED if found is None else found.bounds


def difference_bounds(metric: str) -> Bounds:
    """The range of a difference of two values of ``metric``: [low - high, high - low]."""
    low, high = metric_bounds(metric)
    return low - high, high - low


def clip_interval(
    low: float | None, high: float | None, bounds: Bounds
) -> tuple[float | None, float | None]:
    """(low, high) with both ends moved into ``bounds``; (None, None) stays."""
    if low is None or high is None:
        return None, None
    lo, hi = bounds
    return min(max(low, lo), hi), max(min(high, hi), lo)


def t_interval(
    mean: float,
    std: float | None,
    n: int,
    *,
    bounds: Bounds = UNBOUNDED,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """Student-t interval mean ± t_{(1+c)/2, n-1} · std / sqrt(n), clipped to ``bounds``;
    (None, None) for n < 2."""
    if n < 2 or std is None or math.isnan(std):
        return None, None
    return t_se_interval(mean, std / math.sqrt(n), n - 1, bounds=bounds, confidence=confidence)


def t_se_interval(
    value: float | None,
    std_error: float | None,
    df: int,
    *,
    bounds: Bounds = UNBOUNDED,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """value ± t_{(1+c)/2, df} · std_error, clipped to ``bounds``; (None, None) without a
    standard error or for df < 1."""
    if value is None or std_error is None or math.isnan(std_error) or df < 1:
        return None, None
    half = float(stats.t.ppf((1 + confidence) / 2, df)) * std_error
    return clip_interval(value - half, value + half, bounds)


def wilson_interval(
    proportion: float | None, n: int, *, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Wilson score interval of a proportion p over n 0/1 values (Wilson 1927):
    (p + z²/2n ± z · sqrt(p(1 - p)/n + z²/4n²)) / (1 + z²/n), z = z_{(1+c)/2}. Always inside
    [0, 1], never of zero width, also at p = 0 or 1; (None, None) for n = 0."""
    if proportion is None or n < 1:
        return None, None
    p = min(max(proportion, 0.0), 1.0)
    z = float(stats.norm.ppf((1 + confidence) / 2))
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # the interval holds p (exactly at p = 0 or 1, where rounding could leave it 1e-16 short)
    return min(max(centre - half, 0.0), p), max(min(centre + half, 1.0), p)


def mean_interval(
    metric: str,
    mean: float | None,
    std: float | None,
    n: int,
    *,
    protocol: str = "full",
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """The 95% interval of a mean of per-user (per-event) values of ``metric`` under
    ``protocol``: Wilson when the values are 0/1 (the registry's ``binary``), else the
    t-interval clipped to the metric's bounds."""
    if mean is None:
        return None, None
    found = definitions(protocol).get(metric)
    if found is not None and found.binary:
        return wilson_interval(mean, n, confidence=confidence)
    bounds = metric_bounds(metric, protocol=protocol)
    return t_interval(mean, std, n, bounds=bounds, confidence=confidence)


def normal_interval(
    value: float | None,
    std: float | None,
    *,
    bounds: Bounds = UNBOUNDED,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """value ± z_{(1+c)/2} · std (a bootstrap standard error), clipped to the statistic's
    ``bounds``; (None, None) without a std."""
    if value is None or std is None or math.isnan(std):
        return None, None
    half = float(stats.norm.ppf((1 + confidence) / 2)) * std
    return clip_interval(value - half, value + half, bounds)


def paired_t_pvalue(mean: float, std: float | None, n: int) -> float | None:
    """Two-sided paired t-test p = 2 · P(T_{n-1} >= |mean| / (std / sqrt(n))). Without spread
    (std = 0) the statistic is ±infinite or 0/0: p = 0 when mean != 0 (every user moved the same
    way), p = 1 when mean = 0 (nothing changed); None only for n < 2 (no test)."""
    if n < 2 or std is None or math.isnan(std):
        return None
    if std == 0:
        return 0.0 if mean != 0 else 1.0
    statistic = mean / (std / math.sqrt(n))
    return float(2 * stats.t.sf(abs(statistic), n - 1))


# the minimum detectable effect of a comparison: two-sided paired t-test at this level and power
MDE_ALPHA = 0.05
MDE_POWER = 0.8


def cohens_dz(mean: float | None, std: float | None) -> float | None:
    """Cohen's d_z, the standardised effect of paired differences: mean / std (sample std,
    ddof 1). None without spread (std = 0: the effect is not a finite multiple of it) or
    without a std (a single user)."""
    if mean is None or std is None or math.isnan(std) or std == 0:
        return None
    return mean / std


@cache
def detectable_dz(n: int, alpha: float = MDE_ALPHA, power: float = MDE_POWER) -> float | None:
    """The smallest |d_z| a two-sided paired t-test at level ``alpha`` detects with ``power``
    on n pairs: the d solving P(|T'| > t_{1-alpha/2, n-1}) = power, where T' is noncentral t
    with n - 1 degrees of freedom and noncentrality d·sqrt(n) (statsmodels' TTestPower).
    None for n < 2 (no test)."""
    if n < 2:
        return None
    df = n - 1
    critical = stats.t.ppf(1 - alpha / 2, df)

    def shortfall(d: float) -> float:
        shift = d * math.sqrt(n)
        # the lower tail only shrinks as d grows; scipy returns nan where it underflows
        lower = float(np.nan_to_num(stats.nct.cdf(-critical, df, shift), nan=0.0))
        return float(stats.nct.sf(critical, df, shift)) + lower

    high = 1.0
    while shortfall(high) < power:
        high *= 2
    return float(optimize.brentq(lambda d: shortfall(d) - power, 0.0, high, xtol=1e-15))


def minimum_detectable_effect(std: float | None, n: int) -> float | None:
    """The mean difference, in the metric's units, that the paired t-test at MDE_ALPHA detects
    with MDE_POWER on n users whose differences spread by ``std``: detectable_dz(n) · std."""
    dz = detectable_dz(n)
    if dz is None or std is None or math.isnan(std):
        return None
    return dz * std


@dataclass(frozen=True)
class SignedRanks:
    """Wilcoxon signed-rank sufficient statistics of n paired differences: n_nonzero
    non-zero ones, R+ the sum of their average ranks of |d| where d > 0, and the tie term
    sum over tie groups of t^3 - t."""

    n: int
    n_nonzero: int
    rank_plus: float
    tie_term: float


def wilcoxon_pvalue(ranks: SignedRanks) -> float:
    """Two-sided Wilcoxon signed-rank p-value, zeros dropped (scipy's default ``wilcox``).

    As scipy's ``method="auto"``: the exact null distribution when n <= 50 and there are no
    zeros and no ties; otherwise the normal approximation without continuity correction,
    z = (R+ - n'(n'+1)/4) / sqrt((n'(n'+1)(2n'+1) - T/2) / 24) with n' = n_nonzero. (For
    n <= 13 with ties or zeros scipy runs a permutation test instead; we keep the normal
    approximation there.) p = 1 when every difference is zero (nothing changed).
    """
    m = ranks.n_nonzero
    if m == 0:
        return 1.0
    exact = ranks.n <= EXACT_WILCOXON_MAX and m == ranks.n and ranks.tie_term == 0
    if exact:
        pmf = _signed_rank_pmf(m)
        upper = float(pmf[math.floor(ranks.rank_plus) :].sum())
        lower = float(pmf[: math.ceil(ranks.rank_plus) + 1].sum())
        return min(1.0, 2 * min(upper, lower))
    mean = m * (m + 1) / 4
    # > 0 for m >= 1: the tie term is at most m^3 - m
    variance = (m * (m + 1) * (2 * m + 1) - ranks.tie_term / 2) / 24
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
    """Holm's step-down adjustment over one family of m = len(pvalues) hypotheses: with
    p_(1) <= ... <= p_(m), adjusted p_(i) = min(1, max_{j <= i} (m - j + 1) p_(j)).

    No hypothesis leaves the family: a None (a test that could not be run) counts in m as
    p = 1 (never rejected, so the others stay valid) and stays None in the result."""
    order = sorted((1.0 if p is None else p, i) for i, p in enumerate(pvalues))
    m = len(order)
    adjusted: list[float | None] = [None] * m
    running = 0.0
    for j, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - j) * p))
        if pvalues[i] is not None:
            adjusted[i] = running
    return adjusted


def bonferroni(pvalues: Sequence[float | None]) -> list[float | None]:
    """Bonferroni's adjustment over one family of m = len(pvalues) hypotheses: min(1, m·p)
    (a None counts in m and stays None, as in :func:`holm`)."""
    m = len(pvalues)
    return [None if p is None else min(1.0, m * p) for p in pvalues]


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini & Hochberg's step-up adjustment (false discovery rate; JRSS B 1995) over one
    family of m = len(pvalues) hypotheses: with p_(1) <= ... <= p_(m), adjusted
    p_(i) = min(1, min_{j >= i} m·p_(j) / j). A None counts in m as p = 1 and stays None."""
    order = sorted((1.0 if p is None else p, i) for i, p in enumerate(pvalues))
    m = len(order)
    adjusted: list[float | None] = [None] * m
    running = 1.0
    for j in range(m - 1, -1, -1):
        p, i = order[j]
        running = min(running, m * p / (j + 1))
        if pvalues[i] is not None:
            adjusted[i] = running
    return adjusted


CORRECTIONS = {
    "holm": holm,
    "bonferroni": bonferroni,
    "benjamini_hochberg": benjamini_hochberg,
}
