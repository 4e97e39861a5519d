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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.aggregate import exact_sum, exact_window_sum

MISCALIBRATION = "miscalibration"
ALPHA = 0.01  # Steck's smoothing
CATEGORY = "category"


def category_shares(categories: DataFrame) -> DataFrame:
    """(item_id, category, share): share = 1 / the number of the item's distinct non-empty
    categories; items without categories have no row."""
    distinct = F.array_distinct(F.filter("categories", lambda c: c.isNotNull() & (c != "")))
    described = categories.select(ITEM, distinct.alias("_c")).filter(F.size("_c") > 0)
    return described.select(
        ITEM,
        F.explode("_c").alias(CATEGORY),
        (F.lit(1.0) / F.size("_c").cast("double")).alias("share"),
    )


def user_profiles(history: DataFrame, shares: DataFrame) -> DataFrame:
    """(user_id, category, p): p(c | u) over the distinct described items of u's history,
    partitioned by user (its one shuffle: :func:`miscalibration` joins it without another)."""
    items = history.select(USER, ITEM).repartition(USER).distinct()
    items = items.join(F.broadcast(shares), on=ITEM)
    totals = items.groupBy(USER, CATEGORY).agg(exact_sum("share").alias("_s"))
    described = Window.partitionBy(USER)
    return totals.select(
        USER, CATEGORY, (F.col("_s") / exact_window_sum("_s", described)).alias("p")
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
    and rank) at every k, from :func:`user_profiles` and :func:`category_shares`.

    The list slots are shuffled once, by user, like the profiles: every grouping, window and
    join below is then within a user's partition. Each k is a column of the same rows."""
    keys, ks = list(keys), sorted(set(ks))
    q, lists = _list_shares(ranked, shares, keys=keys, ks=ks)
    # each (list, history category) with its q (null: none of the list's items has it), by
    # a union grouped, not a join: a join on more keys than the user would shuffle again
    q_columns = [f"_q{k}" for k in ks]
    nothing = F.lit(None).cast("double")
    q_rows = q.select(
        *keys, CATEGORY, nothing.alias("p"), F.lit(None).cast("int").alias("_first"), *q_columns
    )
    p_rows = lists.join(profiles, on=USER).select(
        *keys, CATEGORY, "p", "_first", *[nothing.alias(c) for c in q_columns]
    )
    both = q_rows.unionByName(p_rows).groupBy(*keys, CATEGORY)
    pairs = both.agg(*[F.max(c).alias(c) for c in ("p", "_first", *q_columns)])
    values = (
        pairs.filter(F.col("p").isNotNull())
        .groupBy(*keys)
        .agg(
            *[_divergence(f"_q{k}", alpha).alias(f"_v{k}") for k in ks],
            F.min("_first").alias("_first"),
        )
    )
    # a list has a value at k when one of its first k items is described
    at_k = F.array(*[F.struct(F.lit(k).alias("k"), F.col(f"_v{k}").alias("v")) for k in ks])
    per_k = F.filter(at_k, lambda slot: slot["k"] >= F.col("_first"))
    long = values.select(*keys, F.inline(per_k))
    return long.select(*keys, "k", F.col("v").alias(MISCALIBRATION))


def _list_shares(
    ranked: DataFrame, shares: DataFrame, *, keys: list[str], ks: list[int]
) -> tuple[DataFrame, DataFrame]:
    """(*keys, category, _q<k> for each k): q(c | list at k), null where none of the first k
    items has c; and (*keys, _first): each list's best rank of a described item. Both
    partitioned by user."""
    slots = ranked.select(*keys, ITEM, RANK).repartition(USER)
    slots = slots.join(F.broadcast(shares), on=ITEM)  # item-sized
    sums = [exact_sum(F.when(F.col(RANK) <= k, F.col("share"))).alias(f"_s{k}") for k in ks]
    per_category = slots.groupBy(*keys, CATEGORY).agg(F.min(RANK).alias("_first"), *sums)
    whole = Window.partitionBy(*keys)
    q = per_category.select(
        *keys,
        CATEGORY,
        *[(F.col(f"_s{k}") / exact_window_sum(f"_s{k}", whole)).alias(f"_q{k}") for k in ks],
    )
    return q, per_category.groupBy(*keys).agg(F.min("_first").alias("_first"))


def _divergence(q: str, alpha: float) -> Column:
    """KL(p || (1 - alpha) q + alpha p) of a list's rows (one per history category; q null
    where the list has none of it), never below 0 (rounding): an aggregate expression."""
    p = F.col("p")
    smoothed = F.lit(1.0 - alpha) * F.coalesce(F.col(q), F.lit(0.0)) + F.lit(alpha) * p
    return F.greatest(exact_sum(p * F.log(p / smoothed)), F.lit(0.0))
