"""Relevance kinds, duplicate collapse and user segments (DESIGN §3)."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pydantic import ValidationError

from receval_spark.config import RelevanceConfig
from receval_spark.ranking.relevance import (
    activity_counts,
    activity_thresholds,
    relevant_items,
    user_segments,
)

TEST_SCHEMA = "user_id int, item_id int, rating double"
TRUTH_SCHEMA = "user_id int, item_id int, grade double"


def assert_truth(actual, spark, rows):
    expected = spark.createDataFrame(rows, TRUTH_SCHEMA)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_implicit_every_test_interaction_is_relevant_with_grade_1(spark):
    test = spark.createDataFrame(
        [
            (1, 10, 1.0),
            (1, 10, 5.0),  # a repeat play: one (user, item)
            (1, 11, None),  # no rating needed
            (2, 12, 0.0),  # even a zero rating counts when relevance is implicit
        ],
        TEST_SCHEMA,
    )

    truth = relevant_items(test, RelevanceConfig(kind="implicit"))

    assert_truth(truth, spark, [(1, 10, 1.0), (1, 11, 1.0), (2, 12, 1.0)])


def test_threshold_relevant_iff_rating_at_least_threshold(spark):
    test = spark.createDataFrame(
        [
            (1, 10, 3.0),
            (1, 10, 4.0),  # the duplicate reaches the threshold: relevant
            (1, 11, 3.5),  # below
            (2, 12, 5.0),
            (2, 13, None),  # no rating: not relevant
            (3, 14, 3.99),  # user 3 has nothing relevant: absent
        ],
        TEST_SCHEMA,
    )

    truth = relevant_items(test, RelevanceConfig(kind="threshold", threshold=4.0))

    assert_truth(truth, spark, [(1, 10, 1.0), (2, 12, 1.0)])


def test_graded_relevant_iff_rating_at_least_threshold_grade_rating_minus_threshold_plus_1(spark):
    test = spark.createDataFrame(
        [
            (1, 10, 3.0),
            (1, 10, 5.0),  # the duplicate's max: grade 5 - 4 + 1 = 2
            (1, 10, 4.0),
            (1, 11, 1.0),  # 1 star: not relevant (it was, with grade 1, before DESIGN's revision)
            (1, 12, 4.0),  # grade 1
            (2, 13, 4.5),  # a half star: grade 1.5
            (2, 14, 3.5),  # below the threshold
            (2, 15, None),  # no rating: not relevant
            (3, 16, 3.99),  # user 3 has nothing relevant: absent
        ],
        TEST_SCHEMA,
    )

    truth = relevant_items(test, RelevanceConfig(kind="graded", threshold=4.0))

    assert_truth(truth, spark, [(1, 10, 2.0), (1, 12, 1.0), (2, 13, 1.5)])


def test_graded_relevant_items_are_exactly_the_threshold_ones(spark):
    test = spark.createDataFrame(
        [(u, i, float(r)) for u in range(3) for i, r in enumerate([1, 2, 3, 3.5, 4, 4.5, 5, 5])],
        TEST_SCHEMA,
    )

    graded = relevant_items(test, RelevanceConfig(kind="graded", threshold=3.5))
    binary = relevant_items(test, RelevanceConfig(kind="threshold", threshold=3.5))

    assert_df_equality(
        graded.drop("grade"), binary.drop("grade"), ignore_row_order=True, ignore_nullable=True
    )


def test_graded_with_a_mapping_unmapped_ratings_get_0(spark):
    test = spark.createDataFrame(
        [
            (1, 10, 5.0),  # -> 3
            (1, 11, 4.0),  # -> 2
            (1, 11, 3.0),  # -> 1, the duplicate keeps the max 2
            (1, 12, 2.0),  # -> 0: not relevant
            (2, 13, 4.5),  # unmapped -> 0: not relevant
            (2, 14, 3.0),  # -> 1
        ],
        TEST_SCHEMA,
    )
    config = RelevanceConfig(kind="graded", grades={1: 0, 2: 0, 3: 1, 4: 2, 5: 3})

    truth = relevant_items(test, config)

    assert_truth(truth, spark, [(1, 10, 3.0), (1, 11, 2.0), (2, 14, 1.0)])


def test_graded_half_star_mapping_is_looked_up_exactly(spark):
    test = spark.createDataFrame(
        [(1, 10, 3.5), (1, 11, 4.5), (1, 12, 5.0), (1, 13, 3.0), (1, 14, 4.25)], TEST_SCHEMA
    )
    config = RelevanceConfig(kind="graded", grades={3.5: 1, 4: 1, 4.5: 2, 5: 2})

    truth = relevant_items(test, config)

    # 3.0 and 4.25 are not listed: not relevant
    assert_truth(truth, spark, [(1, 10, 1.0), (1, 11, 2.0), (1, 12, 2.0)])


def test_graded_ndcg_and_binary_metrics_by_hand(spark):
    """User 1 rated 10: 5★, 11: 1★, 12: 4★ in test; the list is [11, 10, 13, 12].

    At threshold 4 (graded or not) Rel = {10, 12}; the 1★ item 11 is a miss.
    Binary at k = 4: hits = 2 (ranks 2 and 4), P = 1/2, R = 1, MRR = 1/2, AP = (1/2 + 2/4)/2 =
    1/2, ARHR = (1/2 + 1/4)/2 = 3/8, F1 = 2/3, HR = 1, NDCG = (1/log2 3 + 1/log2 5) /
    (1 + 1/log2 3) = 0.6509209...
    Graded: grades 10 -> 2, 12 -> 1; DCG = 3/log2 3 + 1/log2 5, IDCG = 3 + 1/log2 3: 0.6399093...
    """
    from math import log2

    from receval_spark.metrics.accuracy import ACCURACY_METRICS, per_user_accuracy

    test = spark.createDataFrame([(1, 10, 5.0), (1, 11, 1.0), (1, 12, 4.0)], TEST_SCHEMA)
    ranked = spark.createDataFrame(
        [(1, 11, 1), (1, 10, 2), (1, 13, 3), (1, 12, 4)], "user_id int, item_id int, rank int"
    )

    def scores(config):
        row = per_user_accuracy(ranked, relevant_items(test, config), ks=[4]).collect()
        assert len(row) == 1
        return row[0].asDict()

    graded = scores(RelevanceConfig(kind="graded", threshold=4.0))
    binary = scores(RelevanceConfig(kind="threshold", threshold=4.0))

    want = {
        "precision": 0.5,
        "recall": 1.0,
        "hit_rate": 1.0,
        "mrr": 0.5,
        "map": 0.5,
        "arhr": 3 / 8,
        "f1": 2 / 3,
        "f_beta": 5 / 6,  # 5 * 0.5 * 1 / (4 * 0.5 + 1)
        "r_precision": 1 / 2,  # the first |Rel| = 2 places hold one hit
        "rbp": 0.2 * (0.8 + 0.8**3),  # hits at ranks 2 and 4
    }
    for metric in ACCURACY_METRICS:
        if metric != "ndcg":
            assert graded[metric] == binary[metric] == pytest.approx(want[metric], abs=1e-12)
    binary_ndcg = (1 / log2(3) + 1 / log2(5)) / (1 + 1 / log2(3))
    graded_ndcg = (3 / log2(3) + 1 / log2(5)) / (3 + 1 / log2(3))
    assert binary["ndcg"] == pytest.approx(binary_ndcg, abs=1e-12)
    assert graded["ndcg"] == pytest.approx(graded_ndcg, abs=1e-12)
    assert graded_ndcg == pytest.approx(0.6399093, abs=1e-7)


@pytest.mark.parametrize(
    ("relevance", "fragment"),
    [
        ({"kind": "graded"}, "relevance.kind=graded needs relevance.threshold"),
        ({"kind": "graded", "threshold": 4, "grades": {5: 1}}, "not both"),
        ({"kind": "graded", "grades": {4: 0.5, 5: 2}}, "4.0 -> 0.5 is not allowed"),
        ({"kind": "graded", "grades": {4: -1, 5: 2}}, "4.0 -> -1.0 is not allowed"),
        ({"kind": "graded", "grades": {4: 0, 5: 0}}, "at least one rating to a grade >= 1"),
        ({"kind": "graded", "threshold": float("nan")}, "finite number"),
        ({"kind": "implicit", "threshold": 4}, "only applies to relevance.kind=threshold or"),
        ({"kind": "threshold", "grades": {5: 1}, "threshold": 4}, "relevance.grades only"),
    ],
)
def test_relevance_config_errors_name_the_key(relevance, fragment):
    with pytest.raises(ValidationError) as info:
        RelevanceConfig.model_validate(relevance)

    assert fragment in str(info.value)


def test_user_segments_all_warm_cold(spark):
    users = spark.createDataFrame([(1,), (2,), (3,)], "user_id int")
    history = spark.createDataFrame(
        [(1, 10), (1, 11), (3, 10), (4, 12)],  # user 4 is not evaluated: no segment rows
        "user_id int, item_id int",
    )

    segments = user_segments(users, history, segments=["warm", "cold"])

    expected = spark.createDataFrame(
        [(1, "all"), (1, "warm"), (2, "all"), (2, "cold"), (3, "all"), (3, "warm")],
        "user_id int, segment string",
    )
    assert_df_equality(segments, expected, ignore_row_order=True, ignore_nullable=True)


def test_user_segments_only_the_configured_ones_besides_all(spark):
    users = spark.createDataFrame([(1,), (2,)], "user_id int")
    history = spark.createDataFrame([(1, 10)], "user_id int, item_id int")

    warm_only = user_segments(users, history, segments=["warm"])
    none = user_segments(users, history, segments=[])

    assert_df_equality(
        warm_only,
        spark.createDataFrame([(1, "all"), (1, "warm"), (2, "all")], "user_id int, segment string"),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert_df_equality(
        none,
        spark.createDataFrame([(1, "all"), (2, "all")], "user_id int, segment string"),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_activity_buckets_by_the_quartiles_of_the_warm_evaluated_users(spark):
    """Train counts 1, 2, 3, 4, 8 (user 6 cold, user 7 not evaluated): numpy's linear
    quartiles of [1, 2, 3, 4, 8] are 2, 3, 4; q1 c <= 2, q2 c <= 3, q3 c <= 4, q4 above."""
    users = spark.createDataFrame([(u,) for u in range(1, 7)], "user_id int")
    counts = {1: 1, 2: 2, 3: 3, 4: 4, 5: 8, 7: 50}
    history = spark.createDataFrame(
        [(u, i) for u, n in counts.items() for i in range(n)], "user_id int, item_id int"
    )

    thresholds = activity_thresholds(activity_counts(users, history)).collect()[0][0]
    segments = user_segments(users, history, segments=["activity"], thresholds=thresholds)

    assert thresholds == [2.0, 3.0, 4.0]
    bucket = {1: "q1", 2: "q1", 3: "q2", 4: "q3", 5: "q4"}
    expected = [(u, "all") for u in range(1, 7)] + [(u, f"activity={q}") for u, q in bucket.items()]
    assert sorted(map(tuple, segments.collect())) == sorted(expected)
    cold = user_segments(users, history.filter("user_id = 7"), segments=["activity"])
    assert sorted(map(tuple, cold.collect())) == [(u, "all") for u in range(1, 7)]
