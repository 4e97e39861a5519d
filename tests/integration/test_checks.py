"""Each sanity check and warning of the run record (DESIGN §7) fails on a crafted input.
(They pass on real data in test_statistics_ml100k and the end-to-end demo tests.)"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pyspark.sql import functions as F

from receval_spark.checks import (
    oracle_check,
    run_warnings,
    same_users_check,
    temporal_leakage_check,
)
from receval_spark.cli import main
from receval_spark.config import validate_config
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.aggregate import macro_average, to_long
from receval_spark.models.oracle import oracle_candidates
from receval_spark.pipeline import describe_split, evaluate
from receval_spark.report.tables import MetricRow
from receval_spark.split import Split
from receval_spark.topk import rank_candidates

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
DAY = 86_400
LOG = "user_id int, item_id int, timestamp timestamp, rating double"


def at(day: float) -> dt.datetime:
    return T0 + dt.timedelta(days=day)


def crafted_log(*, reconsumed: bool) -> pd.DataFrame:
    """Users 1-4: 3 train interactions (days 0-2) and one relevant test item (day 5);
    users 5, 6: only a test interaction (cold). With ``reconsumed``, user 1's test item is
    one they already rated in train (re-consumption)."""
    rows = []
    for user in range(1, 5):
        rows += [(user, 10 * user + j, int(T0.timestamp()) + j * DAY, 3.0) for j in range(3)]
        test_item = 10 * user if (reconsumed and user == 1) else 100 + user
        rows.append((user, test_item, int(T0.timestamp()) + 5 * DAY, 5.0))
    rows += [(user, 100 + user, int(T0.timestamp()) + 6 * DAY, 5.0) for user in (5, 6)]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


def job_config(tmp: Path, log: pd.DataFrame, models: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp / "log.parquet"
    log.to_parquet(path, index=False)
    return {
        "run": {"name": "checks", "date": "2024-02-01"},
        "spark": {"master": "local[2]"},
        "output": {"path": str(tmp / "reports")},
        "data": {
            "interactions": {
                "path": str(path),
                "columns": {
                    "user": "user_id",
                    "item": "item_id",
                    "timestamp": "timestamp",
                    "rating": "rating",
                },
            }
        },
        "split": {"method": "global_temporal", "cutoff": at(4).isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [2],
            "min_users": 0,
            "segments": ["warm", "cold"],
            "metrics": ["ndcg", "recall"],
            "bootstrap_samples": 0,
        },
        "models": models,
    }


def test_temporal_leakage_fails_when_train_reaches_past_the_cutoff(spark):
    cutoff = at(4)
    train = spark.createDataFrame([(1, 10, at(1), 3.0), (1, 11, at(4.5), 3.0)], LOG)  # leaks
    test = spark.createDataFrame([(1, 12, at(5), 5.0), (2, 13, at(3), 5.0)], LOG)  # early test row
    split = Split(
        train=train, test=test, params={"method": "global_temporal", "cutoff": cutoff.isoformat()}
    )

    check = temporal_leakage_check(describe_split(split))

    assert not check.passed
    assert "train has interactions at or after the cut-off" in check.detail
    assert "test has interactions before the cut-off" in check.detail


def test_temporal_leakage_passes_on_a_clean_split(spark):
    train = spark.createDataFrame([(1, 10, at(1), 3.0)], LOG)
    test = spark.createDataFrame([(1, 12, at(5), 5.0)], LOG)
    split = Split(train=train, test=test, params={"cutoff": at(4).isoformat()})

    assert temporal_leakage_check(describe_split(split)).passed


def test_oracle_check_fails_when_the_oracle_scores_are_corrupted(spark):
    truth = spark.createDataFrame(
        [(1, 10, 3.0), (1, 11, 1.0), (2, 20, 2.0), (2, 21, 1.0)],
        "user_id int, item_id int, grade double",
    )
    honest = oracle_candidates(truth)
    corrupted = honest.withColumn("score", -honest["score"])  # worst grade first

    def ndcg_rows(candidates, name):
        ranked = rank_candidates(candidates, k=2, seen=None)
        scores = per_user_accuracy(ranked, truth, ks=[2]).withColumn("model", F.lit(name))
        long = to_long(scores, metrics=["ndcg"], keys=["model", "user_id", "k"])
        return [
            MetricRow(
                model=name, segment="all", metric=r.metric, k=r.k, value=r.value, n_users=r.n_users
            )
            for r in macro_average(long, by=["model", "metric", "k"]).collect()
        ]

    assert oracle_check("oracle", ndcg_rows(honest, "oracle")).passed
    failed = oracle_check("oracle", ndcg_rows(corrupted, "oracle"))
    assert not failed.passed
    assert failed.name == "oracle_ndcg[oracle]" and "NDCG@2 = 0." in failed.detail


def test_same_users_check_fails_when_models_differ_in_users_or_cut_offs():
    def row(model, k, n):
        return MetricRow(model=model, segment="all", metric="ndcg", k=k, value=0.1, n_users=n)

    assert same_users_check([row("a", 10, 50), row("b", 10, 50)], ["a", "b"]).passed
    uneven = same_users_check([row("a", 10, 50), row("b", 10, 49)], ["a", "b"])
    assert not uneven.passed and "other users" in uneven.detail
    other_k = same_users_check([row("a", 10, 50), row("b", 5, 50)], ["a", "b"])
    assert not other_k.passed and "differ in rows" in other_k.detail


def test_warnings_for_leaky_splits_few_users_and_sampled_metrics(tmp_path):
    raw = job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    raw["split"] = {"method": "user_random", "fraction": 0.2}
    raw["evaluation"]["min_users"] = 100
    config = validate_config(raw)
    sampled = MetricRow(
        model="popularity",
        segment="all",
        metric="ndcg",
        k=10,
        value=0.3,
        n_users=5,
        protocol="sampled_100",
    )

    warnings = run_warnings(config, 5, [sampled])

    assert any(w.startswith("leaky split:") for w in warnings)
    assert any("only 5 users evaluated" in w for w in warnings)
    assert any("sampled metrics (sampled_100)" in w for w in warnings)
    assert (
        run_warnings(
            validate_config(
                job_config(
                    tmp_path,
                    crafted_log(reconsumed=False),
                    [{"name": "popularity", "kind": "popularity"}],
                )
            ),
            5,
            [],
        )
        == []
    )


def test_reconsumed_test_items_fail_the_heldout_check_and_the_job_exits_1(
    spark, tmp_path, capsys, restore_sql_conf
):
    raw = job_config(
        tmp_path, crafted_log(reconsumed=True), [{"name": "popularity", "kind": "popularity"}]
    )
    config_path = tmp_path / "job.yaml"
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")

    status = main(["evaluate", "--config", str(config_path)])

    assert status == 1
    assert "heldout_not_in_train" in capsys.readouterr().err
    runs = spark.read.parquet(str(tmp_path / "reports" / "runs")).collect()
    assert [r.status for r in runs] == ["failed_checks"]
    checks = {c.name: c for c in runs[0].checks}
    assert not checks["heldout_not_in_train"].passed
    assert checks["heldout_not_in_train"].detail.startswith("1 relevant test (user, item) pairs")


def test_a_model_without_rows_for_cold_users_scores_zero_there(spark, tmp_path):
    recs = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 5)] + [(u, 200, 0.5) for u in range(1, 5)],
        columns=["user_id", "item_id", "score"],
    )
    recs.to_parquet(tmp_path / "recs.parquet", index=False)
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "warm_only", "kind": "external", "path": str(tmp_path / "recs.parquet")},
    ]

    evaluation = evaluate(
        spark, validate_config(job_config(tmp_path, crafted_log(reconsumed=False), models))
    )

    cold = {
        (r.model, r.metric): (r.value, r.n_users) for r in evaluation.metrics if r.segment == "cold"
    }
    assert cold[("warm_only", "ndcg")] == (0.0, 2)
    assert cold[("warm_only", "recall")] == (0.0, 2)
    warm = {(r.model, r.metric): r.value for r in evaluation.metrics if r.segment == "warm"}
    assert warm[("warm_only", "recall")] == 1.0  # every warm user's test item is its top pick
    assert all(c.passed for c in evaluation.checks), evaluation.checks


def test_peer_definitions_report_their_four_metrics_and_recommenders_drops_users(spark, tmp_path):
    """Cold users 5 and 6 get no ALS list (``fallback: none``): under spark_mllib they count
    (0) as every user does; under recommenders they are dropped from ALS's averages (their
    inner join), so the same-users check is replaced by a warning."""
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "als", "kind": "als", "rank": 2, "max_iter": 5, "fallback": "none"},
    ]
    counts = {}
    for definitions in ("spark_mllib", "recommenders"):
        (tmp_path / definitions).mkdir()
        raw = job_config(tmp_path / definitions, crafted_log(reconsumed=False), models)
        raw["evaluation"] |= {"definitions": definitions, "metrics": ["ndcg", "map", "mrr"]}
        evaluation = evaluate(spark, validate_config(raw))
        rows = [r for r in evaluation.metrics if r.segment == "all"]
        assert {r.metric for r in rows} == {"ndcg", "map"}  # mrr: not defined by the peers
        counts[definitions] = {r.model: r.n_users for r in rows}
        names = {c.name for c in evaluation.checks}
        assert ("same_users_all_models" in names) == (definitions == "spark_mllib")
        assert any(f"evaluation.definitions = {definitions}" in w for w in evaluation.warnings)
    assert counts["spark_mllib"] == {"popularity": 6, "als": 6}
    assert counts["recommenders"] == {"popularity": 6, "als": 4}
