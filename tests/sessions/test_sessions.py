"""The session-based protocol (DESIGN §8) on a hand-worked example: two test sessions, every
prefix, each baseline's lists and Recall/MRR written out."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F

from receval_spark.config import SessionPreprocessing
from receval_spark.sessions.metrics import session_accuracy, target_ranks
from receval_spark.sessions.models import (
    external_lists,
    item_knn_lists,
    markov_lists,
    pop_lists,
    s_pop_lists,
    sr_lists,
)
from receval_spark.sessions.pipeline import _exposure
from receval_spark.sessions.preprocessing import (
    drop_rare_items,
    drop_short_sessions,
    filter_until_stable,
    most_recent_sessions,
    prediction_events,
    preprocess_sessions,
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


def test_item_knn_shrinkage_favours_well_supported_pairs(spark):
    # S_1 = {U1, U2, U5} (3), S_2 = {U1, U2, U3, U4, U6} (5), S_3 = {U5} (1)
    # cosine: 1 -> 3: 1/sqrt(3) = 0.577 > 1 -> 2: 2/sqrt(15) = 0.516
    # lambda 1: 1 -> 2: 2/(sqrt(15) + 1) = 0.410 > 1 -> 3: 1/(sqrt(3) + 1) = 0.366
    train = clicks_of(
        spark,
        {"U1": [1, 2], "U2": [1, 2], "U3": [2, 6], "U4": [2, 6], "U5": [1, 3], "U6": [2, 6]},
    )
    events = prediction_events(clicks_of(spark, {"E": [1, 2]}))  # last 1 -> target 2
    plain = item_knn_lists(events, train, k=5, neighbours=100)
    shrunk = item_knn_lists(events, train, k=5, neighbours=100, shrinkage=1.0)
    assert lists_by_event(plain) == {("E", 1): [3, 2]}
    assert lists_by_event(shrunk) == {("E", 1): [2, 3]}
    assert scores(spark, events, shrunk, [1]) == {("recall", 1): 1.0, ("mrr", 1): 1.0}


def test_sr(spark, example):
    train, _, events = example
    # window 10: T1 gives 1 -> 2 (+1), 2 -> 3 (+1), 1 -> 3 (+1/2); T2 2 -> 3; T3 1 -> 2;
    # T4 4 -> 2: rules 1 -> {2: 2, 3: 1/2}, 2 -> {3: 2}, 4 -> {2: 1}
    lists = sr_lists(events, train, k=5, window=10)
    assert lists_by_event(lists) == {
        ("A", 1): [2, 3],
        ("A", 2): [3],
        ("A", 3): [2, 3],
        ("B", 1): [3],
    }
    # target ranks: 1, -, 2, -
    assert scores(spark, events, lists, [1, 2]) == pytest.approx(
        {("recall", 1): 1 / 4, ("recall", 2): 2 / 4, ("mrr", 1): 1 / 4, ("mrr", 2): 1.5 / 4},
        abs=TOL,
    )
    # window 1: only adjacent clicks, 1 -> 3 is gone
    narrow = sr_lists(events, train, k=5, window=1)
    assert lists_by_event(narrow) == {("A", 1): [2], ("A", 2): [3], ("A", 3): [2], ("B", 1): [3]}


def test_sr_weights_repeats_window_and_exact_ties(spark):
    # window 6, rules from 1: 2 <- 1 (S1) + 1/3 (S3) = 4/3; 3 <- 1 (S2) + 1/6 + 1/6 = 4/3
    # (a rational tie: item id decides, though 1.0 + 1/6 + 1/6 is 1.3333333333333335 in
    # floating point); 7 <- 1 + 1/2; 8 and 9 <- 1 + 1/2 + 1/3 + 1/4 + 1/5 each (tie)
    # rules from 7 (S3 = [1, 7, 7, 2]): 7 -> 7 = 1 (repeats count), 7 -> 2 = 1/2 + 1
    train = clicks_of(
        spark,
        {
            "S1": [1, 2],
            "S2": [1, 3],
            "S3": [1, 7, 7, 2],
            "S4": [1, 8, 8, 8, 8, 8, 3],
            "S5": [1, 9, 9, 9, 9, 9, 3],
        },
    )
    events = prediction_events(clicks_of(spark, {"E1": [1, 2], "E2": [7, 7]}))
    assert lists_by_event(sr_lists(events, train, k=10, window=6)) == {
        ("E1", 1): [8, 9, 7, 2, 3],
        ("E2", 1): [2, 7],
    }
    # window 2, from 1: 7, 8, 9 <- 1 + 1/2 each; 2 <- 1 (S3's 2 is 3 clicks after); 3 <- 1
    assert lists_by_event(sr_lists(events, train, k=10, window=2))[("E1", 1)] == [7, 8, 9, 2, 3]
    assert lists_by_event(sr_lists(events, train, k=3, window=6))[("E1", 1)] == [8, 9, 7]


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


def raw_clicks(spark, sessions):
    """{session: [(minutes after T0, item), ...]} as canonical clicks."""
    rows = [
        (s, item, T0 + dt.timedelta(minutes=m), float(j))
        for s, clicks in sessions.items()
        for j, (m, item) in enumerate(clicks)
    ]
    return spark.createDataFrame(rows, CLICKS)


def test_split_by_end_and_start_on_a_session_straddling_the_boundary(spark):
    day = 24 * 60
    # last click at day 9 (D) and test_days 1: boundary = day 8 (minute 11520)
    clicks = raw_clicks(
        spark,
        {
            "A": [(4 * day, 1), (4 * day + 1, 2), (4 * day + 2, 3)],  # before the boundary
            "B": [(8 * day - 2, 1), (8 * day - 1, 4), (8 * day + 1, 2), (8 * day + 2, 1)],
            "C": [(8 * day + 720, 2), (8 * day + 721, 3), (8 * day + 722, 1)],
            "D": [(9 * day - 1, 3), (9 * day, 2)],
        },
    )
    counts = {}
    for split_by in ("end", "start"):
        config = SessionPreprocessing(
            min_session_length=2, min_item_support=1, test_days=1, split_by=split_by
        )
        split = preprocess_sessions(clicks, config)
        counts[split_by] = [
            (s.get("part"), s["clicks"], s["sessions"], s["items"]) for s in split.steps[3:]
        ]
        train = {r.session_id for r in split.train.select("session_id").distinct().collect()}
        test = {r.session_id for r in split.test.select("session_id").distinct().collect()}
        assert not train & test  # no session split in two
        boundary = F.lit(T0 + dt.timedelta(days=8))
        assert split.train.filter(F.col("timestamp") >= boundary).count() == 0
        assert split.params["split_by"] == split_by
    # input 12 clicks, 4 sessions, 4 items; one filter round removes nothing (steps 1, 2)
    # end: train = A (ends before the boundary); test = B, C, D; B's item 4 is not in train
    assert counts["end"] == [
        ("train", 3, 1, 3),
        ("test", 9, 3, 4),
        ("test", 8, 3, 3),  # B's click on 4 dropped
        ("test", 8, 3, 3),
    ]
    # start: test = C, D (start after the boundary); train = A; B straddles: dropped
    assert counts["start"] == [
        ("train", 3, 1, 3),
        ("test", 5, 2, 3),
        ("straddling", 4, 1, 3),
        ("test", 5, 2, 3),
        ("test", 5, 2, 3),
    ]


def test_repeat_until_stable_runs_past_20_rounds(spark):
    # chain S_i = [x_i, x_(i+1)], i = 0..19, and C1 = C2 = [x_20, 1], support >= 2:
    # round 1 drops x_0 (1 click); round r drops S_(r-2) (now 1 click long) and then x_(r-1);
    # round 21 drops S_19 = [x_20]; round 22 removes nothing; the fixed point is C1, C2
    chain = {f"S{i}": [100 + i, 101 + i] for i in range(20)}
    clicks = clicks_of(spark, {**chain, "C1": [120, 1], "C2": [120, 1]})
    config = SessionPreprocessing(min_session_length=2, min_item_support=2)
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        kept, steps = filter_until_stable(clicks, config, n_clicks=44)
        got = sorted((r.session_id, r.item_id) for r in kept.collect())
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", saved)
    assert got == [("C1", 1), ("C1", 120), ("C2", 1), ("C2", 120)]
    assert steps[-1]["round"] == 22
    assert [s["clicks"] for s in steps[-4:]] == [4, 4, 4, 4]
    assert steps[-5]["clicks"] == 5  # round 20 ends with S_19 = [x_20] left


def test_exposure_rows_of_a_model_without_lists(spark):
    # train clicks: item 1 x3, 2 x1, 3 x2 (mean 2); model a: e1 = [1, 2], e2 = [1, 3]
    train = clicks_of(spark, {"T1": [1, 2, 3], "T2": [1, 3], "T3": [1]})
    lists = spark.createDataFrame(
        [("e1", 1, 1, 1, "a"), ("e1", 1, 2, 2, "a"), ("e2", 1, 1, 1, "a"), ("e2", 1, 3, 2, "a")],
        "session_id string, position int, item_id int, rank int, model string",
    )
    models = spark.createDataFrame([("a",), ("b",)], "model string")
    rows = _exposure(lists, train, models, [1, 2], ["coverage", "popularity_bias"]).collect()
    values = {(r.model, r.k, r.metric): r.value for r in rows}
    assert {(r.model, r.k): r.n_users for r in rows} == {
        ("a", 1): 2,
        ("a", 2): 2,
        ("b", 1): 0,
        ("b", 2): 0,
    }
    assert values.pop(("b", 1, "popularity_bias")) is None
    assert values.pop(("b", 2, "popularity_bias")) is None
    assert values == pytest.approx(
        {
            ("a", 1, "coverage"): 1 / 3,
            ("a", 2, "coverage"): 1.0,
            ("a", 1, "popularity_bias"): 3 / 2,  # slots 1, 1: mean 3 over 2
            ("a", 2, "popularity_bias"): 9 / 8,  # slots 1, 2, 1, 3: 9/4 over 2
            ("b", 1, "coverage"): 0.0,  # no list: nothing covered
            ("b", 2, "coverage"): 0.0,
        },
        abs=TOL,
    )
