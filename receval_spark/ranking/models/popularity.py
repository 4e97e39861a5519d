"""Most-popular baseline: score = distinct train users per item, ties by item id ascending."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, SCORE, USER
from receval_spark.ranking.models.common import ranks_needed


def item_popularity(history: DataFrame) -> DataFrame:
    """(item_id, score): the number of distinct users who interacted with the item."""
    return history.groupBy(ITEM).agg(F.countDistinct(USER).cast("double").alias(SCORE))


def popularity_candidates(
    history: DataFrame, users: DataFrame, *, k: int, seen: DataFrame | None
) -> DataFrame:
    """The most popular items for each user in ``users``, enough to leave k after filtering seen.

    User u gets the items of global popularity rank 1..k + |seen(u)|: after removing u's seen
    items at least k remain (when the catalogue has them). Rows: sum over users of
    (k + |seen(u)|), linear in users and history; no users x items product.
    """
    order = Window.orderBy(F.col(SCORE).desc(), F.col(ITEM).asc())  # catalogue-sized, once
    ranked_items = item_popularity(history).withColumn("_pos", F.row_number().over(order))
    slots = ranks_needed(users, k=k, seen=seen).select(
        USER, F.explode(F.sequence(F.lit(1), F.col("_needed"))).alias("_pos")
    )
    return slots.join(ranked_items, on="_pos").select(USER, ITEM, SCORE)


def popularity_scores(history: DataFrame, pairs: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for ``pairs``: the item's popularity, 0 for items without
    train users."""
    return (
        pairs.select(USER, ITEM)
        .join(item_popularity(history), on=ITEM, how="left")
        .select(USER, ITEM, F.coalesce(F.col(SCORE), F.lit(0.0)).alias(SCORE))
    )
