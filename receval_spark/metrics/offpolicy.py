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
consistent with a bias of order 1/n and usually a far smaller variance.

Standard errors are cluster-robust, clusters g = users (every logged list of a user lies in
one cluster): the slots of one list, and a user's lists, are not independent. Each estimator is
a ratio of cluster sums A_g / B_g (IPS: A_g = sum_{i in g} w_i r_i, B_g = n_g impressions;
clipped IPS: min(w_i, M) r_i; SNIPS: B_g = sum_{i in g} w_i), with the delta-method
(linearised) variance over the G clusters and the small-sample factor G / (G - 1):

.. math::

    \widehat{se}^2 = \frac{G}{G - 1} \cdot \frac{\sum_g (A_g - \hat\theta B_g)^2}{(\sum_g B_g)^2}

and the interval theta ± t_{0.975, G-1} · se, clipped to the estimator's range (IPS terms
w r lie in [min(0, W r_min), max(0, W r_max)] with W the largest (clipped) weight; SNIPS and
the logged mean lie in [r_min, r_max]). With one impression per cluster IPS's se is the naive
std / sqrt(n).

Assumptions: common support (p_i > 0 wherever pi could show the item at that position, so
every logged propensity must be positive); propensities are the logging policy's true
probabilities; the reward of an impression depends only on the user, the item and its
position (no interaction between slots); users are independent (slots of one user need not be).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, USER
from receval_spark.metrics.aggregate import exact_sum
from receval_spark.stats import t_se_interval

POSITION, REWARD, PROPENSITY, PROBABILITY = "position", "reward", "propensity", "probability"
CLUSTER = "cluster"
ESTIMATORS = ("ips", "clipped_ips", "snips")


def importance_weights(
    impressions: DataFrame,
    target: DataFrame,
    *,
    by: Sequence[str],
    policies: DataFrame | None = None,
    cluster: str = USER,
) -> DataFrame:
    """(*by, cluster, reward, w): every logged impression with w = pi / p for each target
    policy of ``target`` (keyed by ``by``, e.g. model); pi = 0 where the policy never shows the
    item at that position. ``by`` columns the impressions also have (e.g. a log partition) are
    matched, the others crossed: each policy is scored on every impression of its partition.
    ``policies`` (the ``by`` values to score; default: those in ``target``) keeps a policy
    without any target row, scored with w = 0 everywhere. ``cluster``: the impressions' column
    whose values group impressions that are not independent (default: the user)."""
    by = list(by)
    keys = [USER, ITEM, POSITION]
    shared = [c for c in by if c in impressions.columns]
    policies = (target if policies is None else policies).select(*by).distinct()
    logged = impressions.join(policies, on=shared) if shared else impressions.crossJoin(policies)
    return logged.join(target.select(*by, *keys, PROBABILITY), on=[*by, *keys], how="left").select(
        *by,
        F.col(cluster).alias(CLUSTER),
        REWARD,
        (F.coalesce(F.col(PROBABILITY), F.lit(0.0)) / F.col(PROPENSITY)).alias("w"),
    )


def off_policy_sums(weighted: DataFrame, *, by: Sequence[str], clip: float) -> DataFrame:
    """(*by, n, n_clusters, max_w, max_cw (the largest clipped weight), r_min, r_max and the
    exact sums the estimators need) from (*by, cluster, reward, w): one aggregation per cluster
    (its sums A_g, B_g), then one over the clusters of each group (sums of A_g, A_g^2,
    A_g B_g, B_g, B_g^2)."""
    by = list(by)
    w, r = F.col("w"), F.col(REWARD)
    clipped = F.least(w, F.lit(float(clip)))
    clusters = weighted.groupBy(*by, CLUSTER).agg(
        F.count(F.lit(1)).alias("n_g"),
        F.max(w).alias("max_w"),
        F.max(clipped).alias("max_cw"),
        F.min(r).alias("r_min"),
        F.max(r).alias("r_max"),
        exact_sum(w * r).alias("wr_g"),
        exact_sum(clipped * r).alias("cr_g"),
        exact_sum(w).alias("w_g"),
        exact_sum(w * w).alias("w2_g"),
    )
    n_g, wr_g, cr_g, w_g = F.col("n_g"), F.col("wr_g"), F.col("cr_g"), F.col("w_g")
    return clusters.groupBy(*by).agg(
        F.sum(n_g).alias("n"),
        F.count(F.lit(1)).alias("n_clusters"),
        F.max("max_w").alias("max_w"),
        F.max("max_cw").alias("max_cw"),
        F.min("r_min").alias("r_min"),
        F.max("r_max").alias("r_max"),
        F.sum(n_g * n_g).alias("n2"),
        exact_sum(wr_g).alias("wr"),
        exact_sum(wr_g * wr_g).alias("wr2"),
        exact_sum(wr_g * n_g).alias("wrn"),
        exact_sum(cr_g).alias("cr"),
        exact_sum(cr_g * cr_g).alias("cr2"),
        exact_sum(cr_g * n_g).alias("crn"),
        exact_sum(w_g).alias("w1"),
        exact_sum(w_g * w_g).alias("wg2"),
        exact_sum(wr_g * w_g).alias("wrw"),
        exact_sum("w2_g").alias("w2"),
    )


def cluster_std_error(
    a: float, a2: float, ab: float, b: float, b2: float, n_clusters: int
) -> float | None:
    """Delta-method standard error of theta = sum A_g / sum B_g from the cluster sums
    (a = sum A_g, a2 = sum A_g^2, ab = sum A_g B_g, b = sum B_g, b2 = sum B_g^2):
    sqrt(G/(G-1) · sum (A_g - theta B_g)^2) / sum B_g; None for fewer than 2 clusters or b = 0."""
    if n_clusters < 2 or b == 0:
        return None
    theta = a / b
    spread = a2 - 2 * theta * ab + theta * theta * b2
    return math.sqrt(n_clusters / (n_clusters - 1) * max(spread, 0.0)) / b


@dataclass(frozen=True)
class OffPolicyEstimate:
    """One estimator's value for one target policy (``group``: the values of ``by``), with its
    standard error and 95% interval, the number of logged impressions, the effective sample
    size (sum w)^2 / sum w^2 and the largest weight."""

    group: tuple[str, ...]
    estimator: str
    value: float | None
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    n_impressions: int
    effective_n: float | None
    max_weight: float


def estimates(sums: Row, *, by: Sequence[str]) -> list[OffPolicyEstimate]:
    """IPS, clipped IPS and SNIPS with cluster-robust intervals from one row of
    :func:`off_policy_sums` (module doc); SNIPS is None when no logged impression has w > 0."""
    n, w1, w2, g = sums["n"], sums["w1"], sums["w2"], sums["n_clusters"]
    r_min, r_max = sums["r_min"], sums["r_max"]
    common = {
        "group": tuple(sums[c] for c in by),
        "n_impressions": n,
        "effective_n": w1 * w1 / w2 if w2 > 0 else None,
        "max_weight": sums["max_w"],
    }
    out = []
    for name, total, squares, cross, largest in (
        ("ips", "wr", "wr2", "wrn", sums["max_w"]),
        ("clipped_ips", "cr", "cr2", "crn", sums["max_cw"]),
    ):
        mean = sums[total] / n
        std_error = cluster_std_error(sums[total], sums[squares], sums[cross], n, sums["n2"], g)
        bounds = (min(0.0, largest * r_min), max(0.0, largest * r_max))
        low, high = t_se_interval(mean, std_error, g - 1, bounds=bounds)
        out.append(
            OffPolicyEstimate(
                estimator=name, value=mean, std_error=std_error, ci_low=low, ci_high=high, **common
            )
        )
    if w1 > 0:
        value = sums["wr"] / w1
        std_error = cluster_std_error(sums["wr"], sums["wr2"], sums["wrw"], w1, sums["wg2"], g)
        low, high = t_se_interval(value, std_error, g - 1, bounds=(r_min, r_max))
    else:
        value = std_error = low = high = None
    out.append(
        OffPolicyEstimate(
            estimator="snips", value=value, std_error=std_error, ci_low=low, ci_high=high, **common
        )
    )
    return out
