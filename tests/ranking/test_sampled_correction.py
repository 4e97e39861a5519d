"""Corrected sampled metrics ``sampled_<N>_corrected`` (docs/evaluation.md#corrected-sampled-
metrics-sampled_n_corrected): each positive's rank among the sampled negatives scaled to the
user's pool of negatives (Krichene & Rendle, KDD 2020), the accuracy metrics at those places."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import reference as ref
from chispa import assert_df_equality
from helpers import sql_conf

from receval_spark.config import EvaluationConfig, PopularityModel, RandomModel
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.lists import item_statistics
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.population import Population
from receval_spark.ranking.relevance import user_segments
from receval_spark.ranking.sampled import sampled_candidates, sampled_protocol
from receval_spark.ranking.sampled_correction import estimated_positions, negative_pools
from receval_spark.stats import mean_interval, metric_bounds

PAIRS = "user_id int, item_id int"
RANKED = "model string, user_id int, item_id int, rank int"
TRUTH = "user_id int, item_id int, grade double"
POOLS = "user_id int, pool long, negatives long"
METRICS = ("precision", "recall", "hit_rate", "mrr", "map", "ndcg", "arhr", "r_precision", "rbp")


def one_positive(spark):
    """|I| = 101 train items (0..100); user 1 interacted only with its positive, item 0, in
    test; 10 negatives (1..10) drawn; the positive ranked 3rd (two negatives above it)."""
    interactions = spark.createDataFrame([(1, 0)] + [(9, i) for i in range(101)], PAIRS)
    catalogue = spark.createDataFrame([(i,) for i in range(101)], "item_id int")
    truth = spark.createDataFrame([(1, 0, 1.0)], TRUTH)
    pairs = spark.createDataFrame([(1, i) for i in range(11)], PAIRS)
    order = [1, 2, 0, *range(3, 11)]
    ranked = spark.createDataFrame([("m", 1, i, r) for r, i in enumerate(order, 1)], RANKED)
    return interactions, catalogue, truth, pairs, ranked


def test_the_pool_is_the_catalogue_less_the_users_items_and_the_negatives_those_drawn(spark):
    interactions, catalogue, truth, pairs, _ = one_positive(spark)
    pools = negative_pools(interactions, catalogue, pairs, truth)
    assert_df_equality(
        pools,
        spark.createDataFrame([(1, 100, 10)], POOLS),
        ignore_nullable=True,
        ignore_row_order=True,
    )


def test_a_positive_ranked_third_among_ten_negatives_of_a_hundred_is_estimated_at_21(spark):
    """r = 3: r~ = 1 + 2 · 100 / 10 = 21, so recall@20 counts it 0, recall@50 1; MRR@50 1/21,
    NDCG@50 1/log2(22), AP@50 = P@21 = 1/21."""
    interactions, catalogue, truth, pairs, ranked = one_positive(spark)
    pools = negative_pools(interactions, catalogue, pairs, truth)
    corrected = estimated_positions(ranked, truth, pools, by=["model"])
    assert [(r.item_id, r["rank"]) for r in corrected.collect()] == [(0, 21.0)]

    scores = per_user_accuracy(corrected.drop("model"), truth, ks=[20, 50]).collect()
    at = {r.k: r for r in scores}
    assert (at[20].recall, at[20].hit_rate, at[20].ndcg, at[20].mrr) == (0.0, 0.0, 0.0, 0.0)
    assert (at[50].recall, at[50].hit_rate) == (1.0, 1.0)
    assert at[50].mrr == 1 / 21 and at[50].map == 1 / 21 and at[50].precision == 1 / 50
    assert at[50].ndcg == pytest.approx(1 / math.log2(22), abs=1e-15)
    raw = {r.k: r for r in per_user_accuracy(ranked.drop("model"), truth, ks=[20]).collect()}
    assert raw[20].recall == 1.0 and raw[20].mrr == 1 / 3  # the sampled numbers it corrects


def test_two_positives_keep_their_order_and_count_each_other(spark):
    """Positives at sampled ranks 1 and 4 of 2 + 10, pool 100: the first has no negative
    above it (place 1), the second two (place 2 + 2 · 10 = 22). Every metric equals the
    reference's definitions at those places."""
    truth = spark.createDataFrame([(1, 0, 1.0), (1, 50, 2.0)], TRUTH)
    order = [0, 1, 2, 50, *range(3, 11)]
    ranked = spark.createDataFrame([("m", 1, i, r) for r, i in enumerate(order, 1)], RANKED)
    pools = spark.createDataFrame([(1, 100, 10)], POOLS)
    corrected = estimated_positions(ranked, truth, pools, by=["model"])
    assert {r.item_id: r["rank"] for r in corrected.collect()} == {0: 1.0, 50: 22.0}

    places = ref.corrected_positions(order, {0, 50}, pool=100, negatives=10)
    assert places == {0: Fraction(1), 50: Fraction(22)}
    scores = per_user_accuracy(corrected.drop("model"), truth, ks=[20, 50])
    for row in scores.collect():
        expected = ref.metrics_at_places(places, {0: 1.0, 50: 2.0}, row.k)
        for metric in METRICS:
            assert row[metric] == pytest.approx(expected[metric], abs=1e-12), (row.k, metric)
    at_50 = {r.k: r for r in scores.collect()}[50]
    assert at_50.map == pytest.approx((1 + 2 / 22) / 2, abs=1e-15)


def test_a_place_on_the_cut_off_is_a_hit_exactly(spark):
    """Pool 110, 100 negatives, 50 of them above the positive: its place is the rational
    (100 + 50 · 110) / 100 = 56, a hit at k = 56 and not at 55. Computed as 1 + 50 · 1.1 in
    doubles it would be 56.00000000000001, a miss at 56; one division of exact integers is
    not."""
    assert 1 + 50 * (110 / 100) > 56  # the rounding the formula avoids
    truth = spark.createDataFrame([(1, 0, 1.0)], TRUTH)
    order = [*range(1, 51), 0, *range(51, 101)]
    ranked = spark.createDataFrame([("m", 1, i, r) for r, i in enumerate(order, 1)], RANKED)
    pools = spark.createDataFrame([(1, 110, 100)], POOLS)
    corrected = estimated_positions(ranked, truth, pools, by=["model"])
    assert [r["rank"] for r in corrected.collect()] == [56.0]
    hits = {r.k: r.hit_rate for r in per_user_accuracy(corrected, truth, ks=[55, 56]).collect()}
    assert hits == {55: 0.0, 56: 1.0}


def test_an_oracle_stays_perfect_and_a_user_without_negatives_keeps_the_sampled_places(spark):
    """All positives above every negative: places 1..|Rel(u)|, as in the full list. User 2 has
    no negative (an empty pool): its places are its sampled ranks."""
    truth = spark.createDataFrame([(1, 0, 1.0), (1, 5, 1.0), (2, 7, 1.0)], TRUTH)
    ranked = spark.createDataFrame(
        [("m", 1, 0, 1), ("m", 1, 5, 2), ("m", 1, 3, 3), ("m", 2, 7, 1)], RANKED
    )
    pools = spark.createDataFrame([(1, 100, 1)], POOLS)  # user 2: no row
    corrected = estimated_positions(ranked, truth, pools, by=["model"])
    got = {(r.user_id, r.item_id): r["rank"] for r in corrected.collect()}
    assert got == {(1, 0): 1.0, (1, 5): 2.0, (2, 7): 1.0}
    scores = per_user_accuracy(corrected.drop("model"), truth, ks=[1, 2]).collect()
    assert all(r.ndcg == 1.0 and r.map == 1.0 and r.mrr == 1.0 for r in scores)


# ------------------------------------------- through the sampled protocol


TRAIN = [
    (100 + u, item)
    for item, n in zip(range(10, 40), range(30, 0, -1), strict=True)
    for u in range(n)
]
TEST = [(7, 14), (7, 30), (8, 39), (100, 25)]


def population(spark):
    history = spark.createDataFrame(TRAIN, PAIRS)
    truth = spark.createDataFrame([(u, i, 1.0) for u, i in TEST], TRUTH)
    interactions = history.unionByName(spark.createDataFrame(TEST, PAIRS))
    users = truth.select("user_id").distinct()
    segments = user_segments(users, history, segments=[])
    catalogue = item_statistics(history)
    return interactions, Population(history, truth, users, 3, segments, history, catalogue, [])


def run_sampled(spark, **settings):
    interactions, people = population(spark)
    config = EvaluationConfig(
        **{"k": [5, 20], "segments": [], "protocol": ["sampled_5"], "metrics": ["ndcg", "recall"]}
        | settings
    )
    scorers = {
        m.name: fit_model(m, history=people.history, truth=people.truth, k=20, seen=None)
        for m in (
            PopularityModel(name="pop", kind="popularity"),
            RandomModel(name="rnd", kind="random"),
        )
    }
    return sampled_protocol(
        "sampled_5", scorers=scorers, interactions=interactions, population=people, settings=config
    ), people


def test_corrected_rows_are_labelled_beside_the_raw_ones_and_match_the_reference(spark):
    interactions, people = population(spark)
    results, _ = run_sampled(spark)
    assert set(results) == {"sampled_5", "sampled_5_corrected"}
    for label, accuracy in results.items():
        assert {r.protocol for r in accuracy.rows} == {label}
    raw, corrected = (
        {(r.model, r.metric, r.k): r.value for r in results[p].rows}
        for p in ("sampled_5", "sampled_5_corrected")
    )
    assert all(corrected[key] <= raw[key] for key in raw)  # places only move down
    assert any(corrected[key] < raw[key] for key in raw)

    # the reference, from the definitions: the same sampled items (their draw is
    # test_sampled's), popularity's order with hashed ties, each user's pool from the log
    pairs = sampled_candidates(
        interactions, people.history, people.truth, people.users, n=5, seed=42
    ).collect()
    popularity = ref.popularity_scores(people.history.toPandas())
    ordered = ref.sampled_order(
        [(r.user_id, r.item_id) for r in pairs],
        lambda user, item: popularity.get(item, 0.0),
        seed=42,
    )
    per_user = results["sampled_5_corrected"].per_user
    assert per_user is not None
    got = {
        (r.user_id, r.metric, r.k): r.value
        for r in per_user.filter("model = 'pop' and segment = 'all'").collect()
    }
    assert {u for u, _, _ in got} == {7, 8, 100}
    for user in (7, 8, 100):
        rel = {i: 1.0 for u, i in TEST if u == user}
        interacted = {i for u, i in TRAIN + TEST if u == user}
        pool = len(set(popularity) - interacted)
        negatives = len(ordered[user]) - len(rel)
        places = ref.corrected_positions(ordered[user], rel, pool=pool, negatives=negatives)
        for k in (5, 20):
            expected = ref.metrics_at_places(places, rel, k)
            for metric in ("ndcg", "recall"):
                assert got[(user, metric, k)] == pytest.approx(expected[metric], abs=1e-12)


def test_the_sampled_labels_have_no_catalogue_auc(spark):
    results, _ = run_sampled(spark, metrics=["ndcg", "auc"])
    for accuracy in results.values():
        assert {r.metric for r in accuracy.rows} == {"ndcg"}


def test_no_corrected_rows_when_switched_off_or_under_a_peers_definitions(spark):
    off, _ = run_sampled(spark, sampled_correction=False)
    assert set(off) == {"sampled_5"}
    mllib, _ = run_sampled(spark, definitions="spark_mllib")
    assert set(mllib) == {"sampled_5"}


def test_the_corrected_values_do_not_depend_on_shuffle_partitions(spark):
    def values(partitions):
        with sql_conf(spark, {"spark.sql.shuffle.partitions": str(partitions)}):
            results, _ = run_sampled(spark)
            return {
                (r.model, r.metric, r.k): (r.value, r.std)
                for r in results["sampled_5_corrected"].rows
            }

    assert values(1) == values(7)


@pytest.mark.parametrize("label", ["sampled_100_corrected", "debiased_iqr", "sampled_100"])
def test_the_labelled_protocols_have_the_full_protocols_bounds_and_intervals(label):
    for metric in METRICS:
        assert metric_bounds(metric, protocol=label) == metric_bounds(metric) == (0.0, 1.0)
    # hit_rate is 0/1 under every label: the Wilson interval, inside [0, 1]
    assert mean_interval("hit_rate", 0.5, 0.5, 40, protocol=label) == mean_interval(
        "hit_rate", 0.5, 0.5, 40
    )
    low, high = mean_interval("ndcg", 0.01, 0.05, 10, protocol=label)
    assert low == 0.0 and high is not None and high < 1.0
