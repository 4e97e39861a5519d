"""Session Item-KNN ties (DESIGN §8): equal cosines are equal exactly and go by item id, even
where their doubles differ in the last bit."""

from __future__ import annotations

import datetime as dt
import math

from chispa import assert_df_equality

from receval_spark.sessions.models import item_knn_lists
from receval_spark.sessions.preprocessing import prediction_events, sequence_clicks

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
CLICKS = "session_id string, item_id int, timestamp timestamp, order double"

# S_1 = {T1, T2, T3} (3), S_3 = {T1} (1), S_2 = {T1, ..., T9} (9): the cosines of item 1 with
# 3 and with 2 are 1/√(3·1) and 3/√(3·9), equal (1/3 = 9/27), but as doubles 1/√3 rounds one bit
# above 3/√27, which put item 3 first; the tie goes to item 2, the smaller id
TRAIN = {
    "T1": [1, 3, 2],
    "T2": [1, 2],
    "T3": [1, 2],
    **{f"T{s}": [2, 4] for s in range(4, 10)},
}


def clicks_of(spark, sessions):
    rows = [
        (s, item, T0 + dt.timedelta(minutes=j), None)
        for s, items in sessions.items()
        for j, item in enumerate(items)
    ]
    return sequence_clicks(spark.createDataFrame(rows, CLICKS))


def test_the_example_is_a_tie_whose_doubles_differ():
    assert 1**2 * 27 == 3**2 * 3  # 1/√3 = 3/√27
    assert 1 / math.sqrt(3 * 1) > 3 / math.sqrt(3 * 9)  # rounding puts item 3 first


def test_equal_cosines_tie_exactly_and_go_by_item_id(spark):
    train = clicks_of(spark, TRAIN)
    events = prediction_events(clicks_of(spark, {"E": [1, 2], "F": [3, 1]}))

    lists = item_knn_lists(events, train, k=5, neighbours=100)

    # last 1: 2 and 3 tie at 1/√3 (2 first); last 3: 1 (1/√3), then 2 (1/√9)
    expected = spark.createDataFrame(
        [("E", 1, 2, 1), ("E", 1, 3, 2), ("F", 1, 1, 1), ("F", 1, 2, 2)],
        "session_id string, position int, item_id int, rank int",
    )
    assert_df_equality(
        lists, expected, ignore_row_order=True, ignore_nullable=True, ignore_column_order=True
    )
