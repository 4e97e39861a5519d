r"""Paired model comparisons over users (DESIGN §7): Spark computes the sufficient statistics.

For a model m, the baseline b and one (segment, metric, k), the users both were evaluated on
give differences d_u = x_u(m) - x_u(b). Per comparison one aggregation yields

.. math::

    n,\ \bar d,\ s_d \text{ (paired t-test)} \qquad
    n_{\ne 0},\ R^+ = \sum_{d_u > 0} r_u,\ T = \sum_{\text{tie groups}} (t^3 - t)
    \text{ (Wilcoxon signed-rank)}

where r_u is the average rank of |d_u| among the non-zero differences (zeros dropped, as in
Wilcoxon's original method and scipy's default) and t the size of a group of tied |d_u|.
Only these scalars reach the driver (``receval_spark.stats`` turns them into p-values).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.metrics.aggregate import exact_mean, exact_std
from receval_spark.schema import USER

COMPARISON_KEYS = ("segment", "metric", "k")


def paired_differences(
    per_user: DataFrame, *, baseline: str, keys: Sequence[str] = COMPARISON_KEYS
) -> DataFrame:
    """(model, baseline, *keys, user_id, diff): every other model's per-user value minus the
    baseline's, on the users present for both (an inner join; k matched null-safely)."""
    keys = list(keys)
    base = per_user.filter(F.col("model") == baseline).select(
        *[F.col(c).alias(f"_b_{c}") for c in keys],
        F.col(USER).alias("_b_user"),
        F.col("value").alias("_b_value"),
    )
    others = per_user.filter(F.col("model") != baseline)
    matched = [others[c].eqNullSafe(base[f"_b_{c}"]) for c in keys] + [
        others[USER] == base["_b_user"]
    ]
    return others.join(base, on=matched).select(
        "model",
        F.lit(baseline).alias("baseline"),
        *keys,
        USER,
        (F.col("value") - F.col("_b_value")).alias("diff"),
    )


def paired_statistics(differences: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, n_users, mean_diff, std_diff, n_nonzero, rank_plus, tie_term) per comparison.

    Average rank of a non-zero |d| = (non-zero |d| smaller than it) + (t + 1) / 2 for its tie
    group of size t; all from windows over one sort per comparison by |d|.
    """
    by = list(by)
    magnitude = differences.withColumn("_abs", F.abs("diff"))
    group = Window.partitionBy(*by)
    ordered = group.orderBy("_abs")
    is_zero = F.when(F.col("diff") == 0, 1).otherwise(0)
    ranked = magnitude.select(
        *by,
        "diff",
        F.count(F.lit(1)).over(ordered.rangeBetween(0, 0)).cast("double").alias("_t"),
        (F.rank().over(ordered) - 1 - F.sum(is_zero).over(group)).alias("_below"),
    )
    t = F.col("_t")
    nonzero = F.col("diff") != 0
    return ranked.groupBy(*by).agg(
        F.count(F.lit(1)).alias("n_users"),
        exact_mean("diff").alias("mean_diff"),
        exact_std("diff").alias("std_diff"),
        F.count(F.when(nonzero, True)).alias("n_nonzero"),
        F.coalesce(
            F.sum(F.when(F.col("diff") > 0, F.col("_below") + (t + 1) / 2)), F.lit(0.0)
        ).alias("rank_plus"),
        # a tie group of size t adds t^3 - t: each of its t rows adds t^2 - 1
        F.coalesce(F.sum(F.when(nonzero, t * t - 1)), F.lit(0.0)).alias("tie_term"),
    )
