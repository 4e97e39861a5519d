"""The session-based protocol (DESIGN §8) on a hand-worked example: two test sessions, every
prefix, each baseline's lists and Recall/MRR written out."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F

from receval_spark.metrics.session import session_accuracy, target_ranks
from receval_spark.models.session import (
    external_lists,
    item_knn_lists,
    markov_lists,
    pop_lists,
    s_pop_lists,
)
from receval_spark.sessions import (
    drop_rare_items,
    drop_short_sessions,
    most_recent_sessions,
    prediction_events,
    sequence_clicks,
)

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
CLICKS = "session_id string, item_id int, timestamp timestamp, order double"
TOL = 1e-12

# train: T1 = [1, 2, 3], T2 = [2, 3], T3 = [1, 2], T4 = [4, 2]
#   clicks: 1 -> 2, 2 -> 4, 3 -> 2, 4 -> 1; POP = [2, 1, 3, 4] (1 before 3: tie by id)
#   transitions: 1 -> 2 (x2), 2 -> 3 (x2), 4 -> 2
TRAIN = {"T1": [1, 2, 3], "T2": [2, 3], "T3": [1, 2], "T4": [4, 2]}
# test: A = [1, 2, 1, 3], B = [2, 4]
#   events: (A, 1) [1] -> 2; (A, 2) [1, 2] -> 1; (A, 3) [1, 2, 1] -> 3; (B, 1) [2] -> 4
TEST = {"A": [1, 2, 1, 3], "B": [2, 4]}


def clicks_of(spark, sessions):
    rows = [
        (s, item, T0 + dt.timedelta(minutes=j), None)
        for s, items in sessions.items()
        for j, item in enumerate(items)
    ]
    return sequence_clicks(spark.createDataFrame(rows, CLICKS))


@pytest.fixture(scope="module")
def example(spark):
    train, test = clicks_of(spark, TRAIN), clicks_of(spark, TEST)
    return train, test, prediction_events(test)


def lists_by_event(lists):
    out = {}
    for r in lists.orderBy("session_id", "position", "rank").collect():
        out.setdefault((r.session_id, r.position), []).append(r.item_id)
    return out


def scores(spark, events, lists, ks):
    models = spark.createDataFrame([("m",)], "model string")
    ranks = target_ranks(events, lists.withColumn("model", F.lit("m")), models)
    return {(r.metric, r.k): r.value for r in session_accuracy(ranks, ks=ks).collect()}


def test_prefix_expansion_gives_n_minus_1_events(example):
    _, _, events = example
    got = sorted((r.session_id, r.position, r.item_id, r.target_id) for r in events.collect())
    assert got == [("A", 1, 1, 2), ("A", 2, 2, 1), ("A", 3, 1, 3), ("B", 1, 2, 4)]


def test_pop(spark, example):
    train, _, events = example
    lists = pop_lists(events, train, k=5)
    assert set(map(tuple, lists_by_event(lists).values())) == {(2, 1, 3, 4)}
    # target ranks: 2 -> 1, 1 -> 2, 3 -> 3, 4 -> 4
    assert scores(spark, events, lists, [1, 2]) == pytest.approx(
        {("recall", 1): 1 / 4, ("recall", 2): 2 / 4, ("mrr", 1): 1 / 4, ("mrr", 2): 1.5 / 4},
        abs=TOL,
    )


def test_s_pop(spark, example):
    train, test, events = example
    lists = s_pop_lists(events, test, train, k=5)
    assert lists_by_event(lists) == {
        ("A", 1): [1, 2, 3, 4],  # prefix item first, then POP without it
        ("A", 2): [2, 1, 3, 4],  # 1 and 2 once each: tie by train clicks (2 has 4)
        ("A", 3): [1, 2, 3, 4],  # 1 twice
        ("B", 1): [2, 1, 3, 4],
    }
    # target ranks: 2, 2, 3, 4
    assert scores(spark, events, lists, [1, 2, 5]) == pytest.approx(
        {
            ("recall", 1): 0.0,
            ("recall", 2): 2 / 4,
            ("recall", 5): 1.0,
            ("mrr", 1): 0.0,
            ("mrr", 2): (1 / 2 + 1 / 2) / 4,
            ("mrr", 5): (1 / 2 + 1 / 2 + 1 / 3 + 1 / 4) / 4,
        },
        abs=TOL,
    )


def test_markov(spark, example):
    train, _, events = example
    lists = markov_lists(events, train, k=5)
    # last 1 -> [2]; last 2 -> [3]
    assert lists_by_event(lists) == {("A", 1): [2], ("A", 2): [3], ("A", 3): [2], ("B", 1): [3]}
    # only (A, 1) hits, at rank 1; events without the target still count
    assert scores(spark, events, lists, [1, 2]) == pytest.approx(
        {("recall", 1): 1 / 4, ("recall", 2): 1 / 4, ("mrr", 1): 1 / 4, ("mrr", 2): 1 / 4},
        abs=TOL,
    )


def test_item_knn(spark, example):
    train, _, events = example
    lists = item_knn_lists(events, train, k=5, neighbours=100)
    # sessions: 1 {T1, T3}, 2 {T1..T4}, 3 {T1, T2}, 4 {T4}
    # last 1: 2 -> 2/sqrt(2*4) = 0.707, 3 -> 1/sqrt(2*2) = 0.5
    # last 2: 1 -> 2/sqrt(8), 3 -> 2/sqrt(8) (tie: id), 4 -> 1/sqrt(4) = 0.5
    assert lists_by_event(lists) == {
        ("A", 1): [2, 3],
        ("A", 2): [1, 3, 4],
        ("A", 3): [2, 3],
        ("B", 1): [1, 3, 4],
    }
    # target ranks: 1, 1, 2, 3
    assert scores(spark, events, lists, [1, 2, 5]) == pytest.approx(
        {
            ("recall", 1): 2 / 4,
            ("recall", 2): 3 / 4,
            ("recall", 5): 1.0,
            ("mrr", 1): 2 / 4,
            ("mrr", 2): 2.5 / 4,
            ("mrr", 5): (1 + 1 + 1 / 2 + 1 / 3) / 4,
        },
        abs=TOL,
    )


def test_external_predictions_are_ranked_per_event(spark, example):
    _, _, events = example
    predictions = spark.createDataFrame(
        [("A", 1, 9, 0.9), ("A", 1, 2, 0.5), ("B", 1, 4, 0.1), ("C", 1, 4, 1.0)],
        "session_id string, position int, item_id int, score double",
    )
    lists = external_lists(events, predictions, k=5)
    assert lists_by_event(lists) == {("A", 1): [9, 2], ("B", 1): [4]}  # C is no event
    assert scores(spark, events, lists, [1, 2]) == pytest.approx(
        {("recall", 1): 1 / 4, ("recall", 2): 2 / 4, ("mrr", 1): 1 / 4, ("mrr", 2): 1.5 / 4},
        abs=TOL,
    )


def test_filters(spark):
    clicks = clicks_of(spark, {"S1": [1], "S2": [1, 2], "S3": [1, 1, 3]})
    short = drop_short_sessions(clicks, min_length=2)
    assert sorted(r.session_id for r in short.select("session_id").distinct().collect()) == [
        "S2",
        "S3",
    ]
    rare = drop_rare_items(clicks, min_support=2)
    assert sorted(r.item_id for r in rare.collect()) == [1, 1, 1, 1]


def test_most_recent_fraction_keeps_the_latest_starting_sessions(spark):
    # sessions S0..S7 start one hour apart; 1/4 of 8 -> the 2 latest (S6, S7); 0.3 -> ceil 2.4 = 3
    rows = [
        (f"S{s}", 1 + j, T0 + dt.timedelta(hours=s, minutes=j), None)
        for s in range(8)
        for j in range(2)
    ]
    clicks = spark.createDataFrame(rows, CLICKS)

    def kept(fraction):
        recent = most_recent_sessions(clicks, fraction=fraction)
        return sorted({r.session_id for r in recent.collect()})

    assert kept(0.25) == ["S6", "S7"]
    assert kept(0.3) == ["S5", "S6", "S7"]
    assert kept(1.0) == [f"S{s}" for s in range(8)]
