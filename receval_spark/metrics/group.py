"""The group-level beyond-accuracy metrics of the rankings with their spread: the exposure
statistics (:mod:`~receval_spark.metrics.exposure`) with the bootstrap std
(:mod:`~receval_spark.metrics.bootstrap`), and the sampled Jaccard personalization
(:mod:`~receval_spark.metrics.diversity`) with its spread over the pairs, as (*keys, k,
metric, value, n_users, std, n_samples, interval) rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.metrics.aggregate import exact_mean, exact_std, to_long, union_all
from receval_spark.metrics.bootstrap import bootstrap_std
from receval_spark.metrics.diversity import PERSONALIZATION_JACCARD, jaccard_pair_distances
from receval_spark.metrics.exposure import (
    GROUP_STATISTICS,
    exposure_blocks,
    exposure_statistics,
    ranking_exposure,
)
from receval_spark.metrics.lists import BeyondInputs, list_holders

GROUP_COLUMNS = ("metric", "value", "std", "n_samples", "interval", "n_users")


def group_beyond(
    ranked: DataFrame,
    inputs: BeyondInputs,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    metrics: Sequence[str],
    pairs: int,
    seed: int,
    bootstrap_samples: int = 0,
    exposure: DataFrame | None = None,
) -> DataFrame | None:
    """(*keys, k, metric, value, n_users, std, n_samples, interval) for the group metrics of
    the lists R_k(u) (``top_k_lists``) of the rankings ``ranked`` (*keys, user_id,
    item_id, rank; ranks 1..n per ranking), for every k in ``ks``; None when none is wanted.

    ``exposure``: ``ranking_exposure`` of ``ranked`` when the caller has it already.
    n_users is the number of lists in the group (``list_holders``).
    personalization_jaccard is a mean over sampled user pairs: std is their deviation,
    n_samples their number, interval ``t``. The other group statistics carry the bootstrap std
    and interval ``bootstrap`` when ``bootstrap_samples`` > 0, else a null std and interval.
    """
    keys = list(keys)
    by = [*keys, "k"]
    statistics = [m for m in GROUP_STATISTICS if m in metrics]
    if not statistics and PERSONALIZATION_JACCARD not in metrics:
        return None
    holders = list_holders(ranked, keys=keys, ks=ks)
    counts = persist(holders.groupBy(*by).agg(F.count(F.lit(1)).alias("n_lists")))
    frames = []
    if statistics:  # blocks persisted only when a statistic reads them
        if exposure is None:
            exposure = ranking_exposure(ranked, inputs.catalogue, keys=keys, ks=ks)
        blocks = persist(exposure_blocks(exposure, by=by))
        values = to_long(
            exposure_statistics(blocks, counts, inputs.totals, by=by),
            metrics=statistics,
            keys=[*by, "n_lists"],
        )
        spread = bootstrap_std(
            ranked, inputs, keys=keys, ks=ks, metrics=metrics, samples=bootstrap_samples, seed=seed
        )
        frames.append(_with_spread(values, spread, by=by))
    if PERSONALIZATION_JACCARD in metrics:
        distances = jaccard_pair_distances(ranked, keys=keys, ks=ks, pairs=pairs, seed=seed)
        frames.append(_sampled_mean(distances, counts, by=by))
    return union_all(frames)


def _with_spread(values: DataFrame, spread: DataFrame | None, *, by: Sequence[str]) -> DataFrame:
    """The exposure statistics' rows with their bootstrap std (interval ``bootstrap``), or a
    null std and interval without a bootstrap."""
    if spread is None:
        values = values.withColumn("std", F.lit(None).cast("double"))
    else:
        values = values.join(spread, on=[*by, "metric"], how="left")
    return (
        values.withColumn("n_samples", F.lit(None).cast("long"))
        .withColumn("interval", F.when(F.col("std").isNotNull(), F.lit("bootstrap")))
        .withColumnRenamed("n_lists", "n_users")
        .select(*by, *GROUP_COLUMNS)
    )


def _sampled_mean(distances: DataFrame, counts: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """personalization_jaccard: the mean of the sampled pairs' distances, their deviation and
    number, interval ``t``."""
    return (
        distances.groupBy(*by)
        .agg(
            exact_mean("value").alias("value"),
            exact_std("value").alias("std"),
            F.count(F.lit(1)).alias("n_samples"),
        )
        .join(counts, on=list(by))
        .select(
            *by,
            F.lit(PERSONALIZATION_JACCARD).alias("metric"),
            "value",
            "std",
            "n_samples",
            F.lit("t").alias("interval"),
            F.col("n_lists").alias("n_users"),
        )
    )
