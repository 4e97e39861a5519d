r"""The top-k lists and the item table of the catalogue that every beyond-accuracy metric reads.

A list R_k(u) is the non-empty top-k of an evaluated user: one row per (list, item),
``(*by, user_id, item_id)`` where ``by`` names a list group such as (model, segment, k). The
catalogue I is the configured item universe (data.catalogue, or data.items marked as the
catalogue), by default the items with a train interaction; the item table holds every item
of I and every train item with its train users and interactions and whether it is in I
(docs/evaluation.md#catalogue).
The metrics themselves live by family: :mod:`~receval_spark.metrics.exposure` (coverage, Gini,
entropy, popularity bias, personalization, long tail), :mod:`~receval_spark.metrics.diversity`
(Jaccard personalization, ILD, category coverage), :mod:`~receval_spark.metrics.novelty`
(novelty, serendipity) and :mod:`~receval_spark.metrics.bootstrap` (the spread of the group
statistics), assembled per user by :mod:`~receval_spark.metrics.per_user` and per list group by
:mod:`~receval_spark.metrics.group`. Every definition is in docs/evaluation.md, section
"Beyond-accuracy metrics".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER


def cut_offs(ks: Sequence[int]) -> Column:
    """The cut-offs k of ``ks`` with k >= the row's rank: explode it to count a list slot
    towards every cut-off that includes it."""
    return F.filter(F.array(*[F.lit(int(k)) for k in ks]), lambda k: k >= F.col(RANK))


def top_k_lists(ranked: DataFrame, *, ks: Sequence[int]) -> DataFrame:
    """R_k(u) for every k, read off one ranking: the ranked rows (any extra columns kept) with
    their k, one row per k >= rank."""
    exploded = ranked.select("*", F.explode(F.array(*[F.lit(int(k)) for k in ks])).alias("k"))
    return exploded.filter(F.col(RANK) <= F.col("k"))


def item_statistics(history: DataFrame) -> DataFrame:
    """The item table of the default catalogue (I = the train items): (item_id, n_users,
    n_interactions, in_catalogue = true) over the train interactions."""
    return history.groupBy(ITEM).agg(
        F.countDistinct(USER).alias("n_users"),
        F.count(F.lit(1)).alias("n_interactions"),
        F.lit(True).alias("in_catalogue"),
    )


def with_catalogue(statistics: DataFrame, catalogue: DataFrame | None) -> DataFrame:
    """The item table of a configured catalogue: (item_id, n_users, n_interactions,
    in_catalogue) for every item of I and every train item, from the train ``statistics``
    (:func:`item_statistics`) and ``catalogue`` (item_id), the ids of I; None: I is the train
    items and ``statistics`` is the table. A catalogue item without a train interaction has 0
    train users and interactions; a train item outside I keeps its counts (novelty and the
    popularity bias read them) with ``in_catalogue`` false."""
    if catalogue is None:
        return statistics
    members = catalogue.select(ITEM).distinct().withColumn("_member", F.lit(True))
    joined = statistics.drop("in_catalogue").join(members, on=ITEM, how="full")
    return joined.select(
        ITEM,
        F.coalesce(F.col("n_users"), F.lit(0).cast("long")).alias("n_users"),
        F.coalesce(F.col("n_interactions"), F.lit(0).cast("long")).alias("n_interactions"),
        F.coalesce(F.col("_member"), F.lit(False)).alias("in_catalogue"),
    )


def catalogue_members(items: DataFrame) -> DataFrame:
    """The rows of the item table ``items`` whose item is in the catalogue I."""
    return items.filter(F.col("in_catalogue"))


def catalogue_totals(history: DataFrame, items: DataFrame) -> DataFrame:
    """One row: n_catalogue = |I|, n_train_users, mean_item_interactions = the mean train
    interactions of the items of I (0 for those without any), from the item table
    ``items`` (:func:`item_statistics`, :func:`with_catalogue`)."""
    members = catalogue_members(items).agg(
        F.count(F.lit(1)).alias("n_catalogue"),
        F.avg("n_interactions").alias("mean_item_interactions"),
    )
    users = history.agg(F.countDistinct(USER).alias("n_train_users"))
    return members.crossJoin(users)


def with_list_size(lists: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """The lists with ``list_size`` = |R_k(u)|, the number of rows of the user's list."""
    return lists.withColumn("list_size", F.count(F.lit(1)).over(Window.partitionBy(*by, USER)))


def with_ranking_length(ranked: DataFrame, *, keys: Sequence[str], ks: Sequence[int]) -> DataFrame:
    """The rows of rank <= max(ks) of the rankings (*keys, user_id, rank, ...) with
    ``n_ranked``, the number of such rows of the ranking: with ranks 1..n, |R_k(u)| =
    min(k, n_ranked), so no list needs counting once the lists are formed."""
    window = Window.partitionBy(*keys, USER)
    return ranked.filter(F.col(RANK) <= max(ks)).withColumn(
        "n_ranked", F.count(F.lit(1)).over(window)
    )


def ranked_lists(ranked: DataFrame, *, keys: Sequence[str], ks: Sequence[int]) -> DataFrame:
    """:func:`top_k_lists` of the rankings (*keys, user_id, item_id, rank; ranks 1..n) with
    ``list_size`` = min(k, n) (:func:`with_ranking_length`): the lists of :func:`with_list_size`
    without counting the k-exploded rows."""
    lists = top_k_lists(with_ranking_length(ranked, keys=keys, ks=ks), ks=ks)
    return lists.withColumn("list_size", F.least(F.col("k"), F.col("n_ranked")))


def with_item_popularity(lists: DataFrame, items: DataFrame) -> DataFrame:
    """The lists with ``n_interactions`` (train interactions of the item, 0 for an item
    without any) and ``in_catalogue`` (whether the item is in I), from the item table
    ``items``."""
    known = items.select(ITEM, "n_interactions", "in_catalogue")
    return lists.join(known, on=ITEM, how="left").fillna(
        {"n_interactions": 0, "in_catalogue": False}
    )


def list_counts(lists: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, n_lists): the number of lists of each group."""
    return lists.groupBy(*by).agg(F.countDistinct(USER).alias("n_lists"))


def list_holders(ranked: DataFrame, *, keys: Sequence[str], ks: Sequence[int]) -> DataFrame:
    """(*keys, user_id, k): one row per non-empty R_k(u) of the rankings ``ranked`` (*keys,
    user_id, rank, ...), read off each ranking's first rank: a list is non-empty at every k at
    or past its first item (rank 1, or later for an external model's ``rank_semantics:
    positions`` whose first slots are empty)."""
    first = ranked.groupBy(*keys, USER).agg(F.min(RANK).alias(RANK))
    return top_k_lists(first, ks=ks).drop(RANK)


@dataclass(frozen=True)
class BeyondInputs:
    """What the beyond-accuracy metrics read besides the lists.

    ``catalogue``: the item table, :func:`item_statistics` or :func:`with_catalogue`;
    ``totals``: :func:`catalogue_totals`; ``truth``:
    Rel(u) as (user_id, item_id, ...). ``expected``: (user_id, item_id, rank), the items that
    are not surprising for serendipity: item i is expected in u's list at k when rank <= k (the
    rank in u's popularity list; 0 for an expectation that holds at every k).
    ``categories`` / ``units``: item metadata, or None when absent. ``head``: (item_id) of
    the head items (items=head), whose complement is the long tail of aplt and aclt; None:
    neither is computed.
    """

    catalogue: DataFrame
    totals: DataFrame
    truth: DataFrame
    expected: DataFrame
    categories: DataFrame | None = None
    units: DataFrame | None = None
    head: DataFrame | None = None
