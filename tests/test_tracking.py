"""Experiment tracking (tracking.mlflow): one MLflow run per evaluation run, against a real
local MLflow file store, read back with ``mlflow.search_runs``."""

from __future__ import annotations

import json

import mlflow
import pytest
import yaml
from helpers import crafted_job_config, crafted_log, kept_sql_conf
from mlflow import MlflowClient

from receval_spark import read_reports
from receval_spark.cli import main
from receval_spark.tracking import flat, metric_key


def tracked_job(spark, tmp_path, mlflow_settings: dict) -> int:
    """The crafted job with popularity and ``tracking.mlflow``, through the CLI; exit status."""
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    raw["tracking"] = {"mlflow": mlflow_settings}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with kept_sql_conf(spark):
        return main(["evaluate", "--config", str(path), "--quiet"])


def test_a_run_is_logged_with_its_config_metrics_summary_and_report(
    spark, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3: the file store is opt-in
    store = f"file://{tmp_path / 'mlruns'}"

    status = tracked_job(spark, tmp_path, {"tracking_uri": store, "experiment": "nightly-evals"})

    out = capsys.readouterr().out
    assert status == 0, out
    mlflow.set_tracking_uri(store)
    runs = mlflow.search_runs(experiment_names=["nightly-evals"])
    assert len(runs) == 1
    run = runs.iloc[0]
    assert f"mlflow run: {run.run_id}" in out
    assert run["tags.mlflow.runName"] == "checks 2024-02-01"
    assert (run["tags.receval.status"], run.status) == ("succeeded", "FINISHED")
    assert run["params.run.name"] == "checks" and run["params.evaluation.k"] == "[2]"
    assert run["params.models.0.kind"] == "popularity"
    committed = read_reports(spark, str(tmp_path / "reports"), dataset="metrics").toPandas()
    assert run["tags.receval.run_id"] == committed.run_id.iloc[0]
    for row in committed[committed.segment == "all"].itertuples():
        assert run[f"metrics.{metric_key(row.model, row.metric, row.k, row.protocol)}"] == row.value
    client = MlflowClient(tracking_uri=store)
    artifacts = {a.path for a in client.list_artifacts(run.run_id)}
    assert artifacts == {"summary.json", "metrics.csv", "report"}
    pages = {a.path for a in client.list_artifacts(run.run_id, "report")}
    assert pages == {"report/report.html", "report/report.md"}
    summary = json.loads(
        (tmp_path / "mlruns")
        .joinpath(run.experiment_id, run.run_id, "artifacts", "summary.json")
        .read_text()
    )
    assert summary["run_status"] == "succeeded" and summary["run_id"] == run["tags.receval.run_id"]


def test_config_flattens_to_dotted_params_and_metrics_to_keys():
    config = {"run": {"name": "n"}, "evaluation": {"k": [5, 10], "baseline": None}}
    config["models"] = [{"name": "pop", "kind": "popularity"}]

    assert dict(flat(config)) == {
        "run.name": "n",
        "evaluation.k": "[5, 10]",
        "evaluation.baseline": "null",
        "models.0.name": "pop",
        "models.0.kind": "popularity",
    }
    assert metric_key("als", "ndcg", 10, "full") == "als.ndcg_at_10"
    assert metric_key("als", "gini", None, "sampled_100") == "als.gini.sampled_100"


@pytest.mark.parametrize("uri", ["bogus://nowhere"])
def test_a_tracking_failure_is_a_warning_and_leaves_the_exit_status(spark, tmp_path, capsys, uri):
    status = tracked_job(spark, tmp_path, {"tracking_uri": uri})

    err = capsys.readouterr().err
    assert status == 0, err
    assert "warning: tracking.mlflow: " in err
    assert (tmp_path / "reports" / "metrics").exists()  # the reports are committed
