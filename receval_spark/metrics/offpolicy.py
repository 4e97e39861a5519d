r"""Off-policy estimates of a new ranking policy's reward from logged impressions.

Logged impressions: one row per impression shown by the logging policy mu, ``(user_id,
item_id, position, reward, propensity)`` with p_i = mu(item at position | user) > 0 as logged
at serving time. The target policy pi gives pi_i = pi(item at position | user) for the logged
(user, item, position): a deterministic ranking gives 1 where it puts the item at that position
and 0 elsewhere (the item-position model); a stochastic one its probability. With
w_i = pi_i / p_i over the n logged impressions:

.. math::

    IPS = \frac{1}{n} \sum_i w_i r_i \qquad
    IPS_M = \frac{1}{n} \sum_i \min(w_i, M)\, r_i \qquad
    SNIPS = \frac{\sum_i w_i r_i}{\sum_i w_i}

IPS is unbiased under the assumptions below; clipping at M trades bias for variance; SNIPS is
consistent with a bias of order 1/n and usually a far smaller variance. Intervals: IPS and
clipped IPS are means of per-impression terms (t-interval, std / sqrt(n)); SNIPS uses the
delta method, se^2 = sum w_i^2 (r_i - SNIPS)^2 / (sum w_i)^2.

Assumptions: common support (p_i > 0 wherever pi could show the item at that position, so
every logged propensity must be positive); propensities are the logging policy's true
probabilities; the reward of an impression depends only on the user, the item and its
position (no interaction between slots); impressions are independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from receval_spark.metrics.aggregate import exact_sum
from receval_spark.schema import ITEM, USER
from receval_spark.stats import normal_interval, t_interval

POSITION, REWARD, PROPENSITY, PROBABILITY = "position", "reward", "propensity", "probability"
ESTIMATORS = ("ips", "clipped_ips", "snips")


def importance_weights(
    impressions: DataFrame,
    target: DataFrame,
    *,
    by: Sequence[str],
    policies: DataFrame | None = None,
) -> DataFrame:
    """(*by, reward, w): every logged impression with w = pi / p for each target policy of
    ``target`` (keyed by ``by``, e.g. model); pi = 0 where the policy never shows the item at
    that position. ``by`` columns the impressions also have (e.g. a log partition) are
    matched, the others crossed: each policy is scored on every impression of its partition.
    ``policies`` (the ``by`` values to score; default: those in ``target``) keeps a policy
    without any target row, scored with w = 0 everywhere."""
    by = list(by)
    keys = [USER, ITEM, POSITION]
    shared = [c for c in by if c in impressions.columns]
    policies = (target if policies is None else policies).select(*by).distinct()
    logged = impressions.join(policies, on=shared) if shared else impressions.crossJoin(policies)
    return logged.join(target.select(*by, *keys, PROBABILITY), on=[*by, *keys], how="left").select(
        *by,
        REWARD,
        (F.coalesce(F.col(PROBABILITY), F.lit(0.0)) / F.col(PROPENSITY)).alias("w"),
    )


def off_policy_sums(weighted: DataFrame, *, by: Sequence[str], clip: float) -> DataFrame:
    """(*by, n, max_w, and the exact sums the estimators need) in one aggregation."""
    w, r = F.col("w"), F.col(REWARD)
    clipped = F.least(w, F.lit(float(clip)))
    return weighted.groupBy(*by).agg(
        F.count(F.lit(1)).alias("n"),
        F.max(w).alias("max_w"),
        exact_sum(w * r).alias("wr"),
        exact_sum(w * r * w * r).alias("wr2"),
        exact_sum(clipped * r).alias("cr"),
        exact_sum(clipped * r * clipped * r).alias("cr2"),
        exact_sum(w).alias("w1"),
        exact_sum(w * w).alias("w2"),
        exact_sum(w * w * r).alias("w2r"),
        exact_sum(w * w * r * r).alias("w2r2"),
    )


@dataclass(frozen=True)
class OffPolicyEstimate:
    """One estimator's value for one target policy (``group``: the values of ``by``), with its
    standard error and 95% interval, the number of logged impressions, the effective sample
    size (sum w)^2 / sum w^2 and the largest weight."""

    group: tuple
    estimator: str
    value: float | None
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    n_impressions: int
    effective_n: float | None
    max_weight: float


def estimates(sums: Row, *, by: Sequence[str]) -> list[OffPolicyEstimate]:
    """IPS, clipped IPS and SNIPS with intervals from one row of :func:`off_policy_sums`
    (module doc); SNIPS is None when no logged impression has w > 0."""
    n, w1, w2 = sums["n"], sums["w1"], sums["w2"]
    common = {
        "group": tuple(sums[c] for c in by),
        "n_impressions": n,
        "effective_n": w1 * w1 / w2 if w2 > 0 else None,
        "max_weight": sums["max_w"],
    }
    out = []
    for name, total, squares in (("ips", "wr", "wr2"), ("clipped_ips", "cr", "cr2")):
        mean = sums[total] / n
        std = math.sqrt(max(sums[squares] - sums[total] ** 2 / n, 0.0) / (n - 1)) if n > 1 else None
        low, high = t_interval(mean, std, n)
        std_error = std / math.sqrt(n) if std is not None else None
        out.append(
            OffPolicyEstimate(
                estimator=name, value=mean, std_error=std_error, ci_low=low, ci_high=high, **common
            )
        )
    if w1 > 0:
        value = sums["wr"] / w1
        spread = sums["w2r2"] - 2 * value * sums["w2r"] + value * value * w2
        std_error = math.sqrt(max(spread, 0.0)) / w1
        low, high = normal_interval(value, std_error)
    else:
        value = std_error = low = high = None
    out.append(
        OffPolicyEstimate(
            estimator="snips", value=value, std_error=std_error, ci_low=low, ci_high=high, **common
        )
    )
    return out
