"""The report commit of ``receval_spark.commit`` (module doc): through Spark alone, on ``file://``,
on ``viewfs://`` (a Hadoop filesystem the driver's Python cannot open) and on ``s3a://`` (an
object store: no rename of folders, a bucket of the tests' S3 server).

Readers see, per run date, exactly the rows of the run that committed it last; a failed or
killed run is never seen and is emptied by the next writer; other dates are never touched; one
writer at a time.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ReportRoot
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from storage import storages

from receval_spark.commit import (
    Lease,
    LogEvent,
    WriterConflict,
    append_event,
    commit_datasets,
    read_log,
    run_folder,
    run_states,
)
from receval_spark.committed import read_committed
from receval_spark.config import CatalogConfig, InteractionsSource
from receval_spark.io import read_table, to_uri

D1, D2 = "2026-01-01", "2026-01-02"
SCHEMA = "run_id string, i int, value double"


def frame(spark: SparkSession, run_id: str, rows: int = 3) -> DataFrame:
    return spark.createDataFrame([(run_id, i, float(i) / 2) for i in range(rows)], SCHEMA).coalesce(
        1
    )


def tables(
    spark: SparkSession,
    run_id: str,
    datasets: tuple[str, ...] = ("metrics", "runs", "per_user"),
    rows: int = 3,
) -> dict[str, DataFrame]:
    return {name: frame(spark, run_id, rows) for name in datasets}


def committed(spark: SparkSession, root: ReportRoot, dataset: str) -> set[tuple[str, str, int]]:
    """(run_date, run_id, i) of the rows readers see."""
    rows = read_committed(spark, root.uri, dataset, schema=frame(spark, "x").schema)
    return {(r.run_date, r.run_id, r.i) for r in rows.collect()}


def runs_seen(spark: SparkSession, root: ReportRoot, dataset: str) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for date, run_id, _ in committed(spark, root, dataset):
        seen.setdefault(date, set()).add(run_id)
    return seen


def data_files(folder: Path) -> list[Path]:
    """Parquet files under a folder that a reader would open (not _SUCCESS, not .crc)."""
    return [p for p in folder.rglob("*.parquet") if not p.name.startswith((".", "_"))]


def commit(spark: SparkSession, root: ReportRoot, run_id: str, date: str, **kwargs) -> None:
    commit_datasets(
        tables(spark, run_id, **kwargs), output_path=root.uri, run_date=date, run_id=run_id
    )


def begin_by_hand(
    spark: SparkSession, root: ReportRoot, run_id: str, date: str, *, owner: str, ago: float = 0
) -> None:
    """A writer's first steps, by hand: its begin event, then its datasets (no commit)."""
    at = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=ago)
    datasets = ("metrics", "runs")
    event = LogEvent(run_id, "begin", date, datasets, at, owner)
    append_event(spark, root.uri, event, tag="00000")
    for name in datasets:
        frame(spark, run_id).write.parquet(run_folder(root.uri, name, date, run_id))


def dead_owner() -> str:
    """host:pid of a process of this host that has ended."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return f"{os.uname().nodename}:{child.stdout.strip()}"


def test_commits_a_date(spark: SparkSession, report_root: ReportRoot) -> None:
    commit(spark, report_root, "r1", D1)
    for name in ("metrics", "runs", "per_user"):
        assert runs_seen(spark, report_root, name) == {D1: {"r1"}}
        folder = f"{name}/run_date={D1}/run=r1"
        assert report_root.data_files(folder) and f"{folder}/_SUCCESS" in report_root.names(folder)
    assert not report_root.names("comparisons/")
    events = read_log(spark, report_root.uri)
    assert [e.event for e in sorted(events, key=lambda e: e.at)][:1] == ["begin"]
    assert {e.event for e in events} == {"begin", "commit", "end"}
    # a plain Spark read of a dataset folder sees the run partition column as well
    plain = spark.read.parquet(f"{report_root.uri}/metrics")
    assert sorted(plain.columns) == ["i", "run", "run_date", "run_id", "value"]
    assert plain.count() == 3


def test_rewriting_a_date_replaces_it_and_leaves_other_dates(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    commit(spark, report_root, "r2", D2)
    d1_before = report_root.files(f"metrics/run_date={D1}/**")

    commit(spark, report_root, "r3", D2, rows=5)

    for name in ("metrics", "runs", "per_user"):
        assert runs_seen(spark, report_root, name) == {D1: {"r1"}, D2: {"r3"}}
    assert len(committed(spark, report_root, "metrics")) == 3 + 5
    assert report_root.files(f"metrics/run_date={D1}/**") == d1_before
    # the superseded run's folders are emptied: a plain read sees the committed rows only
    assert not report_root.data_files(f"metrics/run_date={D2}/run=r2")
    plain = spark.read.parquet(f"{report_root.uri}/metrics")
    assert {(str(r.run_date), r.run_id) for r in plain.select("run_date", "run_id").collect()} == {
        (D1, "r1"),
        (D2, "r3"),
    }


def test_dataset_not_written_again_is_absent_for_that_date(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    commit(spark, report_root, "r2", D2)
    commit(spark, report_root, "r3", D2, datasets=("metrics", "runs"))

    assert runs_seen(spark, report_root, "per_user") == {D1: {"r1"}}
    assert runs_seen(spark, report_root, "metrics") == {D1: {"r1"}, D2: {"r3"}}


def test_failure_while_writing_changes_nothing_readers_see(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    before = {name: committed(spark, report_root, name) for name in ("metrics", "runs")}

    @F.udf("double")
    def explode(value):
        raise RuntimeError("boom inside a Python UDF")

    failing = frame(spark, "r2").withColumn("value", explode("value"))
    # metrics is written completely before runs fails: readers must never see it
    doomed = {"metrics": frame(spark, "r2"), "runs": failing, "per_user": frame(spark, "r2")}
    with pytest.raises(Exception, match="boom inside a Python UDF"):
        commit_datasets(doomed, output_path=report_root.uri, run_date=D1, run_id="r2")

    assert {name: committed(spark, report_root, name) for name in ("metrics", "runs")} == before
    assert not report_root.data_files(f"metrics/run_date={D1}/run=r2")
    states = run_states(read_log(spark, report_root.uri))
    assert states["r2"].discarded and states["r2"].ended and states["r2"].committed is None


def test_unknown_dataset_is_refused_before_writing(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    with pytest.raises(ValueError, match="unknown report datasets"):
        commit_datasets(
            {"metrics": frame(spark, "r1"), "metricz": frame(spark, "r1")},
            output_path=report_root.uri,
            run_date=D1,
            run_id="r1",
        )
    assert not report_root.names()


# ---------------------------------------------------------------------------------------------
# a killed driver, and one writer at a time


def test_a_killed_run_is_never_seen_and_the_next_writer_discards_it(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    begin_by_hand(spark, report_root, "r2", D1, owner=dead_owner())  # died before its commit
    assert runs_seen(spark, report_root, "metrics") == {D1: {"r1"}}

    commit(spark, report_root, "r3", D2)  # its owner is gone: no wait, and r2 is discarded

    assert runs_seen(spark, report_root, "metrics") == {D1: {"r1"}, D2: {"r3"}}
    assert not report_root.data_files(f"metrics/run_date={D1}/run=r2")
    assert run_states(read_log(spark, report_root.uri))["r2"].discarded


def test_a_run_killed_after_its_commit_is_committed(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    owner = dead_owner()
    begin_by_hand(spark, report_root, "r2", D1, owner=owner)
    at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    commit_event = LogEvent("r2", "commit", D1, ("metrics", "runs"), at, owner)
    append_event(spark, report_root.uri, commit_event, tag="00001")
    # died here: no end event, r1's folders still full; readers already see r2 alone
    assert runs_seen(spark, report_root, "metrics") == {D1: {"r2"}}
    assert runs_seen(spark, report_root, "per_user") == {}  # r2 did not write it

    commit(spark, report_root, "r3", D2)

    assert runs_seen(spark, report_root, "metrics") == {D1: {"r2"}, D2: {"r3"}}
    assert not report_root.data_files(f"metrics/run_date={D1}/run=r1")


def test_committed_rows_are_read_in_the_schema_asked_for(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    """Files of dates written before a column existed read it as null, a column no longer in
    the schema is not read, and the run_date column is text, whatever each file holds."""
    older = spark.createDataFrame([("r1", 1, "gone")], "run_id string, i int, dropped string")
    commit_datasets({"metrics": older}, output_path=report_root.uri, run_date=D1, run_id="r1")
    commit(spark, report_root, "r2", D2, datasets=("metrics",))
    rows = read_committed(spark, report_root.uri, "metrics", schema=frame(spark, "x").schema)
    assert rows.columns == ["run_id", "i", "value", "run_date"]
    assert dict(rows.dtypes)["run_date"] == "string"
    got = sorted((r.run_date, r.run_id, r.i, r.value) for r in rows.collect())
    assert got == [(D1, "r1", 1, None)] + [(D2, "r2", i, i / 2) for i in range(3)]


@pytest.mark.parametrize("report_root", storages("s3a"), indirect=True)
def test_a_log_found_once_is_listed_once(
    spark: SparkSession, report_root: ReportRoot, s3_server
) -> None:
    """The first read of a log names its folder twice (quiet when it is missing), later reads
    once: on an object store the listing then costs a few requests, not two per event."""
    at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    for n in range(20):
        event = LogEvent(f"r{n:02d}", "begin", D1, ("metrics",), at, "host:1")
        append_event(spark, report_root.uri, event, tag="00000")
    requests = []
    for _ in range(2):
        s3_server.requests.clear()
        assert len(read_log(spark, report_root.uri)) == 20
        requests.append(sum(s3_server.requests.values()))
    assert requests[1] <= 20 + 8 < requests[0], requests  # measured: 24 against 64


@pytest.mark.parametrize("report_root", ["file"], indirect=True)  # the lease: any storage
def test_a_second_writer_fails_naming_the_live_one(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    live = f"{os.uname().nodename}:{os.getpid()}"  # this process: alive
    begin_by_hand(spark, report_root, "r2", D2, owner=live)

    with pytest.raises(WriterConflict, match=r"run r2 .* is writing to .*one writer at a time"):
        commit(spark, report_root, "r3", D2)

    assert runs_seen(spark, report_root, "metrics") == {D1: {"r1"}}
    states = run_states(read_log(spark, report_root.uri))
    assert states["r3"].ended and states["r3"].committed is None
    assert not states["r2"].discarded  # the live run is left alone


@pytest.mark.parametrize("report_root", ["file"], indirect=True)  # the lease: any storage
def test_a_lease_without_heartbeats_lapses(spark: SparkSession, report_root: ReportRoot) -> None:
    """A writer on another host (its pid cannot be checked) that stopped beating."""
    begin_by_hand(spark, report_root, "r2", D1, owner="elsewhere:1", ago=30)
    commit_datasets(
        tables(spark, "r3"), output_path=report_root.uri, run_date=D1, run_id="r3", lease_seconds=20
    )
    assert runs_seen(spark, report_root, "metrics") == {D1: {"r3"}}
    assert run_states(read_log(spark, report_root.uri))["r2"].discarded


@pytest.mark.parametrize("report_root", ["file"], indirect=True)  # the lease: any storage
def test_a_run_given_up_as_dead_refuses_to_commit(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    commit(spark, report_root, "r1", D1)
    root = report_root.uri
    with Lease(
        spark, root, run_id="r2", run_date=D1, datasets=("metrics",), lease_seconds=600
    ) as lease:
        frame(spark, "r2").write.parquet(run_folder(root, "metrics", D1, "r2"))
        now = dt.datetime.now(dt.UTC)
        append_event(
            spark, root, LogEvent("r2", "discard", D1, ("metrics",), now, "x:1"), tag="by-r9"
        )
        with pytest.raises(WriterConflict, match="given up on as dead"):
            lease.commit()
    assert runs_seen(spark, report_root, "metrics") == {D1: {"r1"}}


@pytest.mark.parametrize("report_root", ["file"], indirect=True)  # the lease: any storage
def test_heartbeats_keep_a_slow_writer_alive(spark: SparkSession, report_root: ReportRoot) -> None:
    with Lease(
        spark, report_root.uri, run_id="r1", run_date=D1, datasets=("metrics",), lease_seconds=3
    ):
        import time

        time.sleep(4)
        events = read_log(spark, report_root.uri)
    assert sum(e.event == "heartbeat" for e in events) >= 2


# ---------------------------------------------------------------------------------------------
# paths


def test_to_uri_local_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert to_uri("/data/ratings.parquet") == "file:///data/ratings.parquet"
    assert to_uri("reports") == (tmp_path / "reports").as_uri()
    assert to_uri("./a/../b") == (tmp_path / "b").as_uri()
    assert to_uri("file:///data/x") == "file:///data/x"
    assert to_uri("s3a://bucket/reports/") == "s3a://bucket/reports/"
    assert to_uri("hdfs://nn:8020/r") == "hdfs://nn:8020/r"


def test_write_reports_to_a_relative_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    commit_datasets(tables(spark, "r1"), output_path="reports", run_date=D1, run_id="r1")
    assert data_files(tmp_path / "reports" / "metrics" / f"run_date={D1}" / "run=r1")


def test_write_reports_to_a_file_uri(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    commit_datasets(tables(spark, "r1"), output_path=out.as_uri(), run_date=D1, run_id="r1")
    assert data_files(out / "metrics" / f"run_date={D1}" / "run=r1")


def test_write_reports_to_a_path_with_a_space(spark: SparkSession, tmp_path: Path) -> None:
    """No literal '%20' directory: Hadoop reads a URI's path as written."""
    out = tmp_path / "my reports"
    commit_datasets(tables(spark, "r1"), output_path=str(out), run_date=D1, run_id="r1")
    assert data_files(out / "metrics" / f"run_date={D1}" / "run=r1")
    assert read_committed(spark, str(out), "metrics", schema=frame(spark, "x").schema).count() == 3
    assert not (tmp_path / "my%20reports").exists()


@pytest.mark.parametrize("folder", ["my data", "run=1", "café"])
def test_read_table_path_with_special_characters(
    spark: SparkSession, tmp_path: Path, folder: str
) -> None:
    """A local input path is read as written, whatever characters its folders hold."""
    path = tmp_path / folder / "interactions.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"user_id": [1, 2], "item_id": [10, 20]}), path)
    source = InteractionsSource(path=str(path))
    df = read_table(spark, source, key="data.interactions")
    assert sorted(df.columns) == ["item_id", "user_id"]
    assert df.count() == 2


# ---------------------------------------------------------------------------------------------
# every byte through Spark

# Filesystem clients beside Spark's Hadoop one: they cannot open s3a://, viewfs://, dbfs:/ ...
SECOND_CLIENTS = {"pyarrow.fs", "pyarrow.parquet", "pyarrow.dataset", "fsspec", "hdfs"}
SECOND_CLIENT_CALLS = {"from_uri", "read_parquet", "to_parquet", "read_table", "write_table"}


def test_the_package_reads_and_writes_reports_only_through_spark() -> None:
    import ast

    from helpers import REPO

    found = []
    for path in sorted((REPO / "receval_spark").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            clients = [m for m in modules if m in SECOND_CLIENTS]
            found += [f"{path.name}:{node.lineno}: import {m}" for m in clients]
            if isinstance(node, ast.Attribute) and node.attr in SECOND_CLIENT_CALLS:
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not found, found


@pytest.mark.parametrize("report_root", storages("file", "s3a"), indirect=True)
def test_a_catalog_table_gains_the_columns_a_newer_dataset_adds(
    spark: SparkSession, report_root: ReportRoot
) -> None:
    """A report dataset that gained a column (comparisons' effect_size, say) since its catalog
    table was created: the table gets the column, earlier dates read it as null. The table
    and its partitions are located under the output root (on s3a://: in the bucket)."""
    catalog = CatalogConfig(database="receval_evolution")
    older = spark.createDataFrame([("a", 1.0)], "model string, mean_diff double")
    newer = spark.createDataFrame([("a", 2.0, 0.5)], "model string, mean_diff double, mde double")
    output = report_root.uri
    try:
        for date, frame in ((D1, older), ("2026-01-02", newer)):
            commit_datasets(
                {"comparisons": frame},
                output_path=output,
                run_date=date,
                run_id=f"r-{date}",
                catalog=catalog,
            )
        rows = spark.sql(
            "SELECT run_date, mean_diff, mde FROM receval_evolution.comparisons ORDER BY run_date"
        ).collect()
        partition = spark.sql(
            f"DESCRIBE TABLE EXTENDED receval_evolution.comparisons PARTITION (run_date = '{D1}')"
        ).collect()
        location = next(r.data_type for r in partition if r.col_name == "Location")
    finally:
        spark.sql("DROP DATABASE IF EXISTS receval_evolution CASCADE")

    assert [tuple(r) for r in rows] == [(D1, 1.0, None), ("2026-01-02", 2.0, 0.5)]
    expected = f"{report_root.uri}/comparisons/run_date={D1}/run=r-{D1}"
    assert location == expected.replace("file:///", "file:/")  # as Hadoop spells a local path
