"""Most-popular baseline: score = distinct train users per item, ties by item id ascending."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, SCORE, USER
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
    slots = ranks_needed(users, k=k, seen=seen).select(
        USER, F.explode(F.sequence(F.lit(1), F.col("_needed"))).alias("_pos")
    )
    positions = popularity_positions(item_popularity(history))
    return slots.join(positions, on="_pos").select(USER, ITEM, SCORE)


def popularity_positions(popularity: DataFrame) -> DataFrame:
    """(item_id, score, _pos): every item of ``popularity`` (:func:`item_popularity`) and its
    position 1..n in the global popularity order (score descending, ties by item id): one
    catalogue-sized window."""
    order = Window.orderBy(F.col(SCORE).desc(), F.col(ITEM).asc())
    return popularity.withColumn("_pos", F.row_number().over(order))


def popularity_ranks(
    popularity: DataFrame, pairs: DataFrame, *, seen: DataFrame | None
) -> DataFrame:
    """(user_id, item_id, rank): for the (user, item) ``pairs`` whose item is in ``popularity``
    (:func:`item_popularity`, or the catalogue's train users per item) and not in ``seen`` for
    the user, the item's rank in the user's popularity list — the rank
    :func:`popularity_candidates` and seen filtering give it — without building the lists:
    rank = global position - the number of the user's seen items placed before it.

    One window per user over the pairs and the user's seen items in popularity order (a
    running count of seen items): linear in pairs + seen pairs, so a few pairs per user (e.g.
    the relevant recommended items) cost far less than every user's top-k popularity list.
    """
    positions = popularity_positions(popularity).select(ITEM, "_pos")
    ranked = pairs.select(USER, ITEM).distinct().join(positions, on=ITEM)
    if seen is None:
        return ranked.select(USER, ITEM, F.col("_pos").alias(RANK))
    seen = seen.select(USER, ITEM).distinct()
    unseen = ranked.join(seen, on=[USER, ITEM], how="left_anti").withColumn("_seen", F.lit(0))
    marks = seen.join(positions, on=ITEM).withColumn("_seen", F.lit(1))
    # distinct items hold distinct positions: no seen item ties with a pair
    earlier = Window.partitionBy(USER).orderBy("_pos").rowsBetween(Window.unboundedPreceding, 0)
    return (
        unseen.unionByName(marks)
        .withColumn("_before", F.sum("_seen").over(earlier))
        .filter(F.col("_seen") == 0)
        .select(USER, ITEM, (F.col("_pos") - F.col("_before")).cast("int").alias(RANK))
    )


def popularity_scores(history: DataFrame, pairs: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for ``pairs``: the item's popularity, 0 for items without
    train users."""
    return (
        pairs.select(USER, ITEM)
        .join(item_popularity(history), on=ITEM, how="left")
        .select(USER, ITEM, F.coalesce(F.col(SCORE), F.lit(0.0)).alias(SCORE))
    )
