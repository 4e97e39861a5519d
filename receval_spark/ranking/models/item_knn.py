r"""Item-kNN: item-item cosine similarity on train co-occurrence, top-N neighbours per item
(Sarwar et al., WWW 2001; Deshpande & Karypis, TOIS 2004), all in Spark SQL.

With U_i the distinct train users of item i and H(u) the distinct train items of user u:

.. math::

    sim(i, j) = \frac{|U_i \cap U_j|}{\sqrt{|U_i|\,|U_j|}} \qquad
    score(u, j) = \sum_{i \in H(u),\ j \in N(i)} sim(i, j)

N(i) holds the ``neighbours`` items most similar to i (ties by item id): similarities are
compared exactly, as the rationals sim² (:func:`cosine_order`), never as their rounded doubles,
and each is the double sqrt(|U_i ∩ U_j|² / (|U_i| |U_j|)), so equal cosines are the same double
(:func:`cosine`); scores are exact sums, so the ranking does not depend on the partitioning.
Items of H(u) are scored too (seen-item filtering happens when ranking). Cost: the
co-occurrence self-join has sum over users of |H(u)| (|H(u)| - 1) / 2 rows (each unordered
pair once; once per fit); scoring has sum over users of |H(u)| · neighbours rows — no
users x items product.
"""

from __future__ import annotations

import math

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, SCORE, USER
from receval_spark.expressions import cosine, cosine_order
from receval_spark.metrics.aggregate import exact_sum
from receval_spark.ranking.models.common import dense_ids

PAIR_BITS = 32  # an item pair (a, b) of dense numbers as one long: a * 2^PAIR_BITS + b
PAIR_BASE = 1 << PAIR_BITS
PAIRS_PER_PARTITION = 1_000_000  # co-occurring pairs per task (pair_partitions)
NEIGHBOUR_RANK = "neighbour_rank"  # 1 = the most similar other item


def pair_partitions(pairs: DataFrame) -> int:
    """Partitions for the co-occurrence self-join of the distinct (user_id, item_id) ``pairs``
    and for the count of its output: one per PAIRS_PER_PARTITION of the sum over users of
    |H(u)| (|H(u)| - 1) / 2, the rows the self-join makes. AQE would size both shuffles by
    their input, which is small where the output is not (ml-latest-small: 100k pairs, 22M
    co-occurring pairs made in one task). One Spark job (a sum)."""
    sizes = pairs.groupBy(USER).agg(F.count(F.lit(1)).cast("double").alias("_h"))
    total = sizes.agg(F.sum(F.col("_h") * (F.col("_h") - 1) / 2)).collect()[0][0] or 0.0
    return max(1, math.ceil(total / PAIRS_PER_PARTITION))


def item_neighbours(history: DataFrame, *, neighbours: int) -> DataFrame:
    """(item_id, neighbour, similarity, neighbour_rank): each item's ``neighbours`` most
    similar other items, ranked from 1 (ties by item id), so that the first n of them are its
    n most similar (:func:`nearest`). Similarities are ordered exactly (:func:`cosine_order`:
    items of up to 10^9 users)."""
    pairs = history.select(USER, ITEM).distinct()
    # items numbered 0..n-1 with their |U_i|: an unordered pair (i, j), i < j, is then one long
    ids = dense_ids(pairs, ITEM, name="_number").join(
        pairs.groupBy(ITEM).agg(F.count(F.lit(1)).alias("_n")), on=ITEM
    )
    parts = pair_partitions(pairs)
    numbered = pairs.join(ids, on=ITEM).select(USER, "_number").repartition(parts, USER)
    left, right = numbered.alias("a"), numbered.alias("b")
    pair = F.col("a._number").cast("long") * PAIR_BASE + F.col("b._number")
    # |U_i ∩ U_j| is symmetric: count each unordered pair once (half the self-join's rows),
    # then give it to both items. The raw pairs are shuffled to the count as they are: a
    # map-side partial count of 30M pairs into 13M keys costs more than it saves
    # (ml-latest-small on local[2]: 17 s with it, 9-11 s without).
    once = (
        left.join(right, on=USER)
        .filter(F.col("a._number") < F.col("b._number"))
        .select(pair.alias("_pair"))
        .repartition(parts, "_pair")
        .groupBy("_pair")
        .agg(F.count(F.lit(1)).alias("_both"))
    )
    first = ids.select(
        F.col("_number").alias("_a"), F.col(ITEM).alias("_i"), F.col("_n").alias("_ni")
    )
    second = ids.select(
        F.col("_number").alias("_b"), F.col(ITEM).alias("_j"), F.col("_n").alias("_nj")
    )
    similar = (
        once.select(
            F.shiftright("_pair", PAIR_BITS).cast("int").alias("_a"),
            (F.col("_pair") % PAIR_BASE).cast("int").alias("_b"),
            "_both",
        )
        .join(first, on="_a")
        .join(second, on="_b")
        .select(
            "_i", "_j", "_ni", "_nj", "_both", cosine("_both", "_ni", "_nj").alias("similarity")
        )
    )
    both_ways = F.array(  # each with the neighbour's |U_j|
        F.struct(F.col("_i").alias(ITEM), F.col("_j").alias("neighbour"), F.col("_nj").alias("_s")),
        F.struct(F.col("_j").alias(ITEM), F.col("_i").alias("neighbour"), F.col("_ni").alias("_s")),
    )
    together = similar.select(F.inline(both_ways), "_both", "similarity")
    order = Window.partitionBy(ITEM).orderBy(*cosine_order("_both", "_s"), F.col("neighbour"))
    return (
        together.withColumn(NEIGHBOUR_RANK, F.row_number().over(order))
        .filter(F.col(NEIGHBOUR_RANK) <= neighbours)
        .select(ITEM, "neighbour", "similarity", NEIGHBOUR_RANK)
    )


def nearest(neighbours: DataFrame, n: int) -> DataFrame:
    """The rows of each item's ``n`` most similar items in an :func:`item_neighbours` table
    of at least ``n`` neighbours per item: the same table as ``item_neighbours`` with
    ``neighbours=n``, without computing the similarities again (a grid over ``neighbours``)."""
    return neighbours.filter(F.col(NEIGHBOUR_RANK) <= n)


def item_knn_candidates(history: DataFrame, users: DataFrame, neighbours: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for each user in ``users``: score(u, j) of the module doc
    from the :func:`item_neighbours` table (users without train items get no candidates)."""
    own = history.select(USER, ITEM).distinct().join(users.select(USER), on=USER, how="left_semi")
    return (
        own.join(neighbours, on=ITEM)
        .groupBy(USER, F.col("neighbour").alias(ITEM))
        .agg(exact_sum("similarity").alias(SCORE))
    )


def item_knn_users(history: DataFrame, users: DataFrame, neighbours: DataFrame) -> DataFrame:
    """(user_id): the users of ``users`` item-kNN can score: some train item of theirs has a
    neighbour (exactly the users :func:`item_knn_candidates` gives rows)."""
    described = neighbours.select(ITEM).distinct()
    return (
        history.select(USER, ITEM)
        .join(users.select(USER), on=USER, how="left_semi")
        .join(described, on=ITEM, how="left_semi")
        .select(USER)
        .distinct()
    )


def item_knn_scores(history: DataFrame, pairs: DataFrame, neighbours: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for the distinct (user, item) ``pairs``: score(u, j) of the
    module doc, 0 where no train item of u has j among its neighbours, null for every pair of
    a user item-kNN cannot score (:func:`item_knn_users`: no train item with a neighbour)."""
    pairs = pairs.select(USER, ITEM).distinct()
    users = pairs.select(USER).distinct()
    scored = item_knn_candidates(history, users, neighbours)
    able = item_knn_users(history, users, neighbours).withColumn("_able", F.lit(True))
    return (
        pairs.join(scored, on=[USER, ITEM], how="left")
        .join(able, on=USER, how="left")
        .select(
            USER,
            ITEM,
            F.when(F.col("_able"), F.coalesce(F.col(SCORE), F.lit(0.0))).alias(SCORE),
        )
    )
