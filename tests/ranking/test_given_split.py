"""``split: {method: given}``: the caller's own train and test (docs/evaluation.md#given-split),
through the Python API and the CLI; everything downstream as for our own splits, the leakage
check where both parts carry timestamps."""

from __future__ import annotations

import datetime as dt
import math
from fractions import Fraction

import pandas as pd
import pytest
import yaml
from helpers import DAY, T0, crafted_job_config, crafted_log, kept_sql_conf, metric_values

from receval_spark import evaluate
from receval_spark.cli import main
from receval_spark.config import GivenSplit
from receval_spark.errors import ConfigError, InputError
from receval_spark.ranking.leakage import NO_TIMESTAMPS, split_leakage
from receval_spark.ranking.split import given_split

# The peers' shape: a test set and a model's lists, a small train set, no timestamps.
TRAIN = [(1, 10), (1, 11), (2, 10), (3, 12)]
TEST = [(1, 12), (2, 11), (2, 12), (4, 10)]
RECS = [(1, 12, 0.9), (1, 13, 0.5), (2, 13, 0.9), (2, 11, 0.8), (4, 11, 1.0)]
CONFIG = {
    "evaluation": {
        "k": [2],
        "min_users": 1,
        "baseline": None,
        "metrics": ["precision", "recall", "ndcg", "mrr", "hit_rate", "coverage"],
        "bootstrap_samples": 0,
    },
    "models": [],
}


def _frames(spark):
    return (
        spark.createDataFrame(TRAIN, "user_id int, item_id int"),
        spark.createDataFrame(TEST, "user_id int, item_id int"),
        spark.createDataFrame(RECS, "user_id int, item_id int, score double"),
    )


def _all(result, model: str = "m") -> dict[str, float]:
    rows = result.metrics.filter(f"model = '{model}' AND segment = 'all'").collect()
    return {r.metric: r.value for r in rows}


def test_a_given_pair_without_timestamps_gives_the_hand_computed_metrics(spark) -> None:
    """Rel: 1 -> {12}, 2 -> {11, 12}, 4 -> {10} (user 4 is cold); lists at k = 2: 1 -> [12, 13]
    (1 hit), 2 -> [13, 11] (hit at rank 2), 4 -> [11] (none). Catalogue: train items 10-12."""
    train, test, recs = _frames(spark)
    result = evaluate(spark, CONFIG, train=train, test=test, recommendations={"m": recs})
    values = _all(result)
    assert Fraction(values["precision"]).limit_denominator(100) == Fraction(1, 3)
    assert Fraction(values["recall"]).limit_denominator(100) == Fraction(1, 2)
    ndcg_2 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert values["ndcg"] == pytest.approx((1 + ndcg_2 + 0) / 3, abs=1e-15)
    assert Fraction(values["coverage"]).limit_denominator(100) == Fraction(2, 3)  # 11, 12 of 3
    assert values["hit_rate"] == pytest.approx(2 / 3, abs=1e-15)
    assert result.outcome.n_users_evaluated == 3
    split = result.outcome.split
    assert split["method"] == "given"
    assert (split["train"]["rows"], split["test"]["rows"]) == (4, 4)
    cold = result.metrics.filter("model = 'm' AND segment = 'cold' AND metric = 'recall'")
    assert [r.n_users for r in cold.collect()] == [1]  # user 4 has no train rows
    assert any("no_temporal_leakage cannot run" in w for w in result.warnings)
    assert "no_temporal_leakage" not in {c.name for c in result.checks}


def test_seen_items_are_filtered_by_the_given_train(spark) -> None:
    """User 1's list starts with a train item (10): filtered, so 12 moves to rank 1."""
    train, test, _ = _frames(spark)
    recs = spark.createDataFrame(
        [(1, 10, 1.0), (1, 12, 0.9), (2, 11, 1.0), (4, 10, 1.0)],
        "user_id int, item_id int, score double",
    )
    values = _all(evaluate(spark, CONFIG, train=train, test=test, recommendations={"m": recs}))
    # 1: [12] hit at 1; 2: [11] hit at 1 of Rel {11, 12}; 4: [10] hit
    assert values["mrr"] == 1.0
    assert Fraction(values["recall"]).limit_denominator(100) == Fraction(5, 6)


def test_without_train_every_test_user_is_cold(spark) -> None:
    _, test, recs = _frames(spark)
    catalogue = spark.createDataFrame([(i,) for i in range(10, 20)], "item_id int")
    result = evaluate(spark, CONFIG, test=test, recommendations={"m": recs}, catalogue=catalogue)
    values = _all(result)
    assert Fraction(values["precision"]).limit_denominator(100) == Fraction(1, 3)
    assert result.outcome.split["train"]["rows"] == 0
    warm = result.metrics.filter("segment = 'warm'").count()
    assert warm == 0 or all(
        r.n_users == 0 for r in result.metrics.filter("segment = 'warm'").collect()
    )


def test_the_given_pair_of_a_global_cut_equals_the_global_temporal_split(spark, tmp_path) -> None:
    """The crafted log split at day 4 by us, and the same two halves given as files through
    the CLI: the same numbers, and the leakage check passes."""
    log = crafted_log(reconsumed=True)
    models = [{"name": "popularity", "kind": "popularity"}]
    raw = crafted_job_config(tmp_path, log, models)
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with kept_sql_conf(spark):
        assert main(["evaluate", "--config", str(config)]) == 0
    expected = metric_values(spark, tmp_path / "reports", "2024-02-01")

    cut = int(T0.timestamp()) + 4 * DAY
    columns = raw["data"]["interactions"]["columns"]
    for name, part in (("train", log[log.timestamp < cut]), ("test", log[log.timestamp >= cut])):
        part.to_parquet(tmp_path / f"{name}.parquet", index=False)
        raw["data"][name] = {"path": str(tmp_path / f"{name}.parquet"), "columns": columns}
    del raw["data"]["interactions"]
    raw["split"] = {"method": "given"}
    raw["output"]["path"] = str(tmp_path / "given")
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with kept_sql_conf(spark):
        assert main(["evaluate", "--config", str(config)]) == 0
    assert metric_values(spark, tmp_path / "given", "2024-02-01") == expected


def _timed(spark, rows):
    return spark.createDataFrame(
        [(u, i, dt.datetime(2026, 1, d)) for u, i, d in rows],
        "user_id int, item_id int, timestamp timestamp",
    )


def test_the_leakage_check_of_a_given_pair(spark) -> None:
    _, _, recs = _frames(spark)
    test = _timed(spark, [(1, 12, 3), (2, 11, 4)])
    # user 1 has a train row (day 5) after their first test row (day 3): time travel
    travelled = _timed(spark, [(1, 10, 1), (1, 11, 5), (2, 10, 2)])
    result = evaluate(spark, CONFIG, train=travelled, test=test, recommendations={"m": recs})
    check = next(c for c in result.checks if c.name == "no_temporal_leakage")
    assert not check.passed and check.detail.startswith("1 train interactions of 1 users")
    assert any(
        w.startswith("leaky split: the given train and test overlap") for w in result.warnings
    )


def test_the_leakage_rules_of_a_given_pair(spark) -> None:
    """A per-user cut passes with a warning; with the cut-off the pair was made at, the global
    rule fails it; without timestamps nothing can be checked (said)."""
    per_user = _timed(spark, [(1, 10, 1), (2, 10, 2), (2, 13, 3)])
    test = _timed(spark, [(1, 12, 2), (2, 11, 4)])
    leakage = split_leakage(
        GivenSplit(method="given"),
        given_split(GivenSplit(method="given"), per_user, test),
        timestamps=True,
    )
    (check,) = leakage.checks
    assert check.passed, check.detail
    assert [w[:30] for w in leakage.warnings] == ["leaky split: the given train a"]

    at = GivenSplit(method="given", cutoff=dt.date(2026, 1, 3))
    (check,) = split_leakage(at, given_split(at, per_user, test), timestamps=True).checks
    assert not check.passed and "test has interactions before the cut-off" in check.detail

    untimed = split_leakage(at, given_split(at, None, test), timestamps=False)
    assert untimed.checks == [] and untimed.warnings == [NO_TIMESTAMPS]


def test_given_split_errors(spark) -> None:
    train, test, recs = _frames(spark)
    with pytest.raises(ConfigError, match=r"split.method: given needs data.test"):
        evaluate(
            spark,
            {**CONFIG, "split": {"method": "given"}},
            train=train,
            recommendations={"m": recs},
        )
    with pytest.raises(
        ConfigError, match=r"data.train and data.test are read by split.method: given"
    ):
        evaluate(
            spark,
            {**CONFIG, "split": {"method": "user_random"}},
            interactions=train,
            test=test,
            recommendations={"m": recs},
        )
    strings = spark.createDataFrame([("1", "12")], "user_id string, item_id string")
    with pytest.raises(InputError, match=r"^data.test.columns.user: the user ids have type string"):
        evaluate(spark, CONFIG, train=train, test=strings, recommendations={"m": recs})
    empty = spark.createDataFrame(
        pd.DataFrame({"user_id": [], "item_id": []}), "user_id int, item_id int"
    )
    with pytest.raises(InputError, match=r"^data.test: the table has no rows"):
        evaluate(spark, CONFIG, train=train, test=empty, recommendations={"m": recs})


def test_given_frames_with_a_rating_column_need_no_mapping(spark) -> None:
    """Threshold relevance reads the given test set's canonical ``rating`` column: user 2's
    3-star item 12 is not relevant, so their Rel(u) is {11}."""
    train, _, recs = _frames(spark)
    test = spark.createDataFrame(
        [(1, 12, 5.0), (2, 11, 4.0), (2, 12, 3.0), (4, 10, 2.0)],
        "user_id int, item_id int, rating double",
    )
    config = {**CONFIG, "relevance": {"kind": "threshold", "threshold": 4}}
    result = evaluate(spark, config, train=train, test=test, recommendations={"m": recs})
    assert result.outcome.n_users_evaluated == 2  # user 4's only rating is 2 stars
    assert _all(result)["recall"] == 1.0
    unrated = test.drop("rating")
    with pytest.raises(InputError, match=r"^data.test: relevance.kind: threshold needs ratings"):
        evaluate(spark, config, train=train, test=unrated, recommendations={"m": recs})
