r"""Item-kNN: item-item cosine similarity on train co-occurrence, top-N neighbours per item
(Sarwar et al., WWW 2001; Deshpande & Karypis, TOIS 2004).

With U_i the distinct train users of item i and H(u) the distinct train items of user u:

.. math::

    sim(i, j) = \frac{|U_i \cap U_j|}{\sqrt{|U_i|\,|U_j|}} \qquad
    score(u, j) = \sum_{i \in H(u),\ j \in N(i)} sim(i, j)

N(i) holds the ``neighbours`` items most similar to i (ties by item id): similarities are
compared exactly, as the rationals sim² (item_knn_kernel, the keys of
:func:`~receval_spark.expressions.cosine_order`), never as their rounded doubles, and each is
the double sqrt(|U_i ∩ U_j|² / (|U_i| |U_j|)), so equal cosines are the same double
(:func:`~receval_spark.expressions.cosine`); scores are exact sums, so the ranking does not
depend on the partitioning. Items of H(u) are scored too (seen-item filtering happens when
ranking). Cost: the neighbour table counts co-occurrences per block of items with a sparse
product (:func:`item_neighbours`), its blocks holding at most sum over users of
|H(u)| · min(|H(u)|, blocks) train pairs together, once per fit; the rest is Spark SQL, and
scoring has sum over users of |H(u)| · neighbours rows — no users x items product.
"""

from __future__ import annotations

import math

from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.cache import persist
from receval_spark.columns import ITEM, SCORE, USER
from receval_spark.expressions import cosine
from receval_spark.metrics.aggregate import exact_sum
from receval_spark.ordering import global_row_number
from receval_spark.ranking.models import item_knn_kernel
from receval_spark.ranking.models.item_knn_kernel import neighbours_kernel

# executors run the kernel without importing this package: cloudpickle ships it by value
# (vendored cloudpickle has no type hints)
cloudpickle.register_pickle_by_value(item_knn_kernel)  # type: ignore[no-untyped-call]

# at most this many (block item, item) counts per block: a dense block's arrays stay near 100 MB
# (ml-latest-small's table: 4.7-6.1 s with 2^22, 5.7-12.6 s with 2^24, the same rows)
BLOCK_CELLS = 1 << 22
BLOCK_ROWS = 4_000_000  # about this many train pairs per block (a share of sum |H(u)|²)
NEIGHBOUR_RANK = "neighbour_rank"  # 1 = the most similar other item
CHOSEN = T.StructType(
    [
        T.StructField("_a", T.IntegerType()),
        T.StructField("_b", T.IntegerType()),
        T.StructField("_both", T.LongType()),
        T.StructField("_nb", T.LongType()),
        T.StructField(NEIGHBOUR_RANK, T.IntegerType()),
    ]
)


def blocks_of(pairs: DataFrame, items: int) -> int:
    """The number of item blocks for the distinct (user_id, item_id) ``pairs`` of ``items``
    items: enough that a block's counts (block items x items) stay within BLOCK_CELLS and its
    rows within about BLOCK_ROWS. A user of |H(u)| items is in at most min(|H(u)|, blocks)
    blocks, so the blocks hold about sum |H(u)|² / blocks rows: the sum's share of BLOCK_ROWS
    (a user of fewer items than there are blocks is in fewer). One Spark job (a sum)."""
    sizes = pairs.groupBy(USER).agg(F.count(F.lit(1)).cast("double").alias("_h"))
    squares = sizes.agg(F.sum(F.col("_h") * F.col("_h"))).collect()[0][0] or 0.0
    return max(1, math.ceil(items * items / BLOCK_CELLS), math.ceil(squares / BLOCK_ROWS))


def item_neighbours(history: DataFrame, *, neighbours: int) -> DataFrame:
    """(item_id, neighbour, similarity, neighbour_rank): each item's ``neighbours`` most
    similar other items, ranked from 1 (ties by item id), so that the first n of them are its
    n most similar (:func:`nearest`). Similarities are ordered exactly (items of up to 10^9
    users), and each is :func:`~receval_spark.expressions.cosine` of the exact counts.

    Items are numbered in item-id order and cut into blocks (:func:`blocks_of`); a block
    gets every train pair of the users who have one of its items (a join of the pairs with
    the blocks each user is in), and one pandas UDF per block counts the co-occurrences with
    a sparse product and keeps each item's first ``neighbours``
    (:mod:`~receval_spark.ranking.models.item_knn_kernel`): no pair table of sum |H(u)|² rows
    is shuffled, and a block's rows stay within a budget whatever the number of users."""
    pairs = history.select(USER, ITEM).distinct()
    sizes = pairs.groupBy(ITEM).agg(F.count(F.lit(1)).alias("_n"))
    ordered = global_row_number(sizes, [F.col(ITEM)], name="_position")
    ids = persist(ordered.select(ITEM, (F.col("_position") - 1).cast("int").alias("_number"), "_n"))
    items = ids.count()
    blocks = blocks_of(pairs, items)
    block_items = max(1, -(-items // blocks))  # 1 for an empty history
    numbered = pairs.join(ids, on=ITEM).select(USER, "_number", "_n")
    block = F.call_function("div", F.col("_number"), F.lit(block_items)).cast("int").alias("_block")
    members = numbered.select(USER, block).distinct()
    kernel = neighbours_kernel(items=items, block_items=block_items, neighbours=neighbours)
    chosen = numbered.join(members, on=USER).groupBy("_block").applyInPandas(kernel, CHOSEN)
    first = ids.select(F.col("_number").alias("_a"), ITEM, F.col("_n").alias("_na"))
    second = ids.select(F.col("_number").alias("_b"), F.col(ITEM).alias("neighbour"))
    similarity = cosine("_both", "_na", "_nb").alias("similarity")
    named = chosen.join(first, on="_a").join(second, on="_b")
    return named.select(ITEM, "neighbour", similarity, NEIGHBOUR_RANK)


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
