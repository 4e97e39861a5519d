"""Most-popular baseline: score = distinct train users per item, ties by item id ascending."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.ordering import global_row_number
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
    position 1..n in the global popularity order (score descending, ties by item id), numbered
    range by range (:func:`~receval_spark.ordering.global_row_number`)."""
    return global_row_number(popularity, [F.col(SCORE).desc(), F.col(ITEM).asc()], name="_pos")


def popularity_ranks(
    popularity: DataFrame, pairs: DataFrame, *, seen: DataFrame | None
) -> DataFrame:
    """(user_id, item_id, rank): for the (user, item) ``pairs`` whose item is in ``popularity``
    (:func:`item_popularity`, or the catalogue's train users per item) and not in ``seen`` for
    the user, the item's rank in the user's popularity list — the rank
    :func:`popularity_candidates` and seen filtering give it — without building the lists:
    rank = global position - the number of the user's distinct seen items placed before it.

    One window per user over the pairs and those of the user's seen items placed no later
    than the user's last pair (the others cannot move a rank), in popularity order, seen
    items first on a tie: a running count of seen items, and a pair right after a seen item
    of its own position is itself seen and dropped — no anti-join of the pairs with
    ``seen``. Linear in pairs plus the seen pairs of their users, so a few pairs per user
    (e.g. the relevant recommended items) cost far less than every user's top-k popularity
    list.
    """
    # read twice below when seen items are filtered; global_row_number numbers them once
    positions = popularity_positions(popularity).select(ITEM, "_pos")
    ranked = pairs.select(USER, ITEM).distinct().join(positions, on=ITEM)
    if seen is None:
        return ranked.select(USER, ITEM, F.col("_pos").cast("int").alias(RANK))
    last = ranked.groupBy(USER).agg(F.max("_pos").alias("_last"))
    marks = (
        seen.select(USER, ITEM)
        .join(last, on=USER)
        .join(positions, on=ITEM)
        .filter(F.col("_pos") <= F.col("_last"))
        .select(USER, "_pos")
        .distinct()  # distinct items hold distinct positions
        .withColumn("_seen", F.lit(1))
    )
    order = Window.partitionBy(USER).orderBy(F.col("_pos"), F.col("_seen").desc())
    so_far = order.rowsBetween(Window.unboundedPreceding, 0)
    is_seen = (F.lag("_seen").over(order) == 1) & (F.lag("_pos").over(order) == F.col("_pos"))
    return (
        ranked.withColumn("_seen", F.lit(0))
        .unionByName(marks, allowMissingColumns=True)
        .withColumn("_before", F.sum("_seen").over(so_far))
        .withColumn("_is_seen", F.coalesce(is_seen, F.lit(False)))
        .filter((F.col("_seen") == 0) & ~F.col("_is_seen"))
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
