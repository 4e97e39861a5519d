"""Beyond-accuracy metrics (DESIGN §6), worked out by hand, plus the exact and sampled
personalization and the embedding ILD against explicit pairwise computations
(tests/reference.py)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
import reference as ref
from chispa import assert_df_equality
from helpers import beyond_metric
from pyspark.sql import functions as F

from receval_spark.metrics import bootstrap_kernel
from receval_spark.metrics.bootstrap import bootstrap_std, poisson_weight
from receval_spark.metrics.diversity import jaccard_pair_distances, unit_vectors
from receval_spark.metrics.exposure import (
    exposure_blocks,
    exposure_statistics,
    item_exposure,
    long_tail,
)
from receval_spark.metrics.group import group_beyond
from receval_spark.metrics.lists import (
    BeyondInputs,
    catalogue_totals,
    item_statistics,
    list_counts,
    list_holders,
    ranked_lists,
    top_k_lists,
    with_list_size,
)
from receval_spark.metrics.per_user import per_user_beyond

HISTORY = "user_id int, item_id int"
LISTS = "user_id int, k int, item_id int"
RANKED = "user_id int, item_id int, rank int"
CATEGORIES = "item_id int, categories array<string>"
EMBEDDINGS = "item_id int, embedding array<double>"
TRUTH = "user_id int, item_id int, grade double"
TOL = 1e-12
LOG2_3 = math.log2(3)

# The worked example used by several tests.
# train: user 10 -> 1, 2; user 11 -> 1, 3; user 12 -> 1, 4, 4 (twice), 5
#   catalogue I = {1, 2, 3, 4, 5}, n = 5; 3 train users
#   distinct users: 1 -> 3, 2 -> 1, 3 -> 1, 4 -> 1, 5 -> 1
#   interactions:   1 -> 3, 2 -> 1, 3 -> 1, 4 -> 2, 5 -> 1  (sum 8, mean 8/5)
EXAMPLE_HISTORY = [(10, 1), (10, 2), (11, 1), (11, 3), (12, 1), (12, 4), (12, 4), (12, 5)]
# lists at k = 2: user 1 -> [1, 2], user 2 -> [1, 3], user 3 -> [9, 4] (9 is not in I)
#   f: 1 -> 2, 2 -> 1, 3 -> 1, 4 -> 1, 5 -> 0
EXAMPLE_LISTS = [(1, 2, 1), (1, 2, 2), (2, 2, 1), (2, 2, 3), (3, 2, 9), (3, 2, 4)]
# the same lists as rankings (user, item, rank)
EXAMPLE_RANKED = [(1, 1, 1), (1, 2, 2), (2, 1, 1), (2, 3, 2), (3, 9, 1), (3, 4, 2)]


def frame(spark, rows, schema):
    return spark.createDataFrame(rows, schema)


def catalogue_of(spark, history_rows):
    history = frame(spark, history_rows, HISTORY)
    catalogue = item_statistics(history)
    return catalogue, catalogue_totals(history, catalogue)


def blocks_of(lists, catalogue):
    return exposure_blocks(item_exposure(lists, catalogue, by=["k"]), by=["k"])


def statistics_of(lists, catalogue, totals):
    """The group statistics of every k (one row per k) of the (user_id, k, item_id) lists."""
    return exposure_statistics(
        blocks_of(lists, catalogue), list_counts(lists, by=["k"]), totals, by=["k"]
    )


def personalization_of(lists):
    history = lists.select("user_id", "item_id")
    catalogue = item_statistics(history)
    return statistics_of(lists, catalogue, catalogue_totals(history, catalogue))


def by_key(df, key, value="value"):
    return {row[key]: row[value] for row in df.collect()}


def one_row(df):
    rows = df.collect()
    assert len(rows) == 1, rows
    return rows[0]


def pandas_lists(groups: dict[int, dict[int, list[int]]]) -> pd.DataFrame:
    """(user_id, k, item_id) from {k: {user: items}}."""
    rows = [(u, k, i) for k, lists in groups.items() for u, items in lists.items() for i in items]
    return pd.DataFrame(rows, columns=["user_id", "k", "item_id"])


def random_lists(rng, *, users, items, longest) -> dict[int, list[int]]:
    """Lists of 1..longest distinct items drawn from range(items), one per user."""
    lists = {}
    for u in users:
        size = rng.integers(1, longest + 1)
        lists[int(u)] = [int(i) for i in rng.choice(items, size=size, replace=False)]
    return lists


# --- lists and the catalogue --------------------------------------------------------------


def test_top_k_lists_reads_every_cut_off_from_one_ranking(spark):
    ranked = frame(spark, [(1, 11, 1), (1, 12, 2), (1, 13, 3), (2, 21, 1)], RANKED)

    lists = top_k_lists(ranked, ks=[1, 2])

    got = sorted((r.user_id, r.k, r.item_id, r.rank) for r in lists.collect())
    # k = 1: rank 1 of each user; k = 2: ranks 1-2 (user 2 has only one item)
    assert got == [(1, 1, 11, 1), (1, 2, 11, 1), (1, 2, 12, 2), (2, 1, 21, 1), (2, 2, 21, 1)]


def random_rankings(spark, rng, *, shortest: int, longest: int):
    """(model, user_id, item_id, rank): models a and b, 29 users, rankings of shortest..longest
    distinct items (none for a length of 0)."""
    rows = [
        (m, u, 100 + int(i), r + 1)
        for m in ("a", "b")
        for u in range(1, 30)
        for r, i in enumerate(
            rng.choice(40, size=rng.integers(shortest, longest + 1), replace=False)
        )
    ]
    return spark.createDataFrame(rows, "model string, user_id long, item_id long, rank int")


def test_ranked_lists_carry_the_size_of_each_list(spark):
    ranked = random_rankings(spark, np.random.default_rng(5), shortest=1, longest=13)

    got = ranked_lists(ranked, keys=["model"], ks=[1, 4, 10])

    counted = with_list_size(top_k_lists(ranked, ks=[1, 4, 10]), by=["model", "k"])
    columns = ["model", "k", "user_id", "item_id", F.col("list_size").cast("long")]
    assert sorted(set(r.list_size for r in got.collect())) == list(range(1, 11))
    assert_df_equality(
        got.select(*columns),
        counted.select(*columns),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_list_holders_are_one_row_per_non_empty_list(spark):
    ranked = random_rankings(spark, np.random.default_rng(4), shortest=0, longest=5)

    holders = list_holders(ranked, keys=["model"], ks=[1, 3, 10])

    lists = top_k_lists(ranked, ks=[1, 3, 10]).select("model", "user_id", "k").distinct()
    assert holders.columns == ["model", "user_id", "k"]
    assert holders.count() == lists.count() > 100
    assert_df_equality(holders, lists, ignore_row_order=True, ignore_nullable=True)


def test_catalogue_counts_distinct_users_and_interactions(spark):
    catalogue, totals = catalogue_of(spark, EXAMPLE_HISTORY)

    stats = {r.item_id: (r.n_users, r.n_interactions) for r in catalogue.collect()}
    assert stats == {1: (3, 3), 2: (1, 1), 3: (1, 1), 4: (1, 2), 5: (1, 1)}
    row = one_row(totals)
    assert (row.n_catalogue, row.n_train_users) == (5, 3)
    assert row.mean_item_interactions == pytest.approx(8 / 5, abs=TOL)


def test_long_tail_worked_example(spark):
    catalogue, _ = catalogue_of(spark, EXAMPLE_HISTORY)
    lists = frame(spark, EXAMPLE_LISTS, LISTS)

    table = long_tail(item_exposure(lists, catalogue, by=["k"]), catalogue, by=["k"])

    got = {
        r.popularity_bin: (
            r.n_items,
            r.train_interactions,
            r.n_recommended_items,
            r.recommendations,
        )
        for r in table.collect()
    }
    # interactions 1 -> 3, 2 -> 1, 3 -> 1, 4 -> 2, 5 -> 1: bin 0 (1 interaction) = {2, 3, 5},
    # bin 1 (2-3 interactions) = {1, 4}; item 9 is outside the catalogue: bin -1.
    # f: 1 -> 2, 2 -> 1, 3 -> 1, 4 -> 1, 9 -> 1
    assert got == {
        0: (3, 3, 2, 2),  # items 2, 3 recommended once each; 5 never
        1: (2, 5, 2, 3),  # item 1 twice, item 4 once
        -1: (0, 0, 1, 1),  # item 9
    }


def test_long_tail_gives_every_group_every_catalogue_bin(spark):
    catalogue, _ = catalogue_of(spark, EXAMPLE_HISTORY)
    lists = frame(spark, [(1, 1, 1), (1, 2, 1), (1, 2, 2)], LISTS)  # k = 1 shows only item 1

    table = long_tail(item_exposure(lists, catalogue, by=["k"]), catalogue, by=["k"])

    got = {(r.k, r.popularity_bin): r.recommendations for r in table.collect()}
    assert got == {(1, 0): 0, (1, 1): 1, (2, 0): 1, (2, 1): 1}


# --- coverage, gini, entropy --------------------------------------------------------------


def test_exposure_distribution_worked_example(spark):
    catalogue, totals = catalogue_of(spark, EXAMPLE_HISTORY)
    lists = frame(spark, EXAMPLE_LISTS, LISTS)

    row = one_row(statistics_of(lists, catalogue, totals))

    # coverage = |{1, 2, 3, 4}| / |I| = 4/5 (item 9 is outside I and does not count)
    assert row.coverage == pytest.approx(0.8, abs=TOL)
    # f ascending over all of I = (0, 1, 1, 1, 2), n = 5, weights 2i - n - 1 = -4, -2, 0, 2, 4
    # G = (0 - 2 + 0 + 2 + 8) / (5 * 5) = 8 / 25
    assert row.gini == pytest.approx(8 / 25, abs=TOL)
    # F = 5, shares (2, 1, 1, 1)/5: -(0.4 log2 0.4 + 3 * 0.2 log2 0.2) = log2 5 - 2 log2 2 / 5
    assert row.entropy == pytest.approx(math.log2(5) - 0.4, abs=TOL)
    assert row.entropy == pytest.approx(1.9219280948873623, abs=TOL)


def test_lists_of_unknown_items_only_have_coverage_0(spark):
    catalogue, totals = catalogue_of(spark, EXAMPLE_HISTORY)
    lists = frame(spark, [(1, 2, 9), (2, 2, 9), (2, 2, 8)], LISTS)  # 8, 9 are outside I

    row = one_row(statistics_of(lists, catalogue, totals))

    assert (row.coverage, row.gini, row.entropy) == (0.0, None, None)


def test_gini_is_0_for_equal_exposure_over_the_whole_catalogue(spark):
    catalogue, totals = catalogue_of(spark, [(10, 1), (10, 2), (11, 3)])
    # k = 1: every catalogue item in exactly one list; k = 3: every item in both lists
    lists = frame(
        spark,
        [(1, 1, 1), (2, 1, 2), (3, 1, 3)] + [(u, 3, i) for u in (1, 2) for i in (1, 2, 3)],
        LISTS,
    )

    rows = {r.k: r for r in statistics_of(lists, catalogue, totals).collect()}

    for k in (1, 3):
        assert rows[k].gini == pytest.approx(0.0, abs=TOL)
        assert rows[k].coverage == pytest.approx(1.0, abs=TOL)
        assert rows[k].entropy == pytest.approx(LOG2_3, abs=TOL)  # uniform over 3 items


def test_gini_is_n_minus_1_over_n_when_one_item_is_shown_to_everyone(spark):
    catalogue, totals = catalogue_of(spark, [(10, i) for i in range(1, 6)])
    lists = frame(spark, [(u, 1, 1) for u in range(1, 5)], LISTS)  # 4 lists, all [1]

    row = one_row(statistics_of(lists, catalogue, totals))

    # f ascending = (0, 0, 0, 0, 4): G = (2*5 - 5 - 1) * 4 / (5 * 4) = 4/5 = (n - 1)/n
    assert row.gini == pytest.approx(4 / 5, abs=TOL)
    assert row.coverage == pytest.approx(1 / 5, abs=TOL)
    assert row.entropy == pytest.approx(0.0, abs=TOL)


def test_exposure_matches_the_reference_on_the_worked_example():
    lists = pandas_lists({2: {1: [1, 2], 2: [1, 3], 3: [9, 4]}})
    ranking = ref.lists_at(lists, 2)
    catalogue = [1, 2, 3, 4, 5]
    assert ref.coverage(ranking, catalogue) == pytest.approx(0.8, abs=TOL)
    assert ref.gini(ranking, catalogue) == pytest.approx(8 / 25, abs=TOL)
    assert ref.entropy(ranking, catalogue) == pytest.approx(math.log2(5) - 0.4, abs=TOL)


# --- popularity bias and novelty ----------------------------------------------------------


def test_popularity_bias_worked_example(spark):
    catalogue, totals = catalogue_of(spark, EXAMPLE_HISTORY)
    lists = frame(spark, EXAMPLE_LISTS, LISTS)

    row = one_row(statistics_of(lists, catalogue, totals))

    # slot interaction counts: user 1 -> 3, 1; user 2 -> 3, 1; user 3 -> 0 (item 9), 2
    # mean over slots = 10/6 = 5/3; catalogue mean = 8/5; bias = (5/3) / (8/5) = 25/24
    assert row.popularity_bias == pytest.approx(25 / 24, abs=TOL)


def test_novelty_worked_example_with_the_floor_for_unknown_items(spark):
    catalogue, totals = catalogue_of(spark, EXAMPLE_HISTORY)
    lists = frame(spark, EXAMPLE_LISTS, LISTS)

    values = by_key(beyond_metric(lists, "novelty", catalogue=catalogue, totals=totals), "user_id")

    # p(1) = 3/3 -> -log2 p = 0; p(2) = p(3) = p(4) = 1/3 -> log2 3;
    # p(9) = max(0, 1)/3 = 1/3 (floored) -> log2 3
    # user 1: (0 + log2 3)/2; user 2: (0 + log2 3)/2; user 3: (log2 3 + log2 3)/2 = log2 3
    assert values == pytest.approx({1: LOG2_3 / 2, 2: LOG2_3 / 2, 3: LOG2_3}, abs=TOL)


# --- personalization ----------------------------------------------------------------------


def test_personalization_worked_example(spark):
    lists = frame(spark, EXAMPLE_LISTS, LISTS)

    row = one_row(personalization_of(lists))

    # cos(1, 2) = |{1}| / sqrt(2 * 2) = 1/2; cos(1, 3) = cos(2, 3) = 0
    # mean over the 3 pairs = 1/6 -> personalization = 5/6
    assert row.personalization == pytest.approx(5 / 6, abs=TOL)
    assert row.n_lists == 3


def test_personalization_is_0_for_identical_and_1_for_disjoint_lists(spark):
    identical = [(u, 1, i) for u in range(1, 6) for i in (7, 8, 9)]  # k = 1: all [7, 8, 9]
    disjoint = [(u, 2, 10 * u + j) for u in range(1, 6) for j in range(3)]  # k = 2: no overlap
    lists = frame(spark, identical + disjoint, LISTS)

    values = by_key(personalization_of(lists), "k", "personalization")

    assert values == pytest.approx({1: 0.0, 2: 1.0}, abs=TOL)


def test_personalization_needs_two_lists(spark):
    lists = frame(spark, [(1, 5, 1), (1, 5, 2)], LISTS)

    row = one_row(personalization_of(lists))

    assert row.personalization is None
    assert row.n_lists == 1


def test_exact_personalization_equals_brute_force_over_all_pairs(spark):
    rng = np.random.default_rng(20240601)
    groups = {
        1: random_lists(rng, users=range(300), items=40, longest=10),
        2: random_lists(rng, users=range(1000, 1250), items=15, longest=6),
    }
    lists = pandas_lists(groups)

    got = by_key(personalization_of(spark.createDataFrame(lists, LISTS)), "k", "personalization")

    # brute force: 1 - mean over all 44,850 (k = 1) and 31,125 (k = 2) pairs of the cosine
    want = {k: ref.personalization(ref.lists_at(lists, k)) for k in groups}
    assert 0.0 < want[2] < want[1] < 1.0
    assert got == pytest.approx(want, abs=1e-9)


# --- sampled Jaccard personalization ------------------------------------------------------


def test_reference_xxhash64_is_sparks(spark):
    values = [0, 1, 42, -1, 7919, 2**31 - 1, -(2**31)]
    frame_ = spark.createDataFrame([(v, v) for v in values], "i int, l long")

    rows = frame_.select(
        "i",
        F.xxhash64(F.lit(42), "i").alias("int_hash"),
        F.xxhash64(F.lit(7), "l").alias("long_hash"),
        F.xxhash64(F.lit(2**40), "i").alias("long_seed_hash"),
    ).collect()

    for row in rows:
        assert row.int_hash == ref.spark_xxhash64((42, "int"), (row.i, "int"))
        assert row.long_hash == ref.spark_xxhash64((7, "int"), (row.i, "long"))
        assert row.long_seed_hash == ref.spark_xxhash64((2**40, "long"), (row.i, "int"))


def rankings_of(spark, lists: pd.DataFrame, *, keys: Sequence[str] = ()):
    """(*keys, user_id, item_id, rank) from (*keys, user_id, item_id) rows, ranked in row order."""
    ranked = lists.assign(rank=lists.groupby([*keys, "user_id"]).cumcount() + 1)
    schema = ", ".join([*(f"{key} string" for key in keys), RANKED])
    return spark.createDataFrame(ranked[[*keys, "user_id", "item_id", "rank"]], schema)


def test_jaccard_pairs_are_the_documented_disjoint_hash_order_sample(spark):
    rng = np.random.default_rng(7)
    lists = pandas_lists({8: random_lists(rng, users=range(1, 201), items=25, longest=8)})
    ranked = rankings_of(spark, lists)

    got = jaccard_pair_distances(ranked, keys=[], ks=[2, 8], pairs=40, seed=11)

    pairs = ref.sampled_pairs(range(1, 201), pairs=40, seed=11)
    members = [u for pair in pairs for u in pair]
    assert len(pairs) == 40 and len(set(members)) == 80  # disjoint pairs
    # the same pairs at every k, each compared on its lists at that k
    cut = pd.concat([lists.groupby("user_id").head(2).assign(k=2), lists])
    for k in (2, 8):
        values = by_key(got.filter(F.col("k") == k), "_pair")
        want = ref.jaccard_distances(cut, k, pairs=40, seed=11)
        assert sorted(values) == list(range(40))
        assert [values[j] for j in range(40)] == pytest.approx(want, abs=1e-12)
        assert all(0.0 <= v <= 1.0 for v in values.values())


def test_jaccard_sample_is_deterministic_for_a_seed_and_uses_each_user_once(spark):
    rng = np.random.default_rng(3)
    lists = pandas_lists({4: random_lists(rng, users=range(1, 8), items=10, longest=4)})
    ranked = rankings_of(spark, lists)
    reordered = spark.createDataFrame(ranked.toPandas().iloc[::-1], RANKED).repartition(3)

    first = sorted(jaccard_pair_distances(ranked, keys=[], ks=[4], pairs=10, seed=5).collect())
    again = sorted(jaccard_pair_distances(reordered, keys=[], ks=[4], pairs=10, seed=5).collect())

    assert first == again
    # 7 users and room for 10 pairs: floor(7/2) = 3 disjoint pairs, the odd user is left out
    assert len(first) == 3
    assert [r.value for r in first] == pytest.approx(
        ref.jaccard_distances(lists, 4, pairs=10, seed=5), abs=1e-12
    )


def test_jaccard_mean_is_0_for_identical_and_1_for_disjoint_lists(spark):
    identical = [("same", u, i) for u in range(1, 21) for i in (7, 8, 9)]
    disjoint = [("apart", u, 10 * u + j) for u in range(1, 21) for j in range(3)]
    lists = pd.DataFrame(identical + disjoint, columns=["g", "user_id", "item_id"])
    ranked = rankings_of(spark, lists, keys=["g"])

    means = (
        jaccard_pair_distances(ranked, keys=["g"], ks=[3], pairs=5, seed=42)
        .groupBy("g")
        .agg(F.avg("value").alias("value"), F.count(F.lit(1)).alias("n"))
    )

    rows = {r.g: (r.value, r.n) for r in means.collect()}
    assert rows["same"] == (pytest.approx(0.0, abs=TOL), 5)
    assert rows["apart"] == (pytest.approx(1.0, abs=TOL), 5)


# --- intra-list diversity -----------------------------------------------------------------


# 1 -> {a, b}, 2 -> {b}, 3 -> {c}, 7 -> {b}, 8 -> {a, b, c, d}, 9 -> {c, d} (given twice);
# 4 -> null, 5 -> empty, 6 -> no row
CATEGORY_ROWS = [
    (1, ["a", "b"]),
    (2, ["b"]),
    (3, ["c"]),
    (7, ["b"]),
    (8, ["a", "b", "c", "d"]),
    (9, ["c", "c", "d"]),
    (4, None),
    (5, []),
]
CATEGORY_SETS = {1: {"a", "b"}, 2: {"b"}, 3: {"c"}, 7: {"b"}, 8: {"a", "b", "c", "d"}}
CATEGORY_SETS |= {9: {"c", "d"}, 5: set()}
CATEGORY_LISTS = {
    1: [1, 2, 4],
    2: [1, 3, 5, 6],
    3: [2, 7],
    4: [4, 5, 6],
    5: [1, 2, 8],
    6: [3, 4],
    7: [3, 9],
}


def category_lists(spark):
    rows = [(u, 4, i) for u, items in CATEGORY_LISTS.items() for i in items]
    return frame(spark, rows, LISTS)


def test_category_diversity_of_multi_category_items_by_hand(spark):
    """Each item is its unit multi-hot vector, cos(i, j) = |C_i ∩ C_j| / sqrt(|C_i| |C_j|);
    ILD = 1 - mean cosine over the pairs of items with categories."""
    categories = frame(spark, CATEGORY_ROWS, CATEGORIES)

    values = by_key(
        beyond_metric(category_lists(spark), "ild_category", categories=categories), "user_id"
    )

    root2 = math.sqrt(2)
    want = {
        1: 1 - 1 / root2,  # items 1, 2 ({a, b}, {b}); 4 has no categories
        2: 1.0,  # items 1, 3 share nothing; 5 (empty) and 6 (no row) are left out
        3: 0.0,  # {b}, {b}: identical
        # 5: cos(1, 2) = 1/sqrt(2), cos(1, 8) = 2/sqrt(8), cos(2, 8) = 1/sqrt(4)
        5: 1 - (2 / root2 + 0.5) / 3,
        7: 1 - 1 / root2,  # {c} and {c, d}: the repeated c counts once
        # 4: no item with categories, 6: one item: no value
    }
    assert values == pytest.approx(want, abs=TOL)
    assert want[5] == pytest.approx(0.3619288125423016, abs=TOL)
    reference = ref.ild_category_per_user(CATEGORY_LISTS, CATEGORY_SETS)
    assert reference == pytest.approx(want, abs=TOL)


def test_category_diversity_stays_in_0_1_where_the_old_ratio_exceeded_1(spark):
    """Two items with two categories each, disjoint: the old distinct-categories / items
    ratio was 4/2 = 2; ILD is 1 (orthogonal vectors). Equal lists give exactly 0."""
    categories = frame(spark, [(1, ["a", "b"]), (2, ["c", "d"]), (3, ["a", "b", "c"])], CATEGORIES)
    lists = frame(spark, [(1, 2, 1), (1, 2, 2), (2, 2, 3)], LISTS)
    same = frame(spark, [(4, ["x", "y", "z"]), (5, ["z", "y", "x"])], CATEGORIES)
    equal = frame(spark, [(9, 2, 4), (9, 2, 5)], LISTS)

    values = by_key(beyond_metric(lists, "ild_category", categories=categories), "user_id")
    identical = by_key(beyond_metric(equal, "ild_category", categories=same), "user_id")

    assert values == pytest.approx({1: 1.0}, abs=TOL)  # user 2 has one item: no value
    assert identical == {9: 0.0}


def test_category_coverage_by_hand(spark):
    """Catalogue = train items 1, 2, 3, 4: categories {a, b, c} (4 has none); item 8's d is
    outside the catalogue's categories and does not count."""
    categories = frame(spark, CATEGORY_ROWS, CATEGORIES)
    catalogue = item_statistics(frame(spark, [(10, 1), (10, 2), (11, 3), (11, 4)], HISTORY))

    got = by_key(
        beyond_metric(
            category_lists(spark), "category_coverage", categories=categories, catalogue=catalogue
        ),
        "user_id",
    )

    want = {
        1: 2 / 3,  # {a, b}
        2: 1.0,  # {a, b, c}
        3: 1 / 3,  # {b}
        4: 0.0,  # a list without categories still counts, with 0
        5: 1.0,  # {a, b, c, d}: d is not a catalogue category
        6: 1 / 3,  # {c}
        7: 1 / 3,  # {c, d}: only c
    }
    assert got == pytest.approx(want, abs=TOL)
    reference = ref.category_coverage_per_user(CATEGORY_LISTS, CATEGORY_SETS, [1, 2, 3, 4])
    assert reference == pytest.approx(want, abs=TOL)


def test_category_coverage_without_catalogue_categories_has_no_value(spark):
    categories = frame(spark, [(1, None), (2, []), (8, ["a"])], CATEGORIES)
    catalogue = item_statistics(frame(spark, [(10, 1), (10, 2)], HISTORY))
    lists = frame(spark, [(1, 2, 1), (1, 2, 8)], LISTS)

    assert (
        beyond_metric(
            lists, "category_coverage", categories=categories, catalogue=catalogue
        ).count()
        == 0
    )


def test_embedding_diversity_worked_example(spark):
    units = unit_vectors(
        frame(spark, [(1, [2.0, 0.0]), (2, [0.0, 3.0]), (3, [1.0, 1.0])], EMBEDDINGS)
    )
    lists = frame(spark, [(1, 3, 1), (1, 3, 2), (1, 3, 3)], LISTS)

    values = by_key(beyond_metric(lists, "ild_embedding", units=units), "user_id")

    # cos(1, 2) = 0, cos(1, 3) = cos(2, 3) = 1/sqrt(2): mean = sqrt(2)/3
    assert values == pytest.approx({1: 1 - math.sqrt(2) / 3}, abs=TOL)


def test_embedding_diversity_equals_the_explicit_pairwise_mean(spark):
    rng = np.random.default_rng(99)
    vectors = {i: rng.normal(size=5) for i in range(30)}
    vectors[0] = np.zeros(5)  # a zero vector: no direction, left out
    lists = pandas_lists({6: random_lists(rng, users=range(60), items=36, longest=7)})
    # items 30..35 have no embedding at all
    embeddings = spark.createDataFrame(
        [(i, [float(x) for x in v]) for i, v in vectors.items()], EMBEDDINGS
    )

    got = by_key(
        beyond_metric(
            spark.createDataFrame(lists, LISTS), "ild_embedding", units=unit_vectors(embeddings)
        ),
        "user_id",
    )

    want = ref.ild_embedding_per_user(ref.lists_at(lists, 6), vectors)
    assert len(want) < 60  # some lists have fewer than 2 embedded items: no value
    assert got == pytest.approx(want, abs=1e-9)


def test_unit_vectors_drop_zero_and_missing_vectors(spark):
    embeddings = frame(spark, [(1, [3.0, 4.0]), (2, [0.0, 0.0]), (3, None)], EMBEDDINGS)

    units = {r.item_id: r.unit for r in unit_vectors(embeddings).collect()}

    assert units == {1: pytest.approx([0.6, 0.8], abs=TOL)}


# --- serendipity --------------------------------------------------------------------------


def test_serendipity_against_the_popularity_baselines_top_k(spark):
    ks = [1, 2]
    # the model's ranking; user 4 has a single item, user 3 nothing relevant
    ranked = frame(
        spark,
        [(1, 1, 1), (1, 2, 2), (2, 3, 1), (2, 4, 2), (3, 5, 1), (3, 6, 2), (4, 10, 1)],
        RANKED,
    )
    # the popularity baseline's ranking (the expected items)
    popular = frame(
        spark,
        [(1, 7, 1), (1, 1, 2), (2, 7, 1), (2, 8, 2), (3, 1, 1), (3, 2, 2), (4, 7, 1), (4, 8, 2)],
        RANKED,
    )
    truth = frame(
        spark,
        [(1, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (2, 4, 1.0), (2, 9, 1.0), (4, 10, 1.0)],
        TRUTH,
    )

    result = beyond_metric(ranked, "serendipity", ks=ks, truth=truth, expected=popular)

    got = {(r.user_id, r.k): r.value for r in result.collect()}
    assert got == pytest.approx(
        {
            # k = 1: expected {7} for users 1, 2, 4 and {1} for user 3
            (1, 1): 1.0,  # [1]: relevant, not expected -> 1/1
            (2, 1): 1.0,  # [3]: relevant, not expected -> 1/1
            (3, 1): 0.0,  # [5]: not relevant
            (4, 1): 1.0,  # [10]: relevant, not expected
            # k = 2: expected {7, 1} (user 1), {7, 8} (users 2, 4), {1, 2} (user 3)
            (1, 2): 0.5,  # [1, 2] both relevant, 1 is now expected -> 1/2
            (2, 2): 1.0,  # [3, 4] both relevant and unexpected -> 2/2
            (3, 2): 0.0,
            (4, 2): 0.5,  # [10]: one serendipitous item / k = 2 (not / list length)
        },
        abs=TOL,
    )


def test_serendipity_reference_agrees_on_the_literal_example():
    lists = pandas_lists({2: {1: [1, 2], 2: [3, 4], 3: [5, 6], 4: [10]}})
    expected = pandas_lists({2: {1: [7, 1], 2: [7, 8], 3: [1, 2], 4: [7, 8]}})
    relevant = {1: {1, 2}, 2: {3, 4, 9}, 4: {10}}
    got = ref.serendipity_per_user(ref.lists_at(lists, 2), relevant, ref.lists_at(expected, 2), 2)
    assert got == pytest.approx({1: 0.5, 2: 1.0, 3: 0.0, 4: 0.5}, abs=TOL)


# --- wiring: group and per-user tables ----------------------------------------------------


def test_group_and_per_user_tables_carry_every_requested_metric(spark):
    history = frame(spark, EXAMPLE_HISTORY, HISTORY)
    catalogue = item_statistics(history)
    ranked = frame(spark, EXAMPLE_RANKED, RANKED)
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=catalogue_totals(history, catalogue),
        truth=frame(spark, [(1, 2, 1.0)], TRUTH),
        expected=frame(spark, [(1, 1, 1)], RANKED),
        categories=frame(spark, [(1, ["a"]), (2, ["b"]), (3, ["a"])], CATEGORIES),
    )

    groups = group_beyond(
        ranked,
        inputs,
        keys=[],
        ks=[2],
        metrics=["coverage", "gini", "entropy", "popularity_bias", "personalization"],
        pairs=10,
        seed=1,
    )
    per_user = per_user_beyond(
        ranked,
        inputs,
        ks=[2],
        metrics=["novelty", "ild_category", "category_coverage", "ild_embedding", "serendipity"],
    )

    rows = {r.metric: r for r in groups.collect()}
    assert {m: r.value for m, r in rows.items()} == pytest.approx(
        {
            "coverage": 0.8,
            "gini": 8 / 25,
            "entropy": math.log2(5) - 0.4,
            "popularity_bias": 25 / 24,
            "personalization": 5 / 6,
        },
        abs=TOL,
    )
    assert {(r.n_users, r.std, r.n_samples) for r in rows.values()} == {(3, None, None)}
    got = {(r.metric, r.user_id): r.value for r in per_user.collect()}
    assert got == pytest.approx(
        {
            ("novelty", 1): LOG2_3 / 2,
            ("novelty", 2): LOG2_3 / 2,
            ("novelty", 3): LOG2_3,
            # user 1: [1, 2] -> a, b orthogonal; user 2: [1, 3] -> a, a; user 3: [9, 4] none
            ("ild_category", 1): 1.0,
            ("ild_category", 2): 0.0,
            # catalogue categories {a, b}: user 1 shows both, user 2 a, user 3 none
            ("category_coverage", 1): 1.0,
            ("category_coverage", 2): 0.5,
            ("category_coverage", 3): 0.0,
            # no units configured: ild_embedding is left out
            # user 1: item 2 relevant, not expected -> 1/2; others 0
            ("serendipity", 1): 0.5,
            ("serendipity", 2): 0.0,
            ("serendipity", 3): 0.0,
        },
        abs=TOL,
    )


def test_group_table_reports_the_jaccard_sample_with_its_spread(spark):
    ranked = frame(spark, EXAMPLE_RANKED, RANKED)
    history = frame(spark, EXAMPLE_HISTORY, HISTORY)
    catalogue = item_statistics(history)
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=catalogue_totals(history, catalogue),
        truth=frame(spark, [], TRUTH),
        expected=frame(spark, [], RANKED),
    )

    row = one_row(
        group_beyond(
            ranked, inputs, keys=[], ks=[2], metrics=["personalization_jaccard"], pairs=5, seed=9
        )
    )

    # 3 lists: one complete pair, the odd user is left out
    example = pandas_lists({2: {1: [1, 2], 2: [1, 3], 3: [9, 4]}})
    want = ref.jaccard_distances(example, 2, pairs=5, seed=9)
    assert len(want) == 1
    assert (row.metric, row.n_users, row.n_samples) == ("personalization_jaccard", 3, 1)
    assert row.value == pytest.approx(want[0], abs=TOL)
    assert row.std is None  # a sample std of one pair is undefined


# --- bootstrap intervals of the group statistics ------------------------------------------


def test_poisson_weights_follow_poisson_1(spark):
    u = spark.range(200_000).select((F.col("id") / 200_000.0).alias("u"))

    counts = by_key(u.groupBy(poisson_weight(F.col("u")).alias("w")).count(), "w", "count")

    # the grid u = j / N maps exactly onto the Poisson(1) CDF: P(W = w) = e^-1 / w!
    for w in range(6):
        assert counts[w] / 200_000 == pytest.approx(math.exp(-1) / math.factorial(w), abs=1e-5)
    assert sum(counts.values()) == 200_000


def reference_weight(seed: int, user: int, replicate: int) -> int:
    """Poisson(1) inverse CDF at u = pmod(xxhash64(seed, user, replicate), 2^40) / 2^40."""
    u = (ref.spark_xxhash64((seed, "int"), (user, "int"), (replicate, "int")) % (1 << 40)) / (
        1 << 40
    )
    w, cdf, term = 0, math.exp(-1), math.exp(-1)
    while u >= cdf:
        w += 1
        term /= w
        cdf += term
    return w


def test_bootstrap_kernel_sums_the_reference_weights_in_any_chunking(monkeypatch):
    """The numpy kernel alone (no Spark): from ranking rows, per (list group = ranking group
    and k, item, replicate) f = sum of W(u, b), s = sum of W / sqrt(|R_k(u)|), q = sum of
    W / |R_k(u)| over the group's lists R_k(u) = the rows of rank <= k; the items with f > 0
    grouped into blocks per (group, k, replicate, f, in_catalogue) with their count, train
    interactions, sum of (s^2 - q) / 2 (as exact_sum's limbs) and sum of q (a group's add up to
    its replicate's number of lists) — with several groups and cut-offs in one call, whatever
    the row order and however the rows are cut into chunks."""
    rng = np.random.default_rng(3)
    seed, samples, ks = 11, 7, (2, 5, 9)
    ranked = pd.concat(
        pd.DataFrame(
            {"model": model, "user_id": rng.integers(0, 40, n), "item_id": rng.integers(0, 12, n)}
        )
        .drop_duplicates(["user_id", "item_id"])
        .sample(frac=1, random_state=n)
        for model, n in (("a", 300), ("b", 150))
    )
    ranked["rank"] = ranked.groupby(["model", "user_id"]).cumcount() + 1
    ranked = ranked[ranked["rank"] <= max(ks)].copy()
    ranked["n_ranked"] = ranked.groupby(["model", "user_id"])["item_id"].transform("size")
    ranked["n_interactions"] = ranked["item_id"] * 3
    ranked["in_catalogue"] = ranked["item_id"] < 10
    ranked["_h"] = [ref.spark_xxhash64((seed, "int"), (int(u), "int")) for u in ranked["user_id"]]
    assert ranked["n_ranked"].min() < 5 < ranked["n_ranked"].max()  # short and long lists
    rows = pd.concat(ranked[ranked["rank"] <= k].assign(k=k) for k in ks)
    rows["list_size"] = rows.groupby(["model", "k", "user_id"])["item_id"].transform("size")
    exposure: dict[tuple[str, int, int, int], list[float]] = {}
    for r in rows.itertuples():
        for b in range(samples):
            w = reference_weight(seed, r.user_id, b)
            if w:
                sums = exposure.setdefault((r.model, r.k, r.item_id, b), [0, 0.0, 0.0])
                sums[0] += w
                sums[1] += w / math.sqrt(r.list_size)
                sums[2] += w / r.list_size
    want: dict[tuple[str, int, int, int, bool], list[float]] = {}
    for (model, k, item, b), (f, s, q) in exposure.items():
        block = want.setdefault((model, k, b, f, item < 10), [0, 0, 0.0, 0.0])
        block[0] += 1
        block[1] += 3 * item
        block[2] += (s * s - q) / 2
        block[3] += q
    # the q of a group's blocks add up to its replicate's number of lists, sum_u W(u, b)
    n_lists = {
        (model, k, b): sum(reference_weight(seed, int(u), b) for u in users.unique())
        for (model, k), users in rows.groupby(["model", "k"])["user_id"]
        for b in range(samples)
    }

    for chunk in (5, 64, 32_768):
        monkeypatch.setattr(bootstrap_kernel, "CHUNK_ROWS", chunk)
        kernel = bootstrap_kernel.replicate_blocks_kernel(samples, keys=["model"], ks=ks)
        got = kernel(ranked.sample(frac=1, random_state=chunk).drop(columns="user_id"))

        keys = ["model", "k", "replicate", "f", "in_catalogue"]
        assert sorted(got[keys].itertuples(index=False, name=None)) == sorted(want)
        for r in got.itertuples():
            c, interactions, pair_sum, lists = want[
                (r.model, r.k, r.replicate, r.f, r.in_catalogue)
            ]
            assert (r.c, r.interactions) == (c, interactions)
            limbs = r.pair_h + (r.pair_m + r.pair_l / 2.0**31) / 2.0**31
            assert limbs == pytest.approx(pair_sum, rel=1e-12)
            assert r.lists == pytest.approx(lists, rel=1e-12)
        counted = got.groupby(["model", "k", "replicate"])["lists"].sum()
        assert {key: round(v) for key, v in counted.items() if round(v)} == {
            key: n for key, n in n_lists.items() if n
        }


def test_bootstrap_std_equals_a_reference_over_the_same_replicates(spark):
    rng = np.random.default_rng(7)
    history_rows = [(int(u), int(i)) for u in range(30) for i in rng.choice(25, 4, replace=False)]
    catalogue, totals = catalogue_of(spark, history_rows)
    rankings = {  # two ranking groups, lists of 1..5 and 1..4 items in rank order
        "a": random_lists(rng, users=range(40), items=30, longest=5),
        "b": random_lists(rng, users=range(20, 50), items=12, longest=4),
    }
    ranked = spark.createDataFrame(
        [
            (g, u, i, r + 1)
            for g, lists in rankings.items()
            for u, items in lists.items()
            for r, i in enumerate(items)
        ],
        "g string, user_id int, item_id int, rank int",
    )
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=totals,
        truth=frame(spark, [], TRUTH),
        expected=frame(spark, [], RANKED),
    )
    metrics = ["coverage", "gini", "entropy", "popularity_bias", "personalization"]
    samples, seed, ks = 30, 11, (2, 5)

    got = bootstrap_std(
        ranked, inputs, keys=["g"], ks=ks, metrics=metrics, samples=samples, seed=seed
    )

    _, interactions, _ = ref.train_statistics(
        pd.DataFrame(history_rows, columns=["user_id", "item_id"])
    )
    items = list(interactions)
    want = {}
    for g, lists in rankings.items():
        for k in ks:
            ranking = {u: items_[:k] for u, items_ in lists.items()}
            values = {m: [] for m in metrics}
            for b in range(samples):
                # user u appears W(u, b) times: copies are distinct lists
                replicate = {
                    (u, copy): ranking[u]
                    for u in ranking
                    for copy in range(reference_weight(seed, u, b))
                }
                values["coverage"].append(ref.coverage(replicate, items))
                values["gini"].append(ref.gini(replicate, items))
                values["entropy"].append(ref.entropy(replicate, items))
                values["popularity_bias"].append(ref.popularity_bias(replicate, interactions))
                values["personalization"].append(ref.personalization(replicate))
            want.update({(g, k, m): float(np.std(v, ddof=1)) for m, v in values.items()})
    assert {(r.g, r.k, r.metric): r.std for r in got.collect()} == pytest.approx(want, abs=1e-9)
    assert all(v > 0 for v in want.values())


def test_group_table_marks_bootstrapped_statistics(spark):
    catalogue, totals = catalogue_of(spark, EXAMPLE_HISTORY)
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=totals,
        truth=frame(spark, [], TRUTH),
        expected=frame(spark, [], RANKED),
    )
    ranked = frame(spark, EXAMPLE_RANKED, RANKED)

    rows = group_beyond(
        ranked,
        inputs,
        keys=[],
        ks=[2],
        metrics=["coverage", "personalization_jaccard"],
        pairs=5,
        seed=3,
        bootstrap_samples=20,
    ).collect()

    kinds = {r.metric: (r.interval, r.std is not None, r.n_samples) for r in rows}
    assert kinds == {
        "coverage": ("bootstrap", True, None),
        "personalization_jaccard": ("t", False, 1),
    }


def test_long_tail_share_and_count_worked_example(spark):
    """Train interactions: item 1 x3, 4 x2, 2, 3 and 5 x1 (8 in all). Head at share 0.5: item 1
    (0 before it < 4), item 4 (3 before < 4); item 2 has 5 before it, so 2, 3, 5 and the unknown
    9 are the long tail. k = 2: [1, 2], [1, 3], [9, 4] each hold one tail item (APLT 1/2, ACLT
    1); k = 1: [1], [1], [9] -> 0, 0, 1."""
    from receval_spark.ranking.relevance import item_popularity_segments

    history = frame(spark, EXAMPLE_HISTORY, HISTORY)
    catalogue = item_statistics(history)
    labels = item_popularity_segments(catalogue, head_share=0.5)
    head = labels.filter("segment = 'items=head'").select("item_id")
    assert sorted(r.item_id for r in head.collect()) == [1, 4]
    pandas_history = pd.DataFrame(EXAMPLE_HISTORY, columns=["user_id", "item_id"])
    assert ref.head_items(pandas_history, 0.5) == {1, 4}
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=catalogue_totals(history, catalogue),
        truth=frame(spark, [(1, 2, 1.0)], TRUTH),
        expected=frame(spark, [(1, 1, 1)], RANKED),
        head=head,
    )
    per_user = per_user_beyond(
        frame(spark, EXAMPLE_RANKED, RANKED), inputs, ks=[1, 2], metrics=["aplt", "aclt"]
    )
    got = {(r.metric, r.user_id, r.k): r.value for r in per_user.collect()}
    assert got == {
        **{("aplt", u, 2): 0.5 for u in (1, 2, 3)},
        **{("aclt", u, 2): 1.0 for u in (1, 2, 3)},
        ("aplt", 1, 1): 0.0,
        ("aplt", 2, 1): 0.0,
        ("aplt", 3, 1): 1.0,
        ("aclt", 1, 1): 0.0,
        ("aclt", 2, 1): 0.0,
        ("aclt", 3, 1): 1.0,
    }
    # without the head table neither is computed
    assert (
        per_user_beyond(
            frame(spark, EXAMPLE_RANKED, RANKED),
            dataclasses.replace(inputs, head=None),
            ks=[2],
            metrics=["aplt", "aclt"],
        )
        is None
    )
