r"""Fisher's paired randomization (sign-flip) test of a comparison, the numpy side
(docs/statistics.md#randomization-test): Spark groups each comparison's paired differences by
|d| (``randomization_pvalues`` of :mod:`receval_spark.metrics.compare`) and runs
:func:`sign_flip_kernel` once per comparison as a grouped pandas UDF.

Under H0 (the model and the baseline are exchangeable for every user) each difference d_u
keeps or flips its sign with probability 1/2, independently of the others. The statistic is
the sum of the differences (the mean times n, the same test); with the non-zero |d| grouped
into distinct magnitudes v, c_v users each, p_v of them positive,

.. math::

    T_{obs} = \sum_v v\,(2 p_v - c_v), \qquad
    T = \sum_v v\,(2 B_v - c_v), \quad B_v \sim \mathrm{Binomial}(c_v, 1/2)

which is distributed exactly as the sum with every user's sign flipped, with one draw per
magnitude instead of one per user. The p-value is two-sided, P(|T| >= |T_obs|):

* exact when the enumeration over the magnitudes has at most max(N, EXACT_POINTS) points
  prod_v (c_v + 1) (so always for up to 16 non-zero users, and for metrics with few distinct
  differences far beyond): point (b_v) weighs prod_v C(c_v, b_v) / 2^(c_v);
* otherwise from N seeded draws of T: p = (1 + #{j : |T_j| >= |T_obs|}) / (N + 1), never 0
  (Phipson & Smyth, "Permutation p-values should never be zero", SAGMB 2010).

A null sum counts as at least as extreme when |T| >= |T_obs| - RELATIVE_TOLERANCE · sum_v v c_v,
so sums that are equal but for rounding tie (as ``scipy.stats.permutation_test`` allows); this
only ever makes p larger. Zero differences carry no sign and are left out; p = 1 when every
difference is zero. Fisher, "The Design of Experiments" (1935), §21; Smucker, Allan &
Carterette, "A comparison of statistical significance tests for information retrieval
evaluation", CIKM 2007.

Spark runs the kernel on the executors, which do not import this package: the compare module
registers this module with cloudpickle to be shipped by value, so everything here uses numpy,
pandas and constants only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

EXACT_POINTS = 2**16  # at least this many points are always enumerated exactly
BINOMIAL_FROM = 64  # a magnitude of this many users draws one binomial count, not a bit each
CHUNK_CELLS = 1 << 21  # random draws per chunk of permutations (permutations x columns)
RELATIVE_TOLERANCE = 1e-10  # of sum_v v c_v, the largest |T|: rounding ties
P_RANDOMIZATION = "p_randomization"

Doubles = npt.NDArray[np.float64]
Counts = npt.NDArray[np.int64]


def sign_flip_pvalue(
    magnitudes: npt.ArrayLike,
    counts: npt.ArrayLike,
    positives: npt.ArrayLike,
    *,
    permutations: int,
    seed: int,
) -> float:
    """Two-sided p-value of the paired randomization test of differences given as distinct
    magnitudes |d| >= 0 with their counts and counts of positive d (a magnitude may repeat:
    the grouping only saves draws). Exact when prod (c + 1) <= max(permutations,
    EXACT_POINTS), else Monte Carlo with ``permutations`` draws from numpy's default
    generator seeded with ``seed`` (any int; taken mod 2^64); the draws follow the magnitudes
    in ascending order, so the same groups in any order give the same p."""
    v = np.asarray(magnitudes, dtype=np.float64)
    c = np.asarray(counts, dtype=np.int64)
    p = np.asarray(positives, dtype=np.int64)
    order = np.argsort(v, kind="stable")
    nonzero = v[order] > 0
    v, c, p = v[order][nonzero], c[order][nonzero], p[order][nonzero]
    if not c.sum():
        return 1.0
    threshold = abs(float(v @ (2 * p - c))) - RELATIVE_TOLERANCE * float(v @ c)
    limit = max(permutations, EXACT_POINTS)
    if enumeration_points(c, limit=limit) <= limit:
        return exact_pvalue(v, c, threshold)
    rng = np.random.default_rng(seed % 2**64)
    return (1 + exceedances(v, c, threshold, permutations=permutations, rng=rng)) / (
        permutations + 1
    )


def enumeration_points(counts: Counts, *, limit: int) -> int:
    """prod (c + 1), the points of the exact enumeration; any value above ``limit`` once the
    product passes it."""
    points = 1
    for count in counts:
        points *= int(count) + 1
        if points > limit:
            break
    return points


def exact_pvalue(magnitudes: Doubles, counts: Counts, threshold: float) -> float:
    """P(|T| >= threshold) for T = sum_v v (2 B_v - c_v), B_v ~ Binomial(c_v, 1/2)
    independent: every point (b_v) with its probability, by outer sums and products over the
    magnitudes. The probabilities are exact binary fractions while the non-zero users number
    at most 52 (each a multiple of 2^-n' below 1), so then is p."""
    sums, weights = np.zeros(1), np.ones(1)
    for magnitude, count in zip(magnitudes, counts, strict=True):
        b = np.arange(count + 1)
        sums = np.add.outer(sums, magnitude * (2 * b - count)).ravel()
        weights = np.multiply.outer(weights, half_binomial(int(count))).ravel()
    return min(1.0, float(weights[np.abs(sums) >= threshold].sum()))


def half_binomial(count: int) -> Doubles:
    """P(B = b), b = 0..count, for B ~ Binomial(count, 1/2): C(count, b) / 2^count. Up to
    count = 1000 from the integers C(count, b) (exact while they are below 2^53, count <= 56);
    beyond, by the ratios P(b ± 1) / P(b) multiplied outward from the mode and normalised to
    sum 1 (about sqrt(count) · 1e-16 relative; the far tails underflow to 0)."""
    if count <= 1000:
        row = [1]
        for b in range(count):
            row.append(row[-1] * (count - b) // (b + 1))
        return np.array(row, dtype=np.float64) / 2.0**count
    mode = count // 2
    up = np.arange(mode, count, dtype=np.float64)  # P(b + 1) / P(b) = (count - b) / (b + 1)
    down = np.arange(mode, 0, -1, dtype=np.float64)  # P(b - 1) / P(b) = b / (count - b + 1)
    relative = np.concatenate(
        [
            np.cumprod(down / (count - down + 1))[::-1],
            [1.0],
            np.cumprod((count - up) / (up + 1)),
        ]
    )
    return np.asarray(relative / relative.sum(), dtype=np.float64)


def exceedances(
    magnitudes: Doubles,
    counts: Counts,
    threshold: float,
    *,
    permutations: int,
    rng: np.random.Generator,
) -> int:
    """How many of ``permutations`` random sign assignments give |T| >= threshold. A
    magnitude of fewer than BINOMIAL_FROM users flips a random bit per user (cheaper than a
    binomial draw), a larger one draws B_v ~ Binomial(c_v, 1/2) once; T = 2 · (the positive
    part) - sum_v v c_v. Drawn in chunks of about CHUNK_CELLS random values."""
    few = counts < BINOMIAL_FROM
    per_user = np.repeat(magnitudes[few], counts[few])
    grouped, group_counts = magnitudes[~few], counts[~few]
    offset = float(magnitudes @ counts)
    rows = max(1, CHUNK_CELLS // (len(per_user) + len(grouped)))
    hits = 0
    for start in range(0, permutations, rows):
        draws = min(rows, permutations - start)
        random_bytes = rng.integers(0, 256, size=(draws, -(-len(per_user) // 8)), dtype=np.uint8)
        bits = np.unpackbits(random_bytes, axis=1, count=len(per_user))
        positive = bits.astype(np.float64) @ per_user
        if len(grouped):
            positive += rng.binomial(group_counts, 0.5, size=(draws, len(grouped))) @ grouped
        hits += int(np.count_nonzero(np.abs(2 * positive - offset) >= threshold))
    return hits


def sign_flip_kernel(
    keys: Sequence[str], *, permutations: int
) -> Callable[[tuple[Any, ...], pd.DataFrame], pd.DataFrame]:
    """The grouped pandas UDF of one comparison (``keys``, its grouping columns): its rows
    (magnitude, c, positives, seed: the comparison's seed on every row) -> one row (*keys,
    p_randomization)."""
    names = list(keys)

    def kernel(key: tuple[Any, ...], rows: pd.DataFrame) -> pd.DataFrame:
        p = sign_flip_pvalue(
            rows["magnitude"].to_numpy(),
            rows["c"].to_numpy(),
            rows["positives"].to_numpy(),
            permutations=permutations,
            seed=int(rows["seed"].iloc[0]),
        )
        return pd.DataFrame([[*key, p]], columns=[*names, P_RANDOMIZATION])

    return kernel
