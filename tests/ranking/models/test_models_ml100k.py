"""Candidate models, tuning, the sampled protocol and the rating task on MovieLens 100K.

Setup: global temporal split, validation from 1998-01-15, test from 1998-03-01; relevance
rating >= 4; k = 10. Rating errors are checked against a pandas implementation of the bias
baseline written from its definition (models/bias.py)."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import GENERATED, sql_conf

from receval_spark import evaluate
from receval_spark.config import validate_config

pytestmark = pytest.mark.shared_data

CUTOFF = dt.datetime(1998, 3, 1, tzinfo=dt.UTC)
VALIDATION = dt.datetime(1998, 1, 15, tzinfo=dt.UTC)
COLUMNS = ["user_id", "item_id", "rating", "timestamp"]
REG_ITEM, REG_USER = 10.0, 15.0


def config(u_data: Path, output: Path, **overrides):
    raw = {
        "output": {"path": str(output)},
        "data": {
            "interactions": {
                "path": str(u_data),
                "format": "csv",
                "header": False,
                "delimiter": "\t",
                "column_names": COLUMNS,
                "columns": {"rating": "rating"},
            }
        },
        "split": {
            "method": "global_temporal",
            "cutoff": CUTOFF.isoformat(),
            "validation_cutoff": VALIDATION.isoformat(),
        },
        "relevance": {"kind": "threshold", "threshold": 4.0},
        **overrides,
    }
    return validate_config(raw)


@pytest.fixture(scope="module")
def u_data(shared_data: Path) -> Path:
    return shared_data / "ml-100k" / "u.data"


@pytest.fixture(scope="module")
def ranking(spark, u_data, tmp_path_factory):
    """popularity, random, ALS and item-kNN (both with grids), full and sampled_100, on
    Spark's generated code."""
    cfg = config(
        u_data,
        tmp_path_factory.mktemp("ranking"),
        evaluation={
            "k": [10],
            "protocol": ["full", "sampled_100"],
            "metrics": ["ndcg", "recall", "coverage"],
            "segments": ["warm", "cold"],
            "bootstrap_samples": 0,
        },
        models=[
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 7},
            {"name": "als", "kind": "als", "rank": 32, "reg_param": [0.05, 0.5], "blocks": 2},
            {"name": "item_knn", "kind": "item_knn", "neighbours": [50, 200]},
        ],
    )
    with sql_conf(spark, GENERATED):  # ALS's scoring and item-kNN's pairs are compute
        return evaluate(spark, cfg, keep_cached=True).outcome


def value(evaluation, model, metric, protocol="full", segment="all"):
    (row,) = [
        r
        for r in evaluation.metrics
        if (r.model, r.metric, r.protocol, r.segment) == (model, metric, protocol, segment)
    ]
    return row


def test_als_and_item_knn_beat_popularity_on_warm_users_and_serve_cold_ones_by_it(ranking):
    """Two thirds of ml-100k's test users after 1998-03-01 have no train interaction: ALS and
    item-kNN cannot score them, so ``fallback: popularity`` (the default) gives them
    popularity's lists (the same per-user values, counted in ``runs.split.fallback_users``)
    and the warm segment is the models alone, where both beat popularity (docs/evaluation.md,
    Candidate models); with the fallback they also beat it over all users."""
    for segment in ("all", "warm"):
        assert (
            value(ranking, "random", "ndcg", segment=segment).value
            < value(ranking, "popularity", "ndcg", segment=segment).value
        )
    cold = value(ranking, "popularity", "ndcg", segment="cold")
    assert ranking.split["fallback_users"] == {"als": cold.n_users, "item_knn": cold.n_users}
    for model in ("als", "item_knn"):
        warm = value(ranking, model, "ndcg", segment="warm").value
        assert warm > value(ranking, "popularity", "ndcg", segment="warm").value, model
        for protocol in ("full", "sampled_100"):
            served = value(ranking, model, "ndcg", protocol, segment="cold").value
            assert served == value(ranking, "popularity", "ndcg", protocol, segment="cold").value
        assert value(ranking, model, "ndcg").value > value(ranking, "popularity", "ndcg").value


def test_grids_are_tuned_on_validation_and_recorded(ranking):
    als, knn = ranking.tuning["als"], ranking.tuning["item_knn"]
    assert als["metric"] == knn["metric"] == "ndcg@10"
    assert len(als["grid"]) == 2 and len(knn["grid"]) == 2
    for record in (als, knn):
        best = max(record["grid"], key=lambda p: p["validation_score"])
        assert record["validation_score"] == best["validation_score"] > 0
        assert {k: best[k] for k in record["chosen"]} == record["chosen"]
    json.dumps(ranking.tuning)  # goes into runs/ as JSON


def test_sampled_protocol_is_labelled_and_differs_from_full(ranking):
    for model in ("popularity", "als", "item_knn", "random"):
        full, sampled = value(ranking, model, "ndcg"), value(ranking, model, "ndcg", "sampled_100")
        assert full.n_users == sampled.n_users
        assert sampled.value > full.value  # 100 negatives are easier than the catalogue
    labels = ("full", "sampled_100", "sampled_100_corrected")  # the correction beside the raw
    assert all(r.protocol in labels for r in ranking.metrics)
    assert not [
        r for r in ranking.metrics if r.protocol == "sampled_100" and r.metric == "coverage"
    ]
    assert any(
        "sampled metrics (sampled_100, sampled_100_corrected)" in w for w in ranking.warnings
    )
    compared = {(c.model, c.protocol) for c in ranking.comparisons if c.metric == "ndcg"}
    assert ("als", "sampled_100") in compared and ("als", "full") in compared


def reference_bias(train: pd.DataFrame, pairs: pd.DataFrame) -> np.ndarray:
    """mu + b_u + b_i with b_i = sum(r - mu) / (reg_i + n_i), b_u = sum(r - mu - b_i) /
    (reg_u + n_u) over the train ratings."""
    mu = train["rating"].mean()
    by_item = train.groupby("item_id")["rating"]
    b_item = (by_item.sum() - mu * by_item.count()) / (REG_ITEM + by_item.count())
    residual = train["rating"] - mu - train["item_id"].map(b_item)
    by_user = residual.groupby(train["user_id"])
    b_user = by_user.sum() / (REG_USER + by_user.count())
    return (
        mu + pairs["user_id"].map(b_user).fillna(0) + pairs["item_id"].map(b_item).fillna(0)
    ).to_numpy()


def test_rating_task_errors_match_the_reference_and_say_they_do_not_rank(spark, u_data, tmp_path):
    cfg = config(
        u_data,
        tmp_path,
        task="rating_prediction",
        evaluation={"baseline": None},
        models=[
            {"name": "bias", "kind": "bias", "reg_item": REG_ITEM, "reg_user": REG_USER},
            {
                "name": "als",
                "kind": "als",
                "implicit": False,
                "rank": 10,
                "reg_param": 0.1,
                "blocks": 2,
            },
        ],
    )
    evaluation = evaluate(spark, cfg).outcome

    frame = pd.read_csv(u_data, sep="\t", header=None, names=COLUMNS)
    seconds = frame["timestamp"]
    train = frame[seconds < CUTOFF.timestamp()]
    test = frame[seconds >= CUTOFF.timestamp()]
    known = test[test["user_id"].isin(train["user_id"]) & test["item_id"].isin(train["item_id"])]
    errors = reference_bias(train, known) - known["rating"].to_numpy()
    expected = {
        "mae": np.abs(errors).mean(),
        "mse": (errors**2).mean(),
        "rmse": math.sqrt((errors**2).mean()),
    }
    for metric, number in expected.items():
        row = value(evaluation, "bias", metric)
        assert row.value == pytest.approx(number, abs=1e-9), metric
        assert row.n_users == len(known) and row.k is None
        assert row.ci_low <= row.value <= row.ci_high
    assert evaluation.split["rating_prediction"] == {
        "test_ratings": len(test),
        "scored_ratings": len(known),
    }
    assert 0.7 < value(evaluation, "als", "rmse").value < 1.5
    assert {r.metric for r in evaluation.metrics} == {"mae", "mse", "rmse"}
    assert any("not how well a model ranks" in w for w in evaluation.warnings)
