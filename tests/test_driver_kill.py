"""Fault: the driver killed (SIGKILL, job process group) while it writes the reports, on
``file://`` and ``s3a://`` (an object store: no rename of folders; viewfs:// has the
single steps in tests/test_io.py).

Three committed run dates exist; a re-run of the middle date is killed as soon as its ``begin``
event appears in the commit log (while Spark writes its datasets), or as soon as its ``commit``
event appears (before it empties the superseded run and ends). Readers must see exactly the
three earlier commits in the first case and the killed run's commit in the second (every
dataset of every date from one run), other dates' files byte-identical; a re-run of the date
then completes at once (the killed driver's lease is void: its process is gone) and replaces
that date alone. Single steps are in tests/test_io.py.
"""

from __future__ import annotations

import pytest
import yaml
from helpers import ReportRoot, crafted_job_config, crafted_log, kept_sql_conf, kill_at_event, read

from receval_spark.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.fault]

DATES = ("2024-02-01", "2024-02-02", "2024-02-03")
KILLED = DATES[1]
DATASETS = ("metrics", "long_tail", "runs")  # comparisons: none (one model, the baseline)


def run_of(spark, root: ReportRoot, dataset: str, date: str) -> str:
    """The one run id readers see for a dataset and date."""
    ids = {r.run_id for r in read(spark, root.uri, dataset, date).select("run_id").collect()}
    assert len(ids) == 1, (dataset, date, ids)
    return ids.pop()


def files_of(root: ReportRoot, date: str) -> dict[str, bytes]:
    return root.files(f"*/run_date={date}/**")


@pytest.mark.parametrize(
    ("report_root", "kill_points"),
    [
        # viewfs:// has the unit steps (test_io); s3a:// both kill points, one after the other
        pytest.param("file", ("begin",), id="file"),
        pytest.param("s3a", ("begin", "commit"), marks=pytest.mark.s3a, id="s3a"),
    ],
    indirect=["report_root"],
)
def test_driver_killed_while_writing_reports_loses_nothing(
    spark, tmp_path, report_root: ReportRoot, kill_points: tuple[str, ...]
) -> None:
    """Three nights, then per kill point a re-run of the middle one killed there and a re-run
    that completes (on s3a:// the second kill point starts from the first one's outcome)."""
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    raw["spark"]["conf"] = {
        "spark.sql.shuffle.partitions": 2,
        "spark.ui.enabled": False,
        **report_root.conf,
    }
    raw["output"]["path"] = report_root.uri
    config = tmp_path / "job.yaml"

    def write_config(date: str) -> None:
        raw["run"]["date"] = date
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")

    for date in DATES:
        write_config(date)
        with kept_sql_conf(spark):
            assert main(["evaluate", "--config", str(config)]) == 0
    write_config(KILLED)
    for kill_after in kill_points:
        killed_then_rerun(spark, config, report_root, kill_after)


def killed_then_rerun(spark, config, report_root: ReportRoot, kill_after: str) -> None:
    """The re-run of KILLED killed after its ``kill_after`` event: readers see the earlier
    commits (``begin``) or the killed run's (``commit``); the next re-run replaces that date
    alone and leaves no data of the runs it supersedes."""
    runs_before = {d: run_of(spark, report_root, "runs", d) for d in DATES}
    others_before = {d: files_of(report_root, d) for d in DATES if d != KILLED}
    event = kill_at_event(config, report_root, kill_after)
    killed_run = event.split(".")[0]
    print(f"killed after {event}")

    seen = killed_run if kill_after == "commit" else runs_before[KILLED]
    for date in DATES:
        for dataset in DATASETS:
            assert run_of(spark, report_root, dataset, date) == (
                seen if date == KILLED else runs_before[date]
            ), (dataset, date)
    assert {d: files_of(report_root, d) for d in others_before} == others_before

    with kept_sql_conf(spark):
        assert main(["evaluate", "--config", str(config)]) == 0  # the re-run completes at once
    rerun = run_of(spark, report_root, "runs", KILLED)
    assert rerun not in (runs_before[KILLED], killed_run)
    for dataset in DATASETS:
        assert run_of(spark, report_root, dataset, KILLED) == rerun
    assert {d: files_of(report_root, d) for d in others_before} == others_before
    # the killed run's and the superseded runs' folders of the date hold no data any more
    leftover = [
        p
        for p in report_root.files(f"*/run_date={KILLED}/run=*/*.parquet")
        if f"run={rerun}" not in p
    ]
    assert not leftover
