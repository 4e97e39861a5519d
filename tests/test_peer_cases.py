"""The peers' own test cases fed as their users hold the data — a test set and a model's
lists or predicted ratings, no timestamps, no train, no cut-off (docs/evaluation.md#given-split)
— must give the peers' published numbers, and our exact values.

- Microsoft Recommenders, ``tests/unit/.../test_python_evaluation.py`` (``rating_true``,
  ``rating_pred``, k = 10): precision 0.26666, recall 0.37777, ndcg 0.38172, map 0.23613;
  MAE 6.375, RMSE 7.254309 over the 8 pairs both tables hold.
- Spark MLlib, the ``RankingMetrics`` example of its documentation: three queries, the third
  with an empty ground truth; precisionAt(1) = 1/3, precisionAt(5) = 0.26666,
  meanAveragePrecision = 0.355026, ndcgAt(3) = 1/3, ndcgAt(10) = 0.48791 (under
  ``definitions: spark_mllib``, which averages over every query as MLlib does; the third
  query's user is in the train set, as a user without test interactions is).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from receval_spark import evaluate

PEER_TOLERANCE = 1e-4  # the peers publish 4-5 digits

RATING_TRUE = {
    "userID": [1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3],
    "itemID": [1, 2, 3, 1, 4, 5, 6, 7, 2, 5, 6, 8, 9, 10, 11, 12, 13, 14],
    "rating": [5, 4, 3, 5, 5, 3, 3, 1, 5, 5, 5, 4, 4, 3, 3, 3, 2, 1],
}
RATING_PRED = {
    "userID": [1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3],
    "itemID": [3, 10, 12, 10, 3, 5, 11, 13, 4, 10, 7, 13, 1, 3, 5, 2, 11, 14],
    "prediction": [14, 13, 12, 14, 13, 12, 11, 10, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5],
}
COLUMNS = {"user": "userID", "item": "itemID"}


def _frame(spark, table: dict[str, list[int]]):
    """The peer's pandas frame as Spark reads it: integer columns."""
    rows = list(zip(*table.values(), strict=True))
    return spark.createDataFrame(rows, ", ".join(f"{c} int" for c in table))


def _exact(value: float) -> Fraction:
    return Fraction(value).limit_denominator(100_000)


def test_recommenders_ranking_case(spark) -> None:
    config = {
        "data": {"test": {"columns": {**COLUMNS, "timestamp": None}}},
        "evaluation": {
            "k": [10],
            "metrics": ["precision", "recall", "ndcg", "map"],
            "min_users": 1,
            "baseline": None,
        },
        "models": [
            {"name": "peer", "kind": "external", "columns": {**COLUMNS, "score": "prediction"}}
        ],
    }
    result = evaluate(
        spark,
        config,
        test=_frame(spark, RATING_TRUE),
        recommendations={"peer": _frame(spark, RATING_PRED)},
    )
    values = {r.metric: r.value for r in result.metrics.filter("segment = 'all'").collect()}
    published = {"precision": 0.26666, "recall": 0.37777, "ndcg": 0.38172, "map": 0.23613}
    for metric, value in published.items():
        assert values[metric] == pytest.approx(value, abs=PEER_TOLERANCE), metric
    assert _exact(values["precision"]) == Fraction(4, 15)
    assert _exact(values["recall"]) == Fraction(17, 45)
    assert _exact(values["map"]) == Fraction(4463, 18900)


def test_recommenders_rating_case(spark) -> None:
    config = {
        "task": "rating_prediction",
        "data": {"test": {"columns": {**COLUMNS, "timestamp": None, "rating": "rating"}}},
        "evaluation": {"min_users": 1, "baseline": None},
        "models": [
            {"name": "peer", "kind": "external", "columns": {**COLUMNS, "prediction": "prediction"}}
        ],
    }
    result = evaluate(
        spark,
        config,
        test=_frame(spark, RATING_TRUE),
        recommendations={"peer": _frame(spark, RATING_PRED)},
    )
    values = {r.metric: r for r in result.metrics.collect()}
    assert values["mae"].value == pytest.approx(6.375, abs=PEER_TOLERANCE)
    assert values["rmse"].value == pytest.approx(7.254309, abs=PEER_TOLERANCE)
    assert _exact(values["mae"].value) == Fraction(51, 8)
    assert _exact(values["mse"].value) == Fraction(421, 8)
    # the 10 test ratings without a prediction are counted, not dropped silently
    assert result.outcome.split["rating_prediction"]["unpredicted"] == {"peer": 10}


MLLIB_QUERIES = [
    ([1, 6, 2, 7, 8, 3, 9, 10, 4, 5], [1, 2, 3, 4, 5]),
    ([4, 1, 5, 6, 2, 7, 3, 8, 9, 10], [1, 2, 3]),
    ([1, 2, 3, 4, 5], []),
]


def test_spark_mllib_documentation_case(spark) -> None:
    test = spark.createDataFrame(
        [(u, i) for u, (_, labels) in enumerate(MLLIB_QUERIES, 1) for i in labels],
        "user_id int, item_id int",
    )
    lists = spark.createDataFrame(
        [(u, i, r) for u, (pred, _) in enumerate(MLLIB_QUERIES, 1) for r, i in enumerate(pred, 1)],
        "user_id int, item_id int, rank int",
    )
    config = {
        "evaluation": {
            "k": [1, 3, 5, 10],
            "definitions": "spark_mllib",
            "metrics": ["precision", "ndcg", "map"],
            "min_users": 1,
            "baseline": None,
        },
        "models": [
            {"name": "peer", "kind": "external", "columns": {"score": None, "rank": "rank"}}
        ],
    }
    # the third query's user has history but no test interaction (where an empty ground truth
    # comes from): evaluation.users listed_or_relevant counts the log's users with a list
    train = spark.createDataFrame([(3, 99)], "user_id int, item_id int")
    result = evaluate(spark, config, train=train, test=test, recommendations={"peer": lists})
    values = {(r.metric, r.k): r.value for r in result.metrics.filter("segment = 'all'").collect()}
    assert _exact(values["precision", 1]) == Fraction(1, 3)
    assert values["precision", 5] == pytest.approx(0.26666, abs=PEER_TOLERANCE)
    assert values["map", 10] == pytest.approx(0.355026, abs=PEER_TOLERANCE)
    assert values["ndcg", 3] == pytest.approx(1 / 3, abs=1e-12)
    assert values["ndcg", 10] == pytest.approx(0.48791, abs=PEER_TOLERANCE)
    assert result.outcome.n_users_evaluated == 3
