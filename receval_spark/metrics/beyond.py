r"""Beyond-accuracy metrics of the top-k lists (DESIGN §6), linear in users and list slots.

Lists are the non-empty top-k lists of the evaluated users, one row per (list, item):
``(*by, user_id, item_id)`` where ``by`` names a list group such as (model, segment, k).
Catalogue I = items with a train interaction; f_i = number of lists containing i;
p(i) = max(train users of i, 1) / train users.

.. math::

    Coverage = |\cup_u R_k(u) \cap I| / |I| \qquad
    Gini = \frac{\sum_{i=1}^{n} (2i - n - 1) f_{(i)}}{n \sum_i f_i} \ (f \text{ ascending over } I)

    Entropy = -\sum_i \frac{f_i}{F} \log_2 \frac{f_i}{F} \qquad
    Novelty(u) = \frac{1}{|R_k(u)|} \sum_{i \in R_k(u)} -\log_2 p(i)

    PopularityBias = \frac{\text{mean train interactions of list slots}}
                          {\text{mean train interactions of catalogue items}}

    \sum_{u<v} \cos(u, v) = \sum_i \frac{s_i^2 - q_i}{2},\quad
    s_i = \sum_{u \ni i} |R_k(u)|^{-1/2},\ q_i = \sum_{u \ni i} |R_k(u)|^{-1}

    ILD(u) = 1 - \frac{\lVert \sum_{i} \hat v_i \rVert^2 - n}{n (n - 1)} \qquad
    CategoryCoverage(u) = \frac{|\cup_{i \in R_k(u)} C_i \cap C_I|}{|C_I|}

with \hat v_i the unit embedding (``ild_embedding``) or the unit multi-hot category vector
(``ild_category``; \lVert \sum \hat v \rVert^2 = \sum_c s_c^2, s_c = \sum_{i \ni c}
|C_i|^{-1/2}), and C_I the categories of the catalogue items.

No user pairs, no per-list item pairs: every metric is a join on item or user and an
aggregation. Group-level metrics come back as (*by, metric, value, n_users); per-user ones as
(*by, user_id, metric, value) for macro averaging with the accuracy metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, USER
from receval_spark.expressions import seeded_hash, uniform
from receval_spark.metrics.aggregate import (
    LIMB,
    exact_mean,
    exact_std,
    exact_sum,
    limb_sum,
    to_long,
    union_all,
)
from receval_spark.registry import family


def top_k_lists(ranked: DataFrame, *, ks: Sequence[int]) -> DataFrame:
    """R_k(u) for every k, read off one ranking: the ranked rows (any extra columns kept) with
    their k, one row per k >= rank."""
    exploded = ranked.select("*", F.explode(F.array(*[F.lit(int(k)) for k in ks])).alias("k"))
    return exploded.filter(F.col(RANK) <= F.col("k"))


def item_statistics(history: DataFrame) -> DataFrame:
    """The catalogue: (item_id, n_users, n_interactions) over the train interactions."""
    return history.groupBy(ITEM).agg(
        F.countDistinct(USER).alias("n_users"),
        F.count(F.lit(1)).alias("n_interactions"),
    )


def catalogue_totals(history: DataFrame, catalogue: DataFrame) -> DataFrame:
    """One row: n_catalogue, n_train_users, mean_item_interactions."""
    items = catalogue.agg(
        F.count(F.lit(1)).alias("n_catalogue"),
        F.avg("n_interactions").alias("mean_item_interactions"),
    )
    users = history.agg(F.countDistinct(USER).alias("n_train_users"))
    return items.crossJoin(users)


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


def with_item_popularity(lists: DataFrame, catalogue: DataFrame) -> DataFrame:
    """The lists with ``n_interactions`` (train interactions of the item, 0 outside the
    catalogue) and ``in_catalogue``."""
    known = catalogue.select(ITEM, "n_interactions", F.lit(True).alias("in_catalogue"))
    return lists.join(known, on=ITEM, how="left").fillna(
        {"n_interactions": 0, "in_catalogue": False}
    )


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
    """(*by, item_id, n_interactions, in_catalogue, f, s, q): per recommended item, f = number
    of lists holding it, s = sum of |R_k(u)|^{-1/2} and q = sum of 1 / |R_k(u)| over those
    lists. Every group statistic below is read off this one item-level table."""
    return _sized_exposure(with_list_size(lists, by=by), catalogue, by=by)


def ranking_exposure(
    ranked: DataFrame, catalogue: DataFrame, *, keys: Sequence[str], ks: Sequence[int]
) -> DataFrame:
    """:func:`item_exposure` by (*keys, k) of the lists R_k(u) of the rankings ``ranked``
    (*keys, user_id, item_id, rank; ranks 1..n), their sizes read off the rankings
    (:func:`ranked_lists`)."""
    return _sized_exposure(ranked_lists(ranked, keys=keys, ks=ks), catalogue, by=[*keys, "k"])


def _sized_exposure(lists: DataFrame, catalogue: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """:func:`item_exposure` of lists that carry their ``list_size``."""
    return weighted_exposure(
        with_item_popularity(lists, catalogue),
        keys=[*by, ITEM, "n_interactions", "in_catalogue"],
        weight=F.lit(1),
    )


LONG_TAIL_COUNTS = ("n_items", "train_interactions", "n_recommended_items", "recommendations")


def popularity_bin(n_interactions: Column, in_catalogue: Column) -> Column:
    """floor(log2(train interactions)) for catalogue items (bin b holds 2^b..2^(b+1)-1
    interactions); -1 for recommended items outside the catalogue."""
    return F.when(in_catalogue, F.floor(F.log2(n_interactions)).cast("int")).otherwise(F.lit(-1))


def long_tail(exposure: DataFrame, catalogue: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, popularity_bin, n_items, train_interactions, n_recommended_items, recommendations):
    the catalogue binned by train popularity (:func:`popularity_bin`), each bin's items and
    train interactions, and per group the distinct items recommended from it and the list
    slots it fills (sum of f_i). Every group gets every catalogue bin, zero where unused."""
    items = catalogue.select(
        popularity_bin(F.col("n_interactions"), F.lit(True)).alias("popularity_bin"),
        "n_interactions",
    )
    bins = items.groupBy("popularity_bin").agg(
        F.count(F.lit(1)).alias("n_items"),
        F.sum("n_interactions").alias("train_interactions"),
    )
    recommended = exposure.groupBy(
        *by, popularity_bin(F.col("n_interactions"), F.col("in_catalogue")).alias("popularity_bin")
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


def list_counts(lists: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, n_lists): the number of lists of each group."""
    return lists.groupBy(*by).agg(F.countDistinct(USER).alias("n_lists"))


def list_holders(ranked: DataFrame, *, keys: Sequence[str], ks: Sequence[int]) -> DataFrame:
    """(*keys, user_id, k): one row per non-empty R_k(u) of the rankings ``ranked`` (*keys,
    user_id, rank, ...), read off their rank-1 rows: a list is non-empty at every k once it
    has a first item."""
    first = ranked.filter(F.col(RANK) == 1).select(*keys, USER, RANK)
    return top_k_lists(first, ks=ks).drop(RANK)


def exposure_blocks(exposure: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, f, in_catalogue, c, interactions, pair_sum): items grouped by exposure f, with
    c items, the sum of their n_interactions and of their (s^2 - q) / 2. One small table per
    group from which every group statistic below is computed."""
    return exposure.groupBy(*by, "f", "in_catalogue").agg(
        F.count(F.lit(1)).alias("c"),
        F.sum("n_interactions").alias("interactions"),
        exact_sum((F.col("s") * F.col("s") - F.col("q")) / 2).alias("pair_sum"),
    )


GROUP_STATISTICS = ("coverage", "gini", "entropy", "popularity_bias", "personalization")


def block_terms(blocks: DataFrame, totals: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """Per exposure block, the addends of every group statistic (:func:`group_values`).

    Catalogue blocks keep their c items, blocks outside the catalogue count as c = 0 items
    for coverage, Gini and entropy (lists of unknown items only: coverage 0, Gini and
    entropy null) but keep their list slots for the popularity bias (n_i = 0 there). Gini
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


def group_values(
    blocks: DataFrame, counts: DataFrame, totals: DataFrame, *, by: Sequence[str]
) -> DataFrame:
    """(*by, coverage, gini, entropy, popularity_bias, personalization, n_lists) from the
    exposure blocks (:func:`exposure_blocks`) and the list counts (:func:`list_counts`) of
    each group: one window and one aggregation over the blocks for all five statistics.

    PopularityBias = (sum_i f_i n_i / sum_i f_i) / mean train interactions of catalogue items;
    Personalization = 1 - sum_{u<v} cos(u, v) / (n (n - 1) / 2) with the pair sum of the
    module doc, n = n_lists; null below 2 lists.
    """
    by = list(by)
    mass = F.sum("mass")
    values = (
        block_terms(blocks, totals, by=by)
        .groupBy(*by)
        .agg(
            (F.sum("c") / F.first("n")).alias("coverage"),
            F.try_divide(F.sum("gini_term"), F.first("n") * mass).alias("gini"),
            (F.log2(mass) - F.try_divide(exact_sum("mass_log"), mass)).alias("entropy"),
            (F.sum("slot_interactions") / F.sum("slots") / F.first("mean_item_interactions")).alias(
                "popularity_bias"
            ),
            exact_sum("pair_sum").alias("_pair_sum"),
        )
    )
    n_lists = F.col("n_lists")
    personalization = F.when(n_lists >= 2, 1 - F.col("_pair_sum") / (n_lists * (n_lists - 1) / 2))
    return values.join(counts, on=by).select(
        *by, *GROUP_STATISTICS[:4], personalization.alias("personalization"), "n_lists"
    )


def jaccard_pair_distances(
    ranked: DataFrame, *, keys: Sequence[str], ks: Sequence[int], pairs: int, seed: int
) -> DataFrame:
    """(*keys, k, _pair, value = 1 - Jaccard) for a seeded sample of disjoint user pairs per
    list group (*keys, k) of the lists R_k(u) of the rankings ``ranked`` (*keys, user_id,
    item_id, rank).

    The 2·pairs users with the smallest hash(seed, user) in a group are paired in hash order;
    a uniform sample of pairs, independent of partitioning. A ranking has a list at every k,
    so a group's users, and its sample, are the same at every k: they are drawn once per
    ranking group (from the rank-1 rows) and only their rankings are cut at each k. Its mean
    estimates ``personalization_jaccard``; its spread gives the standard error
    std / sqrt(pairs).
    """
    keys = list(keys)
    order = Window.partitionBy(*keys).orderBy(seeded_hash(seed, USER), F.col(USER))
    chosen = (
        ranked.filter(F.col(RANK) == 1)
        .select(*keys, USER)
        .withColumn("_pos", F.row_number().over(order) - 1)
        .filter(F.col("_pos") < 2 * pairs)
        .withColumn("_pair", F.floor(F.col("_pos") / 2))
    )
    complete = (
        chosen.groupBy(*keys, "_pair")
        .agg(F.count(F.lit(1)).alias("_members"))
        .filter(F.col("_members") == 2)
    )
    sampled = ranked.join(chosen.join(complete, on=[*keys, "_pair"]), on=[*keys, USER])
    by = [*keys, "k"]
    shared = (
        top_k_lists(sampled, ks=ks)
        .groupBy(*by, "_pair", ITEM)
        .agg(F.count(F.lit(1)).alias("_holders"))
    )
    return shared.groupBy(*by, "_pair").agg(
        (1 - F.count(F.when(F.col("_holders") == 2, True)) / F.count(F.lit(1))).alias("value")
    )


def unit_vectors(embeddings: DataFrame) -> DataFrame:
    """(item_id, unit): embeddings scaled to length 1; zero or missing vectors are dropped."""
    norm = F.sqrt(F.aggregate("embedding", F.lit(0.0), lambda acc, x: acc + x * x))
    return (
        embeddings.select(ITEM, "embedding", norm.alias("_norm"))
        .filter(F.col("_norm") > 0)
        .select(ITEM, F.transform("embedding", lambda x: x / F.col("_norm")).alias("unit"))
    )


def vector_sum(vectors: Column) -> Column:
    """Element-wise sum of an array of equal-length arrays (an aggregate over collect_list),
    added in sorted order: the result does not depend on the order collect_list saw them."""
    vectors = F.array_sort(vectors)
    first = F.try_element_at(vectors, F.lit(1))  # null for no vector
    zero = F.transform(first, lambda _: F.lit(0.0))
    return F.aggregate(vectors, zero, lambda acc, v: F.zip_with(acc, v, lambda a, b: a + b))


def list_diversity(squared: Column, n: Column) -> Column:
    """1 - mean pairwise cosine of a list's n unit vectors from ``squared`` = ||sum of the
    unit vectors||^2: 1 - (||sum v||^2 - n) / (n (n - 1)), no pair loop; null below 2."""
    n = n.cast("double")
    return F.when(n >= 2, 1 - (squared - n) / (n * (n - 1)))


def category_entries(categories: DataFrame) -> DataFrame:
    """(item_id, category, weight, lead): the non-zero entries of each item's unit-normalised
    multi-hot category vector, weight = 1 / sqrt(number of its distinct categories), and
    ``lead`` = 1 on exactly one entry per item (its smallest category), 0 on the others.
    Items without categories have no entry."""
    distinct = F.array_sort(
        F.array_distinct(F.filter("categories", lambda c: c.isNotNull() & (c != "")))
    )
    described = categories.select(ITEM, distinct.alias("_c")).filter(F.size("_c") > 0)
    return described.select(
        ITEM,
        F.posexplode("_c").alias("_pos", "category"),
        (F.lit(1.0) / F.sqrt(F.size("_c").cast("double"))).alias("weight"),
    ).select(ITEM, "category", "weight", (F.col("_pos") == 0).cast("int").alias("lead"))


def item_categories(entries: DataFrame, known: DataFrame) -> DataFrame:
    """(item_id, _categories): each item's :func:`category_entries` as structs (category,
    weight, lead, known), known = the category is among ``known``
    (:func:`catalogue_categories`); items without categories have no row."""
    flagged = entries.join(known, on="category", how="left")
    entry = F.struct("category", "weight", "lead", F.col("_known").alias("known"))
    return flagged.groupBy(ITEM).agg(F.collect_list(entry).alias("_categories"))


def category_sums(rows: DataFrame, *, ks: Sequence[int], keys: Sequence[str]) -> DataFrame:
    """(*keys, _squared_k, _described_k, _shown_k for every k) per ranking (``keys``; rows
    with ``rank`` and :func:`item_categories`' ``_categories``), over its rows of rank <= k:
    ||sum v||^2 = sum over its categories c of s_c^2 (s_c = sum of 1/sqrt(|C_i|) over the list
    items holding c, the unit multi-hot vectors of ild_category), the number of its items with
    categories, and the number of its distinct catalogue categories. One aggregation per
    (ranking, category), one per ranking; at a k where no item has categories the three are
    null (or 0 shown)."""
    keys = list(keys)
    entries = rows.select(*keys, RANK, F.explode("_categories").alias("_c"))
    cut = {k: F.col(RANK) <= k for k in ks}
    per_category = entries.groupBy(*keys, F.col("_c.category").alias("category")).agg(
        *[
            column
            for k in ks
            for column in (
                exact_sum(F.when(cut[k], F.col("_c.weight"))).alias(f"_s_{k}"),
                F.sum(F.when(cut[k], F.col("_c.lead"))).alias(f"_items_{k}"),
                F.max(F.when(cut[k], F.col("_c.known"))).alias(f"_known_{k}"),
            )
        ]
    )
    return per_category.groupBy(*keys).agg(
        *[
            column
            for k in ks
            for column in (
                exact_sum(F.col(f"_s_{k}") * F.col(f"_s_{k}")).alias(f"_squared_{k}"),
                F.sum(f"_items_{k}").alias(f"_described_{k}"),
                F.count(F.when(F.col(f"_known_{k}"), True)).alias(f"_shown_{k}"),
            )
        ]
    )


def catalogue_categories(entries: DataFrame, catalogue: DataFrame) -> DataFrame:
    """(category, _known = true): C_I, the distinct categories of the catalogue's items."""
    known = entries.join(catalogue.select(ITEM), on=ITEM, how="left_semi")
    return known.select("category").distinct().withColumn("_known", F.lit(True))


def content_expected(
    lists: DataFrame, history: DataFrame, units: DataFrame, *, threshold: float
) -> DataFrame:
    """(user_id, item_id): list items whose cosine to the user's train profile is >= threshold.

    The profile is the sum of the unit vectors of the user's train items (its direction is
    their mean); items or users without an embedding count as expected (not surprising).
    """
    profiles = (
        history.select(USER, ITEM)
        .distinct()
        .join(units, on=ITEM)
        .groupBy(USER)
        .agg(vector_sum(F.collect_list("unit")).alias("_profile"))
    )
    pairs = lists.select(USER, ITEM).distinct()
    dot = F.aggregate(
        F.zip_with("unit", "_profile", lambda a, b: a * b),
        F.lit(0.0),
        lambda acc, x: acc + x,
    )
    norm = F.sqrt(F.aggregate("_profile", F.lit(0.0), lambda acc, x: acc + x * x))
    scored = pairs.join(units, on=ITEM, how="left").join(profiles, on=USER, how="left")
    cosine = dot / norm
    return scored.filter(
        F.col("unit").isNull() | F.col("_profile").isNull() | (cosine >= F.lit(threshold))
    ).select(USER, ITEM)


@dataclass(frozen=True)
class BeyondInputs:
    """What the beyond-accuracy metrics read besides the lists.

    ``expected``: (user_id, item_id, rank), the items that are not surprising for
    serendipity: item i is expected in u's list at k when rank <= k (the rank in u's
    popularity list; 0 for an expectation that holds at every k). ``categories`` / ``units``:
    item metadata, or None when absent.
    """

    catalogue: DataFrame
    totals: DataFrame
    truth: DataFrame
    expected: DataFrame
    categories: DataFrame | None = None
    units: DataFrame | None = None


PER_USER_METRICS = ("novelty", "ild_category", "category_coverage", "ild_embedding", "serendipity")


def surprising_counts(
    rows: DataFrame, inputs: BeyondInputs, *, keys: Sequence[str], ks: Sequence[int]
) -> DataFrame:
    """(*keys, ``_surprising_<k>`` for k in ``ks``) from ranking ``rows`` (*keys, item_id,
    rank): per ranking, the relevant items at rank <= k that are not expected at k (their
    smallest rank in ``inputs.expected`` is above k, or they have none). Only rankings holding a
    relevant item get a row: the relevant rows are joined with their expected ranks, nothing
    else."""
    user_keys = [USER, ITEM]
    hits = rows.join(inputs.truth.select(*user_keys), on=user_keys, how="left_semi")
    expected = inputs.expected.groupBy(*user_keys).agg(F.min(RANK).alias("_expected"))
    scored = hits.join(expected, on=user_keys, how="left")
    counts = [
        F.count(
            F.when((F.col(RANK) <= k) & F.coalesce(F.col("_expected") > k, F.lit(True)), True)
        ).alias(f"_surprising_{k}")
        for k in ks
    ]
    return scored.groupBy(*keys).agg(*counts)


def per_user_beyond(
    ranked: DataFrame,
    inputs: BeyondInputs,
    *,
    ks: Sequence[int],
    by: Sequence[str] = (),
    metrics: Sequence[str],
) -> DataFrame | None:
    """(*by, user_id, k, metric, value) for the per-user metrics among ``metrics`` (module doc)
    at every k, from ``ranked`` = (*by, user_id, item_id, rank) rankings: R_k(u) = the rows
    of rank <= k.

    One pass over the rankings, shuffled by user once: each row gets its item's train users
    (novelty: -log2 p(i), averaged over the list), unit vector (ild_embedding) and categories;
    then one aggregation per ranking holds every k (sums over the rows of rank <= k) and
    :func:`category_sums` the category metrics. Serendipity (relevant items not expected at k,
    / k) reads only the relevant rows (:func:`surprising_counts`): 0 for a ranking without one.
    ild_category and category_coverage (no ``categories``) and ild_embedding (no ``units``) are
    left out when their metadata is None.
    ILD counts only items with a vector or categories and has no value below 2 such items;
    category_coverage is 0 for a list without catalogue categories and has no value when the
    catalogue has none.
    """
    by, ks = list(by), sorted({int(k) for k in ks})
    keys = [*by, USER]
    described = {
        "ild_category": inputs.categories,
        "category_coverage": inputs.categories,
        "ild_embedding": inputs.units,
    }
    wanted = [m for m in PER_USER_METRICS if m in metrics and described.get(m, True) is not None]
    if not wanted:
        return None
    rows = lists = ranked.select(*keys, ITEM, RANK).filter(F.col(RANK) <= max(ks))
    known = None
    if inputs.categories is not None and {"ild_category", "category_coverage"} & set(wanted):
        entries = category_entries(inputs.categories)
        known = catalogue_categories(entries, inputs.catalogue)
        rows = rows.join(item_categories(entries, known), on=ITEM, how="left")
    if "novelty" in wanted:  # item attributes: joins on the item (broadcast when small)
        rows = rows.join(inputs.catalogue.select(ITEM, "n_users"), on=ITEM, how="left")
        rows = rows.crossJoin(F.broadcast(inputs.totals.select("n_train_users")))
    if "ild_embedding" in wanted:
        rows = rows.join(inputs.units, on=ITEM, how="left")
    rows = rows.repartition(USER)  # the one shuffle of the rows: every step below is per user
    aggregates: list[Column] = []
    for k in ks:
        cut = F.col(RANK) <= k
        if "novelty" in wanted:
            n_users = F.greatest(F.coalesce(F.col("n_users"), F.lit(0)), F.lit(1))
            p = n_users / F.col("n_train_users").cast("double")
            aggregates.append(exact_mean(F.when(cut, -F.log2(p))).alias(f"novelty_{k}"))
        if "ild_embedding" in wanted:
            unit = F.when(cut, F.col("unit"))
            total = vector_sum(F.collect_list(unit))
            squared = F.aggregate(total, F.lit(0.0), lambda acc, x: acc + x * x)
            aggregates.append(list_diversity(squared, F.count(unit)).alias(f"ild_embedding_{k}"))
    # _slots: every ranking gets a row, whatever is wanted
    per_list = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("_slots"), *aggregates)
    values = {
        (m, k): F.col(f"{m}_{k}") for m in ("novelty", "ild_embedding") if m in wanted for k in ks
    }
    if "serendipity" in wanted:
        per_list = per_list.join(
            surprising_counts(lists, inputs, keys=keys, ks=ks), on=keys, how="left"
        )
        for k in ks:
            values[("serendipity", k)] = F.coalesce(F.col(f"_surprising_{k}"), F.lit(0)) / k
    if known is not None:
        sums = category_sums(rows, ks=ks, keys=keys)
        per_list = per_list.join(sums, on=keys, how="left")
        total = known.agg(F.count(F.lit(1)).alias("_total")).filter(F.col("_total") > 0)
        per_list = per_list.join(F.broadcast(total), on=F.lit(True), how="left")
        for k in ks:
            ild = list_diversity(F.col(f"_squared_{k}"), F.col(f"_described_{k}"))
            clipped = F.least(F.greatest(ild, F.lit(0.0)), F.lit(1.0))  # rounding; in [0, 1]
            values[("ild_category", k)] = F.when(ild.isNotNull(), clipped)
            shown = F.coalesce(F.col(f"_shown_{k}"), F.lit(0))
            values[("category_coverage", k)] = shown / F.col("_total")
    at_k = F.array(
        *[
            F.struct(F.lit(k).alias("k"), *[values[(m, k)].cast("double").alias(m) for m in wanted])
            for k in ks
        ]
    )
    wide = per_list.select(*keys, F.explode(at_k).alias("_at")).select(*keys, "_at.*")
    return to_long(wide, metrics=wanted, keys=[*keys, "k"]).filter(F.col("value").isNotNull())


BOOTSTRAPPED_METRICS = tuple(m.name for m in family("beyond") if m.bootstrapped)
POISSON_MAX = 16
CHUNK_ROWS = 32_768  # list rows per weight matrix in the bootstrap kernel (x B int32)


def poisson_thresholds() -> list[float]:
    """P(W <= w) for W ~ Poisson(1), w = 0 .. POISSON_MAX - 1 (P(W > 16) < 1e-14)."""
    cdf, term, thresholds = 0.0, math.exp(-1.0), []
    for w in range(POISSON_MAX):
        cdf += term
        term /= w + 1
        thresholds.append(cdf)
    return thresholds


def poisson_weight(u: Column) -> Column:
    """A Poisson(1) draw from u ~ U[0, 1): the smallest w with P(W <= w) > u (capped at 16)."""
    weight = F.lit(POISSON_MAX)
    for w, threshold in reversed(list(enumerate(poisson_thresholds()))):
        weight = F.when(u < F.lit(threshold), F.lit(w)).otherwise(weight)
    return weight


def replicate_weight(seed: int, user: Column, replicate: Column) -> Column:
    """W(user, replicate) ~ Poisson(1) from hash(seed, user, replicate): the multiplicity of a
    user in a bootstrap replicate, the same in every list group and on every partitioning."""
    return poisson_weight(uniform(F.xxhash64(F.lit(seed), user, replicate)))


def replicate_blocks_kernel(
    samples: int, *, keys: Sequence[str], ks: Sequence[int]
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The numpy side of :func:`bootstrap_blocks`: ranking rows (``keys``, item_id,
    n_interactions, in_catalogue, ``_h`` = xxhash64(seed, user), rank, ``n_ranked``) of whole
    (ranking group, item)s, any number of groups -> the bucket's part of every replicate's
    exposure blocks of every list group (``keys``, k) for k in ``ks``: (``keys``, k, replicate,
    f, in_catalogue, c, interactions, pair_h, pair_m, pair_l, lists).

    A row of rank r is in R_k(u) for every k >= r, whose size is min(k, n_ranked) (ranks run
    1..n_ranked). W(user, b) is :func:`replicate_weight` exactly: Spark's xxhash64 of the int b
    seeded with ``_h`` (XXH64 ``hashInt``), its low 40 bits as u, the Poisson(1) inverse CDF at
    u, drawn once per distinct user of the call (a user's rows in every group and item share
    them). The weights are summed once per (group, item, n_ranked, smallest k holding the row);
    per k those sums give each (group, item, list size) and so f, s and q of
    :func:`weighted_exposure`; items with f > 0 are then grouped as in
    :func:`exposure_blocks`: c items, the sum of their n_interactions, and (s^2 - q) / 2 cut
    into the fixed-point limbs of ``exact_sum`` and summed as longs, so adding the buckets'
    parts in Spark (:func:`limb_sum`) gives ``exposure_blocks`` of the replicate bit for bit.
    ``lists`` is the blocks' sum of q: over every item of a group, sum_i q_i = sum_u W(u, b)
    |R(u)| / |R(u)|, the replicate's number of lists (a double within far less than 1/2 of
    that integer). Rows are summed in chunks of ``CHUNK_ROWS``, so memory is bounded by the
    chunk, the users (B int32 each) and the (group, item, n_ranked, k) sums.

    Everything the kernel uses lives inside it (numpy, pandas and constants only): it is
    pickled by value, so executors run it without importing this package.
    """
    thresholds = np.asarray(poisson_thresholds())
    keys, limb = list(keys), LIMB
    cut_offs = np.asarray(sorted({int(k) for k in ks}), dtype=np.int64)
    chunk_rows = CHUNK_ROWS

    def kernel(rows: pd.DataFrame) -> pd.DataFrame:
        primes = [
            np.uint64(p)
            for p in (
                0x9E3779B185EBCA87,
                0xC2B2AE3D27D4EB4F,
                0x165667B19E3779F9,
                0x27D4EB2F165667C5 + 4,
            )
        ]
        p1, p2, p3, p5_4 = primes
        replicates = np.arange(samples, dtype=np.uint64) * p1  # hashInt: (b & 0xFFFFFFFF) * P1

        def weights(seeds: np.ndarray) -> np.ndarray:
            h = (seeds[:, None] + p5_4) ^ replicates[None, :]
            h = ((h << np.uint64(23)) | (h >> np.uint64(41))) * p2 + p3
            h ^= h >> np.uint64(33)
            h *= p2
            h ^= h >> np.uint64(29)
            h *= p3
            h ^= h >> np.uint64(32)
            u = (h & np.uint64((1 << 40) - 1)).astype(np.float64) / float(1 << 40)
            return np.searchsorted(thresholds, u, side="right").astype(np.int32)

        def changes(n: int, *columns: np.ndarray) -> np.ndarray:
            """Of n sorted rows: True on the first and where any column differs from the row
            before."""
            changed = np.zeros(n, dtype=bool)
            changed[:1] = True
            for values in columns:
                changed[1:] |= values[1:] != values[:-1]
            return changed

        band = np.searchsorted(cut_offs, rows[RANK].to_numpy(), side="left")  # smallest k >= r
        rows = rows.assign(_band=band).sort_values(
            [*keys, ITEM, "n_ranked", "_band"], kind="stable", ignore_index=True
        )
        n = len(rows)
        new_group = changes(n, *(rows[key].to_numpy() for key in keys))
        new_item = new_group | changes(n, rows[ITEM].to_numpy())
        n_ranked, band = rows["n_ranked"].to_numpy(), rows["_band"].to_numpy()
        users, user_of_row = np.unique(rows["_h"].to_numpy().view(np.uint64), return_inverse=True)
        user_weights = weights(users)  # each user's B weights, drawn once per call
        starts = np.flatnonzero(new_item | changes(n, n_ranked, band))  # (item, n_ranked, band)s
        segment_of_row = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
        per_segment = np.zeros((len(starts), samples), dtype=np.int64)
        for lo in range(0, n, chunk_rows):
            hi = min(lo + chunk_rows, n)
            segments = segment_of_row[lo:hi]
            bounds = np.flatnonzero(changes(hi - lo, segments))
            chunk = user_weights[user_of_row[lo:hi]]
            per_segment[segments[bounds]] += np.add.reduceat(chunk, bounds, axis=0)
        item_of_segment = (np.cumsum(new_item) - 1)[starts]
        item_rows = np.flatnonzero(new_item)  # a row of each (group, item)
        group_of_item = (np.cumsum(new_group) - 1)[item_rows]
        parts = []  # per k: (list group, item, f, s, q) of the items its lists hold; the
        # largest k holds every row
        segment_band, segment_n = band[starts], n_ranked[starts]
        for j, k in enumerate(cut_offs):
            held = np.flatnonzero(segment_band <= j)  # segments of rows of rank <= k
            if not len(held):  # the bucket's items are all ranked below k
                continue
            size = np.minimum(segment_n[held], k)  # ascending within an item
            item = item_of_segment[held]
            runs = np.flatnonzero(changes(len(held), item, size))  # one per (item, size)
            per_size = np.add.reduceat(per_segment[held], runs, axis=0)
            x = 1.0 / np.sqrt(size[runs].astype(np.float64))
            item_starts = np.flatnonzero(changes(len(runs), item[runs]))
            items = item[runs][item_starts]
            parts.append(
                (
                    group_of_item[items] * len(cut_offs) + j,
                    items,
                    np.add.reduceat(per_size, item_starts, axis=0),
                    np.add.reduceat(per_size * x[:, None], item_starts, axis=0),
                    np.add.reduceat(per_size * x[:, None] * x[:, None], item_starts, axis=0),
                )
            )
        list_group, items, f, s, q = (np.concatenate(a) for a in zip(*parts, strict=True))

        held, replicate = np.nonzero(f)  # the (list group, item, replicate)s with f > 0
        first = item_rows[items[held]]  # a row of each
        s_held = s[held, replicate]
        pair = (s_held * s_held - q[held, replicate]) / 2
        h = np.floor(pair)
        middle = (pair - h) * limb
        m = np.floor(middle)
        low = np.floor((middle - m) * limb)
        group = list_group[held]
        f_held = f[held, replicate]
        in_catalogue = rows["in_catalogue"].to_numpy()[first]
        order = np.lexsort((in_catalogue, f_held, replicate, group))
        key = [v[order] for v in (group, replicate, f_held, in_catalogue)]
        bounds = np.flatnonzero(changes(len(order), *key))  # one block per distinct key

        def total(values: np.ndarray, dtype: type = np.int64) -> np.ndarray:
            """Per block, the sum of a value of the held (group, item, replicate)s."""
            ordered = values[order].astype(dtype)
            return np.add.reduceat(ordered, bounds) if len(bounds) else ordered

        block_group = key[0][bounds]
        out = rows.loc[np.flatnonzero(new_group)[block_group // len(cut_offs)], keys]
        return out.reset_index(drop=True).assign(
            k=cut_offs[block_group % len(cut_offs)].astype(np.int32),
            replicate=key[1][bounds].astype(np.int32),
            f=key[2][bounds],
            in_catalogue=key[3][bounds],
            c=np.diff(np.r_[bounds, len(order)]).astype(np.int64),
            interactions=total(rows["n_interactions"].to_numpy()[first]),
            pair_h=total(h),
            pair_m=total(m),
            pair_l=total(low),
            lists=total(q[held, replicate], np.float64),
        )

    return kernel


def bootstrap_blocks(
    ranked: DataFrame,
    catalogue: DataFrame,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    samples: int,
    seed: int,
) -> DataFrame:
    """(*keys, k, replicate, f, in_catalogue, c, interactions, pair_sum, lists):
    :func:`exposure_blocks` of the lists R_k(u) of the rankings ``ranked`` (*keys, user_id,
    item_id, rank; ranks 1..n per ranking) for every k in ``ks``, in each of ``samples``
    Poisson bootstrap replicates of the users, where a list counts W(user, replicate) times
    (items with f = 0 in a replicate are left out), and ``lists``, the blocks' sum of q (their
    group's replicate size: :func:`bootstrap_list_counts`).

    The ranking rows (not one row per list and k) are grouped by the hash bucket of the item
    alone, one bucket per shuffle partition, with each ranking's length n; a row of rank r
    belongs to the lists of every k >= r, of size min(k, n). :func:`replicate_blocks_kernel`
    sums the B weights of every row of every group in the bucket in numpy (a pandas UDF over
    Arrow) and returns the bucket's blocks at every k; one aggregation adds the buckets'
    blocks. The replicated rows never exist as Spark rows, the kernel runs once per bucket (not
    once per group and bucket: the per-call cost dominated small runs with many models,
    segments and k), and only blocks cross back to the JVM. Measured against fanning each row
    out to its replicates and hash-aggregating in Spark in ``benchmarks/README.md`` (bootstrap
    kernel).
    """
    keys, ks = list(keys), sorted({int(k) for k in ks})
    ranking = with_ranking_length(ranked, keys=keys, ks=ks)
    rows = with_item_popularity(ranking, catalogue).select(
        *keys,
        ITEM,
        "n_interactions",
        "in_catalogue",
        F.col(RANK).cast("int").alias(RANK),
        F.col("n_ranked").cast("int").alias("n_ranked"),
        F.xxhash64(F.lit(seed), F.col(USER)).alias("_h"),
    )
    fields = {field.name: field for field in rows.schema.fields}
    schema = StructType(
        [
            *[fields[c] for c in keys],
            StructField("k", IntegerType(), False),
            StructField("replicate", IntegerType(), False),
            StructField("f", LongType(), False),
            StructField("in_catalogue", BooleanType(), False),
            *[StructField(c, LongType(), False) for c in ("c", "interactions")],
            *[StructField(c, LongType(), False) for c in ("pair_h", "pair_m", "pair_l")],
            StructField("lists", DoubleType(), False),
        ]
    )
    buckets = int(rows.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    bucket = F.pmod(F.xxhash64(F.col(ITEM)), F.lit(buckets))
    kernel = replicate_blocks_kernel(samples, keys=keys, ks=ks)
    parts = rows.groupBy(bucket).applyInPandas(kernel, schema)
    return parts.groupBy(*keys, "k", "replicate", "f", "in_catalogue").agg(
        F.sum("c").alias("c"),
        F.sum("interactions").alias("interactions"),
        limb_sum("pair_h", "pair_m", "pair_l").alias("pair_sum"),
        F.sum("lists").alias("lists"),
    )


def bootstrap_list_counts(blocks: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, replicate, n_lists): the number of lists in each replicate, sum of W(user, b),
    read off :func:`bootstrap_blocks` (their ``lists``, rounded to the integer it estimates)."""
    n_lists = F.round(F.sum("lists")).cast("long").alias("n_lists")
    return blocks.groupBy(*by, "replicate").agg(n_lists)


def group_statistics(
    blocks: DataFrame,
    counts: DataFrame,
    totals: DataFrame,
    *,
    by: Sequence[str],
    metrics: Sequence[str],
) -> DataFrame | None:
    """(*by, metric, value, n_lists) for coverage, gini, entropy, popularity_bias and
    personalization among ``metrics`` (:func:`group_values`, one row per metric)."""
    wanted = [m for m in GROUP_STATISTICS if m in metrics]
    if not wanted:
        return None
    return to_long(
        group_values(blocks, counts, totals, by=by), metrics=wanted, keys=[*by, "n_lists"]
    )


def bootstrap_std(
    ranked: DataFrame,
    inputs: BeyondInputs,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    metrics: Sequence[str],
    samples: int,
    seed: int,
) -> DataFrame | None:
    """(*keys, k, metric, std): the standard deviation of each group statistic of the lists
    R_k(u) of the rankings ``ranked`` (as :func:`bootstrap_blocks`) over ``samples`` Poisson
    bootstrap replicates of the users; None when no such metric is wanted or samples is 0.

    Only the spread is used: a replicate holds ~63% distinct users, so statistics that grow
    with the number of distinct lists (coverage, entropy) are biased low in every replicate
    and percentile intervals would miss the estimate; the interval is value ± z·std.
    """
    wanted = [m for m in BOOTSTRAPPED_METRICS if m in metrics]
    if not wanted or samples == 0:
        return None
    by = [*keys, "k"]
    blocks = persist(
        bootstrap_blocks(ranked, inputs.catalogue, keys=keys, ks=ks, samples=samples, seed=seed)
    )
    values = group_statistics(
        blocks,
        bootstrap_list_counts(blocks, by=by),
        inputs.totals,
        by=[*by, "replicate"],
        metrics=wanted,
    )
    return values.groupBy(*by, "metric").agg(exact_std("value").alias("std"))


def group_beyond(
    ranked: DataFrame,
    inputs: BeyondInputs,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    metrics: Sequence[str],
    pairs: int,
    seed: int,
    bootstrap_samples: int = 0,
    exposure: DataFrame | None = None,
) -> DataFrame | None:
    """(*keys, k, metric, value, n_users, std, n_samples, interval) for the group metrics of
    the lists R_k(u) (:func:`top_k_lists`) of the rankings ``ranked`` (*keys, user_id,
    item_id, rank; ranks 1..n per ranking), for every k in ``ks``.

    ``exposure``: :func:`ranking_exposure` of ``ranked`` when the caller has it already.
    n_users is the number of lists in the group (:func:`list_holders`).
    personalization_jaccard is a mean over sampled user pairs: std is their deviation,
    n_samples their number, interval ``t``. The other group statistics carry the bootstrap std
    and interval ``bootstrap`` when ``bootstrap_samples`` > 0, else a null std and interval.
    """
    keys = list(keys)
    by = [*keys, "k"]
    columns = [*by, "metric", "value", "std", "n_samples", "interval", "n_users"]
    statistics = [m for m in GROUP_STATISTICS if m in metrics]
    if not statistics and "personalization_jaccard" not in metrics:
        return None
    holders = list_holders(ranked, keys=keys, ks=ks)
    counts = persist(holders.groupBy(*by).agg(F.count(F.lit(1)).alias("n_lists")))
    frames = []
    scalar = None
    if statistics:  # blocks persisted only when a statistic reads them
        if exposure is None:
            exposure = ranking_exposure(ranked, inputs.catalogue, keys=keys, ks=ks)
        blocks = persist(exposure_blocks(exposure, by=by))
        scalar = group_statistics(blocks, counts, inputs.totals, by=by, metrics=statistics)
    if scalar is not None:
        spread = bootstrap_std(
            ranked, inputs, keys=keys, ks=ks, metrics=metrics, samples=bootstrap_samples, seed=seed
        )
        if spread is None:
            scalar = scalar.withColumn("std", F.lit(None).cast("double"))
        else:
            scalar = scalar.join(spread, on=[*by, "metric"], how="left")
        frames.append(
            scalar.withColumn("n_samples", F.lit(None).cast("long"))
            .withColumn("interval", F.when(F.col("std").isNotNull(), F.lit("bootstrap")))
            .withColumnRenamed("n_lists", "n_users")
            .select(*columns)
        )
    if "personalization_jaccard" in metrics:
        frames.append(
            jaccard_pair_distances(ranked, keys=keys, ks=ks, pairs=pairs, seed=seed)
            .groupBy(*by)
            .agg(
                exact_mean("value").alias("value"),
                exact_std("value").alias("std"),
                F.count(F.lit(1)).alias("n_samples"),
            )
            .join(counts, on=by)
            .select(
                *by,
                F.lit("personalization_jaccard").alias("metric"),
                "value",
                "std",
                "n_samples",
                F.lit("t").alias("interval"),
                F.col("n_lists").alias("n_users"),
            )
        )
    return union_all(frames)
