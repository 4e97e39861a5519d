"""Calibration, exposure of item groups and agreement with another model's lists
(DESIGN §6) on small examples worked out by hand: the Spark functions of
receval_spark.metrics.calibration, .fairness and .agreement."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from pyspark.sql import functions as F

from receval_spark.metrics.agreement import agreement
from receval_spark.metrics.calibration import category_shares, miscalibration, user_profiles
from receval_spark.metrics.fairness import (
    awrf,
    catalogue_targets,
    exposure_gap,
    group_attention,
    item_groups,
)

RANKED = "model string, user_id string, item_id string, rank int"
KEYS = ["model", "user_id"]
C = 1 / math.log2(3)  # the attention of rank 2


def ranked_frame(spark, lists: dict[tuple[str, str], list[str]]):
    rows = [
        (model, user, item, rank)
        for (model, user), items in lists.items()
        for rank, item in enumerate(items, start=1)
    ]
    return spark.createDataFrame(rows, RANKED)


def by_key(frame, column):
    return {(r["model"], r["user_id"], r["k"]): r[column] for r in frame.collect()}


def test_miscalibration_worked_out_by_hand(spark):
    # history of u: i1 {A}, i2 {A, B} -> p(A) = (1 + 1/2) / 2 = 3/4, p(B) = 1/4
    # list [i3 {B}, i4 {A}, i5 (no categories)]: k = 1: q = (0, 1); k = 3: q = (1/2, 1/2)
    categories = spark.createDataFrame(
        [("i1", ["A"]), ("i2", ["A", "B", "B"]), ("i3", ["B"]), ("i4", ["A"]), ("i5", [])],
        "item_id string, categories array<string>",
    )
    history = spark.createDataFrame(
        [("u", "i1"), ("u", "i2"), ("u", "i2"), ("cold_in_categories", "i5")],
        "user_id string, item_id string",
    )
    shares = category_shares(categories)
    profiles = user_profiles(history, shares)
    assert {(r["category"], r["p"]) for r in profiles.collect()} == {("A", 0.75), ("B", 0.25)}
    ranked = ranked_frame(
        spark, {("m", "u"): ["i3", "i4", "i5"], ("m", "cold_in_categories"): ["i3"]}
    )
    got = by_key(miscalibration(ranked, profiles, shares, keys=KEYS, ks=[1, 3]), "miscalibration")

    def kl(q_a: float, q_b: float) -> float:
        smoothed_a, smoothed_b = 0.99 * q_a + 0.01 * 0.75, 0.99 * q_b + 0.01 * 0.25
        return 0.75 * math.log(0.75 / smoothed_a) + 0.25 * math.log(0.25 / smoothed_b)

    # a user without a described history item has no value
    assert got == pytest.approx({("m", "u", 1): kl(0, 1), ("m", "u", 3): kl(0.5, 0.5)}, abs=1e-15)
    assert got[("m", "u", 1)] == pytest.approx(
        0.75 * math.log(100) + 0.25 * math.log(0.25 / 0.9925)
    )


def head_tail(spark):
    """Catalogue h1 (head), t1, t2, t3 (tail): target t = (1/4, 3/4)."""
    catalogue = spark.createDataFrame(
        [(i, True) for i in ("h1", "t1", "t2", "t3")], "item_id string, in_catalogue boolean"
    )
    head = spark.createDataFrame([("h1",)], "item_id string")
    groups = item_groups(head=head)
    return groups, catalogue_targets(catalogue, groups, default="items=tail")


def test_targets_are_catalogue_shares(spark):
    _, targets = head_tail(spark)
    assert {r["group"]: Fraction(r["target"]) for r in targets.collect()} == {
        "items=head": Fraction(1, 4),
        "items=tail": Fraction(3, 4),
    }


def test_awrf_and_exposure_gap_worked_out_by_hand(spark):
    groups, targets = head_tail(spark)
    # u1: [h1, t1] -> attention head 1, tail c; u2: [t2, t3] -> tail 1 + c
    ranked = ranked_frame(spark, {("m", "u1"): ["h1", "t1"], ("m", "u2"): ["t2", "t3"]})
    attended = group_attention(ranked, groups, keys=KEYS, ks=[2], default="items=tail")
    got = by_key(awrf(attended, targets, keys=KEYS), "awrf")

    def jsd(e_head: float) -> float:
        e, t = (e_head, 1 - e_head), (0.25, 0.75)
        terms = 0.0
        for ei, ti in zip(e, t, strict=True):
            m = (ei + ti) / 2
            terms += (0.5 * ei * math.log2(ei / m) if ei else 0.0) + 0.5 * ti * math.log2(ti / m)
        return terms

    assert got == pytest.approx(
        {("m", "u1", 2): 1 - math.sqrt(jsd(1 / (1 + C))), ("m", "u2", 2): 1 - math.sqrt(jsd(0))},
        abs=1e-12,
    )
    # E_head = 1 / (1 + c + 1 + c); the gap is |E_head - 1/4| (the tail's is the same)
    segmented = attended.withColumn("segment", F.lit("all"))
    row = exposure_gap(segmented, targets, by=["model", "segment"]).collect()[0]
    assert row["exposure_gap"] == pytest.approx(1 / (2 + 2 * C) - 0.25, abs=1e-15)
    assert row["n_users"] == 2
    # z_u = U / (2A) (s_head a_u,head + s_tail a_u,tail - a_u S): s = (+1, -1), A = 2 + 2c
    e_head = 1 / (2 + 2 * C)
    s = e_head - (1 - e_head)
    z1 = 2 / (2 * (2 + 2 * C)) * ((1 - C) - (1 + C) * s)
    z2 = 2 / (2 * (2 + 2 * C)) * (-(1 + C) - (1 + C) * s)
    assert z1 + z2 == pytest.approx(0.0, abs=1e-15)
    assert row["std"] == pytest.approx(math.sqrt(z1 * z1 + z2 * z2), abs=1e-15)


def test_a_list_only_of_a_group_outside_the_target_scores_zero(spark):
    segments = spark.createDataFrame(
        [("a", "provider=x"), ("b", "provider=y"), ("new", "provider=z")],
        "item_id string, segment string",
    )
    catalogue = spark.createDataFrame(
        [("a", True), ("b", True), ("c", True)], "item_id string, in_catalogue boolean"
    )
    groups = item_groups(segments=segments)
    targets = catalogue_targets(catalogue, groups, default="provider=unassigned")
    # each 1/3 as the one correctly rounded double 1.0 / 3.0
    assert {r["group"]: r["target"] for r in targets.collect()} == {
        "provider=x": 1 / 3,
        "provider=y": 1 / 3,
        "provider=unassigned": 1 / 3,  # c has no segment
    }
    ranked = ranked_frame(spark, {("m", "u"): ["new"], ("m", "v"): ["a", "b", "c"]})
    attended = group_attention(ranked, groups, keys=KEYS, ks=[1], default="provider=unassigned")
    got = by_key(awrf(attended, targets, keys=KEYS), "awrf")
    assert got[("m", "u", 1)] == pytest.approx(0.0, abs=1e-12)  # JSD 1: disjoint supports


def test_agreement_worked_out_by_hand(spark):
    # A = [a, b, c] against B = [b, a, d]: X_1 = 0, X_2 = 2, X_3 = 2
    # RBO_ext = (0.1/0.9)(2/2 · 0.81 + 2/3 · 0.729) + (2/3) · 0.729 = 0.144 + 0.486 = 0.63
    ranked = ranked_frame(
        spark, {("m", "u"): ["a", "b", "c"], ("base", "u"): ["b", "a", "d"], ("m", "alone"): ["a"]}
    )
    frame = agreement(
        ranked,
        reference="base",
        baseline="base",
        ks=[3],
        persistence=0.9,
        metrics=["intersection", "agreement_rbo", "unexpectedness"],
    )
    got = {(r["model"], r["user_id"], r["metric"]): r["value"] for r in frame.collect()}
    assert got == pytest.approx(
        {
            ("m", "u", "intersection"): 2 / 3,
            ("m", "u", "agreement_rbo"): 0.63,
            ("m", "u", "unexpectedness"): 1 / 3,
            ("base", "u", "intersection"): 1.0,
            ("base", "u", "agreement_rbo"): 1.0,
            ("base", "u", "unexpectedness"): 0.0,
        },
        abs=1e-12,
    )  # "alone" has no list from base: no value


def test_auc_worked_out_by_hand(spark):
    # catalogue {a, b, c, d, e}; Rel(u) = {b, x} (x outside the catalogue); u saw e, so the
    # negatives are {a, c, d}. k = 1, [a]: x and b tie with c, d and lose to a: (2·2·½)/6 = 1/3
    # k = 2, [a, b]: b beats c, d (2); x ties with c, d (1): 3/6 = 1/2
    # k = 3, [a, b, x]: b and x beat c, d: 4/6 = 2/3. v has no list: ½. w has no negative.
    from receval_spark.metrics.auc import auc_per_user

    ranked = spark.createDataFrame(
        [("u", "a", 1, "m"), ("u", "b", 2, "m"), ("u", "x", 3, "m")],
        "user_id string, item_id string, rank int, model string",
    )
    truth = spark.createDataFrame(
        [("u", "b"), ("u", "x"), ("v", "a"), *[("w", i) for i in "abcde"]],
        "user_id string, item_id string",
    )
    catalogue = spark.createDataFrame([(i,) for i in "abcde"], "item_id string")
    seen = spark.createDataFrame([("u", "e")], "user_id string, item_id string")
    models = spark.createDataFrame([("m",)], "model string")
    frame = auc_per_user(ranked, truth, catalogue=catalogue, seen=seen, ks=[1, 2, 3], lists=models)
    got = {(r["user_id"], r["k"]): r["auc"] for r in frame.collect()}
    assert got == {
        ("u", 1): 1 / 3,
        ("u", 2): 1 / 2,
        ("u", 3): 2 / 3,
        **{("v", k): 0.5 for k in (1, 2, 3)},
        **{("w", k): None for k in (1, 2, 3)},
    }
