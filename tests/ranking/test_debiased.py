"""The popularity-debiased protocol ``debiased_iqr`` (docs/evaluation.md#popularity-debiased-
protocol-debiased_iqr): items of Rel(u) more popular than Q3 + 1.5·IQR keep that many of their
pairs (RecTools' DebiasConfig), chosen by a seeded hash; the full lists are scored against it."""

from __future__ import annotations

import pandas as pd
import pytest
import reference as ref
from helpers import sql_conf
from pyspark.sql import functions as F

from receval_spark.config import EvaluationConfig
from receval_spark.metrics.lists import item_statistics
from receval_spark.ranking.debiased import DebiasFacts, debiased_protocol, debiased_truth
from receval_spark.ranking.population import Population
from receval_spark.ranking.relevance import user_segments

TRUTH = "user_id int, item_id int, grade double"
RANKED = "model string, user_id int, item_id int, score double, rank int"
# item popularities 1, 1, 1, 2, 2, 3, 20: items 1..6 held by users 1..10, item 7 by 100..119
POPULARITY = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 20}


def hand_truth() -> list[tuple[int, int, float]]:
    users = iter(range(1, 11))
    rows = [
        (next(users), item, 1.0) for item, n in POPULARITY.items() if item < 7 for _ in range(n)
    ]
    return rows + [(u, 7, 1.0) for u in range(100, 120)]


def test_the_bound_of_a_hand_worked_example_and_the_counts_that_survive(spark):
    """Sorted popularities 1 1 1 2 2 3 20 (n = 7): Q1 at position (n - 1)·0.25 = 1.5 is 1,
    Q3 at 4.5 is 2 + 0.5·(3 - 2) = 2.5; IQR 1.5; bound int(2.5 + 1.5·1.5) = int(4.75) = 4.
    Item 7 keeps 4 of its 20 pairs; the 16 users holding only item 7 whose pair goes are
    not evaluated; every other item keeps all."""
    assert ref.debias_bound(list(POPULARITY.values())) == (1.0, 2.5, 4)
    truth = spark.createDataFrame(hand_truth(), TRUTH)
    kept, facts = debiased_truth(truth, iqr_coef=1.5, seed=42)

    counts = {r.item_id: r["count"] for r in kept.groupBy("item_id").count().collect()}
    assert counts == {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 4}
    assert facts == DebiasFacts(
        iqr_coef=1.5,
        q1=1.0,
        q3=2.5,
        bound=4,
        items=7,
        items_down_sampled=1,
        pairs=30,
        pairs_removed=16,
        users=30,
        users_removed=16,
    )
    # which four: the smallest xxhash64(42, user, 7), in the reference's own xxhash64
    survivors = {r.user_id for r in kept.filter("item_id = 7").collect()}
    expected, _ = ref.debiased_truth(pd.DataFrame(hand_truth(), columns=ref_columns()), seed=42)
    assert survivors == set(expected.loc[expected["item_id"] == 7, "user_id"])
    assert len(survivors) == 4


def ref_columns() -> list[str]:
    return ["user_id", "item_id", "grade"]


def test_a_larger_coefficient_keeps_more_and_the_bound_is_floored(spark):
    """c = 3: 2.5 + 3·1.5 = 7 exactly: item 7 keeps 7. c = 0: bound int(2.5) = 2, so items 6
    and 7 are cut to 2."""
    truth = spark.createDataFrame(hand_truth(), TRUTH)
    _, wide = debiased_truth(truth, iqr_coef=3.0, seed=42)
    assert (wide.bound, wide.pairs_removed, wide.items_down_sampled) == (7, 13, 1)
    kept, tight = debiased_truth(truth, iqr_coef=0.0, seed=42)
    assert (tight.bound, tight.pairs_removed, tight.items_down_sampled) == (2, 19, 2)
    assert kept.filter("item_id = 6").count() == 2


def random_truth(spark, seed: int = 5):
    """400 users, 60 items with a long-tailed popularity (item i: about 300 / (i + 1) users)."""
    rows = [
        (u, i, 1.0) for i in range(60) for u in range(400) if (u * 7919 + i * 104729) % (i + 1) == 0
    ]
    return spark.createDataFrame(rows, TRUTH)


def test_the_pairs_kept_depend_on_the_seed_not_on_partitioning_or_row_order(spark):
    truth = random_truth(spark)

    def kept(frame, seed):
        table, facts = debiased_truth(frame, iqr_coef=1.5, seed=seed)
        return {(r.user_id, r.item_id) for r in table.collect()}, facts

    base, facts = kept(truth, 42)
    assert facts.items_down_sampled > 0 and facts.pairs_removed > 0
    shuffled = truth.orderBy(F.rand(3)).repartition(7, "user_id")
    with sql_conf(spark, {"spark.sql.shuffle.partitions": "3"}):
        again, facts_again = kept(shuffled, 42)
    assert again == base and facts_again == facts
    other, facts_other = kept(truth, 43)
    assert other != base and facts_other.pairs_removed == facts.pairs_removed  # same counts
    expected, ref_facts = ref.debiased_truth(truth.toPandas(), seed=42)
    assert base == set(zip(expected["user_id"], expected["item_id"], strict=True))
    assert (facts.q1, facts.q3, facts.bound) == (
        ref_facts["q1"],
        ref_facts["q3"],
        ref_facts["bound"],
    )
    assert facts.pairs_removed == ref_facts["pairs_removed"]
    assert facts.users_removed == ref_facts["users_removed"]


def test_the_full_lists_are_scored_against_the_debiased_truth(spark):
    """Users 100..119 like bestseller 7, user 100 item 3 too, nine users items 1, 2, 4, 5, 6
    (popularities 1 1 1 2 2 3 20 again: bound 4). ``pop`` recommends item 7 to everyone,
    ``niche`` item 3. Under full pop's HitRate@1 is 20/29; under debiased_iqr the 4 kept
    holders of item 7 over the users left with a relevant item (user 100 stays through item
    3), and niche's 1 over the same users."""
    rows = [(u, 7, 1.0) for u in range(100, 120)] + [(100, 3, 1.0)]
    rows += [(u, i, 1.0) for u, i, _ in hand_truth() if i < 7 and i != 3]
    truth = spark.createDataFrame(rows, TRUTH)
    users = truth.select("user_id").distinct()
    everyone = sorted(r.user_id for r in users.collect())
    assert len(everyone) == 29
    ranked = spark.createDataFrame(
        [("pop", u, 7, 1.0, 1) for u in everyone] + [("niche", u, 3, 1.0, 1) for u in everyone],
        RANKED,
    )
    history = spark.createDataFrame([(0, 7)], "user_id int, item_id int")
    population = Population(
        history=history,
        truth=truth,
        users=users,
        n_users=len(everyone),
        segments=user_segments(users, history, segments=[]),
        seen=None,
        catalogue=item_statistics(history),
        facts=[],
    )
    models = spark.createDataFrame([("pop",), ("niche",)], "model string")
    settings = EvaluationConfig(k=[1], segments=[], metrics=["hit_rate", "recall"])
    accuracy, facts = debiased_protocol(ranked, population, models=models, settings=settings)
    assert {r.protocol for r in accuracy.rows} == {"debiased_iqr"}
    values = {(r.model, r.metric): (r.value, r.n_users) for r in accuracy.rows}

    expected, _ = ref.debiased_truth(pd.DataFrame(rows, columns=ref_columns()), seed=42)
    holders = set(expected.loc[expected["item_id"] == 7, "user_id"])
    n = expected["user_id"].nunique()
    assert len(holders) == facts.bound == 4 and facts.pairs_removed == 16
    assert n == 29 - facts.users_removed == 29 - (16 - (100 not in holders))
    assert values[("pop", "hit_rate")] == (pytest.approx(4 / n, abs=1e-15), n)
    assert values[("niche", "hit_rate")] == (pytest.approx(1 / n, abs=1e-15), n)
    assert accuracy.per_user is not None
    assert accuracy.per_user.select("user_id").distinct().count() == n
