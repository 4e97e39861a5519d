r"""Paired model comparisons over users (docs/statistics.md): Spark computes the sufficient
statistics.

For a model m, the baseline b and one (segment, metric, k), the users both were evaluated on
give differences d_u = x_u(m) - x_u(b). Per comparison one aggregation yields

.. math::

    n,\ \bar d,\ s_d \text{ (paired t-test)} \qquad
    n_{\ne 0},\ R^+ = \sum_{d_u > 0} r_u,\ T = \sum_{\text{tie groups}} (t^3 - t)
    \text{ (Wilcoxon signed-rank)}

where r_u is the average rank of |d_u| among the non-zero differences (zeros dropped, as in
Wilcoxon's original method and scipy's default) and t the size of a group of tied |d_u|.
Only these scalars reach the driver (``receval_spark.stats`` turns them into p-values).
With ``evaluation.randomization_test``, the differences grouped by (comparison, |d|) also go
through a grouped pandas UDF that returns each comparison's randomization-test p-value
(receval_spark.metrics.randomization), collected with the same rows (one collect).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import cast

from pyspark import cloudpickle
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.columns import USER
from receval_spark.config import RandomizationTest
from receval_spark.metrics import randomization
from receval_spark.metrics.aggregate import exact_mean, exact_std
from receval_spark.metrics.randomization import P_RANDOMIZATION, sign_flip_kernel
from receval_spark.results import ComparisonRow, earlier_baseline
from receval_spark.stats import (
    SignedRanks,
    benjamini_hochberg,
    bonferroni,
    cohens_dz,
    difference_bounds,
    holm,
    minimum_detectable_effect,
    paired_t_pvalue,
    t_interval,
    wilcoxon_pvalue,
)

# executors run the kernel without importing this package (as the bootstrap's); pyspark's
# vendored cloudpickle has no type hints
cloudpickle.register_pickle_by_value(randomization)  # type: ignore[no-untyped-call]

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


def randomization_pvalues(
    differences: DataFrame, *, by: Sequence[str], test: RandomizationTest
) -> DataFrame:
    """(*by, p_randomization): Fisher's paired randomization test of every comparison
    (receval_spark.metrics.randomization). The differences are grouped by (*by, |d|) into
    (magnitude, c, positives) rows, at most one per user and usually far fewer, and a grouped
    pandas UDF turns each comparison's rows into its p-value; its generator is seeded with
    xxhash64(seed, *by), so the p-value depends neither on partitioning nor on row order.
    The grouped rows are spread over ``spark.sql.shuffle.partitions`` partitions by
    comparison (an explicit count, which adaptive execution keeps: coalesced to the few
    partitions their small size asks for, the draws would run on one or two cores)."""
    by = list(by)
    magnitudes = (
        differences.groupBy(*by, F.abs("diff").alias("magnitude"))
        .agg(
            F.count(F.lit(1)).alias("c"),
            F.count(F.when(F.col("diff") > 0, True)).alias("positives"),
        )
        .withColumn("seed", F.xxhash64(F.lit(test.seed), *by))
    )
    fields = {f.name: f for f in differences.schema.fields}
    schema = T.StructType(
        [*[fields[c] for c in by], T.StructField(P_RANDOMIZATION, T.DoubleType(), False)]
    )
    kernel = sign_flip_kernel(by, permutations=test.permutations)
    # a setting with a built-in default: never None
    partitions = int(cast(str, differences.sparkSession.conf.get("spark.sql.shuffle.partitions")))
    spread = magnitudes.repartition(partitions, *by)  # the grouping below adds no shuffle
    return spread.groupBy(*by).applyInPandas(kernel, schema)


def compare_run(
    per_user_by_protocol: dict[str, DataFrame | None],
    *,
    baseline: str,
    randomization: RandomizationTest | None = None,
) -> list[ComparisonRow]:
    """Every comparison of the run with the baseline (:func:`compare_models` under each
    protocol), not yet adjusted: the run's one Holm family also holds the comparisons with
    earlier dates, so the adjustment is the judge's (receval_spark.judgement, once per run)."""
    return [
        dataclasses.replace(c, protocol=protocol)
        for protocol, per_user in per_user_by_protocol.items()
        if per_user is not None
        for c in compare_models(per_user, baseline=baseline, randomization=randomization)
    ]


def family_adjusted(rows: list[ComparisonRow], *, correction: str = "holm") -> list[ComparisonRow]:
    """``rows`` with their t-test p-values adjusted over all ``rows`` as one family (no
    comparison left out) by Holm (p_holm), Bonferroni (p_bonferroni) and Benjamini-Hochberg
    (p_bh), the Wilcoxon and randomization-test p-values by Holm (p_wilcoxon_holm,
    p_randomization_holm; None where the test did not run), the family size, and
    ``correction``: the one that decides (evaluation.correction)."""
    p_ttest = [r.p_ttest for r in rows]
    p_holm, p_bonferroni, p_bh = holm(p_ttest), bonferroni(p_ttest), benjamini_hochberg(p_ttest)
    p_wilcoxon_holm = holm([r.p_wilcoxon for r in rows])
    p_randomization_holm = holm([r.p_randomization for r in rows])
    return [
        dataclasses.replace(
            r,
            p_holm=p_holm[i],
            p_wilcoxon_holm=p_wilcoxon_holm[i],
            p_randomization_holm=p_randomization_holm[i],
            p_bonferroni=p_bonferroni[i],
            p_bh=p_bh[i],
            holm_family_size=len(rows),
            correction=correction,
        )
        for i, r in enumerate(rows)
    ]


def compare_models(
    per_user: DataFrame, *, baseline: str, randomization: RandomizationTest | None = None
) -> list[ComparisonRow]:
    """Every model against ``baseline`` per (segment, metric, k) on their common users: mean
    difference with its t-interval (clipped to the range of a difference of the metric),
    paired t-test and Wilcoxon p-values (and the randomization test's, with
    ``randomization``), effect size d_z and the minimum detectable effect; not yet
    Holm-adjusted (:func:`compare_run`)."""
    differences = paired_differences(per_user, baseline=baseline)
    return comparison_rows(differences, randomization=randomization)


def earlier_differences(
    tonight: DataFrame, earlier: DataFrame, *, dates: Sequence[str]
) -> DataFrame:
    """(model, baseline, *keys, user_id, diff): each model's per-user value minus the mean of
    its own values of the run ``dates`` (``earlier`` holds those dates' rows; baseline
    ``<model>@<date>`` for one date, ``<model>@<first>..<last>`` for a window), on the users
    evaluated tonight and on at least one of the dates. Both in the ``per_user`` dataset's
    columns (user_id a string)."""
    keys = ["model", *COMPARISON_KEYS, USER]
    before = earlier.groupBy(*keys).agg(F.avg("value").alias("_before"))
    matched = [tonight[c].eqNullSafe(before[c]) for c in keys]
    return tonight.join(before, on=matched).select(
        tonight["model"],
        F.concat(tonight["model"], F.lit(earlier_baseline("", dates))).alias("baseline"),
        *[tonight[c] for c in (*COMPARISON_KEYS, USER)],
        (tonight["value"] - F.col("_before")).alias("diff"),
    )


def comparison_rows(
    differences: DataFrame, *, randomization: RandomizationTest | None = None
) -> list[ComparisonRow]:
    """One comparison per (model, baseline, segment, metric, k) of paired ``differences``
    (:func:`compare_models`' statistics), with the randomization test's p-value when
    ``randomization`` is given: its rows join the statistics' in one collect (a union, not
    a join: no shuffle of the statistics)."""
    keys = ["model", "baseline", *COMPARISON_KEYS]
    statistics = paired_statistics(differences, by=keys)
    if randomization is not None:
        pvalues = randomization_pvalues(differences, by=keys, test=randomization)
        statistics = statistics.unionByName(pvalues, allowMissingColumns=True)
    collected = statistics.collect()
    p_randomization = {  # the p-value rows: no statistics
        tuple(r[c] for c in keys): r[P_RANDOMIZATION] for r in collected if r["n_users"] is None
    }
    rows = []
    for r in [r for r in collected if r["n_users"] is not None]:
        low, high = t_interval(
            r["mean_diff"], r["std_diff"], r["n_users"], bounds=difference_bounds(r["metric"])
        )
        ranks = SignedRanks(r["n_users"], r["n_nonzero"], r["rank_plus"], r["tie_term"])
        rows.append(
            ComparisonRow(
                model=r["model"],
                baseline=r["baseline"],
                segment=r["segment"],
                metric=r["metric"],
                k=r["k"],
                n_users=r["n_users"],
                mean_diff=r["mean_diff"],
                std_diff=r["std_diff"],
                ci_low=low,
                ci_high=high,
                p_ttest=paired_t_pvalue(r["mean_diff"], r["std_diff"], r["n_users"]),
                p_wilcoxon=wilcoxon_pvalue(ranks),
                effect_size=cohens_dz(r["mean_diff"], r["std_diff"]),
                mde=minimum_detectable_effect(r["std_diff"], r["n_users"]),
                p_randomization=p_randomization.get(tuple(r[c] for c in keys)),
            )
        )
    return rows
