"""An explicit catalogue I (docs/evaluation.md#catalogue): coverage, Gini, entropy, category
coverage and the popularity bias over the configured item universe, worked out by hand on the
example of tests/metrics/test_beyond.py and against the reference (tests/reference.py) on a
seeded synthetic log; novelty does not depend on I.

The example: train user 10 -> 1, 2; user 11 -> 1, 3; user 12 -> 1, 4, 4, 5 (3 train users;
interactions 1 -> 3, 2 -> 1, 3 -> 1, 4 -> 2, 5 -> 1); lists at k = 2: user 1 -> [1, 2],
user 2 -> [1, 3], user 3 -> [9, 4]. The train catalogue is {1, 2, 3, 4, 5}; the explicit one
I = {1, 2, 6, 9, 10}: items 6, 9, 10 have no train interaction, train items 3, 4, 5 are
outside it, and the lists show two items outside it (3 and 4).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest
import reference as ref
from pyspark.sql import functions as F

from receval_spark.metrics.exposure import item_exposure, long_tail
from receval_spark.metrics.group import group_beyond
from receval_spark.metrics.lists import (
    BeyondInputs,
    catalogue_totals,
    item_statistics,
    with_catalogue,
)
from receval_spark.metrics.per_user import per_user_beyond

HISTORY = "user_id int, item_id int"
RANKED = "user_id int, item_id int, rank int"
CATEGORIES = "item_id int, categories array<string>"
TRUTH = "user_id int, item_id int, grade double"
TOL = 1e-12
LOG2_3 = math.log2(3)

EXAMPLE_HISTORY = [(10, 1), (10, 2), (11, 1), (11, 3), (12, 1), (12, 4), (12, 4), (12, 5)]
EXAMPLE_RANKED = [(1, 1, 1), (1, 2, 2), (2, 1, 1), (2, 3, 2), (3, 9, 1), (3, 4, 2)]
EXPLICIT = [1, 2, 6, 9, 10]
# categories: the train catalogue's are {a, b, c, d, g}, the explicit one's {a, b, e, f}
EXAMPLE_CATEGORIES = [
    (1, ["a"]),
    (2, ["b"]),
    (3, ["c"]),
    (4, ["d"]),
    (5, ["g"]),
    (6, ["a", "f"]),
    (9, ["e"]),
]
GROUP = ["coverage", "gini", "entropy", "popularity_bias", "personalization"]
PER_USER = ["novelty", "category_coverage"]


def item_table(spark, catalogue: list[int] | None):
    history = spark.createDataFrame(EXAMPLE_HISTORY, HISTORY)
    ids = (
        None
        if catalogue is None
        else spark.createDataFrame([(i,) for i in catalogue], "item_id int")
    )
    items = with_catalogue(item_statistics(history), ids)
    return history, items


def example_inputs(spark, catalogue: list[int] | None) -> BeyondInputs:
    history, items = item_table(spark, catalogue)
    return BeyondInputs(
        catalogue=items,
        totals=catalogue_totals(history, items),
        truth=spark.createDataFrame([], TRUTH),
        expected=spark.createDataFrame([], RANKED),
        categories=spark.createDataFrame(EXAMPLE_CATEGORIES, CATEGORIES),
    )


def example_values(spark, catalogue: list[int] | None, *, bootstrap_samples: int = 0):
    """({metric: value} of the group statistics, {(metric, user): value} per user, and the
    group rows) of the example lists at k = 2 over ``catalogue`` (None: the train items)."""
    ranked = spark.createDataFrame(EXAMPLE_RANKED, RANKED)
    inputs = example_inputs(spark, catalogue)
    groups = group_beyond(
        ranked,
        inputs,
        keys=[],
        ks=[2],
        metrics=GROUP,
        pairs=10,
        seed=1,
        bootstrap_samples=bootstrap_samples,
    ).collect()
    per_user = per_user_beyond(ranked, inputs, ks=[2], metrics=PER_USER).collect()
    return (
        {r.metric: r.value for r in groups},
        {(r.metric, r.user_id): r.value for r in per_user},
        groups,
    )


def test_the_item_table_holds_the_catalogue_and_every_train_item(spark):
    history, items = item_table(spark, EXPLICIT)

    got = {r.item_id: (r.n_users, r.n_interactions, r.in_catalogue) for r in items.collect()}
    assert got == {
        1: (3, 3, True),
        2: (1, 1, True),
        3: (1, 1, False),
        4: (1, 2, False),
        5: (1, 1, False),
        6: (0, 0, True),
        9: (0, 0, True),
        10: (0, 0, True),
    }
    totals = catalogue_totals(history, items).collect()[0]
    # |I| = 5; interactions over I: 3 + 1 + 0 + 0 + 0 = 4, mean 4/5
    assert (totals.n_catalogue, totals.n_train_users) == (5, 3)
    assert totals.mean_item_interactions == pytest.approx(4 / 5, abs=TOL)


def test_an_explicit_catalogue_changes_the_catalogue_metrics_by_the_worked_amounts(spark):
    train_group, train_user, _ = example_values(spark, None)
    group, per_user, _ = example_values(spark, EXPLICIT)

    # train catalogue (tests/metrics/test_beyond.py): coverage 4/5, Gini 8/25, entropy
    # log2 5 - 2/5, popularity bias (10/6) / (8/5) = 25/24
    assert train_group["coverage"] == 4 / 5
    assert train_group["gini"] == pytest.approx(8 / 25, abs=TOL)
    assert train_group["popularity_bias"] == pytest.approx(25 / 24, abs=TOL)
    # explicit I = {1, 2, 6, 9, 10}: shown from I: 1, 2, 9 -> coverage 3/5 (down by 1/5)
    assert group["coverage"] == 3 / 5
    assert group["coverage"] - train_group["coverage"] == pytest.approx(-1 / 5, abs=TOL)
    # f over I ascending: 6 -> 0, 10 -> 0, 2 -> 1, 9 -> 1, 1 -> 2; n = 5, weights -4 -2 0 2 4:
    # G = (0 + 0 + 0 + 2 + 8) / (5 * 4) = 1/2 (slots of 3 and 4 are outside I)
    assert group["gini"] == pytest.approx(1 / 2, abs=TOL)
    # F = 4, shares 2/4, 1/4, 1/4: entropy = 1/2 + 2 * 1/2 = 3/2
    assert group["entropy"] == pytest.approx(3 / 2, abs=TOL)
    # every slot with its train interactions: 3, 1, 3, 1, 0 (item 9), 2 (item 4): 10/6;
    # mean over I: (3 + 1 + 0 + 0 + 0) / 5 = 4/5 -> (10/6) / (4/5) = 25/12
    assert group["popularity_bias"] == pytest.approx(25 / 12, abs=TOL)
    # personalization does not read I: 1 - (1/2 + 0 + 0) / 3 = 5/6
    assert group["personalization"] == pytest.approx(5 / 6, abs=TOL)
    assert train_group["personalization"] == pytest.approx(5 / 6, abs=TOL)
    # C_I = {a, b, e, f}: user 1 shows a, b -> 2/4; user 2 a (c is no catalogue category)
    # -> 1/4; user 3 e (d is not) -> 1/4. Train catalogue: C_I = {a, b, c, d, g}: 2/5 each
    # for users 1, 2 and 1/5 for user 3 (d; e is not)
    assert {u: per_user[("category_coverage", u)] for u in (1, 2, 3)} == {
        1: 2 / 4,
        2: 1 / 4,
        3: 1 / 4,
    }
    assert {u: train_user[("category_coverage", u)] for u in (1, 2, 3)} == {
        1: 2 / 5,
        2: 2 / 5,
        3: 1 / 5,
    }
    # novelty reads train popularity only, p floored at 1/3: [1, 2] -> (0 + log2 3) / 2, ...
    novelty = {u: per_user[("novelty", u)] for u in (1, 2, 3)}
    assert novelty == pytest.approx({1: LOG2_3 / 2, 2: LOG2_3 / 2, 3: LOG2_3}, abs=TOL)
    assert novelty == pytest.approx({u: train_user[("novelty", u)] for u in (1, 2, 3)}, abs=TOL)


def test_the_bootstrap_reads_the_explicit_catalogue(spark):
    _, _, rows = example_values(spark, EXPLICIT, bootstrap_samples=20)

    got = {r.metric: r for r in rows}
    assert got["coverage"].value == 3 / 5
    for metric in ("coverage", "gini", "entropy", "popularity_bias"):
        assert got[metric].interval == "bootstrap"
        assert got[metric].std is not None and got[metric].std > 0, metric


def test_the_long_tail_bins_the_explicit_catalogue(spark):
    _, items = item_table(spark, EXPLICIT)
    lists = spark.createDataFrame(EXAMPLE_RANKED, RANKED).withColumn("k", F.lit(2)).drop("rank")

    table = long_tail(item_exposure(lists, items, by=["k"]), items, by=["k"])

    got = {
        r.popularity_bin: (
            r.n_items,
            r.train_interactions,
            r.n_recommended_items,
            r.recommendations,
        )
        for r in table.collect()
    }
    # I by train interactions: 6, 9, 10 none (bin -1), 2 one (bin 0), 1 three (bin 1).
    # Recommended, each in the bin of its train interactions, in I or not: 9 (bin -1, once),
    # 2 and 3 (bin 0, once each), 1 (bin 1, twice) and 4 (two interactions: bin 1, once)
    assert got == {-1: (3, 0, 1, 1), 0: (1, 1, 2, 2), 1: (1, 3, 2, 3)}


def synthetic(seed: int = 7):
    """A train log over items 0..39 (skewed), rankings of 30 users over items 0..49 at k <= 5,
    categories for items 0..54, and a catalogue of items 20..54 (train items 0..19 outside it,
    items 40..54 without a train interaction; categories g and h only outside it)."""
    rng = random.Random(seed)
    train = [(u, min(int(rng.expovariate(0.08)), 39)) for u in range(100, 140) for _ in range(6)]
    ranked = []
    for user in range(30):
        items = rng.sample(range(50), rng.randint(1, 5))
        ranked += [(user, item, rank) for rank, item in enumerate(items, start=1)]
    # categories g and h only on items outside the catalogue
    letters = {i: "abcdefgh" if i < 20 else "abcdef" for i in range(55)}
    categories = {i: set(rng.sample(letters[i], rng.randint(1, 3))) for i in range(55)}
    catalogue = list(range(20, 55))
    return train, ranked, categories, catalogue


def test_explicit_catalogue_metrics_match_the_reference(spark):
    train, ranked, categories, catalogue = synthetic()
    history = spark.createDataFrame(train, HISTORY)
    ids = spark.createDataFrame([(i,) for i in catalogue], "item_id int")
    items = with_catalogue(item_statistics(history), ids)
    inputs = BeyondInputs(
        catalogue=items,
        totals=catalogue_totals(history, items),
        truth=spark.createDataFrame([], TRUTH),
        expected=spark.createDataFrame([], RANKED),
        categories=spark.createDataFrame(
            [(i, sorted(c)) for i, c in categories.items()], CATEGORIES
        ),
    )
    rankings = spark.createDataFrame(ranked, RANKED)
    ks = [3, 5]
    groups = group_beyond(rankings, inputs, keys=[], ks=ks, metrics=GROUP, pairs=5, seed=1)
    per_user = per_user_beyond(rankings, inputs, ks=ks, metrics=[*PER_USER, "ild_category"])
    got = {(r.metric, r.k): r.value for r in groups.collect()}
    users = pd.DataFrame(per_user.collect(), columns=per_user.columns)
    means = users.groupby(["metric", "k"])["value"].mean()
    got |= {(m, int(k)): float(v) for (m, k), v in means.items()}

    lists = pd.DataFrame(
        [(u, k, i) for u, i, r in ranked for k in ks if r <= k], columns=["user_id", "k", "item_id"]
    )
    table, _ = ref.beyond_metrics(
        lists,
        pd.DataFrame(train, columns=["user_id", "item_id"]),
        categories=categories,
        catalogue=catalogue,
    )
    asked = {*GROUP, *PER_USER, "ild_category"}  # the reference also gives aplt and aclt
    want = {(r.metric, int(r.k)): float(r.value) for r in table.itertuples() if r.metric in asked}
    assert set(got) == set(want)
    bad = {
        key: (got[key], want[key])
        for key in want
        if not np.isclose(got[key], want[key], rtol=0, atol=1e-9)
    }
    assert not bad, bad
    # the catalogue matters here: against the train items the reference differs
    train_only, _ = ref.beyond_metrics(
        lists, pd.DataFrame(train, columns=["user_id", "item_id"]), categories=categories
    )
    other = {(r.metric, int(r.k)): float(r.value) for r in train_only.itertuples()}
    for metric in ("coverage", "gini", "entropy", "popularity_bias", "category_coverage"):
        assert not np.isclose(other[(metric, 5)], want[(metric, 5)], rtol=0, atol=1e-6), metric
