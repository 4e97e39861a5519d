"""Report datasets as Delta Lake and Iceberg tables (output.format; docs/tables.md), and inputs
read from both formats at a version, on the local filesystem with the real jars.

Per format, one output and one test, as a night's job meets it: three nights of a job whose
interactions and external model are read from tables at a version (the third night at a worse
version of the model: the alert fires), the report of the last night; then, after the input
tables moved on, re-runs of the middle night as processes: the driver killed (SIGKILL) in the
middle of its table writes and right after its commit event, each followed by a reader's view
(the pinned versions give the same values), then two jobs at once (the tables keep one run per
date); last, time travel to the reports as committed on the third night.
"""

from __future__ import annotations

import glob
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from helpers import crafted_job_config, crafted_log, kill_when, start_evaluate

from receval_spark import read_reports, render_report, run_job
from receval_spark.commit import REPORT_DATASETS, committed_runs, read_log, report_root
from receval_spark.tables import identifier, latest_version, refreshed

pytestmark = [pytest.mark.integration, pytest.mark.fault, pytest.mark.nightly]

DATES = ("2024-02-01", "2024-02-02", "2024-02-03")
USERS = range(1, 7)
COLUMNS = ["user_id", "item_id", "score"]
GOOD = pd.DataFrame(
    [(u, 100 + u, 1.0) for u in USERS] + [(u, 900, 0.5) for u in USERS], columns=COLUMNS
)  # every user's relevant test item first
BAD = pd.DataFrame([(u, 900 + j, 1.0 - j / 10) for u in USERS for j in range(2)], columns=COLUMNS)


@dataclass
class Lake:
    """One format's output, its job (``raw``), the versions of its model's tables."""

    table_format: str
    tmp: Path
    raw: dict[str, Any]
    recs: dict[str, int] = field(default_factory=dict)  # good / bad -> table version

    @property
    def output(self) -> str:
        return str(self.raw["output"]["path"])

    def config(self, date: str) -> dict[str, Any]:
        """The job of ``date``: the third night reads the bad recommendations."""
        self.raw["run"]["date"] = date
        self.raw["models"][1]["version"] = self.recs["bad" if date == DATES[2] else "good"]
        return self.raw

    def config_file(self, date: str) -> Path:
        path = self.tmp / f"job-{date}.yaml"
        path.write_text(yaml.safe_dump(self.config(date)), encoding="utf-8")
        return path

    def namespace(self, kind: str) -> str:
        return f"lake.{kind}_{self.tmp.name.replace('-', '_')}"


def write_input(spark, lake: Lake, name: str, rows: pd.DataFrame) -> tuple[dict[str, Any], int]:
    """Replace the rows of the input table ``name`` (a new version): its source block (a
    Delta path, an Iceberg catalog table) and the version holding ``rows``."""
    frame = spark.createDataFrame(rows)
    if lake.table_format == "delta":
        location = str(lake.tmp / "inputs" / name)
        frame.write.format("delta").mode("overwrite").save(location)
        source: dict[str, Any] = {"path": location, "format": "delta"}
    else:
        location = f"{lake.namespace('inputs')}.{name}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {lake.namespace('inputs')}")
        frame.writeTo(location).createOrReplace()
        source = {"table": location}
    name_sql = identifier(lake.table_format, location)
    return source, latest_version(spark, name_sql, lake.table_format)


@pytest.fixture(scope="module", params=["delta", "iceberg"])
def lake(request, spark, lake_settings, tmp_path_factory) -> Lake:
    tmp = tmp_path_factory.mktemp(request.param)
    raw = crafted_job_config(tmp, crafted_log(reconsumed=False), [])
    lake = Lake(request.param, tmp, raw)
    log, log_version = write_input(spark, lake, "log", crafted_log(reconsumed=False))
    recs, lake.recs["good"] = write_input(spark, lake, "recs", GOOD)
    _, lake.recs["bad"] = write_input(spark, lake, "recs", BAD)
    columns = raw["data"]["interactions"]["columns"]
    raw["data"]["interactions"] = {**log, "version": log_version, "columns": columns}
    external = {"user": "user_id", "item": "item_id", "score": "score"}
    raw["models"] = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "ext", "kind": "external", **recs, "columns": external},
    ]
    rule = {"metric": "ndcg", "k": 2, "max_relative_drop": 0.05, "window": 2}
    raw["evaluation"]["alerts"] = [rule]
    raw["output"] = {"path": str(tmp / "reports"), "format": lake.table_format, "lists": True}
    raw["output"]["catalog"] = {"database": lake.namespace("reports")}  # Iceberg: its tables
    if lake.table_format == "delta":  # Delta: path tables, registered in the session catalog
        raw["output"]["catalog"] = {"database": f"reports_{tmp.name.replace('-', '_')}"}
    raw["spark"] = {"master": "local[1]", "class_archive": False, "conf": lake_settings}
    return lake


def view(spark, lake: Lake) -> dict[tuple[str, str], list[str]]:
    """What a reader sees: (dataset, date) -> its rows (as text, sorted)."""
    seen: dict[tuple[str, str], list[str]] = {}
    for dataset in REPORT_DATASETS:
        for row in read_reports(spark, lake.output, dataset=dataset).collect():
            seen.setdefault((dataset, row["run_date"]), []).append(repr(tuple(row)))
    return {key: sorted(rows) for key, rows in seen.items()}


def values(rows: list[str], run_id: str) -> list[str]:
    """Rows as text without their run id: what two runs of the same input share."""
    return sorted(row.replace(run_id, "<run>") for row in rows)


def committed(spark, lake: Lake) -> dict[str, str]:
    return {
        d: s.run_id for d, s in committed_runs(read_log(spark, report_root(lake.output))).items()
    }


def table_runs(spark, lake: Lake, dataset: str) -> set[tuple[str, str]]:
    """(run_date, run_id) of every row the dataset's table holds, committed or not."""
    state = next(iter(committed_runs(read_log(spark, report_root(lake.output))).values()))
    name = refreshed(spark, lake.table_format, state.tables[dataset])
    rows = spark.sql(f"SELECT DISTINCT run_date, run_id FROM {name}").collect()
    return {(r.run_date, r.run_id) for r in rows}


def assert_one_run_per_date(spark, lake: Lake) -> None:
    """Readers see one run per date in every dataset, and the tables hold nothing else."""
    runs = committed(spark, lake)
    for (dataset, date), rows in view(spark, lake).items():
        assert all(runs[date] in row for row in rows), (dataset, date)
    for dataset in ("metrics", "lists", "runs"):
        assert table_runs(spark, lake, dataset) == set(runs.items()), dataset


def commit_events(lake: Lake) -> set[str]:
    """The commit events of the log whose file is in place (a folder being written is not)."""
    files = glob.glob(f"{lake.output}/_commits/events/*.commit/part-*")  # ignores vanishing dirs
    return {Path(name).parent.name for name in files}


def table_commits(lake: Lake, dataset: str) -> int:
    """The number of commits of a dataset's table (its transaction log's entries)."""
    if lake.table_format == "delta":
        return len(list((Path(lake.output) / dataset / "_delta_log").glob("*.json")))
    warehouse = Path(str(lake.raw["spark"]["conf"]["spark.sql.catalog.lake.warehouse"])[5:])
    folder = warehouse / lake.namespace("reports").removeprefix("lake.") / dataset / "metadata"
    return len(list(folder.glob("v*.metadata.json")))  # not a writer's temporary file


def test_three_nights_killed_reruns_two_writers_and_time_travel(spark, lake: Lake) -> None:
    done = {date: run_job(spark, lake.config(date)) for date in DATES}
    assert [done[d].commit.judgement.status for d in DATES] == [
        "succeeded",
        "succeeded",
        "regressed",
    ]
    assert any("ext" in alert for alert in done[DATES[2]].commit.judgement.alerts)
    stability = read_reports(spark, lake.output, dataset="metrics", dates=DATES[1])
    assert stability.filter("metric = 'stability_rbo'").count() > 0  # last night's lists read
    database = lake.raw["output"]["catalog"]["database"]
    assert spark.table(f"{database}.metrics").filter(f"run_date = '{DATES[2]}'").count() > 0
    html = render_report(spark, lake.output, date=DATES[2]).read_text(encoding="utf-8")
    assert "ext" in html and DATES[2] in html
    night, runs = view(spark, lake), committed(spark, lake)
    assert_one_run_per_date(spark, lake)

    # a re-run of the middle night after the input moved on, its driver killed mid-write
    write_input(spark, lake, "log", crafted_log(reconsumed=True))
    date = DATES[1]
    config = lake.config_file(date)
    appended = table_commits(lake, "metrics")
    kill_when(config, lambda: table_commits(lake, "metrics") > appended)
    assert committed(spark, lake) == runs and view(spark, lake) == night
    leftovers = table_runs(spark, lake, "metrics") - set(runs.items())
    assert leftovers and {d for d, _ in leftovers} == {date}  # its rows are there, unseen

    # killed right after its commit event, before its clean-up: committed, and as the pinned
    # input versions give the same values, the same rows as the night before
    known = commit_events(lake)
    kill_when(config, lambda: len(commit_events(lake)) > len(known))
    (killed,) = {name.split(".")[0] for name in commit_events(lake) - known}
    after = view(spark, lake)
    assert committed(spark, lake) == {**runs, date: killed}
    assert others(after, date) == others(night, date)
    for (dataset, day), rows in after.items():
        if day == date and dataset != "runs":
            assert values(rows, killed) == values(night[(dataset, day)], runs[date]), dataset

    jobs = [  # two at once: one commits (or both, one after the other), and cleans up
        start_evaluate(config, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(job, *job.communicate(timeout=900)) for job in jobs]
    codes = sorted(job.returncode for job, _, _ in results)
    assert codes in ([0, 0], [0, 2]), [f"{o[-2000:]}\n{e[-4000:]}" for _, o, e in results]
    for job, _, err in results:
        if job.returncode == 2:
            assert "one writer at a time" in err, err[-4000:]
    final = committed(spark, lake)
    assert others(final, date) == others(runs, date) and final[date] not in (killed, runs[date])
    assert_one_run_per_date(spark, lake)
    assert others(view(spark, lake), date) == others(night, date)

    last_night = done[DATES[2]].commit.run_id  # time travel: as committed on the third night
    for dataset in ("metrics", "runs"):
        travelled = read_reports(spark, lake.output, dataset=dataset, as_of=last_night).collect()
        assert sorted(repr(tuple(r)) for r in travelled) == sorted(
            row for (name, _), rows in night.items() if name == dataset for row in rows
        )


def others(mapping: dict, date: str) -> dict:
    """The entries of ``mapping`` (keyed by date, or by (dataset, date)) of the other dates."""
    return {k: v for k, v in mapping.items() if (k[1] if isinstance(k, tuple) else k) != date}
