"""The benchmark's own tools: the generator's comparison data, the numpy floor and the job
profile's attribution of the event log.

The side-by-side benchmark compares times only after the tools agree on the values, so its
numpy floor must compute DESIGN §5's numbers; here it is checked against this project's
Spark implementation on a small generated scale, and the generator's promises are checked.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import REPO

BENCHMARKS = REPO / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
generate = importlib.import_module("generate")
side_by_side = importlib.import_module("side_by_side")
job_profile = importlib.import_module("job_profile")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scale")
    kwargs = {**generate.SCALE_DEFAULTS, "users": 400, "items": 500}
    generate.generate(**kwargs, out=out)
    return out


def test_the_generator_is_deterministic(data: Path, tmp_path: Path) -> None:
    generate.generate(**{**generate.SCALE_DEFAULTS, "users": 400, "items": 500}, out=tmp_path)
    for name in ("interactions.parquet", "items.parquet", "candidates.parquet", "meta.json"):
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), name


def test_candidates_are_unseen_items_of_test_users(data: Path) -> None:
    meta = json.loads((data / "meta.json").read_text())
    log = pq.read_table(data / "interactions.parquet").to_pandas()
    candidates = pq.read_table(data / "candidates.parquet").to_pandas()
    train = log[log["timestamp"] < meta["cutoff"]]
    test = log[log["timestamp"] >= meta["cutoff"]]
    assert set(candidates["user_id"]) <= set(test["user_id"])
    assert meta["test_users"] == test["user_id"].nunique() > 0
    seen = set(zip(train["user_id"], train["item_id"], strict=True))
    pairs = list(zip(candidates["user_id"], candidates["item_id"], strict=True))
    assert not seen.intersection(pairs)
    assert len(set(pairs)) == len(pairs)  # one row per (user, item)
    held_out = set(zip(test["user_id"], test["item_id"], strict=True)) - seen
    assert held_out.intersection(pairs)  # the model has some signal


def test_numpy_floor_equals_the_spark_metrics(spark, data: Path) -> None:
    floor = side_by_side.numpy_four(side_by_side.numpy_inputs(data))
    inputs = side_by_side.spark_inputs(spark, data)
    try:
        values = side_by_side.receval_four(inputs)
        unfiltered = side_by_side.receval_four(inputs, filter_seen=False)
        ml = side_by_side.spark_ml_four(inputs)
        lean = side_by_side.spark_ml_lean_four(inputs)
    finally:
        for df in inputs.values():
            df.unpersist()
    assert 0 < floor["ndcg"] < 1
    for metric in side_by_side.FOUR:
        assert np.isclose(values[metric], floor[metric], rtol=0, atol=1e-12), metric
        assert np.isclose(ml[metric], floor[metric], rtol=0, atol=1e-12), metric
        assert np.isclose(lean[metric], floor[metric], rtol=0, atol=1e-12), metric
        assert unfiltered[metric] == values[metric], metric  # no candidate is a train item


def test_the_job_profile_attributes_jobs_busy_idle_and_task_time_to_stages() -> None:
    """Stage a: [0, 10) with jobs 1-4 and 3-6 (busy 5, idle 5); stage b: [10, 20) with a job
    submitted at 12 that runs past the stage's end (busy 8 within it)."""

    def job(job_id, start, end, stages):
        return [
            {
                "Event": "SparkListenerJobStart",
                "Job ID": job_id,
                "Submission Time": start * 1000,
                "Stage IDs": stages,
            },
            {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": end * 1000},
        ]

    def task(stage, millis):
        return {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": stage,
            "Task Metrics": {"Executor Run Time": millis},
        }

    events = [*job(0, 1, 4, [0]), *job(1, 3, 6, [1, 2]), task(0, 500), task(2, 1500)]
    events += [*job(2, 12, 25, [3]), task(3, 4000), task(3, 4000)]
    jobs = job_profile.job_intervals(events)
    assert jobs == [(1, 4, 0.5), (3, 6, 1.5), (12, 25, 8.0)]

    rows, total = job_profile.profile([("a", 0, 10), ("b", 10, 20)], jobs)

    assert rows == [("a", 10, 2, 5, 5, 2.0), ("b", 10, 1, 8, 2, 8.0)]
    assert total == ("total", 20, 3, 13, 7, 10.0)


def test_the_session_profile_counts_each_job_for_its_tagged_stage(tmp_path: Path) -> None:
    """Jobs carry their stage's tag as Spark reports it (after the session's and the thread's
    prefixes); untagged jobs are counted apart; rolled event logs are read from subfolders."""
    sessions_scale = importlib.import_module("sessions_scale")
    prefix = "spark-session-1-thread-2-receval-"
    events = [
        {"Event": "SparkListenerJobStart", "Properties": {"spark.job.tags": f"{prefix}split"}},
        {"Event": "SparkListenerJobStart", "Properties": {"spark.job.tags": f"x,{prefix}split"}},
        {"Event": "SparkListenerJobStart", "Properties": {"spark.job.tags": f"{prefix}top_k"}},
        {"Event": "SparkListenerJobStart", "Properties": {}},
        {"Event": "SparkListenerJobEnd", "Job ID": 0},
    ]
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "events_1").write_text("\n".join(map(json.dumps, events)))
    assert sessions_scale.jobs_per_stage(tmp_path) == {"split": 2, "top_k": 1, "(none)": 1}


@pytest.mark.shared_data
def test_the_yoochoose_shaped_log_follows_the_sample(shared_data: Path, monkeypatch) -> None:
    """Deterministic; sessions of 2 or more clicks with the sample's mean length; the clicks of
    a session in time order; the fitted Zipf exponent and repeat share are the sample's."""
    sessions_scale = importlib.import_module("sessions_scale")
    monkeypatch.setattr(sessions_scale, "YOOCHOOSE", shared_data / "yoochoose-clicks-100k")
    shape = sessions_scale.sample_shape()
    facts = shape.facts()
    log = sessions_scale.generate_yoochoose(200_000, shape)
    assert log.equals(sessions_scale.generate_yoochoose(200_000, shape))
    lengths = log.groupby("session_id").size()
    assert lengths.min() >= 2 and abs(lengths.mean() - 3.95) < 0.1
    assert 200_000 <= len(log) <= 200_000 + lengths.max()
    assert (log.groupby("session_id").time.diff().dropna() >= 0).all()
    assert 0.9 < facts["exponent"] < 1.2 and 0.2 < facts["repeat"] < 0.3
    following = log.session_id.eq(log.session_id.shift())
    share = log.item_id.eq(log.item_id.shift())[following].mean()
    assert abs(share - facts["repeat"]) < 0.02  # draws of the sample's share (and Zipf's own)
