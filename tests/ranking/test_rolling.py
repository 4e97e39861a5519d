"""Rolling backtests (docs/evaluation.md#rolling-backtests): consecutive global cuts on a
crafted log, each window's cut and counts written out, every model refit per window, the
windows' rows keyed by ``window`` and the pooled rows beside them, through the API, the
committed datasets (file:// and viewfs://), the summary JSON and the report."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from helpers import DAY, T0, ReportRoot, at
from pyspark.sql import functions as F
from storage import storages

import receval_spark as rv
from receval_spark.config import RollingSplit
from receval_spark.errors import ConfigError, InputError
from receval_spark.expressions import iso
from receval_spark.ranking.split import rolling_splits
from receval_spark.report.render import load_report, render
from receval_spark.run import run_summary

# on file:// only, for the suite's time: the commit this test goes through is the one every
# job makes (the windows are a column of its rows), which tests/test_io.py runs on viewfs:// and
# s3a://, and the nights of a job test_alerts.py and test_list_stability.py
STORAGES = storages("file")


def log() -> pd.DataFrame:
    """Users 1-4. Days 0-2: each user u its items 10u, 10u+1, users 1-3 item 1 (the popular
    one). Window 1 tests [day 4, day 6): users 1, 2 on item 2. Window 2 tests [day 6, day 8):
    user 1 on item 3, user 2 on item 1 (which they had: seen, so not relevant, and user 2 is
    not evaluated there), user 3 on item 2, user 4 on item 5."""
    start = int(T0.timestamp())
    rows = [(u, 10 * u + j, start + j * DAY) for u in range(1, 5) for j in range(2)]
    rows += [(u, 1, start + 2 * DAY) for u in (1, 2, 3)]
    rows += [(1, 2, start + 4 * DAY), (2, 2, start + 5 * DAY)]
    rows += [(1, 3, start + 6 * DAY), (2, 1, start + 7 * DAY), (3, 2, start + 6 * DAY)]
    rows += [(4, 5, start + 7 * DAY)]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])


SPLIT = {"method": "rolling", "windows": 2, "test_length": "2d", "end": at(8).isoformat()}


def config(output: str | None = None) -> dict:
    job = {
        "run": {"name": "rolling", "date": "2026-11-02"},
        "split": SPLIT,
        "relevance": {"kind": "implicit"},
        "evaluation": {
            "k": [2],
            "min_users": 0,
            "metrics": ["ndcg", "recall", "coverage"],
            "bootstrap_samples": 0,
            "baseline": "popularity",
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "ext", "kind": "external"},
        ],
    }
    if output is not None:
        job["output"] = {"path": output, "per_user": True}
    return job


def ext(spark):
    """The same lists every window: 1 -> [2, 3], 2 -> [3, 1], 3 -> [2, 3], 4 -> [3, 2]."""
    lists = {1: [2, 3], 2: [3, 1], 3: [2, 3], 4: [3, 2]}
    rows = [(u, i, 2.0 - r) for u, items in lists.items() for r, i in enumerate(items)]
    return spark.createDataFrame(rows, "user_id long, item_id long, score double")


def test_the_windows_cut_the_log_as_written_out(spark) -> None:
    frame = spark.createDataFrame(log()).withColumn(
        "timestamp", F.col("timestamp").cast("timestamp")
    )
    splits = rolling_splits(RollingSplit.model_validate(SPLIT), frame)
    assert [s.params["cutoff"] for s in splits] == [iso(at(4)), iso(at(6))]
    assert [s.params["test_end"] for s in splits] == [iso(at(6)), iso(at(8))]
    assert [(s.train.count(), s.test.count()) for s in splits] == [(11, 2), (13, 4)]
    assert [s.params["window"] for s in splits] == [1, 2]
    # with validation_length 2d, window 1's tuning data is [day 2, day 4): its train ends there
    tuned = RollingSplit.model_validate({**SPLIT, "validation_length": "2d"})
    first = rolling_splits(tuned, frame)[0]
    assert first.params["validation_cutoff"] == iso(at(2))
    assert first.validation is not None
    assert (first.train.count(), first.validation.count(), first.test.count()) == (8, 3, 2)


def test_a_step_shorter_than_the_test_length_overlaps_and_a_window_before_the_data_fails(
    spark,
) -> None:
    frame = spark.createDataFrame(log()).withColumn(
        "timestamp", F.col("timestamp").cast("timestamp")
    )
    overlapping = RollingSplit.model_validate({**SPLIT, "windows": 3, "step": "1d"})
    starts = [s.params["cutoff"] for s in rolling_splits(overlapping, frame)]
    assert starts == [iso(at(4)), iso(at(5)), iso(at(6))]
    too_many = RollingSplit.model_validate({**SPLIT, "windows": 5})
    with pytest.raises(InputError, match=r"5 rolling windows starts at 2023-12-30.* is empty"):
        rolling_splits(too_many, frame)


def test_durations_and_what_a_rolling_backtest_refuses() -> None:
    assert RollingSplit.model_validate({**SPLIT, "test_length": "12h"}).test_length == (
        dt.timedelta(hours=12)
    )
    with pytest.raises(ValueError, match="positive"):
        RollingSplit.model_validate({**SPLIT, "test_length": "0d"})
    refused = {**config(), "output": {"path": "/tmp/x", "lists": True}}
    with pytest.raises(ConfigError, match=r"rolling does not support output\.lists"):
        rv.evaluate(None, refused)  # type: ignore[arg-type]


@pytest.mark.parametrize("report_root", STORAGES, indirect=True)
def test_each_window_refits_and_the_pooled_rows_average_them(spark, report_root: ReportRoot):
    """ext at k = 2, window 1: user 1 (Rel {2}) hits at rank 1, user 2 (Rel {2}) misses:
    recall 1/2 over 2 users; window 2: user 1 (Rel {3}) hits at 2, user 3 (Rel {2}) at 1,
    user 4 (Rel {5}) misses: 2/3 over 3 users. Pooled: their mean 7/12, their standard
    deviation (1/6)/sqrt(2), 5 users; one paired comparison over the 5 (window, user) units."""
    output = report_root.uri
    result = rv.evaluate(
        spark,
        config(output),
        interactions=spark.createDataFrame(log()),
        recommendations={"ext": ext(spark)},
    )
    rows = {(r.model, r.metric, r.window): r for r in result.outcome.metrics if r.segment == "all"}
    assert (rows[("ext", "recall", 1)].value, rows[("ext", "recall", 1)].n_users) == (1 / 2, 2)
    assert rows[("ext", "recall", 2)].value == pytest.approx(2 / 3, abs=1e-15)
    assert rows[("ext", "recall", 2)].n_users == 3
    pooled = rows[("ext", "recall", None)]
    assert pooled.value == pytest.approx(7 / 12, abs=1e-15)
    assert pooled.n_users == 5
    assert pooled.std == pytest.approx((1 / 6) / 2**0.5, abs=1e-15)
    assert pooled.ci_low is not None and pooled.ci_high is not None
    assert pooled.ci_low <= pooled.value <= pooled.ci_high
    # popularity is refit per window: its window 2 list holds item 2, learnt from window 1
    assert rows[("popularity", "recall", 2)].value != rows[("popularity", "recall", 1)].value
    split = result.outcome.split
    assert split["method"] == "rolling"
    assert [w["cutoff"] for w in split["windows"]] == [iso(at(4)), iso(at(6))]
    assert all(c.passed for c in result.checks if c.name == "no_temporal_leakage")
    pooled_comparisons = [
        c for c in result.judgement.comparisons if c.window is None and c.metric == "recall"
    ]
    assert ("all", 5) in {(c.segment, c.n_users) for c in pooled_comparisons}
    assert {c.window for c in result.judgement.comparisons} == {1, 2, None}

    commit = rv.write_reports(result)
    metrics = rv.read_reports(spark, output, dataset="metrics").toPandas()
    assert sorted(metrics.window.dropna().unique()) == [1, 2]
    per_user = rv.read_reports(spark, output, dataset="per_user").toPandas()
    assert set(per_user.window) == {1, 2}
    summary = run_summary(result, commit)
    assert {r["window"] for r in summary["windows"]} == {1, 2}
    assert all(r.get("window") is None for r in summary["metrics"])
    _, markdown = render(load_report(spark, output))
    assert "## Rolling backtest: NDCG@2" in markdown
    assert "2024-01-05 to 2024-01-07" in markdown

    # re-running the date commits the same rows
    def committed(dataset: str) -> list[tuple]:
        frame = rv.read_reports(spark, output, dataset=dataset).drop("run_id")
        return sorted(map(tuple, frame.collect()), key=repr)

    before = {name: committed(name) for name in ("metrics", "comparisons", "per_user")}
    rv.write_reports(
        rv.evaluate(
            spark,
            config(output),
            interactions=spark.createDataFrame(log()),
            recommendations={"ext": ext(spark)},
        )
    )
    assert {name: committed(name) for name in before} == before
