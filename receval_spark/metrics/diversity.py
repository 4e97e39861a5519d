r"""Diversity metrics of the top-k lists: between users' lists and within one list.

.. math::

    PersonalizationJaccard = 1 - \frac{1}{P} \sum_{(u, v)}
        \frac{|R_k(u) \cap R_k(v)|}{|R_k(u) \cup R_k(v)|} \ \text{over P sampled user pairs}

    ILD(u) = 1 - \frac{\lVert \sum_{i} \hat v_i \rVert^2 - n}{n (n - 1)} \qquad
    CategoryCoverage(u) = \frac{|\cup_{i \in R_k(u)} C_i \cap C_I|}{|C_I|}

with \hat v_i the unit embedding of the n list items that have one (``ild_embedding``) or
their unit multi-hot category vector (``ild_category``; \lVert \sum \hat v \rVert^2 =
\sum_c s_c^2, s_c = \sum_{i \ni c} |C_i|^{-1/2}), and C_I the categories of the items of the
catalogue I (docs/evaluation.md#catalogue). No per-list item pairs: ||sum v||^2 - n is twice
the sum of the pairwise cosines. The exact (cosine) personalization is an exposure statistic
(:func:`receval_spark.metrics.exposure.exposure_statistics`). Definitions: docs/evaluation.md,
section "Beyond-accuracy metrics".
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.expressions import seeded_hash
from receval_spark.metrics.aggregate import exact_sum
from receval_spark.metrics.lists import catalogue_members, top_k_lists

PERSONALIZATION_JACCARD = "personalization_jaccard"
ILD_CATEGORY = "ild_category"
ILD_EMBEDDING = "ild_embedding"
CATEGORY_COVERAGE = "category_coverage"


def jaccard_pair_distances(
    ranked: DataFrame, *, keys: Sequence[str], ks: Sequence[int], pairs: int, seed: int
) -> DataFrame:
    """(*keys, k, _pair, value = 1 - Jaccard) for a seeded sample of disjoint user pairs per
    list group (*keys, k) of the lists R_k(u) of the rankings ``ranked`` (*keys, user_id,
    item_id, rank): value = 1 - (items in both lists) / (items in either list).

    The 2·pairs users with the smallest hash(seed, user) in a group are paired in hash order;
    a uniform sample of pairs, independent of partitioning. A ranking has a list at every k,
    so a group's users, and its sample, are the same at every k: they are drawn once per
    ranking group (from the rank-1 rows) and only their rankings are cut at each k. Its mean
    estimates ``personalization_jaccard``, the inter-user diversity of Zhou et al., "Solving
    the apparent diversity-accuracy dilemma of recommender systems" (PNAS 2010), with the
    Jaccard similarity of the two lists; its spread gives the standard error std / sqrt(pairs).
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
    """Intra-list diversity, 1 - mean pairwise cosine of a list's n unit vectors, from
    ``squared`` = ||sum of the unit vectors||^2: 1 - (||sum v||^2 - n) / (n (n - 1)), no pair
    loop; null below 2 vectors. The ILD of Ziegler et al., "Improving recommendation lists
    through topic diversification" (WWW 2005), with the cosine as the similarity."""
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
    null (or 0 shown).

    The shown categories over those of the catalogue are category coverage, the genre coverage
    of Vargas et al., "Coverage, redundancy and size-awareness in genre diversity for
    recommender systems" (RecSys 2014).
    """
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
    """(category, _known = true): C_I, the distinct categories of the items of the catalogue
    I (the members of the item table ``catalogue``, :mod:`~receval_spark.metrics.lists`)."""
    known = entries.join(catalogue_members(catalogue).select(ITEM), on=ITEM, how="left_semi")
    return known.select("category").distinct().withColumn("_known", F.lit(True))
