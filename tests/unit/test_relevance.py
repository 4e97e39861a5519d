"""Relevance kinds, duplicate collapse and user segments (DESIGN §3)."""

from __future__ import annotations

from chispa import assert_df_equality

from receval_spark.config import RelevanceConfig
from receval_spark.relevance import relevant_items, user_segments

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


def test_graded_grade_is_the_rating_and_duplicates_collapse_to_the_max(spark):
    test = spark.createDataFrame(
        [
            (1, 10, 3.0),
            (1, 10, 5.0),
            (1, 10, 4.0),
            (1, 11, 0.0),  # grade 0: not relevant
            (2, 12, 2.5),
            (2, 13, -1.0),  # negative: not relevant
        ],
        TEST_SCHEMA,
    )

    truth = relevant_items(test, RelevanceConfig(kind="graded"))

    assert_truth(truth, spark, [(1, 10, 5.0), (2, 12, 2.5)])


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
