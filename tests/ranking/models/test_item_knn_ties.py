"""Item-kNN ties (models/item_knn.py, DESIGN §4): equal cosines are equal exactly — ranked by
item id, and the same double, so equal scores stay equal — even where |U_i ∩ U_j| / √(|U_i||U_j|)
rounds them apart in the last bit."""

from __future__ import annotations

import math

from chispa import assert_df_equality
from pyspark.sql import functions as F

from receval_spark.config import ItemKnnModel
from receval_spark.expressions import cosine_order
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.models.item_knn import item_neighbours
from receval_spark.ranking.topk import rank_candidates

PAIRS = "user_id int, item_id int"
# U_1 = {1, ..., 6} (6), U_3 = {1} (1), U_2 = {2, 3, 4, 7, ..., 12} (9): sim(1, 3) = 1/√6 and
# sim(1, 2) = 3/√54 are equal (1/6 = 9/54), but the first rounds one bit above the second,
# which put item 3 first; the tie goes to item 2, the smaller id
HISTORY = [
    (1, 1),
    (1, 3),
    *[(u, i) for u in (2, 3, 4) for i in (1, 2)],
    (5, 1),
    (6, 1),
    *[(u, 2) for u in range(7, 13)],
]
SIMILARITY = math.sqrt(1 / 6)  # = math.sqrt(9 / 54): every similarity of this history


def test_the_example_is_a_tie_whose_doubles_differ():
    assert 1**2 * 54 == 3**2 * 6
    assert 1 / math.sqrt(6 * 1) > 3 / math.sqrt(6 * 9)  # rounding puts item 3 first
    assert math.sqrt(1 / 6) == math.sqrt(9 / 54) == SIMILARITY  # one rounding each: equal


def test_equal_similarities_are_one_double_ranked_by_item_id(spark):
    history = spark.createDataFrame(HISTORY, PAIRS)

    got = item_neighbours(history, neighbours=5)

    expected = spark.createDataFrame(
        [
            (1, 2, SIMILARITY, 1),  # tie with 3: the smaller id first
            (1, 3, SIMILARITY, 2),
            (2, 1, SIMILARITY, 1),
            (3, 1, SIMILARITY, 1),
        ],
        "item_id int, neighbour int, similarity double, neighbour_rank int",
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_user_ranks_the_tied_candidates_by_item_id(spark):
    """User 5 saw item 1 only: items 2 and 3 score the same (one neighbour each, the same
    double), so the list is [2, 3], and a single neighbour keeps item 2."""
    history = spark.createDataFrame(HISTORY, PAIRS)
    users = spark.createDataFrame([(5,)], "user_id int")
    truth = spark.createDataFrame([], "user_id int, item_id int, grade double")

    def ranked(neighbours):
        model = ItemKnnModel(name="knn", kind="item_knn", neighbours=neighbours, fallback="none")
        scorer = fit_model(model, history=history, truth=truth, k=2, seen=history)
        assert scorer.candidates is not None
        lists = rank_candidates(scorer.candidates(users), k=2, seen=history)
        return [(r.item_id, r.score) for r in lists.orderBy("rank").collect()]

    assert ranked(5) == [(2, SIMILARITY), (3, SIMILARITY)]
    assert ranked(1) == [(2, SIMILARITY)]


def test_the_order_keys_are_exact_where_doubles_are_not(spark):
    """Rows (both, support of the neighbour) of one item's partition, ordered by the keys and
    then by row DESCENDING, so rows with equal keys come out reversed: 1²/3 = 3²/27 (rows 1, 2)
    are equal; (s - 1)²/s = s - 2 + 1/s (row 3) is above (s - 2)²/(s - 2) = s - 2 (row 4)
    although their doubles are equal; the largest counts (row 5: 10^18 / 10^9) fit a long."""
    s = 10**9 - 1
    assert float((s - 1) ** 2) / s == float(s - 2)
    rows = [(1, 1, 3), (2, 3, 27), (3, s - 1, s), (4, s - 2, s - 2), (5, 10**9, 10**9)]
    frame = spark.createDataFrame(rows, "row int, both long, other long")

    ordered = frame.orderBy(*cosine_order("both", "other"), F.col("row").desc())

    assert [r.row for r in ordered.collect()] == [5, 3, 4, 2, 1]
