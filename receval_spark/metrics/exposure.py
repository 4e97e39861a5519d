r"""Exposure metrics of the top-k lists: how the list slots spread over the catalogue.

Catalogue I = the configured item universe, by default the items with a train interaction
(n = |I|, docs/evaluation.md#catalogue); f_i = number of lists containing i (0 for catalogue
items never recommended), F = \sum_{i \in I} f_i; n_i = train interactions of i (0 for an item
without any). Coverage, Gini and entropy are over I: list slots of items outside I are left
out of them; the popularity bias reads every list slot.

.. math::

    Coverage = |\cup_u R_k(u) \cap I| / |I| \qquad
    Gini = \frac{\sum_{i=1}^{n} (2i - n - 1) f_{(i)}}{n \sum_i f_i} \ (f \text{ ascending over } I)

    Entropy = -\sum_i \frac{f_i}{F} \log_2 \frac{f_i}{F} \qquad
    PopularityBias = \frac{\sum_j f_j n_j / \sum_j f_j}{\text{mean } n_i \text{ over } I}
    \ (j \text{ over every recommended item})

    Personalization = 1 - \frac{\sum_{u<v} \cos(u, v)}{U (U - 1) / 2}, \quad
    \sum_{u<v} \cos(u, v) = \sum_i \frac{s_i^2 - q_i}{2},\
    s_i = \sum_{u \ni i} |R_k(u)|^{-1/2},\ q_i = \sum_{u \ni i} |R_k(u)|^{-1}

with U the number of lists and cos(u, v) the cosine of the binary item vectors of two lists.
No user pairs: every statistic is read off one item-level table (f_i, s_i, q_i per recommended
item, :func:`item_exposure`) condensed into exposure blocks (items grouped by f,
:func:`exposure_blocks`); group-level values come back as (*by, metric, value, n_lists).
Definitions and peers: docs/evaluation.md, section "Beyond-accuracy metrics".
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM
from receval_spark.metrics.aggregate import exact_sum, to_long
from receval_spark.metrics.diversity import PERSONALIZATION_JACCARD
from receval_spark.metrics.lists import (
    catalogue_members,
    ranked_lists,
    with_item_popularity,
    with_list_size,
)
from receval_spark.registry import family

COVERAGE = "coverage"
GINI = "gini"
ENTROPY = "entropy"
POPULARITY_BIAS = "popularity_bias"
PERSONALIZATION = "personalization"
# the registry's group statistics of the lists read off the exposure blocks: all but the
# sampled Jaccard personalization (diversity.jaccard_pair_distances) and the exposure gap of
# item groups (receval_spark.metrics.fairness)
GROUP_STATISTICS = tuple(
    m.name
    for m in family("beyond")
    if m.scope == "group" and m.name not in (PERSONALIZATION_JACCARD, "exposure_gap")
)
LONG_TAIL_COUNTS = ("n_items", "train_interactions", "n_recommended_items", "recommendations")


def weighted_exposure(rows: DataFrame, *, keys: Sequence[str], weight: Column) -> DataFrame:
    """(*keys, f, s, q) from list rows with ``list_size``: f = sum of w, s = sum of
    w |R_k(u)|^{-1/2} and q = sum of w / |R_k(u)| over the rows of each key.

    The weights are first summed as longs per (key, list size), so the exact sums of s and q
    run over the few distinct list sizes of a key instead of over every list row.
    """
    per_size = rows.groupBy(*keys, "list_size").agg(F.sum(weight).alias("_w"))
    w, x = F.col("_w"), F.lit(1.0) / F.sqrt("list_size")
    return per_size.groupBy(*keys).agg(
        F.sum(w).alias("f"), exact_sum(w * x).alias("s"), exact_sum(w * x * x).alias("q")
    )


def item_exposure(lists: DataFrame, catalogue: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, item_id, n_interactions, in_catalogue, f, s, q) from the item table
    ``catalogue`` (:mod:`~receval_spark.metrics.lists`): per recommended item, f = number
    of lists holding it, s = sum of |R_k(u)|^{-1/2} and q = sum of 1 / |R_k(u)| over those
    lists. Every group statistic below is read off this one item-level table."""
    return _sized_exposure(with_list_size(lists, by=by), catalogue, by=by)


def ranking_exposure(
    ranked: DataFrame, catalogue: DataFrame, *, keys: Sequence[str], ks: Sequence[int]
) -> DataFrame:
    """:func:`item_exposure` by (*keys, k) of the lists R_k(u) of the rankings ``ranked``
    (*keys, user_id, item_id, rank; ranks 1..n), their sizes read off the rankings
    (:func:`~receval_spark.metrics.lists.ranked_lists`)."""
    return _sized_exposure(ranked_lists(ranked, keys=keys, ks=ks), catalogue, by=[*keys, "k"])


def _sized_exposure(lists: DataFrame, catalogue: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """:func:`item_exposure` of lists that carry their ``list_size``."""
    return weighted_exposure(
        with_item_popularity(lists, catalogue),
        keys=[*by, ITEM, "n_interactions", "in_catalogue"],
        weight=F.lit(1),
    )


def popularity_bin(n_interactions: Column) -> Column:
    """floor(log2(train interactions)) (bin b holds 2^b..2^(b+1)-1 interactions); -1 for an
    item without a train interaction."""
    return F.when(n_interactions > 0, F.floor(F.log2(n_interactions)).cast("int")).otherwise(
        F.lit(-1)
    )


def long_tail(exposure: DataFrame, items: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, popularity_bin, n_items, train_interactions, n_recommended_items, recommendations):
    the catalogue I (the members of the item table ``items``) binned by train popularity
    (:func:`popularity_bin`), each bin's items and train interactions, and per group the
    distinct items recommended from it and the list slots it fills (sum of f_i): every
    recommended item counts in the bin of its train interactions, in I or not (bin -1: none).
    Every group gets every catalogue bin, zero where unused.

    The long-tail view of Park and Tuzhilin, "The long tail of recommender systems and how to
    leverage it" (RecSys 2008), with logarithmic popularity bins instead of a head/tail cut.
    """
    members = catalogue_members(items).select(
        popularity_bin(F.col("n_interactions")).alias("popularity_bin"), "n_interactions"
    )
    bins = members.groupBy("popularity_bin").agg(
        F.count(F.lit(1)).alias("n_items"),
        F.sum("n_interactions").alias("train_interactions"),
    )
    recommended = exposure.groupBy(
        *by, popularity_bin(F.col("n_interactions")).alias("popularity_bin")
    ).agg(
        F.count(F.lit(1)).alias("n_recommended_items"),
        F.sum("f").alias("recommendations"),
    )
    return (
        exposure.select(*by)
        .distinct()
        .crossJoin(bins)
        .join(recommended, on=[*by, "popularity_bin"], how="full")
        .fillna(0, subset=list(LONG_TAIL_COUNTS))
    )


def exposure_blocks(exposure: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, f, in_catalogue, c, interactions, pair_sum): items grouped by exposure f, with
    c items, the sum of their n_interactions and of their (s^2 - q) / 2. One small table per
    group from which every group statistic below is computed."""
    return exposure.groupBy(*by, "f", "in_catalogue").agg(
        F.count(F.lit(1)).alias("c"),
        F.sum("n_interactions").alias("interactions"),
        exact_sum((F.col("s") * F.col("s") - F.col("q")) / 2).alias("pair_sum"),
    )


def block_terms(blocks: DataFrame, totals: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """Per exposure block, the addends of every group statistic (:func:`exposure_statistics`).

    Catalogue blocks keep their c items, blocks outside the catalogue count as c = 0 items
    for coverage, Gini and entropy (lists of items outside I only: coverage 0, Gini and
    entropy null) but keep their list slots, with their train interactions, for the
    popularity bias. Gini
    counts never-recommended catalogue items as f = 0 without materialising them: the n0
    zero items take the first n0 positions of the ascending order, and items sharing a value
    f occupy a block of consecutive positions, so one window over the distinct f values of a
    group suffices. Ties do not change the value.
    """
    by = list(by)
    group = Window.partitionBy(*by)
    smaller = group.orderBy("f").rowsBetween(Window.unboundedPreceding, -1)
    n = F.col("n_catalogue").cast("long")
    c = F.when(F.col("in_catalogue"), F.col("c")).otherwise(F.lit(0)).cast("long")
    f = F.col("f").cast("long")
    start = (n - F.sum(c).over(group)) + F.coalesce(F.sum(c).over(smaller), F.lit(0))
    return blocks.crossJoin(F.broadcast(totals)).select(
        *by,
        n.alias("n"),
        c.alias("c"),
        (c * f).alias("mass"),
        ((c * f).cast("double") * F.log2(f)).alias("mass_log"),
        # f times the sum of (2 position - n - 1) over positions start+1 .. start+c (longs)
        (f * c * (2 * start + c - n)).alias("gini_term"),
        (f * F.col("interactions")).alias("slot_interactions"),
        (f * F.col("c")).alias("slots"),
        "pair_sum",
        "mean_item_interactions",
    )


def exposure_statistics(
    blocks: DataFrame, counts: DataFrame, totals: DataFrame, *, by: Sequence[str]
) -> DataFrame:
    """(*by, coverage, gini, entropy, popularity_bias, personalization, n_lists) from the
    exposure blocks (:func:`exposure_blocks`) and the list counts
    (:func:`~receval_spark.metrics.lists.list_counts`) of each group: one window and one
    aggregation over the blocks for all five statistics (formulas in the module doc).

    Coverage is catalogue coverage (Ge, Delgado-Battenfeld and Jannach, "Beyond accuracy:
    evaluating recommender systems by coverage and serendipity", RecSys 2010); Gini and
    entropy are the sales-diversity measures of Shani and Gunawardana, "Evaluating
    recommendation systems" (Recommender Systems Handbook, 2011), over all n catalogue items;
    PopularityBias = (sum_i f_i n_i / sum_i f_i, over every recommended item) / mean train
    interactions of the catalogue items (0 for those without any), the average
    recommendation popularity of Abdollahpouri, Burke and Mobasher (FLAIRS 2019) over all
    list slots, divided by the catalogue's mean (null when it is 0); Personalization = 1 -
    sum_{u<v} cos(u, v) / (n (n - 1) / 2), n = n_lists, the inter-user diversity of Zhou
    et al., "Solving the apparent diversity-accuracy dilemma of recommender systems" (PNAS
    2010), with the cosine for lists of unequal length; null below 2 lists.
    """
    by = list(by)
    mass = F.sum("mass")
    values = (
        block_terms(blocks, totals, by=by)
        .groupBy(*by)
        .agg(
            F.try_divide(F.sum("c"), F.first("n")).alias(COVERAGE),
            F.try_divide(F.sum("gini_term"), F.first("n") * mass).alias(GINI),
            (F.log2(mass) - F.try_divide(exact_sum("mass_log"), mass)).alias(ENTROPY),
            F.try_divide(
                F.sum("slot_interactions") / F.sum("slots"), F.first("mean_item_interactions")
            ).alias(POPULARITY_BIAS),
            exact_sum("pair_sum").alias("_pair_sum"),
        )
    )
    n_lists = F.col("n_lists")
    personalization = F.when(n_lists >= 2, 1 - F.col("_pair_sum") / (n_lists * (n_lists - 1) / 2))
    return values.join(counts, on=by).select(
        *by,
        COVERAGE,
        GINI,
        ENTROPY,
        POPULARITY_BIAS,
        personalization.alias(PERSONALIZATION),
        "n_lists",
    )


def group_statistics(
    blocks: DataFrame,
    counts: DataFrame,
    totals: DataFrame,
    *,
    by: Sequence[str],
    metrics: Sequence[str],
) -> DataFrame | None:
    """(*by, metric, value, n_lists) for the :data:`GROUP_STATISTICS` among ``metrics``
    (:func:`exposure_statistics`, one row per metric); None when none is wanted."""
    wanted = [m for m in GROUP_STATISTICS if m in metrics]
    if not wanted:
        return None
    return to_long(
        exposure_statistics(blocks, counts, totals, by=by), metrics=wanted, keys=[*by, "n_lists"]
    )
