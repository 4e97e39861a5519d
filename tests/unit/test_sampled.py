"""The sampled-negative protocol (DESIGN §7): each positive ranked among N seeded negatives."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import functions as F

from receval_spark.config import PopularityModel
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.models import fit_model
from receval_spark.pipeline import sampled_candidates
from receval_spark.topk import rank_candidates, top_k

SCHEMA = "user_id int, item_id int"
# train popularity (distinct users): 10 -> 5, 11 -> 4, 12 -> 3, 13 -> 2, 14 -> 1
TRAIN = [
    (100 + u, item)
    for item, n in zip(range(10, 15), range(5, 0, -1), strict=True)
    for u in range(n)
]
TEST = [(7, 14)]  # user 7 (no train rows) likes the least popular item


@pytest.fixture
def parts(spark):
    history = spark.createDataFrame(TRAIN, SCHEMA)
    truth = spark.createDataFrame(
        [(u, i, 1.0) for u, i in TEST], "user_id int, item_id int, grade double"
    )
    interactions = history.unionByName(spark.createDataFrame(TEST, SCHEMA))
    users = truth.select("user_id").distinct()
    return interactions, history, truth, users


def ranks(ranked):
    return {r.item_id: r["rank"] for r in ranked.collect()}


def test_sampled_and_full_protocols_on_a_literal_example(spark, parts):
    """User 7's never-interacted train items are 10-13, all more popular than its positive 14:
    among 2 sampled negatives the positive ranks 3rd whichever two are drawn; among the full
    catalogue it ranks 5th. MRR 1/3 vs 1/5, NDCG@5 1/log2(4) vs 1/log2(6), HR@3 1 vs 0."""
    interactions, history, truth, users = parts
    scorer = fit_model(
        PopularityModel(name="p", kind="popularity"), history=history, truth=truth, k=5, seen=None
    )

    pairs = sampled_candidates(interactions, history, truth, users, n=2, seed=42)
    negatives = {r.item_id for r in pairs.collect()} - {14}
    assert len(negatives) == 2 and negatives <= {10, 11, 12, 13}
    sampled = top_k(scorer.scores(pairs), k=5)
    full = rank_candidates(scorer.candidates(users), k=5, seen=None)
    assert ranks(sampled)[14] == 3 and ranks(full)[14] == 5

    def metrics(ranked):
        row = per_user_accuracy(ranked, truth, ks=[3, 5]).orderBy("k").collect()
        return {(r.k, m): r[m] for r in row for m in ("hit_rate", "mrr", "ndcg")}

    s, f = metrics(sampled), metrics(full)
    assert (s[(3, "hit_rate")], f[(3, "hit_rate")]) == (1.0, 0.0)
    assert s[(5, "mrr")] == pytest.approx(1 / 3, abs=1e-12)
    assert f[(5, "mrr")] == pytest.approx(1 / 5, abs=1e-12)
    assert s[(5, "ndcg")] == pytest.approx(1 / math.log2(4), abs=1e-12)
    assert f[(5, "ndcg")] == pytest.approx(1 / math.log2(6), abs=1e-12)


def test_negatives_are_never_interacted_train_items_and_do_not_depend_on_partitioning(spark, parts):
    interactions, history, truth, users = parts
    everything = sampled_candidates(interactions, history, truth, users, n=10, seed=1)
    assert sorted(r.item_id for r in everything.collect()) == [10, 11, 12, 13, 14]  # n >= pool

    def draw(seed, partitions):
        return sorted(
            r.item_id
            for r in sampled_candidates(
                interactions.repartition(partitions),
                history.repartition(partitions, "item_id"),
                truth,
                users,
                n=2,
                seed=seed,
            ).collect()
        )

    assert draw(3, 1) == draw(3, 4)
    assert len({tuple(draw(seed, 2)) for seed in range(8)}) > 1  # the seed matters
    assert everything.filter(F.col("item_id") == 14).count() == 1  # the positive, once
