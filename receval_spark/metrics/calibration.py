r"""Steck's miscalibration of each list (docs/evaluation.md#calibration).

Each item with categories C_i (distinct, non-empty) gives each of them the share 1 / |C_i|.
For user u, p(c | u) is the mean share of c over the distinct items of u's train history
that have categories, q(c | u) the same over the items of R_k(u) that have categories, and

.. math::

    \mathrm{miscalibration@k}(u) = \mathrm{KL}(p \,\|\, \tilde q)
        = \sum_c p(c \mid u) \ln \frac{p(c \mid u)}{\tilde q(c \mid u)}, \qquad
    \tilde q = (1 - \alpha)\, q + \alpha\, p

(Steck, "Calibrated Recommendations", RecSys 2018; natural logarithm, alpha = 0.01, every list
item weighted 1). 0 for a list whose category shares equal the history's; larger is worse.
Users without a described history item, or whose list has no described item, have no value.
Only the categories of u's history contribute (p(c) = 0 adds 0), so the work is one row per
(list, history category): no row for a category neither side holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, USER
from receval_spark.metrics.aggregate import exact_sum, exact_window_sum
from receval_spark.metrics.lists import cut_offs

MISCALIBRATION = "miscalibration"
ALPHA = 0.01  # Steck's smoothing


def category_shares(categories: DataFrame) -> DataFrame:
    """(item_id, category, share): share = 1 / the number of the item's distinct non-empty
    categories; items without categories have no row."""
    distinct = F.array_distinct(F.filter("categories", lambda c: c.isNotNull() & (c != "")))
    described = categories.select(ITEM, distinct.alias("_c")).filter(F.size("_c") > 0)
    return described.select(
        ITEM,
        F.explode("_c").alias("category"),
        (F.lit(1.0) / F.size("_c").cast("double")).alias("share"),
    )


def user_profiles(history: DataFrame, shares: DataFrame) -> DataFrame:
    """(user_id, category, p): p(c | u) over the distinct described items of u's history."""
    items = history.select(USER, ITEM).distinct().join(F.broadcast(shares), on=ITEM)
    totals = items.groupBy(USER, "category").agg(exact_sum("share").alias("_s"))
    described = Window.partitionBy(USER)
    return totals.select(
        USER, "category", (F.col("_s") / exact_window_sum("_s", described)).alias("p")
    )


def miscalibration(
    ranked: DataFrame,
    profiles: DataFrame,
    shares: DataFrame,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    alpha: float = ALPHA,
) -> DataFrame:
    """(*keys, k, miscalibration) per list (``keys`` end with user_id; ``ranked`` has item_id
    and rank) at every k, from :func:`user_profiles` and :func:`category_shares`."""
    keys = list(keys)
    slots = ranked.select(*keys, ITEM, F.explode(cut_offs(ks)).alias("k"))
    slots = slots.join(F.broadcast(shares), on=ITEM)  # item-sized
    per_category = slots.groupBy(*keys, "k", "category").agg(exact_sum("share").alias("_s"))
    share = F.col("_s") / exact_window_sum("_s", Window.partitionBy(*keys, "k"))
    q = per_category.select(*keys, "k", "category", share.alias("q"))
    lists = q.select(*keys, "k").distinct()
    pairs = lists.join(profiles, on=USER).join(q, on=[*keys, "k", "category"], how="left")
    p = F.col("p")
    smoothed = F.lit(1.0 - alpha) * F.coalesce(F.col("q"), F.lit(0.0)) + F.lit(alpha) * p
    divergence = exact_sum(p * F.log(p / smoothed))
    return pairs.groupBy(*keys, "k").agg(F.greatest(divergence, F.lit(0.0)).alias(MISCALIBRATION))
