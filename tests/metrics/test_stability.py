"""Night-over-night list stability on crafted nights (DESIGN §6): Jaccard@k, RBO@k and the
exposure churn, worked out by hand and against tests/reference.py."""

from __future__ import annotations

import random

import pytest
import reference
from chispa import assert_approx_df_equality

from receval_spark.metrics.stability import (
    exposure_churn,
    list_agreement,
    night_lists,
    stability_aggregates,
)

LISTS = "model string, user_id string, rank int, item_id string, score double"
AGREEMENT = "model string, user_id string, k int, stability_jaccard double, stability_rbo double"


def lists_frame(spark, lists, model="m"):
    rows = [
        (model, user, rank, item, float(-rank))
        for user, items in lists.items()
        for rank, item in enumerate(items, start=1)
    ]
    return spark.createDataFrame(rows, LISTS)


def agreement(spark, tonight, previous, *, ks, p=0.9):
    frame = list_agreement(
        lists_frame(spark, tonight), lists_frame(spark, previous), ks=ks, persistence=p
    )
    return {
        (r["user_id"], r["k"], name): r[f"stability_{name}"]
        for r in frame.collect()
        for name in ("jaccard", "rbo")
    }


def test_identical_lists_score_one_and_the_exposure_does_not_move(spark):
    lists = {"u1": ["a", "b", "c"], "u2": ["c", "d", "e"]}
    values = agreement(spark, lists, lists, ks=[2, 3])
    expected = {(u, k, m): 1.0 for u in lists for k in (2, 3) for m in ("jaccard", "rbo")}
    assert values == pytest.approx(expected)
    churn = exposure_churn(lists_frame(spark, lists), lists_frame(spark, lists), ks=[3])
    assert [(r["k"], r["value"], r["n_users"]) for r in churn.collect()] == [(3, 0.0, 2)]


def test_two_swapped_places_worked_out_by_hand(spark):
    # X_1 = 0, X_2 = 2, X_3 = 3: RBO = (0.1/0.9)(0 + (2/2)·0.81 + (3/3)·0.729) + 0.729 = 0.9
    values = agreement(spark, {"u": ["a", "b", "c"]}, {"u": ["b", "a", "c"]}, ks=[1, 3])
    assert values == pytest.approx(
        {("u", 3, "jaccard"): 1.0, ("u", 3, "rbo"): 0.9}  # {a} against {b} at k = 1:
        | {("u", 1, "jaccard"): 0.0, ("u", 1, "rbo"): 0.0}
    )


def test_one_replaced_item_worked_out_by_hand(spark):
    # X = 1, 2, 2: RBO = (0.1/0.9)(0.9 + 0.81 + (2/3)·0.729) + (2/3)·0.729 = 0.73
    values = agreement(spark, {"u": ["a", "b", "c"]}, {"u": ["a", "b", "d"]}, ks=[3])
    assert values == pytest.approx({("u", 3, "jaccard"): 0.5, ("u", 3, "rbo"): 0.73})
    churn = exposure_churn(
        lists_frame(spark, {"u": ["a", "b", "c"]}),
        lists_frame(spark, {"u": ["a", "b", "d"]}),
        ks=[3],
    )
    assert churn.collect()[0]["value"] == pytest.approx(1 / 3)


def test_disjoint_lists_score_zero_and_users_of_one_night_only_are_left_out(spark):
    values = agreement(
        spark, {"u": ["a", "b"], "new": ["a"]}, {"u": ["c", "d"], "gone": ["a"]}, ks=[2]
    )
    assert values == {("u", 2, "jaccard"): 0.0, ("u", 2, "rbo"): 0.0}


def test_random_lists_match_the_reference_uneven_lengths_included(spark):
    rng = random.Random(3)
    items = [f"i{n}" for n in range(12)]
    tonight = {f"u{n}": rng.sample(items, rng.randint(1, 8)) for n in range(40)}
    previous = {f"u{n}": rng.sample(items, rng.randint(1, 8)) for n in range(40)}
    ks, p = [3, 5, 8], 0.8
    values = agreement(spark, tonight, previous, ks=ks, p=p)
    expected = {}
    for u in tonight:
        for k in ks:
            a, b = tonight[u][:k], previous[u][:k]
            expected[(u, k, "jaccard")] = reference.jaccard_index(a, b)
            expected[(u, k, "rbo")] = reference.rbo_ext(a, b, p)
    assert values == pytest.approx(expected, abs=1e-12)
    churn = exposure_churn(lists_frame(spark, tonight), lists_frame(spark, previous), ks=ks)
    for r in churn.collect():
        cut = {u: v[: r["k"]] for u, v in tonight.items()}
        before = {u: v[: r["k"]] for u, v in previous.items()}
        assert r["value"] == pytest.approx(reference.exposure_churn(cut, before), abs=1e-12)


def test_idle_users_are_those_without_an_interaction_between_the_cut_offs(spark):
    # cut-offs 2026-12-01 (last night) and 2026-12-02 (tonight): u1 clicked on 12-01 (active),
    # u2 last on 11-20 (idle), u3 has no train interaction (idle)
    tonight = {"u1": ["a", "b"], "u2": ["a", "b"], "u3": ["a", "b"]}
    previous = {"u1": ["b", "a"], "u2": ["a", "c"], "u3": ["a", "b"]}
    history = spark.createDataFrame(
        [
            ("u1", "2026-11-20 10:00:00"),
            ("u1", "2026-12-01 10:00:00"),
            ("u2", "2026-11-20 10:00:00"),
        ],
        "user_id string, ts string",
    ).selectExpr("user_id", "to_timestamp(ts) AS timestamp")
    segments = spark.createDataFrame(
        [(u, "all") for u in tonight] + [("u1", "warm"), ("u2", "warm"), ("u3", "cold")],
        "user_id string, segment string",
    )
    night = night_lists(
        lists_frame(spark, tonight).select("user_id", "item_id", "score", "rank", "model"),
        segments,
        history,
        "2026-12-02T00:00:00Z",
    )
    rows = stability_aggregates(
        night,
        lists_frame(spark, previous),
        previous_cutoff="2026-12-01T00:00:00Z",
        ks=[2],
        persistence=0.9,
    ).filter("metric = 'stability_jaccard'")
    # jaccard: u1 1, u2 1/3, u3 1
    expected = spark.createDataFrame(
        [
            ("m", "all", "stability_jaccard", 2, 7 / 9, 3),
            ("m", "warm", "stability_jaccard", 2, 2 / 3, 2),
            ("m", "cold", "stability_jaccard", 2, 1.0, 1),
            ("m", "idle", "stability_jaccard", 2, 2 / 3, 2),
        ],
        "model string, segment string, metric string, k int, value double, n_users long",
    )
    assert_approx_df_equality(
        rows.drop("std"), expected, 1e-12, ignore_row_order=True, ignore_nullable=True
    )
