r"""Corrected sampled metrics ``sampled_<N>_corrected``
(docs/evaluation.md#corrected-sampled-metrics-sampled_n_corrected): each positive of a sampled
list moved to its estimated place in the full list, and the accuracy metrics computed at those
places.

Krichene & Rendle (KDD 2020, "On Sampled Metrics for Item Recommendation") rank one positive
among m negatives drawn uniformly from the n - 1 others; its sampled rank r estimates its full
rank R without bias as 1 + (r - 1)(n - 1)/m, since each of the R - 1 items above it is drawn
with probability m/(n - 1). Here a user has several positives, ranked together with the
negatives, and the negatives are drawn from the user's own pool P(u) (the train catalogue
items the user never interacted with). For the positive at sampled rank s that is the j-th of
the user's positives (j = 1: the best) and so has r = s - j + 1 (1 + the negatives above it):

.. math::

    \tilde{p} = j + (r - 1) \cdot \frac{|P(u)|}{N_u}
              = \frac{j N_u + (r - 1) |P(u)|}{N_u}

the positives above it plus the unbiased estimate of the pool items above it, plus one
(N_u: the negatives actually drawn for u; with none, p̃ = j). The division is one correctly
rounded double of two exact integers, so p̃ <= k holds exactly when the rational does. Every
accuracy metric is then its ``full`` formula (receval_spark.metrics.accuracy) with p̃ for
the rank: a hit at k where p̃ <= k, 1/p̃ for MRR, 1/log2(p̃ + 1) for DCG, P@i = j/p̃ for AP.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER


def negative_pools(
    interactions: DataFrame, catalogue: DataFrame, pairs: DataFrame, truth: DataFrame
) -> DataFrame:
    """(user_id, pool, negatives) for every user with a sampled negative: |P(u)|, the
    ``catalogue`` items (item_id) the user never interacted with in any part of the log (the
    pool :func:`receval_spark.ranking.sampled.sampled_candidates` draws from), and N_u, the
    user's sampled ``pairs`` outside Rel(u) (``truth``)."""
    items = catalogue.select(ITEM).distinct()
    size = items.agg(F.count(F.lit(1)).alias("_catalogue"))
    interacted = (
        interactions.select(USER, ITEM)
        .distinct()
        .join(items, on=ITEM, how="left_semi")
        .groupBy(USER)
        .agg(F.count(F.lit(1)).alias("_interacted"))
    )
    negatives = (
        pairs.select(USER, ITEM)
        .join(truth.select(USER, ITEM), on=[USER, ITEM], how="left_anti")
        .groupBy(USER)
        .agg(F.count(F.lit(1)).alias("negatives"))
    )
    pool = F.col("_catalogue") - F.coalesce(F.col("_interacted"), F.lit(0))
    return (
        negatives.join(interacted, on=USER, how="left")
        .crossJoin(F.broadcast(size))
        .select(USER, pool.alias("pool"), "negatives")
    )


def estimated_positions(
    ranked: DataFrame, truth: DataFrame, pools: DataFrame, *, by: Sequence[str] = ()
) -> DataFrame:
    """(*by, user_id, item_id, rank): every positive of the sampled lists ``ranked`` (*by,
    user_id, item_id, rank; rank 1.. among Rel(u) and the negatives) with its estimated place
    p̃ in the full list (a double; module docstring), from ``pools`` (:func:`negative_pools`).

    Only the positives are kept: the metrics read nothing else. A positive below the sampled
    cut keeps no row, and needs none: p̃ >= its sampled rank, as |P(u)| >= N_u.
    """
    positives = ranked.join(truth.select(USER, ITEM), on=[USER, ITEM], how="left_semi")
    order = Window.partitionBy(*by, USER).orderBy(F.col(RANK).asc())
    j = F.row_number().over(order).cast("long")
    above = F.col(RANK).cast("long") - F.col("_j")  # r - 1: the negatives above it
    n = F.col("negatives")
    place = F.when(
        n > 0, (F.col("_j") * n + above * F.col("pool")).cast("double") / n.cast("double")
    ).otherwise(F.col("_j").cast("double"))
    return (
        positives.select(*by, USER, ITEM, RANK, j.alias("_j"))
        .join(pools, on=USER, how="left")
        .select(*by, USER, ITEM, place.alias(RANK))
    )
