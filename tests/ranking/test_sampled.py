"""The sampled-negative protocol (DESIGN §7): each positive ranked among N seeded negatives."""

from __future__ import annotations

import math

import pytest
from helpers import one_als_fit_per_history
from pyspark.sql import functions as F

from receval_spark.config import AlsModel, EvaluationConfig, ItemKnnModel, PopularityModel
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.lists import item_statistics
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.population import Population
from receval_spark.ranking.relevance import user_segments
from receval_spark.ranking.sampled import sampled_candidates, sampled_protocol
from receval_spark.ranking.topk import rank_candidates, sampled_top_k, top_k

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


# ------------------------------------------- users a model cannot score, and equal scores

NEGATIVES = range(10, 201)  # 191 train items
WARM = range(100, 120)  # 20 warm users, 10 items each; user 7 is cold (no train rows)


def counter_example(spark, positive):
    """Issue 18's counter-example: cold user 7 likes ``positive`` (3 or 999, a train item of
    users 100 and 101); the other train items, 10..200, are its possible negatives."""
    train = [(100 + j, 10 + (10 * j + t) % 191) for j in range(len(WARM)) for t in range(10)]
    train += [(100, positive), (101, positive)]
    history = spark.createDataFrame(train, SCHEMA)
    truth = spark.createDataFrame([(7, positive, 1.0)], "user_id int, item_id int, grade double")
    interactions = history.unionByName(spark.createDataFrame([(7, positive)], SCHEMA))
    return interactions, history, truth


def sampled_scores(spark, positive, models):
    """{(model, metric): user 7's value@10} under sampled_100, the scorers, the sampled pairs."""
    interactions, history, truth = counter_example(spark, positive)
    users = truth.select("user_id").distinct()
    settings = EvaluationConfig(
        k=[10], metrics=["ndcg", "hit_rate", "mrr"], segments=[], protocol=["sampled_100"]
    )
    scorers = {
        m.name: fit_model(m, history=history, truth=truth, k=10, seen=history) for m in models
    }
    per_user = sampled_protocol(
        "sampled_100",
        scorers=scorers,
        interactions=interactions,
        population=Population(
            history=history,
            truth=truth,
            users=users,
            n_users=1,
            segments=user_segments(users, history, segments=[]),
            seen=history,
            catalogue=item_statistics(history),
            facts=[],
        ),
        settings=settings,
    )["sampled_100"].per_user
    values = {(r.model, r.metric): r.value for r in per_user.filter("segment = 'all'").collect()}
    pairs = sampled_candidates(interactions, history, truth, users, n=100, seed=settings.seed)
    return values, scorers, pairs


def candidate_models(fallback, suffix=""):
    return [
        AlsModel(name=f"als{suffix}", kind="als", rank=2, max_iter=2, blocks=2, fallback=fallback),
        ItemKnnModel(name=f"item_knn{suffix}", kind="item_knn", neighbours=20, fallback=fallback),
    ]


@pytest.fixture(scope="module", params=[3, 999])
def cold_user(request, spark):
    """(positive, values, scorers, pairs) of one sampled_100 run of the counter-example with
    popularity and both candidate models twice: ``fallback: none`` (als, item_knn) and
    ``fallback: popularity`` (als+fallback, item_knn+fallback); shared by the two tests below
    (each model's per-user values do not depend on the other models of the run)."""
    positive = request.param
    popularity = PopularityModel(name="popularity", kind="popularity")
    models = [popularity, *candidate_models("none"), *candidate_models("popularity", "+fallback")]
    with one_als_fit_per_history(fit_model):  # the two ALS configs: one fit
        return (positive, *sampled_scores(spark, positive, models))


def test_a_cold_user_gets_no_sampled_list_whatever_the_id_of_its_positive(cold_user):
    """Before: ALS (null scores) and item-kNN (all 0) tied every candidate and item id
    ascending decided, so positive 3 ranked first (NDCG = HitRate = MRR = 1) and 999 last (0).
    Now a user the model cannot score has no list: 0 for both ids, as under ``full``."""
    positive, values, scorers, pairs = cold_user
    negatives = [r.item_id for r in pairs.collect() if r.item_id != positive]
    assert len(negatives) == 100 and set(negatives) <= set(NEGATIVES)
    for model in ("als", "item_knn"):
        for metric in ("ndcg", "hit_rate", "mrr"):
            assert values[(model, metric)] == 0.0, (model, metric)
        # the old ranking of the same scores: all tied, item id ascending decides
        tied = top_k(scorers[model].scores(pairs), k=1).collect()
        assert [r.item_id for r in tied] == [min(positive, *negatives)]


def test_the_popularity_fallback_scores_a_cold_user_as_popularity_does(cold_user):
    """``fallback: popularity``: the cold user's sampled list is popularity's (its scores on
    the same sampled items, the same hash order of ties), so its metrics are popularity's."""
    _, values, _, _ = cold_user
    for model in ("als+fallback", "item_knn+fallback"):
        for metric in ("ndcg", "hit_rate", "mrr"):
            assert values[(model, metric)] == values[("popularity", metric)], (model, metric)
    # the positive has 2 train users, as items 10-18 (10 + (10 j + t) mod 191 wraps onto
    # them), the other negatives 1: it ties with 9 items for the top 10
    assert values[("popularity", "hit_rate")] == 1.0 and values[("popularity", "mrr")] >= 0.1


def test_equal_scores_are_ordered_by_a_seeded_hash_not_by_item_id(spark):
    """200 users score the same 192 items equally. By id, item 3 would rank first for every
    user; under the seeded hash of (seed, user, item) it is first for about 1/192 of them,
    each user's order differs, and the order depends on the seed, not on the input order."""
    rows = [(u, i, 1.0) for u in range(200) for i in [3, *NEGATIVES]]
    scores = spark.createDataFrame(rows, "user_id int, item_id int, score double")

    def orders(frame, seed):
        ranked = sampled_top_k(frame, k=192, seed=seed)
        return {
            r.user_id: [i.item_id for i in r.items]
            for r in ranked.groupBy("user_id")
            .agg(F.sort_array(F.collect_list(F.struct("rank", "item_id"))).alias("items"))
            .collect()
        }

    by_hash = orders(scores, 42)
    assert len(by_hash) == 200 and all(len(v) == 192 for v in by_hash.values())
    ranks_of_3 = [items.index(3) + 1 for items in by_hash.values()]
    assert sum(r == 1 for r in ranks_of_3) <= 5
    assert 60 < sum(ranks_of_3) / len(ranks_of_3) < 130  # about (1 + 192) / 2
    assert len({tuple(v) for v in by_hash.values()}) == 200  # one order per user
    shuffled = spark.createDataFrame(list(reversed(rows)), scores.schema).repartition(7)
    assert orders(shuffled, 42) == by_hash
    assert orders(scores, 43) != by_hash


def test_unscored_items_rank_last_and_a_user_without_any_score_has_no_list(spark):
    scores = spark.createDataFrame(
        [(1, 10, None), (1, 11, 0.5), (1, 12, 0.9), (2, 10, None), (2, 11, None)],
        "user_id int, item_id int, score double",
    )
    ranked = {
        (r.user_id, r.item_id): r["rank"] for r in sampled_top_k(scores, k=5, seed=1).collect()
    }
    assert ranked == {(1, 12): 1, (1, 11): 2, (1, 10): 3}
