"""Top-k ranking: order, tie-break by item id, seen-item filtering before the cut (DESIGN §4)."""

from __future__ import annotations

from chispa import assert_df_equality

from receval_spark.ranking.topk import filter_seen_items, rank_candidates, top_k

CANDIDATES = "user_id int, item_id int, score double"
RANKED = "user_id int, item_id int, score double, rank int"

ROWS = [
    (1, 10, 0.5),
    (1, 11, 0.9),
    (1, 12, 0.5),
    (1, 13, 0.1),
    (1, 9, 0.5),  # three items tied at 0.5: 9, 10, 12 in that order
    (2, 20, 1.0),  # one candidate only
    (3, 31, -2.0),  # a rank-based model: score = -rank
    (3, 30, -1.0),
]


def assert_ranked(actual, spark, rows):
    expected = spark.createDataFrame(rows, RANKED)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_top_k_orders_by_score_then_item_id_ascending(spark):
    ranked = top_k(spark.createDataFrame(ROWS, CANDIDATES), k=3)

    assert_ranked(
        ranked,
        spark,
        [
            (1, 11, 0.9, 1),
            (1, 9, 0.5, 2),
            (1, 10, 0.5, 3),  # 12 (also 0.5) is cut: larger item id
            (2, 20, 1.0, 1),
            (3, 30, -1.0, 1),
            (3, 31, -2.0, 2),
        ],
    )


def test_top_k_keeps_whole_lists_shorter_than_k(spark):
    ranked = top_k(spark.createDataFrame(ROWS, CANDIDATES), k=10)

    assert_ranked(
        ranked,
        spark,
        [
            (1, 11, 0.9, 1),
            (1, 9, 0.5, 2),
            (1, 10, 0.5, 3),
            (1, 12, 0.5, 4),
            (1, 13, 0.1, 5),
            (2, 20, 1.0, 1),
            (3, 30, -1.0, 1),
            (3, 31, -2.0, 2),
        ],
    )


def test_top_k_is_the_same_for_any_partitioning_or_row_order(spark):
    reference = top_k(spark.createDataFrame(ROWS, CANDIDATES), k=3)
    shuffled = spark.createDataFrame(list(reversed(ROWS)), CANDIDATES).repartition(3, "item_id")

    assert_df_equality(top_k(shuffled, k=3), reference, ignore_row_order=True)


def test_filter_seen_items_drops_only_the_users_own_seen_items(spark):
    candidates = spark.createDataFrame(ROWS, CANDIDATES)
    seen = spark.createDataFrame(
        [
            (1, 11, 5.0),
            (1, 11, 3.0),  # a repeat in the history
            (2, 9, 1.0),  # user 2 saw item 9: user 1's item 9 stays
            (3, 99, 1.0),  # not a candidate
        ],
        "user_id int, item_id int, rating double",
    )

    remaining = filter_seen_items(candidates, seen)

    expected = spark.createDataFrame([r for r in ROWS if (r[0], r[1]) != (1, 11)], CANDIDATES)
    assert_df_equality(remaining, expected, ignore_row_order=True, ignore_nullable=True)


def test_rank_candidates_removes_seen_items_before_the_cut(spark):
    candidates = spark.createDataFrame(ROWS, CANDIDATES)
    seen = spark.createDataFrame([(1, 11), (1, 9), (3, 30)], "user_id int, item_id int")

    ranked = rank_candidates(candidates, k=3, seen=seen)

    # user 1 still gets 3 items: the cut comes after removing 11 and 9
    assert_ranked(
        ranked,
        spark,
        [
            (1, 10, 0.5, 1),
            (1, 12, 0.5, 2),
            (1, 13, 0.1, 3),
            (2, 20, 1.0, 1),
            (3, 31, -2.0, 1),
        ],
    )


def test_rank_candidates_without_seen_is_top_k(spark):
    candidates = spark.createDataFrame(ROWS, CANDIDATES)

    assert_df_equality(
        rank_candidates(candidates, k=2, seen=None),
        top_k(candidates, k=2),
        ignore_row_order=True,
    )
    assert_ranked(
        rank_candidates(candidates, k=1, seen=None),
        spark,
        [(1, 11, 0.9, 1), (2, 20, 1.0, 1), (3, 30, -1.0, 1)],
    )
