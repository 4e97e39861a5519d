"""Built-in models: popularity, seeded random, oracle; the fallback of candidate models."""

from __future__ import annotations

import numpy as np
import pytest
from chispa import assert_df_equality
from helpers import one_als_fit_per_history
from pyspark.sql import functions as F

from receval_spark.config import AlsModel, ItemKnnModel, PopularityModel
from receval_spark.ranking.models import fallback_users, fit_model
from receval_spark.ranking.models.oracle import oracle_candidates
from receval_spark.ranking.models.popularity import (
    item_popularity,
    popularity_candidates,
    popularity_ranks,
)
from receval_spark.ranking.models.random import random_candidates
from receval_spark.ranking.topk import rank_candidates

PAIRS = "user_id int, item_id int"
CANDIDATES = "user_id int, item_id int, score double"
RANKED = "user_id int, item_id int, score double, rank int"

# distinct users per item: 10 -> 3 (user 1 twice counts once), 11 -> 2, 12, 13, 14 -> 1
HISTORY = [(1, 10), (1, 10), (2, 10), (3, 10), (1, 11), (2, 11), (3, 12), (2, 13), (4, 14)]


def users_frame(spark, ids):
    return spark.createDataFrame([(u,) for u in ids], "user_id int")


def test_item_popularity_counts_distinct_users(spark):
    popularity = item_popularity(spark.createDataFrame(HISTORY, PAIRS))

    expected = spark.createDataFrame(
        [(10, 3.0), (11, 2.0), (12, 1.0), (13, 1.0), (14, 1.0)], "item_id int, score double"
    )
    assert_df_equality(popularity, expected, ignore_row_order=True, ignore_nullable=True)


def test_popularity_candidates_without_seen_filter_are_the_global_top_k(spark):
    history = spark.createDataFrame(HISTORY, PAIRS)

    candidates = popularity_candidates(history, users_frame(spark, [1, 5]), k=3, seen=None)

    expected = spark.createDataFrame(
        [
            (1, 10, 3.0),
            (1, 11, 2.0),
            (1, 12, 1.0),  # tied with 13 and 14 at one user: the smallest item id
            (5, 10, 3.0),
            (5, 11, 2.0),
            (5, 12, 1.0),
        ],
        CANDIDATES,
    )
    assert_df_equality(candidates, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize("filtered", [True, False], ids=["seen filtered", "no seen filter"])
def test_popularity_ranks_are_the_ranks_in_the_built_lists(spark, filtered):
    """popularity_ranks of any (user, item) pairs = the rank the item gets in the user's
    popularity list built by popularity_candidates + rank_candidates; pairs whose item is seen
    by the user or has no train users get no rank."""
    rng = np.random.default_rng(5)
    users_, items_ = rng.integers(0, 30, 400), rng.zipf(1.3, 400) % 40
    rows = [(int(u), int(i)) for u, i in zip(users_, items_, strict=True)]
    history = spark.createDataFrame(rows, PAIRS)
    seen = history if filtered else None
    users = users_frame(spark, range(35))  # users 30..34 have seen nothing
    pairs = spark.createDataFrame(
        [(u, i) for u in range(35) for i in range(45)], PAIRS
    )  # every item, incl. seen ones and items 40..44 without train users
    lists = rank_candidates(
        popularity_candidates(history, users, k=45, seen=seen), k=45, seen=seen
    ).select("user_id", "item_id", "rank")

    ranks = popularity_ranks(item_popularity(history), pairs, seen=seen)

    assert lists.count() > 500
    assert_df_equality(ranks, lists, ignore_row_order=True, ignore_nullable=True)


def test_popularity_leaves_k_items_after_removing_seen_ones(spark):
    history = spark.createDataFrame(HISTORY, PAIRS)
    users = users_frame(spark, [1, 2, 3, 5])

    candidates = popularity_candidates(history, users, k=2, seen=history)
    ranked = rank_candidates(candidates, k=2, seen=history)

    # seen: user 1 {10, 11}, user 2 {10, 11, 13}, user 3 {10, 12}, user 5 nothing
    expected = spark.createDataFrame(
        [
            (1, 12, 1.0, 1),
            (1, 13, 1.0, 2),
            (2, 12, 1.0, 1),
            (2, 14, 1.0, 2),
            (3, 11, 2.0, 1),
            (3, 13, 1.0, 2),
            (5, 10, 3.0, 1),
            (5, 11, 2.0, 2),
        ],
        RANKED,
    )
    assert_df_equality(ranked, expected, ignore_row_order=True, ignore_nullable=True)


def test_popularity_gives_what_the_catalogue_allows(spark):
    history = spark.createDataFrame(HISTORY, PAIRS)

    # user 2 has seen 3 of the 5 catalogue items: only 2 remain for k = 4
    candidates = popularity_candidates(history, users_frame(spark, [2]), k=4, seen=history)
    ranked = rank_candidates(candidates, k=4, seen=history)

    expected = spark.createDataFrame([(2, 12, 1.0, 1), (2, 14, 1.0, 2)], RANKED)
    assert_df_equality(ranked, expected, ignore_row_order=True, ignore_nullable=True)


# ---------------------------------------------------------------- random

CATALOGUE = list(range(100, 120))  # 20 items
RANDOM_HISTORY = [(u, CATALOGUE[(3 * u + j) % 20]) for u in range(1, 5) for j in range(u)]
RANDOM_USERS = [1, 2, 3, 4, 5, 6]  # 5 and 6 have no history


def _random_ranked(spark, history_rows, user_ids, *, seed, k=4, shuffle=False):
    history = spark.createDataFrame(history_rows, PAIRS)
    users = users_frame(spark, user_ids)
    if shuffle:
        history = history.repartition(3, "item_id")
        users = users.repartition(4)
    candidates = random_candidates(history, users, k=k, seen=history, seed=seed)
    return rank_candidates(candidates, k=k, seen=history)


def test_random_candidates_are_seeded_and_independent_of_partitioning_and_order(spark):
    reference = _random_ranked(spark, RANDOM_HISTORY, RANDOM_USERS, seed=7)
    shuffled = _random_ranked(
        spark, list(reversed(RANDOM_HISTORY)), list(reversed(RANDOM_USERS)), seed=7, shuffle=True
    )
    again = _random_ranked(spark, RANDOM_HISTORY, RANDOM_USERS, seed=7)

    assert_df_equality(shuffled, reference, ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(again, reference, ignore_row_order=True, ignore_nullable=True)


def test_random_candidates_no_duplicates_catalogue_items_only_unseen(spark):
    history = spark.createDataFrame(RANDOM_HISTORY, PAIRS)
    users = users_frame(spark, RANDOM_USERS)

    candidates = random_candidates(history, users, k=4, seen=history, seed=7).cache()
    rows = candidates.collect()

    pairs = [(r["user_id"], r["item_id"]) for r in rows]
    assert len(pairs) == len(set(pairs))  # no item twice for one user
    assert {item for _, item in pairs} <= set(CATALOGUE)
    assert {user for user, _ in pairs} == set(RANDOM_USERS)
    # scores are minus the first draw: distinct within a user, so the ranking has no ties
    for user in RANDOM_USERS:
        scores = [r["score"] for r in rows if r["user_id"] == user]
        assert len(scores) == len(set(scores))
        assert all(s <= -1.0 for s in scores)

    ranked = rank_candidates(candidates, k=4, seen=history).collect()
    seen = set(RANDOM_HISTORY)
    assert not [r for r in ranked if (r["user_id"], r["item_id"]) in seen]
    per_user = {u: sorted(r["rank"] for r in ranked if r["user_id"] == u) for u in RANDOM_USERS}
    assert per_user == {u: [1, 2, 3, 4] for u in RANDOM_USERS}


def test_random_candidates_depend_on_the_seed(spark):
    def lists(seed):
        ranked = _random_ranked(spark, RANDOM_HISTORY, RANDOM_USERS, seed=seed)
        return {
            r["user_id"]: r["items"]
            for r in ranked.groupBy("user_id")
            .agg(F.sort_array(F.collect_list(F.struct("rank", "item_id"))).alias("items"))
            .collect()
        }

    first, other = lists(7), lists(8)

    assert set(first) == set(other) == set(RANDOM_USERS)
    assert first != other


# ---------------------------------------------------------------- oracle


def test_oracle_candidates_are_the_relevant_items_scored_by_grade(spark):
    truth = spark.createDataFrame(
        [(1, 10, 1.0), (1, 11, 3.0), (1, 12, 3.0), (2, 20, 2.0)],
        "user_id int, item_id int, grade double",
    )

    candidates = oracle_candidates(truth)
    ranked = rank_candidates(candidates, k=2, seen=None)

    assert_df_equality(
        candidates,
        spark.createDataFrame([(1, 10, 1.0), (1, 11, 3.0), (1, 12, 3.0), (2, 20, 2.0)], CANDIDATES),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # best grade first, ties by item id
    assert_df_equality(
        ranked,
        spark.createDataFrame([(1, 11, 3.0, 1), (1, 12, 3.0, 2), (2, 20, 2.0, 1)], RANKED),
        ignore_row_order=True,
        ignore_nullable=True,
    )


# ---------------------------------------------------------------- fallback of candidate models


def _lists(ranked):
    return {
        r["user_id"]: [(i["item_id"], i["score"]) for i in r["items"]]
        for r in ranked.groupBy("user_id")
        .agg(F.sort_array(F.collect_list(F.struct("rank", "item_id", "score"))).alias("items"))
        .collect()
    }


@pytest.mark.parametrize(
    "model",
    [
        AlsModel(name="als", kind="als", rank=2, max_iter=3, blocks=2),
        ItemKnnModel(name="item_knn", kind="item_knn", neighbours=5),
    ],
    ids=["als", "item_knn"],
)
def test_cold_users_get_exactly_the_popularity_list_under_the_fallback_and_none_without(
    spark, model
):
    """Users 5 and 6 have no train rows: ``fallback: popularity`` (the default) gives them
    popularity's own top-k (same scores, ties, seen filtering), ``none`` gives them nothing;
    the warm users' lists are the model's alone either way, and the fallback counts them."""
    history = spark.createDataFrame(HISTORY, PAIRS)
    users = users_frame(spark, [1, 2, 3, 5, 6])
    truth = spark.createDataFrame([], "user_id int, item_id int, grade double")

    def ranked(config):
        scorer = fit_model(config, history=history, truth=truth, k=2, seen=history)
        return scorer, _lists(rank_candidates(scorer.candidates(users), k=2, seen=history))

    popularity = ranked(PopularityModel(name="p", kind="popularity"))[1]
    assert model.fallback == "popularity"
    with one_als_fit_per_history(fit_model):  # ALS: the same fit wrapped two ways
        served, with_fallback = ranked(model)
        alone, without = ranked(model.model_copy(update={"fallback": "none"}))

    assert with_fallback[5] == with_fallback[6] == popularity[5] == [(10, 3.0), (11, 2.0)]
    assert 5 not in without and 6 not in without
    assert {u: v for u, v in with_fallback.items() if u < 5} == without
    assert sorted(r.user_id for r in fallback_users(served, users).collect()) == [5, 6]
    assert fallback_users(alone, users) is None
