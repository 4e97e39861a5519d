"""Fault: the driver killed (SIGKILL, job process group) while it writes the reports.

Three committed run dates exist; a re-run of the middle date is killed as soon as its staging
folder appears, i.e. while Spark writes the staged datasets. Readers must still see exactly the
three earlier commits (every dataset of every date byte-identical, each partition readable and
from one run), and a re-run of the date then completes and replaces that date alone. The cases
the kill cannot hit reliably (right after the commit marker, half-way through the renames) are
reproduced step by step in tests/test_io.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from helpers import REPO, crafted_job_config, crafted_log, job_env, kept_sql_conf

from receval_spark.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.fault]

DATES = ("2024-02-01", "2024-02-02", "2024-02-03")
KILLED = DATES[1]
DATASETS = ("metrics", "long_tail", "runs")  # comparisons: none (one model, the baseline)


def committed(output: Path) -> dict[str, bytes]:
    """Every file readers see (datasets and rendered pages; not _staging or _trash)."""
    return {
        str(p.relative_to(output)): p.read_bytes()
        for p in sorted(output.rglob("*"))
        if p.is_file() and not str(p.relative_to(output)).startswith("_")
    }


def single_run(output: Path, dataset: str, date: str) -> str:
    """The one run id of a partition (read with pyarrow: a reader outside Spark)."""
    ids = set(pq.read_table(output / dataset / f"run_date={date}").column("run_id").to_pylist())
    assert len(ids) == 1, (dataset, date, ids)
    return ids.pop()


def kill_during_staging(config: Path, output: Path, *, timeout: float = 600) -> str:
    """Start ``receval evaluate`` and SIGKILL its process group once a staging folder appears;
    return what the staging folder held at that moment."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "receval_spark", "evaluate", "--config", str(config)],
        cwd=REPO,
        env=job_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    staging = output / "_staging"
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(staging.glob("*")) if staging.exists() else []
            if runs:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                return ", ".join(sorted(str(p.relative_to(staging)) for p in runs[0].rglob("*")))
            time.sleep(0.01)
        pytest.fail(f"the job ended (exit {proc.poll()}) before its staging folder was seen")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    raise AssertionError("unreachable")


def test_driver_killed_while_writing_reports_loses_nothing(spark, tmp_path) -> None:
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    raw["spark"]["conf"] = {"spark.sql.shuffle.partitions": 2, "spark.ui.enabled": False}
    config = tmp_path / "job.yaml"
    output = tmp_path / "reports"

    def write_config(date: str) -> None:
        raw["run"]["date"] = date
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")

    for date in DATES:
        write_config(date)
        with kept_sql_conf(spark):
            assert main(["evaluate", "--config", str(config)]) == 0
    before = committed(output)
    runs_before = {d: single_run(output, "runs", d) for d in DATES}

    write_config(KILLED)
    staged = kill_during_staging(config, output)
    print(f"killed while staging held: {staged or '(empty folder)'}")

    assert committed(output) == before, f"visible reports changed (staging held: {staged})"
    for date in DATES:
        for dataset in DATASETS:
            assert single_run(output, dataset, date) == runs_before[date]

    with kept_sql_conf(spark):
        assert main(["evaluate", "--config", str(config)]) == 0  # the re-run completes
    after = committed(output)
    rerun = single_run(output, "runs", KILLED)
    assert rerun != runs_before[KILLED]
    for dataset in DATASETS:
        assert single_run(output, dataset, KILLED) == rerun
    others = {k: v for k, v in before.items() if KILLED not in k}
    assert {k: after[k] for k in others} == others, "another date changed"
