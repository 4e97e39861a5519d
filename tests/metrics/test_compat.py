"""Compatibility profiles: worked examples by hand, then ml-100k against Spark MLlib's
RankingMetrics / RankingEvaluator and Microsoft Recommenders' SparkRankingEvaluation."""

from __future__ import annotations

from math import log
from pathlib import Path

import pandas as pd
import pytest
from chispa import assert_approx_df_equality
from pyspark.sql import functions as F

from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.aggregate import exact_mean
from receval_spark.metrics.compat import COMPAT_METRICS, compatible_per_user
from receval_spark.ranking.models.popularity import popularity_candidates
from receval_spark.ranking.topk import rank_candidates

RANKED = "user_id int, item_id int, rank int"
TRUTH = "user_id int, item_id int, grade double"
PER_USER = "user_id int, k int, precision double, recall double, ndcg double, map double"
TOL = 1e-9

# user 1: list [101, 102, 103], relevant {101 (grade 3), 103, 104, 105}: hits at ranks 1 and 3
# user 2: list [201] (shorter than k = 3), relevant {201, 202}
# user 3: no list, relevant {301}
# user 4: a list, nothing relevant: never evaluated
WORKED_RANKED = [(1, 101, 1), (1, 102, 2), (1, 103, 3), (2, 201, 1), (4, 401, 1), (4, 402, 2)]
WORKED_TRUTH = [
    (1, 101, 3.0),
    (1, 103, 1.0),
    (1, 104, 1.0),
    (1, 105, 1.0),
    (2, 201, 1.0),
    (2, 202, 1.0),
    (3, 301, 1.0),
]
WORKED_EXPECTED = [
    # user 1, k=1: P = 1/1, R = 1/4, AP = (1/1) / min(4, 1) = 1,
    #   NDCG: n = min(max(3, 4), 1) = 1, dcg = maxDcg = 1/ln 2 -> 1 (the grade 3 is ignored)
    (1, 1, 1.0, 0.25, 1.0, 1.0),
    # user 1, k=3: P = 2/3, R = 2/4, AP = (1/1 + 2/3) / min(4, 3) = 5/9,
    #   NDCG: n = 3, dcg = 1/ln 2 + 1/ln 4, maxDcg = 1/ln 2 + 1/ln 3 + 1/ln 4
    (1, 3, 2 / 3, 0.5, (1 / log(2) + 1 / log(4)) / (1 / log(2) + 1 / log(3) + 1 / log(4)), 5 / 9),
    # user 2, k=1: P = 1, R = 1/2, AP = 1 / min(2, 1) = 1, NDCG = 1
    (2, 1, 1.0, 0.5, 1.0, 1.0),
    # user 2, k=3: P = 1/3 (divides by k, not by L = 1), R = 1/2, AP = 1 / min(2, 3) = 1/2,
    #   NDCG: n = min(max(1, 2), 3) = 2, dcg = 1/ln 2, maxDcg = 1/ln 2 + 1/ln 3
    (2, 3, 1 / 3, 0.5, (1 / log(2)) / (1 / log(2) + 1 / log(3)), 0.5),
]


def assert_per_user(actual, spark, rows, schema=PER_USER):
    expected = spark.createDataFrame(rows, schema)
    assert_approx_df_equality(actual, expected, 1e-12, ignore_row_order=True, ignore_nullable=True)


def test_spark_mllib_worked_example_scores_a_user_without_a_list_0(spark):
    ranked = spark.createDataFrame(WORKED_RANKED, RANKED)
    truth = spark.createDataFrame(WORKED_TRUTH, TRUTH)

    per_user = compatible_per_user(ranked, truth, ks=[1, 3], definitions="spark_mllib")

    # the NDCG values: 0.7039180890341347 (user 1, k=3) and 0.6131471927654584 (user 2, k=3)
    assert_per_user(
        per_user,
        spark,
        [*WORKED_EXPECTED, (3, 1, 0.0, 0.0, 0.0, 0.0), (3, 3, 0.0, 0.0, 0.0, 0.0)],
    )


def test_recommenders_worked_example_drops_the_user_without_a_list(spark):
    ranked = spark.createDataFrame(WORKED_RANKED, RANKED)
    truth = spark.createDataFrame(WORKED_TRUTH, TRUTH)

    per_user = compatible_per_user(ranked, truth, ks=[1, 3], definitions="recommenders")

    # the same values for users 1 and 2 (cutting the list at k changes none); user 3 is gone
    assert_per_user(per_user, spark, WORKED_EXPECTED)


def test_profiles_per_list_key_a_model_without_a_list_for_a_user(spark):
    # model a: user 1 gets [11 (relevant), 12]; model b has no list for user 1. k = 2, Rel = {11}
    ranked = spark.createDataFrame(
        [(1, 11, 1, "a"), (1, 12, 2, "a"), (2, 21, 1, "b")], RANKED + ", model string"
    )
    truth = spark.createDataFrame([(1, 11, 1.0), (2, 21, 1.0)], TRUTH)
    lists = spark.createDataFrame([("a",), ("b",)], "model string")
    schema = PER_USER.replace("user_id int,", "user_id int, model string,")

    mllib = compatible_per_user(ranked, truth, ks=[2], definitions="spark_mllib", lists=lists)
    recommenders = compatible_per_user(
        ranked, truth, ks=[2], definitions="recommenders", lists=lists
    )

    # hit at rank 1, |lab| = 1: P = 1/2, R = 1, NDCG = 1, AP = 1 / min(1, 2) = 1
    found = [(1, "a", 2, 0.5, 1.0, 1.0, 1.0), (2, "b", 2, 0.5, 1.0, 1.0, 1.0)]
    empty = [(1, "b", 2, 0.0, 0.0, 0.0, 0.0), (2, "a", 2, 0.0, 0.0, 0.0, 0.0)]
    assert_per_user(mllib, spark, found + empty, schema)
    assert_per_user(recommenders, spark, found, schema)


def test_spark_mllib_with_users_scores_an_empty_label_set_0(spark):
    """``users`` (evaluation.users: listed_or_relevant): user 4 has a list and nothing relevant,
    user 5 neither; both are queries with an empty label set, which MLlib scores 0 on all four
    metrics (recall, AP and NDCG would otherwise divide by |lab| = 0)."""
    ranked = spark.createDataFrame(WORKED_RANKED, RANKED)
    truth = spark.createDataFrame(WORKED_TRUTH, TRUTH)
    users = spark.createDataFrame([(u,) for u in range(1, 6)], "user_id int")

    per_user = compatible_per_user(ranked, truth, ks=[1, 3], definitions="spark_mllib", users=users)

    zeros = [(u, k, 0.0, 0.0, 0.0, 0.0) for u in (3, 4, 5) for k in (1, 3)]
    assert_per_user(per_user, spark, [*WORKED_EXPECTED, *zeros])
    with pytest.raises(ValueError, match="recommenders averages only users with a relevant item"):
        compatible_per_user(ranked, truth, ks=[1], definitions="recommenders", users=users)


def test_unknown_definitions_and_non_positive_k_are_rejected(spark):
    ranked = spark.createDataFrame(WORKED_RANKED, RANKED)
    truth = spark.createDataFrame(WORKED_TRUTH, TRUTH)

    with pytest.raises(ValueError, match="spark_mllib, recommenders; got 'receval'"):
        compatible_per_user(ranked, truth, ks=[1], definitions="receval")
    with pytest.raises(ValueError, match="k > 0"):
        compatible_per_user(ranked, truth, ks=[0, 5], definitions="spark_mllib")


# --- ml-100k: global temporal split at the 0.8 quantile of timestamps, Rel = rating >= 4,
# --- popularity top-20 without seen items; every tenth user's list removed ------------------

KS = (5, 10, 20)


@pytest.fixture(scope="module")
def ml100k(shared_data: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test) of u.data split at the 0.8 quantile of timestamps (train strictly before)."""
    data = pd.read_csv(
        shared_data / "ml-100k" / "u.data",
        sep="\t",
        header=None,
        names=["user_id", "item_id", "rating", "timestamp"],
    )
    cutoff = data["timestamp"].quantile(0.8)
    return data[data["timestamp"] < cutoff], data[data["timestamp"] >= cutoff]


@pytest.fixture(scope="module")
def truth_rows(ml100k) -> pd.DataFrame:
    """Rel(u): test (user, item) with rating >= 4, grade 1, and ``graded_grade`` = the graded
    relevance grade at threshold 4 (DESIGN §3: rating - 4 + 1, 4 stars -> 1, 5 stars -> 2)."""
    test = ml100k[1]
    relevant = test[test["rating"] >= 4].groupby(["user_id", "item_id"], as_index=False)["rating"]
    relevant = relevant.max()
    relevant["grade"] = 1.0
    relevant["graded_grade"] = relevant["rating"].astype("float64") - 4.0 + 1.0
    return relevant.drop(columns="rating")


@pytest.fixture(scope="module")
def ranked_rows(spark, ml100k, truth_rows) -> pd.DataFrame:
    """Top-20 popular unseen items per truth user (ties by item id), every tenth user dropped."""
    train = spark.createDataFrame(ml100k[0][["user_id", "item_id"]])
    users = spark.createDataFrame(truth_rows[["user_id"]].drop_duplicates())
    candidates = popularity_candidates(train, users, k=max(KS), seen=train)
    ranked = rank_candidates(candidates, k=max(KS), seen=train)
    kept = ranked.filter(F.col("user_id") % 10 != 0).select("user_id", "item_id", "rank")
    return kept.toPandas()


@pytest.fixture(scope="module")
def inputs(spark, truth_rows, ranked_rows):
    truth = spark.createDataFrame(truth_rows[["user_id", "item_id", "grade"]])
    return spark.createDataFrame(ranked_rows), truth


def macro(per_user) -> dict[tuple[int, str], float]:
    """(k, metric) -> mean over users, plus (k, "n_users")."""
    rows = per_user.groupBy("k").agg(
        F.count(F.lit(1)).alias("n_users"), *[exact_mean(m).alias(m) for m in COMPAT_METRICS]
    )
    return {
        (row["k"], name): row[name]
        for row in rows.collect()
        for name in ("n_users", *COMPAT_METRICS)
    }


def pairs(truth_rows: pd.DataFrame, ranked_rows: pd.DataFrame) -> list[tuple[list, list]]:
    """(pred in rank order, labels) for every truth user; [] for a user without a list."""
    ordered = ranked_rows.sort_values(["user_id", "rank"])
    pred = ordered.groupby("user_id")["item_id"].apply(lambda s: [int(i) for i in s]).to_dict()
    labels = truth_rows.groupby("user_id")["item_id"].apply(lambda s: [int(i) for i in s])
    return [(pred.get(user, []), lab) for user, lab in sorted(labels.to_dict().items())]


def test_ml100k_spark_mllib_equals_ranking_metrics(spark, truth_rows, ranked_rows, inputs):
    from pyspark.mllib.evaluation import RankingMetrics  # RDD-based: the reference, tests only

    ranked, truth = inputs
    ours = macro(compatible_per_user(ranked, truth, ks=KS, definitions="spark_mllib"))
    data = pairs(truth_rows, ranked_rows)
    data.sort(key=lambda pair: not pair[0])  # non-empty first: the schema is inferred from it
    metrics = RankingMetrics(spark.sparkContext.parallelize(data, 4))

    assert sum(1 for pred, _ in data if not pred) > 0  # users without a list are in the mean
    for k in KS:
        assert ours[(k, "n_users")] == len(data)
        assert ours[(k, "precision")] == pytest.approx(metrics.precisionAt(k), abs=TOL)
        assert ours[(k, "recall")] == pytest.approx(metrics.recallAt(k), abs=TOL)
        assert ours[(k, "ndcg")] == pytest.approx(metrics.ndcgAt(k), abs=TOL)
        assert ours[(k, "map")] == pytest.approx(metrics.meanAveragePrecisionAt(k), abs=TOL)


def test_ml100k_spark_mllib_equals_ranking_evaluator_at_10(spark, truth_rows, ranked_rows, inputs):
    from pyspark.ml.evaluation import RankingEvaluator

    ranked, truth = inputs
    ours = macro(compatible_per_user(ranked, truth, ks=[10], definitions="spark_mllib"))
    dataset = spark.createDataFrame(
        [
            ([float(i) for i in pred], [float(i) for i in lab])
            for pred, lab in pairs(truth_rows, ranked_rows)
        ],
        "prediction array<double>, label array<double>",
    )
    names = {"precision": "precisionAtK", "recall": "recallAtK", "ndcg": "ndcgAtK"}
    names["map"] = "meanAveragePrecisionAtK"

    for metric, name in names.items():
        evaluator = RankingEvaluator(metricName=name, k=10)
        assert ours[(10, metric)] == pytest.approx(evaluator.evaluate(dataset), abs=TOL)


def test_ml100k_recommenders_equals_spark_ranking_evaluation(spark, inputs):
    spark_evaluation = pytest.importorskip(
        "recommenders.evaluation.spark_evaluation",
        reason="Microsoft Recommenders (recommenders==1.2.1) is the reference for this profile",
    )
    ranked, truth = inputs
    ours = macro(compatible_per_user(ranked, truth, ks=KS, definitions="recommenders"))
    mllib_users = truth.select("user_id").distinct().count()
    # score = -rank: no ties, so its row_number order is our rank order
    predictions = ranked.select(
        "user_id", "item_id", (-F.col("rank")).cast("double").alias("score")
    )

    for k in KS:
        theirs = spark_evaluation.SparkRankingEvaluation(
            truth,
            predictions,
            k=k,
            relevancy_method="top_k",
            col_user="user_id",
            col_item="item_id",
            col_rating="grade",
            col_prediction="score",
        )
        n_users = theirs._items_for_user_all.count()  # its inner join of predictions and truth
        assert ours[(k, "n_users")] == n_users < mllib_users
        assert ours[(k, "precision")] == pytest.approx(theirs.precision_at_k(), abs=TOL)
        assert ours[(k, "recall")] == pytest.approx(theirs.recall_at_k(), abs=TOL)
        assert ours[(k, "ndcg")] == pytest.approx(theirs.ndcg_at_k(), abs=TOL)
        assert ours[(k, "map")] == pytest.approx(theirs.map_at_k(), abs=TOL)


def test_ml100k_spark_mllib_per_user_equals_ours_at_binary_grades(spark, inputs):
    ranked, truth = inputs
    columns = ["user_id", "k", *COMPAT_METRICS]
    compat = compatible_per_user(ranked, truth, ks=KS, definitions="spark_mllib").select(columns)
    ours = per_user_accuracy(ranked, truth, ks=KS).select(columns)

    assert_approx_df_equality(compat, ours, TOL, ignore_row_order=True, ignore_nullable=True)


def test_ml100k_graded_relevance_changes_only_ndcg_against_spark_mllib(spark, truth_rows, inputs):
    """Graded relevance (threshold 4, grades 1-2) keeps Rel(u), so precision, recall and MAP
    stay MLlib's; only NDCG differs (graded gains vs MLlib's binary ones)."""
    ranked, _ = inputs
    graded = spark.createDataFrame(
        truth_rows[["user_id", "item_id", "graded_grade"]].rename(columns={"graded_grade": "grade"})
    )
    assert set(truth_rows["graded_grade"]) == {1.0, 2.0}
    mllib = macro(compatible_per_user(ranked, graded, ks=[10], definitions="spark_mllib"))
    ours = macro(per_user_accuracy(ranked, graded, ks=[10]))

    print(
        f"\nml-100k popularity@10 ndcg: spark_mllib {mllib[(10, 'ndcg')]:.4f}, graded "
        f"{ours[(10, 'ndcg')]:.4f}"
    )
    for metric in ("precision", "recall", "map"):
        assert ours[(10, metric)] == pytest.approx(mllib[(10, metric)], abs=TOL)
    assert abs(ours[(10, "ndcg")] - mllib[(10, "ndcg")]) > 1e-3
