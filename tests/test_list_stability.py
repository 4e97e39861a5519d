"""Night-over-night list stability through the job (DESIGN §6, docs/nightly.md#list-stability):
the ``lists`` dataset, and the stability rows of ``metrics`` against the previous date with
lists, on ``file://``."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import DAY, T0, ReportRoot, at
from storage import storages

import receval_spark as rv
from receval_spark.alerts import regressions
from receval_spark.api import load_job_config
from receval_spark.config import AlertRule, JobConfig, SessionJobConfig
from receval_spark.errors import ConfigError
from receval_spark.results import MetricRow
from receval_spark.run import run_summary

FIRST, SECOND = "2026-11-01", "2026-11-02"
STABILITY = ("stability_jaccard", "stability_rbo", "exposure_churn")

# on file:// only, for the suite's time: the commit this test goes through runs on viewfs:// and
# s3a:// in tests/test_io.py (docs/datasets.md, "On object storage"), a history read back
# through Hadoop's filesystem API in tests/test_sequential.py (viewfs://) and the nights of the
# job in tests/test_alerts.py (s3a://)
STORAGES = storages("file")


def log() -> pd.DataFrame:
    """Users 1-4: train interactions on days 0-2, user 1 one more on day 4.5 (between the two
    nights' cut-offs, days 4 and 6: users 2-4 are idle), a relevant test item 100 + u on day 7."""
    start = int(T0.timestamp())
    rows = [(u, 10 * u + j, start + j * DAY, 3.0) for u in range(1, 5) for j in range(3)]
    rows += [(1, 15, start + int(4.5 * DAY), 3.0)]
    rows += [(u, 100 + u, start + 7 * DAY, 5.0) for u in range(1, 5)]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


def recommendations(lists: dict[int, list[int]]) -> pd.DataFrame:
    rows = [(u, i, float(10 - r)) for u, items in lists.items() for r, i in enumerate(items)]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "score"])


NIGHT_ONE = {u: [100 + u, 200, 201] for u in range(1, 5)}
# user 2: first two places swapped (RBO 0.9), user 3: third item replaced (Jaccard 0.5,
# RBO 0.73), users 1 and 4 unchanged
NIGHT_TWO = {1: [101, 200, 201], 2: [200, 102, 201], 3: [103, 200, 202], 4: [104, 200, 201]}


def config(output: str, date: str, cutoff_day: float, *, lists: bool = True) -> dict:
    return {
        "run": {"name": "stability", "date": date},
        "output": {"path": output, "lists": lists},
        "split": {"method": "global_temporal", "cutoff": at(cutoff_day).isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [3],
            "min_users": 0,
            "segments": ["warm"],
            "metrics": ["ndcg"],
            "bootstrap_samples": 0,
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "ext", "kind": "external"},
        ],
    }


def night(spark, output: str, date: str, cutoff_day: float, recommended: dict, **options):
    frames = {
        "interactions": spark.createDataFrame(log()),
        "recommendations": {"ext": spark.createDataFrame(recommendations(recommended))},
    }
    return rv.evaluate(spark, config(output, date, cutoff_day, **options), **frames)


def stability_rows(spark, output: str, date: str) -> dict:
    metrics = rv.read_reports(spark, output, dataset="metrics", dates=date).toPandas()
    rows = metrics[metrics.metric.isin(STABILITY) & (metrics.model == "ext")]
    return {(r.segment, r.metric): (r.value, r.n_users) for r in rows.itertuples()}


@pytest.mark.nightly  # several committed nights: make test-all and CI
@pytest.mark.parametrize("report_root", STORAGES, indirect=True)
def test_two_nights_write_lists_and_tomorrow_reports_their_stability(
    spark, report_root: ReportRoot
):
    output = report_root.uri
    first = rv.write_reports(night(spark, output, FIRST, 4, NIGHT_ONE))
    assert "lists" in first.datasets and first.judgement.stability == []
    lists = rv.read_reports(spark, output, dataset="lists").toPandas()
    ext = lists[lists.model == "ext"].sort_values(["user_id", "rank"])
    assert dict(ext.dtypes[["user_id", "item_id"]]) == {"user_id": object, "item_id": object}
    assert ext.groupby("user_id").item_id.apply(list).to_dict() == {
        str(u): [str(i) for i in items] for u, items in NIGHT_ONE.items()
    }
    assert stability_rows(spark, output, FIRST) == {}

    second = night(spark, output, SECOND, 6, NIGHT_TWO)
    summary = run_summary(second, rv.write_reports(second))
    assert {
        (r["model"], r["segment"], r["metric"]): r["n_users"]
        for r in summary["stability"]
        if r["model"] == "ext"
    } == {
        ("ext", "all", "stability_jaccard"): 4,
        ("ext", "all", "stability_rbo"): 4,
        ("ext", "all", "exposure_churn"): 4,
        ("ext", "idle", "stability_jaccard"): 3,
        ("ext", "idle", "stability_rbo"): 3,
    }
    values = stability_rows(spark, output, SECOND)
    expected = {
        ("all", "stability_jaccard"): ((1 + 1 + 0.5 + 1) / 4, 4),
        ("all", "stability_rbo"): ((1 + 0.9 + 0.73 + 1) / 4, 4),
        ("warm", "stability_jaccard"): ((1 + 1 + 0.5 + 1) / 4, 4),
        ("warm", "stability_rbo"): ((1 + 0.9 + 0.73 + 1) / 4, 4),
        ("idle", "stability_jaccard"): ((1 + 0.5 + 1) / 3, 3),  # users 2-4
        ("idle", "stability_rbo"): ((0.9 + 0.73 + 1) / 3, 3),
        # slots: 201 from 4/12 to 3/12, 202 from 0 to 1/12
        ("all", "exposure_churn"): (1 / 12, 4),
    }
    assert values.keys() == expected.keys()
    for key, (value, n_users) in expected.items():
        assert values[key] == (pytest.approx(value, abs=1e-12), n_users), key

    # re-running the date: the same rows, and still against the first night
    def committed_rows():
        rows = rv.read_reports(spark, output, dataset="metrics", dates=SECOND).drop("run_id")
        return sorted(map(tuple, rows.collect()), key=repr)

    before = committed_rows()
    rv.write_reports(night(spark, output, SECOND, 6, NIGHT_TWO))
    assert committed_rows() == before


def test_without_lists_nothing_is_written_and_the_numbers_do_not_change(spark, tmp_path):
    output = (tmp_path / "reports").as_uri()
    with_lists = night(spark, output, FIRST, 4, NIGHT_ONE)
    without = night(spark, output, FIRST, 4, NIGHT_ONE, lists=False)
    assert without.lists is None and without.outcome.lists is None
    assert with_lists.lists is not None
    key = ["model", "segment", "metric", "k"]
    assert (
        with_lists.metrics.drop("run_id").sort(key).collect()
        == without.metrics.drop("run_id").sort(key).collect()
    )
    assert "lists" not in rv.write_reports(without).datasets


def test_the_session_job_refuses_lists(tmp_path):
    clicks = tmp_path / "clicks.parquet"
    clicks.touch()
    raw = {
        "output": {"lists": True},
        "data": {"clicks": {"path": str(clicks)}},
        "models": [{"name": "pop", "kind": "pop"}],
    }
    with pytest.raises(ConfigError, match=r"output\.lists: the session protocol keeps no"):
        load_job_config(raw, SessionJobConfig)


def job(tmp_path, **sections) -> dict:
    log_file = tmp_path / "log.parquet"
    log_file.touch()
    return {
        "data": {"interactions": {"path": str(log_file)}},
        "split": {"method": "global_temporal", "cutoff": "2026-11-01"},
        "models": [{"name": "popularity", "kind": "popularity"}],
        **sections,
    }


RBO_RULE = {"metric": "stability_rbo", "k": 10, "segment": "idle", "max_relative_drop": 0.05}


def test_alert_rules_watch_stability_only_with_lists_and_without_a_significance_test(tmp_path):
    watched = load_job_config(
        job(tmp_path, output={"lists": True}, evaluation={"alerts": [RBO_RULE]}), JobConfig
    )
    assert watched.evaluation.alerts[0].metric == "stability_rbo"
    assert watched.evaluation.rbo_persistence == 0.9
    with pytest.raises(ConfigError, match=r"metric 'stability_rbo' is not computed"):
        load_job_config(job(tmp_path, evaluation={"alerts": [RBO_RULE]}), JobConfig)
    churn_on_idle = {**RBO_RULE, "metric": "exposure_churn"}
    with pytest.raises(ConfigError, match=r"segment 'idle' is not computed for exposure_churn"):
        load_job_config(
            job(tmp_path, output={"lists": True}, evaluation={"alerts": [churn_on_idle]}),
            JobConfig,
        )
    tested = {**RBO_RULE, "significance": 0.05}
    with pytest.raises(ConfigError, match=r"stability_rbo has no per-user rows"):
        load_job_config(
            job(
                tmp_path, output={"lists": True, "per_user": True}, evaluation={"alerts": [tested]}
            ),
            JobConfig,
        )


@pytest.mark.parametrize("persistence", [0, 1, 1.5])
def test_rbo_persistence_lies_strictly_between_0_and_1(tmp_path, persistence):
    with pytest.raises(ConfigError, match=r"evaluation\.rbo_persistence"):
        load_job_config(job(tmp_path, evaluation={"rbo_persistence": persistence}), JobConfig)


def test_the_report_draws_the_stability_history_once_two_dates_have_it():
    from receval_spark.report.plots import _history_figures

    rows = [
        ("ext", "all", metric, 3, value, date)
        for date, value in (("2026-11-02", 0.9), ("2026-11-03", 0.8))
        for metric in ("stability_jaccard", "stability_rbo", "exposure_churn", "ndcg")
    ]
    history = pd.DataFrame(rows, columns=["model", "segment", "metric", "k", "value", "run_date"])
    titles = [f["title"] for f in _history_figures(history, 3)]
    assert titles == ["History", "Stability history"]
    assert [f["title"] for f in _history_figures(history[history.run_date < "2026-11-03"], 3)] == []


def test_a_less_stable_night_fires_the_rule_and_a_rising_churn_counts_as_worse():
    history = pd.DataFrame(
        [
            ("ext", segment, "full", metric, 10, value, date)
            for date in ("2026-11-01", "2026-11-02")
            for segment, metric, value in (
                ("idle", "stability_rbo", 0.98),
                ("all", "exposure_churn", 0.10),
            )
        ],
        columns=["model", "segment", "protocol", "metric", "k", "value", "run_date"],
    )
    tonight = [
        MetricRow(model="ext", segment="idle", metric="stability_rbo", k=10, value=0.8, n_users=50),
        MetricRow(model="ext", segment="all", metric="exposure_churn", k=10, value=0.3, n_users=60),
    ]
    rbo = AlertRule(metric="stability_rbo", k=10, segment="idle", max_relative_drop=0.05)
    churn = AlertRule(metric="exposure_churn", k=10, max_relative_drop=0.5)
    (rbo_alert,) = regressions(tonight, history, [rbo])
    assert rbo_alert.startswith("regression: stability_rbo@10 of ext on idle is 0.8000")
    (churn_alert,) = regressions(tonight, history, [churn])
    assert "exposure_churn@10 of ext on all is 0.3000" in churn_alert
    calm = [
        MetricRow(model="ext", segment="all", metric="exposure_churn", k=10, value=0.05, n_users=60)
    ]
    assert regressions(calm, history, [churn]) == []
