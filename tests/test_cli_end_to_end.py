"""The job as users run it: ``receval``, ``python -m receval_spark`` and ``spark-submit``, each
in its own process (and JVM), against the report contract of CONTRACT.md.

Subprocess runs are slow, so the demo runs happen once per test run (``demo_runs``: python -m,
receval, then spark-submit re-running receval's date) and the tests inspect what they left
behind; the shipped demo with its candidate models is tests/test_shipped_demo.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pyspark
import pytest
from helpers import (
    ACCURACY_METRICS,
    DATE_A,
    DATE_M,
    DEPLOYMENT_SETTINGS,
    REPO,
    VENV_BIN,
    DemoRuns,
    explain,
    kept_sql_conf,
    metric_values,
    read,
    run,
    snapshot,
)

from receval_spark.ranking.pipeline import JOB_STAGES

pytestmark = pytest.mark.integration

ACCURACY = set(ACCURACY_METRICS)

METRICS_TYPES = [
    ("run_id", "string"),
    ("model", "string"),
    ("segment", "string"),
    ("protocol", "string"),
    ("metric", "string"),
    ("k", "int"),
    ("value", "double"),
    ("n_users", "bigint"),
    ("std", "double"),
    ("ci_low", "double"),
    ("ci_high", "double"),
]
RUNS_TYPES = [
    ("run_id", "string"),
    ("run_name", "string"),
    ("started_at", "timestamp"),
    ("finished_at", "timestamp"),
    ("status", "string"),
    ("config", "string"),
    ("split", "string"),
    ("n_users_evaluated", "bigint"),
    ("versions", "string"),
    ("checks", "array<struct<name:string,passed:boolean,detail:string>>"),
    ("warnings", "array<string>"),
]
PER_USER_TYPES = [
    ("run_id", "string"),
    ("model", "string"),
    ("segment", "string"),
    ("user_id", "string"),
    ("metric", "string"),
    ("k", "int"),
    ("value", "double"),
]


def run_ids(spark, output: Path, dataset: str, date: str) -> set[str]:
    df = read(spark, output, dataset, date).select("run_id").distinct()
    return {r.run_id for r in df.collect()}


def assert_same_metrics(left: dict, right: dict) -> None:
    assert left.keys() == right.keys()
    for key in left:
        for a, b in zip(left[key], right[key], strict=True):
            if a is None or b is None:
                assert a is b, (key, left[key], right[key])
            else:
                assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (key, left[key], right[key])


def has_types(df, expected: list[tuple[str, str]]) -> None:
    """Every contract column is present, with the contract's type, in the contract's order."""
    actual = dict(df.dtypes)
    missing = [name for name, _ in expected if name not in actual]
    assert not missing, f"missing columns {missing}; the table has {df.columns}"
    assert [(name, actual[name]) for name, _ in expected] == expected
    order = [df.columns.index(name) for name, _ in expected]
    assert order == sorted(order), df.columns


def test_receval_evaluate_demo_writes_the_contract_reports(spark, demo_runs: DemoRuns) -> None:
    proc = demo_runs.first
    assert proc.returncode == 0, explain(proc)
    out = demo_runs.after_first
    assert f"({DATE_A})" in proc.stdout and "users evaluated" in proc.stdout, proc.stdout
    stages = re.search(r"stages \(s\): (.*)", proc.stdout)
    assert stages is not None, proc.stdout
    names = [part.split()[0] for part in stages.group(1).split(", ")]
    assert names == [*JOB_STAGES, "write"], stages.group(1)
    for dataset in ("metrics", "runs", "per_user"):
        assert (out / dataset / f"run_date={DATE_A}").is_dir(), dataset

    metrics = read(spark, out, "metrics", DATE_A)
    runs = read(spark, out, "runs", DATE_A)
    per_user = read(spark, out, "per_user", DATE_A)
    has_types(metrics, METRICS_TYPES)
    has_types(runs, RUNS_TYPES)
    has_types(per_user, PER_USER_TYPES)

    (record,) = runs.collect()
    assert record.status == "succeeded"
    assert record.run_name == "demo-ml-latest-small"
    assert all(check.passed for check in record.checks), record.checks
    assert record.started_at <= record.finished_at
    for blob in ("config", "split", "versions"):
        json.loads(getattr(record, blob))
    split = json.loads(record.split)
    assert split["method"] == "global_temporal"
    assert split["train"]["rows"] > 0 and split["test"]["rows"] > 0
    assert json.loads(record.versions)["pyspark"] == pyspark.__version__

    rows = metrics.collect()
    assert {r.run_id for r in rows} == {record.run_id}
    assert {r.run_id for r in per_user.select("run_id").distinct().collect()} == {record.run_id}
    assert {r.model for r in rows} == {"popularity", "random", "oracle"}
    assert {r.segment for r in rows} == {"all", "warm", "cold"}
    assert {r.protocol for r in rows} == {"full"}
    accuracy = [r for r in rows if r.metric in ACCURACY]
    assert {(r.model, r.segment, r.metric, r.k) for r in accuracy} == {
        (m, s, metric, k)
        for m in ("popularity", "random", "oracle")
        for s in ("all", "warm", "cold")
        for metric in ACCURACY
        for k in (5, 10, 20)
    }
    for r in accuracy:
        assert 0.0 <= r.value <= 1.0, r
        assert r.n_users > 0, r
        if r.ci_low is not None:
            assert r.ci_low <= r.value <= r.ci_high, r
    n_all = {r.n_users for r in accuracy if r.segment == "all"}
    assert n_all == {record.n_users_evaluated}
    n_warm = {r.n_users for r in accuracy if r.segment == "warm"}
    n_cold = {r.n_users for r in accuracy if r.segment == "cold"}
    assert len(n_warm) == len(n_cold) == 1 and n_warm.pop() + n_cold.pop() == n_all.pop()
    oracle_ndcg = [r for r in accuracy if r.model == "oracle" and r.metric == "ndcg"]
    assert len(oracle_ndcg) == 9
    assert all(r.value == pytest.approx(1.0, abs=1e-9) for r in oracle_ndcg), oracle_ndcg
    ndcg10 = {
        r.model: r.value for r in accuracy if (r.segment, r.metric, r.k) == ("all", "ndcg", 10)
    }
    assert ndcg10["popularity"] > ndcg10["random"]

    # metrics are the macro averages of per_user
    means = {
        (r.model, r.segment, r.metric, r.k): (r["avg(value)"], r["count(1)"])
        for r in per_user.groupBy("model", "segment", "metric", "k")
        .agg({"value": "avg", "*": "count"})
        .collect()
    }
    for r in accuracy:
        mean, count = means[r.model, r.segment, r.metric, r.k]
        assert count == r.n_users, r
        assert mean == pytest.approx(r.value, rel=1e-9, abs=1e-12), r


def test_rerunning_a_date_replaces_exactly_that_date(spark, demo_runs: DemoRuns) -> None:
    assert demo_runs.by_module.returncode == 0, explain(demo_runs.by_module)
    assert demo_runs.first.returncode == 0, explain(demo_runs.first)
    assert demo_runs.again.returncode == 0, explain(demo_runs.again)
    out = demo_runs.output

    assert demo_runs.date_m_before_rerun, "the earlier date should have been written"
    assert snapshot(out, DATE_M) == demo_runs.date_m_before_rerun
    dates = {p.name for p in out.glob("*/run_date=*")}
    assert dates == {f"run_date={DATE_M}", f"run_date={DATE_A}"}

    (first_id,) = run_ids(spark, demo_runs.after_first, "runs", DATE_A)
    (new_id,) = run_ids(spark, out, "runs", DATE_A)
    assert new_id != first_id
    for dataset in ("metrics", "runs", "per_user"):
        assert run_ids(spark, out, dataset, DATE_A) == {new_id}, dataset
    # nothing of the commit machinery is left over
    for folder in ("_staging", "_trash"):
        assert not any(p.is_file() for p in (out / folder).rglob("*")), folder
    # a deterministic job: the re-run reproduces the numbers
    assert_same_metrics(
        metric_values(spark, demo_runs.after_first, DATE_A), metric_values(spark, out, DATE_A)
    )


def test_python_dash_m_works_like_receval(spark, demo_runs: DemoRuns) -> None:
    proc = demo_runs.by_module
    assert proc.returncode == 0, explain(proc)
    assert f"({DATE_M})" in proc.stdout, proc.stdout
    assert demo_runs.first.returncode == 0, explain(demo_runs.first)
    (record,) = read(spark, demo_runs.output, "runs", DATE_M).collect()
    assert record.status == "succeeded"
    assert_same_metrics(
        metric_values(spark, demo_runs.output, DATE_M),
        metric_values(spark, demo_runs.after_first, DATE_A),
    )


def test_help_and_bad_config_exit_codes(tmp_path: Path) -> None:
    """Cheap process-level checks: --help is 0; a config error is 2 before any JVM starts."""
    proc = run([str(VENV_BIN / "receval"), "evaluate", "--help"])
    assert proc.returncode == 0, explain(proc)
    assert "--config" in proc.stdout
    proc = run(
        [
            str(VENV_BIN / "receval"),
            "evaluate",
            "--config",
            "conf/demo.yaml",
            "--set",
            f"output.path={tmp_path / 'out'}",
            "--set",
            "evaluation.k=ten",
        ]
    )
    assert proc.returncode == 2, explain(proc)
    assert "evaluation.k" in proc.stderr
    assert not (tmp_path / "out").exists()


def report_rows(spark, output: Path, dataset: str, date: str) -> list[tuple]:
    """Every row of a committed dataset without its run_id, sorted: what must be bit-identical
    between two runs on the same inputs (``runs``: without the times, config and versions)."""
    df = read(spark, output, dataset, date).drop("run_id")
    if dataset == "runs":
        df = df.drop("started_at", "finished_at", "config", "versions")
    return sorted((tuple(r) for r in df.collect()), key=repr)


def test_cli_api_and_spark_submit_write_bit_identical_reports(
    spark, demo_runs: DemoRuns, tmp_path: Path
) -> None:
    """The demo's DATE_A through ``receval evaluate``, through ``spark-submit --master local[2]
    jobs/evaluate.py`` (the re-run), and through the Python API on DataFrames of the same CSV
    files in this process give the same rows, bit for bit, in every dataset."""
    import receval_spark as rv
    from receval_spark.config_files import read_config_file

    proc = demo_runs.again
    assert proc.returncode == 0, explain(proc)
    assert f"({DATE_A})" in proc.stdout, proc.stdout
    assert demo_runs.first.returncode == 0, explain(demo_runs.first)
    (record,) = read(spark, demo_runs.output, "runs", DATE_A).collect()
    assert record.status == "succeeded", record.checks

    overrides = [value for value in DEPLOYMENT_SETTINGS if value != "--set"]
    config = read_config_file(REPO / "conf" / "demo.yaml", [*overrides, f"run.date={DATE_A}"])
    frames = {
        name: spark.read.csv(config["data"][name].pop("path"), header=True, inferSchema=True)
        for name in ("interactions", "items")
    }
    api = tmp_path / "api"
    # the same history (DATE_M's per-user rows): each model is compared with its previous date
    shutil.copytree(demo_runs.after_first, api)
    with kept_sql_conf(spark), rv.evaluate(spark, config, **frames, keep_cached=True) as result:
        assert rv.write_reports(result, str(api)).status == "succeeded"

    for dataset in ("metrics", "comparisons", "long_tail", "per_user", "runs"):
        receval = report_rows(spark, demo_runs.after_first, dataset, DATE_A)
        assert receval, dataset
        assert report_rows(spark, demo_runs.output, dataset, DATE_A) == receval, dataset
        assert report_rows(spark, api, dataset, DATE_A) == receval, dataset
    models = {row[0] for row in report_rows(spark, api, "metrics", DATE_A)}
    assert models == {"popularity", "random", "oracle"}
    baselines = {row[1] for row in report_rows(spark, api, "comparisons", DATE_A)}
    assert baselines == {"popularity", *(f"{m}@{DATE_M}" for m in models)}


def test_report_renders_the_demo_run_from_parquet_alone(demo_runs: DemoRuns, tmp_path) -> None:
    from receval_spark.cli import main as receval

    out = tmp_path / "report.html"
    assert (
        receval(
            ["report", "--reports", str(demo_runs.after_first), "--date", DATE_A, "--out", str(out)]
        )
        == 0
    )
    html = out.read_text(encoding="utf-8")
    markdown = out.with_suffix(".md").read_text(encoding="utf-8")
    # receval evaluate rendered the same page after its commit (only the history can differ)
    rendered = demo_runs.after_first / "report" / DATE_A / "report.html"
    assert rendered.is_file() and rendered.with_suffix(".md").is_file()
    assert "demo-ml-latest-small" in rendered.read_text(encoding="utf-8")

    metrics = pd.read_parquet(demo_runs.after_first / "metrics" / f"run_date={DATE_A}")
    runs = pd.read_parquet(demo_runs.after_first / "runs" / f"run_date={DATE_A}")
    at10 = metrics[(metrics.segment == "all") & (metrics.k == 10)]
    for model in ("popularity", "random", "oracle"):
        assert f"<td>{model}</td>" in html and f"| {model} |" in markdown
        for metric in ("ndcg", "precision", "recall"):
            value = at10[(at10.model == model) & (at10.metric == metric)].value.iloc[0]
            assert f"{value:.4f}" in html, (model, metric)
    # every metric at every k, for every model, with the Parquet value, in the metrics table
    table = html[html.index('<table id="metrics">') :]
    table = table[: table.index("</table>")]
    overall = metrics[metrics.segment == "all"]
    assert set(overall.metric) >= {"ndcg", "coverage", "gini", "novelty", "personalization"}
    for r in overall.itertuples():
        row = table[table.index(f"<tr><td>{r.metric}@{r.k}</td>") :]
        row = row[: row.index("</tr>")]
        assert f"{r.value:.4f}" in row, (r.model, r.metric, r.k)
    for check in runs.checks.iloc[0]:
        assert check["name"] in html and check["name"] in markdown
    split = json.loads(runs.split.iloc[0])
    assert f"<td>train</td><td>{split['train']['rows']}</td>" in html
    assert f"<td>test</td><td>{split['test']['rows']}</td>" in html
    titles = ("Metrics at each k", "Precision-recall", "Accuracy vs catalogue coverage")
    assert all(title in html for title in (*titles, "Long tail", "NDCG@10 by segment"))
    assert "History" in html  # two run dates under the folder: DATE_M and DATE_A
    assert html.count("data:image/png;base64,") >= 6
    assert "http://" not in html and "https://" not in html  # self-contained
    assert "random trails popularity on NDCG@10" in html and "but covers" in html


def test_long_tail_dataset_adds_up_to_the_catalogue_and_the_lists(demo_runs: DemoRuns) -> None:
    out = demo_runs.after_first
    tail = pd.read_parquet(out / "long_tail" / f"run_date={DATE_A}")
    metrics = pd.read_parquet(out / "metrics" / f"run_date={DATE_A}")
    split = json.loads(pd.read_parquet(out / "runs" / f"run_date={DATE_A}").split.iloc[0])
    n_users = int(metrics[(metrics.metric == "ndcg") & (metrics.segment == "all")].n_users.max())
    coverage = metrics[(metrics.metric == "coverage") & (metrics.segment == "all")]
    # the catalogue is the history models learn from: train + validation, before the test cut
    ratings = pd.read_csv(REPO / "receval_spark" / "data" / "ml-latest-small" / "ratings.csv")
    history = ratings[ratings.timestamp < pd.Timestamp(split["cutoff"]).timestamp()]
    assert len(history) == split["train"]["rows"] + split["validation"]["rows"]
    for (model, k), group in tail.groupby(["model", "k"]):
        catalogue = group[group.popularity_bin >= 0]
        assert catalogue.n_items.sum() == history.movieId.nunique()
        assert catalogue.train_interactions.sum() == len(history)
        assert (catalogue.min_interactions == 2**catalogue.popularity_bin).all()
        expected = coverage[(coverage.model == model) & (coverage.k == k)].value.iloc[0]
        assert catalogue.n_recommended_items.sum() / catalogue.n_items.sum() == pytest.approx(
            expected, abs=1e-12
        )
        if model == "popularity":  # a full list for every evaluated user
            assert group.recommendations.sum() == k * n_users
