"""Two writers of one output root, each a real process (one writer at a time, commit.Lease).

A process that holds the lease (in the middle of its write) makes a ``receval evaluate`` of
the same output fail with exit 2 and one line naming it before it computes anything, writing
nothing; once the holder ends, the same command commits. Two jobs started together on the
same date never mix: readers see every dataset of the date from one run, and a job that lost
says so.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from helpers import (
    REPO,
    ReportRoot,
    crafted_job_config,
    crafted_log,
    job_env,
    kept_sql_conf,
    read,
    start_evaluate,
)
from storage import storages

from receval_spark.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.fault]

DATE = "2024-02-01"
DATASETS = ("metrics", "long_tail", "runs")
HOLDER = """
import json, sys
from pyspark.sql import SparkSession
from receval_spark import commit
builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for key, value in json.loads(sys.argv[2]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
with commit.Lease(spark, sys.argv[1], run_id="holder", run_date="2024-02-01",
              datasets=("metrics",), lease_seconds=600):
    print("holding", flush=True)
    sys.stdin.readline()  # until the test says so
"""


def job_config(tmp_path, root: ReportRoot):
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    raw["spark"]["conf"] = {
        "spark.sql.shuffle.partitions": 2,
        "spark.ui.enabled": False,
        **root.conf,
    }
    raw["output"]["path"] = root.uri
    raw["run"]["date"] = DATE
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


def evaluate(config) -> subprocess.Popen[str]:
    return start_evaluate(config, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("report_root", storages("viewfs"), indirect=True)  # s3a: 85 s, passes
def test_a_job_fails_naming_the_writer_that_holds_the_output(
    spark, tmp_path, report_root: ReportRoot
) -> None:
    config = job_config(tmp_path, report_root)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, report_root.uri, json.dumps(dict(report_root.conf))],
        cwd=REPO,
        env=job_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        blocked = evaluate(config)
        out, err = blocked.communicate(timeout=900)
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert blocked.returncode == 2, f"{out}\n{err}"
        assert len(lines) == 1 and "run holder" in lines[0] and "one writer at a time" in lines[0]
        assert not report_root.files("*/run_date=*/run=*/*.parquet")
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=120)
    with kept_sql_conf(spark):
        assert main(["evaluate", "--config", str(config)]) == 0  # the holder has ended
    assert len({read(spark, report_root.uri, d, DATE).first().run_id for d in DATASETS}) == 1


@pytest.mark.parametrize("report_root", storages("file", "s3a"), indirect=True)
def test_two_jobs_at_once_never_mix_a_date(spark, tmp_path, report_root: ReportRoot) -> None:
    config = job_config(tmp_path, report_root)
    jobs = [evaluate(config), evaluate(config)]
    results = [(job, *job.communicate(timeout=900)) for job in jobs]
    codes = sorted(job.returncode for job, _, _ in results)
    print(f"exit codes of the two jobs: {codes}")  # 0, 0: one after the other; 0, 2: one refused
    assert codes in ([0, 0], [0, 2]), [f"{o}\n{e}" for _, o, e in results]
    for job, _, err in results:
        if job.returncode == 2:
            assert "one writer at a time" in err, err
    runs = {
        d: {r.run_id for r in read(spark, report_root.uri, d, DATE).collect()} for d in DATASETS
    }
    assert len(set().union(*runs.values())) == 1, runs
