"""Rating prediction (models/bias.py, metrics/rating.py): hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from receval_spark.metrics.rating import rating_errors, rating_metrics
from receval_spark.ranking.models.bias import bias_predictions

RATED = "user_id long, item_id long, rating double"
TRAIN = [(1, 10, 5.0), (1, 11, 3.0), (2, 10, 4.0), (2, 12, None)]  # the null rating is ignored
PAIRS = [(1, 10), (2, 11), (3, 10), (3, 99)]


def predictions(spark, **regs):
    train = spark.createDataFrame(TRAIN, RATED)
    pairs = spark.createDataFrame(PAIRS, "user_id long, item_id long")
    rows = bias_predictions(train, pairs, **regs).collect()
    return {(r.user_id, r.item_id): r.prediction for r in rows}


def test_bias_baseline_without_regularization(spark):
    # mu = 4; b_10 = (1 + 0) / 2, b_11 = -1 / 1; b_1 = ((5-4-0.5) + (3-4+1)) / 2, b_2 = -0.5
    assert predictions(spark, reg_item=0.0, reg_user=0.0) == pytest.approx(
        {(1, 10): 4.75, (2, 11): 2.5, (3, 10): 4.5, (3, 99): 4.0}, abs=1e-12
    )


def test_bias_baseline_shrinks_biases_toward_zero(spark):
    b_10, b_11 = 1 / (2 + 2), -1 / (2 + 1)
    b_1 = ((5 - 4 - b_10) + (3 - 4 - b_11)) / (3 + 2)
    b_2 = (4 - 4 - b_10) / (3 + 1)
    assert predictions(spark, reg_item=2.0, reg_user=3.0) == pytest.approx(
        {(1, 10): 4 + b_1 + b_10, (2, 11): 4 + b_2 + b_11, (3, 10): 4 + b_10, (3, 99): 4.0},
        abs=1e-12,
    )


def test_errors_over_known_test_ratings(spark):
    predicted = spark.createDataFrame(
        [("m", 1, 10, 4.75), ("m", 2, 11, 2.5)],
        "model string, user_id long, item_id long, prediction double",
    )
    test = spark.createDataFrame([(1, 10, 4.0), (2, 11, 3.0), (3, 12, 5.0), (4, 10, None)], RATED)

    row = rating_errors(predicted, test, by=["model"]).collect()[0]
    got = {e.metric: e for e in rating_metrics(row, by=["model"])}

    assert (row.n_ratings, row.n_unpredicted) == (2, 1)  # (3, 12) has no prediction
    absolute, squared = np.array([0.75, 0.5]), np.array([0.5625, 0.25])
    assert got["mae"].value == pytest.approx(0.625, abs=1e-12)
    assert got["mse"].value == pytest.approx(0.40625, abs=1e-12)
    assert got["rmse"].value == pytest.approx(math.sqrt(0.40625), abs=1e-12)
    half = stats.t.ppf(0.975, 1) * np.std(absolute, ddof=1) / math.sqrt(2)
    assert 0.625 - half < 0  # MAE >= 0: the t-interval's lower end is clipped at 0
    assert (got["mae"].ci_low, got["mae"].ci_high) == pytest.approx((0.0, 0.625 + half), abs=1e-12)
    half = stats.t.ppf(0.975, 1) * np.std(squared, ddof=1) / math.sqrt(2)
    assert got["rmse"].ci_high == pytest.approx(math.sqrt(0.40625 + half), abs=1e-12)
    assert got["rmse"].ci_low == 0.0  # MSE's lower end is negative here: clipped at 0
    assert {e.group for e in got.values()} == {("m",)}
