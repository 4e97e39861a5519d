"""The report datasets committed per run date, through Spark and the Hadoop filesystem it is
configured with (docs/datasets.md): the commit log, the lease, the writes and committed reads,
the catalog tables.

Layout under an output root (``file://``, ``hdfs://``, ``s3a://``, ``abfss://``, ``viewfs://``...):

    <dataset>/run_date=D/run=R/part-*.parquet     run R's rows of one dataset and date
    _commits/events/<R>.<n>.<event>/part-*.parquet the commit log: one small file per event

A run writes its datasets under its own ``run=R`` folders, then appends a ``commit`` event
(the run date and the datasets written) to the log. That one file is the commit: it appears
whole or not at all (a rename on HDFS and local disks, one object on object stores), so no
folder is ever renamed. Readers resolve each run date to its latest commit and read only that
run's folders, so they never see two runs of one date, nor a run that has not committed.
One writer at a time: a writer holds a lease on the root (``begin`` and ``heartbeat`` events);
a writer that finds another live lease fails with WriterConflict naming it, and a lease whose
heartbeats stopped (a killed driver) lapses. After its commit a writer empties the folders of
superseded and abandoned runs (``discard`` events). Other dates are never touched.

With ``output.format`` delta or iceberg, each dataset is one table instead (log and lease
alike; receval_spark.tables): runs append, commits record the versions holding their rows,
the clean-up deletes superseded and abandoned runs' rows (docs/tables.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import socket
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from receval_spark import tables as lake
from receval_spark.catalog import register_tables
from receval_spark.config import CatalogConfig
from receval_spark.errors import ConfigError, InputError
from receval_spark.io import to_uri

REPORT_DATASETS = (
    "metrics",
    "comparisons",
    "long_tail",
    "off_policy",
    "per_user",
    "lists",
    "attribution",
    "runs",
)

LOG = "_commits/events"
LOG_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("event", T.StringType(), False),
        T.StructField("run_date", T.StringType(), False),
        T.StructField("datasets", T.ArrayType(T.StringType(), False), False),
        T.StructField("at", T.TimestampType(), False),
        T.StructField("owner", T.StringType(), False),
        # table formats: dataset -> table, and a commit's table versions (null: Parquet)
        T.StructField("format", T.StringType(), True),
        T.StructField("tables", T.MapType(T.StringType(), T.StringType(), False), True),
        T.StructField("versions", T.MapType(T.StringType(), T.LongType(), False), True),
    ]
)
RUN_PARTITION = "run"
DEFAULT_LEASE_SECONDS = 600.0


class WriterConflict(InputError):
    """Another run holds the lease on the output root (one writer at a time)."""


@dataclass(frozen=True)
class LogEvent:
    run_id: str
    event: str
    run_date: str
    datasets: tuple[str, ...]
    at: dt.datetime
    owner: str
    format: str = "parquet"
    tables: Mapping[str, str] = field(default_factory=dict)
    versions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunState:
    """What the log says of one run: when it began, its last sign of life, how it ended."""

    run_id: str
    run_date: str
    datasets: tuple[str, ...]
    began: dt.datetime
    last_seen: dt.datetime
    owner: str
    committed: dt.datetime | None
    ended: bool
    discarded: bool
    format: str = "parquet"
    tables: Mapping[str, str] = field(default_factory=dict)  # dataset -> table (formats)
    versions: Mapping[str, int] = field(default_factory=dict)  # dataset -> table version

    def live(self, now: dt.datetime, lease_seconds: float) -> bool:
        """Holding the lease: not ended, and seen within the lease (a driver on this host
        that no longer exists holds nothing)."""
        if self.ended or self.discarded:
            return False
        if _dead_here(self.owner):
            return False
        return (now - self.last_seen).total_seconds() < lease_seconds


def report_root(output_path: str) -> str:
    """The output path as the Hadoop URI every report path is built on."""
    return to_uri(output_path).rstrip("/")


def run_folder(root: str, dataset: str, run_date: str, run_id: str) -> str:
    return f"{root}/{dataset}/run_date={run_date}/{RUN_PARTITION}={run_id}"


_FOUND_LOGS: set[str] = set()  # the log folders this process has read (never removed)


def read_log(spark: SparkSession, root: str) -> list[LogEvent]:
    """Every event of the commit log at ``root`` (none when there is no log yet). The log
    grows by a few rows per run, never with users or interactions."""
    folder = f"{root}/{LOG}"
    # Named twice until found (one path: Spark probes it for a streaming sink's metadata and
    # logs a stack trace when it is missing); once found, once: two paths list it twice (on
    # S3, 20 events: 64 requests against 24; the files are read once either way)
    paths = [folder] if folder in _FOUND_LOGS else [folder, folder]
    try:
        read = spark.read.schema(LOG_SCHEMA).option("recursiveFileLookup", "true")
        rows = read.parquet(*paths).collect()
    except AnalysisException as exc:
        if exc.getCondition() == "PATH_NOT_FOUND":
            _FOUND_LOGS.discard(folder)
            return []
        raise
    _FOUND_LOGS.add(folder)
    return [
        LogEvent(
            run_id=r.run_id,
            event=r.event,
            run_date=r.run_date,
            datasets=tuple(r.datasets),
            at=_utc(r.at),
            owner=r.owner,
            format=r.format or "parquet",
            tables=r.tables or {},
            versions=r.versions or {},
        )
        for r in rows
    ]


def run_states(events: Sequence[LogEvent]) -> dict[str, RunState]:
    """The state of every run the log names."""
    by_run: dict[str, list[LogEvent]] = {}
    for event in events:
        by_run.setdefault(event.run_id, []).append(event)
    states = {}
    for run_id, own in by_run.items():
        begins = [e for e in own if e.event == "begin"] or own
        first = min(begins, key=lambda e: e.at)
        commits = sorted((e for e in own if e.event == "commit"), key=lambda e: e.at)
        states[run_id] = RunState(
            run_id=run_id,
            run_date=first.run_date,
            datasets=first.datasets,
            began=first.at,
            last_seen=max(e.at for e in own),
            owner=first.owner,
            committed=commits[-1].at if commits else None,
            ended=any(e.event == "end" for e in own),
            discarded=any(e.event == "discard" for e in own),
            format=first.format,
            tables=first.tables,
            versions=commits[-1].versions if commits else {},
        )
    return states


def committed_runs(events: Sequence[LogEvent]) -> dict[str, RunState]:
    """Run date -> the run whose rows readers see: the latest commit of that date (ties by
    run id); a discarded run is never chosen."""
    latest: dict[str, RunState] = {}
    for state in run_states(events).values():
        if state.committed is None or state.discarded:
            continue
        best = latest.get(state.run_date)
        if best is None or (state.committed, state.run_id) > (best.committed, best.run_id):
            latest[state.run_date] = state
    return latest


def committed_folders(
    root: str, committed: Mapping[str, RunState], names: Iterable[str]
) -> dict[str, dict[str, str | None]]:
    """Per dataset of ``names``, per committed run date: the folder of the run that committed
    it, or None where that run did not write the dataset."""
    return {
        name: {
            date: run_folder(root, name, date, state.run_id) if name in state.datasets else None
            for date, state in committed.items()
        }
        for name in names
    }


def commit_datasets(
    tables: Mapping[str, DataFrame],
    *,
    output_path: str,
    run_date: str,
    run_id: str,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    catalog: CatalogConfig | None = None,
    table_format: str = "parquet",
) -> None:
    """Write the report datasets of ``run_date`` (Parquet folders, or appended to the tables of
    ``table_format``) and commit them together (module doc); then remove the rows of superseded
    and abandoned runs and point the catalog tables (when ``catalog``) at the committed runs."""
    unknown = set(tables) - set(REPORT_DATASETS)
    if unknown:
        raise ValueError(f"unknown report datasets {sorted(unknown)}")
    root = report_root(output_path)
    spark = next(iter(tables.values())).sparkSession
    locations: dict[str, str] = {}
    if table_format != "parquet":
        lake.require_format(spark, table_format, catalog)
        locations = lake.table_locations(root, table_format, catalog, tables)
    with Lease(
        spark,
        root,
        run_id=run_id,
        run_date=run_date,
        datasets=tuple(tables),
        lease_seconds=lease_seconds,
        table_format=table_format,
        tables=locations,
    ) as lease:
        try:
            if locations:
                versions = lake.append_run(
                    tables, locations, table_format=table_format, run_date=run_date
                )
            else:
                versions = {}
                for name, table in tables.items():
                    table.write.mode("overwrite").parquet(run_folder(root, name, run_date, run_id))
            lease.commit(versions)
        except BaseException:
            lease.abandon()
            raise
        events = read_log(spark, root)
        discard_superseded(spark, root, events, lease_seconds=lease_seconds, own=run_id)
        if catalog is not None and table_format == "parquet":
            schemas = {name: frame.schema for name, frame in tables.items()}
            folders = committed_folders(root, committed_runs(events), tables)
            register_tables(spark, root, catalog, schemas, folders)
        elif catalog is not None and table_format == "delta":
            lake.register_delta(spark, locations, catalog)


class Lease:
    """One writer at a time on an output root, through the commit log: ``begin`` on entry,
    a heartbeat every third of the lease from a background thread, ``end`` on exit.

    A writer yields to another live run that began before it (by begin time, then run id):
    it says so at entry and again right before its commit, so of two writers that overlap,
    at most one commits while the other is live."""

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        *,
        run_id: str,
        run_date: str,
        datasets: tuple[str, ...],
        lease_seconds: float,
        table_format: str = "parquet",
        tables: Mapping[str, str] | None = None,
    ) -> None:
        self.spark, self.root, self.run_id = spark, root, run_id
        self.run_date, self.datasets, self.lease_seconds = run_date, datasets, lease_seconds
        self.format, self.tables = table_format, dict(tables or {})
        self._sequence = itertools.count()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __enter__(self) -> Lease:
        self._append("begin")
        try:
            self._check()
        except WriterConflict:
            self._append("end")
            raise
        self._heartbeat = threading.Thread(target=self._beat, name="receval-lease", daemon=True)
        self._heartbeat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        self._append("end")

    def commit(self, versions: Mapping[str, int] | None = None) -> None:
        """Make the run date read from this run: the one event of the commit (with a table
        format's ``versions`` that hold the run's rows)."""
        self._check()
        self._append("commit", versions or {})

    def abandon(self) -> None:
        """After a failed write: remove what this run wrote (best effort; a later writer
        discards whatever is left)."""
        with contextlib.suppress(Exception):
            self._append("discard")
            remove_rows(self.spark, self.root, [self._event("discard", {})])

    def _check(self) -> None:
        now = _now()
        states = run_states(read_log(self.spark, self.root))
        own = states[self.run_id]
        formats = {s.format for s in states.values()} - {self.format}
        if formats:
            raise ConfigError(
                f"output.format: {self.root} holds reports in format {sorted(formats)[0]}, not "
                f"{self.format}; write {self.format} reports to a new output.path"
            )
        if own.discarded:
            raise WriterConflict(
                f"output.path: run {self.run_id} was given up on as dead by another writer of "
                f"{self.root} (its lease of {self.lease_seconds:g} s lapsed); nothing was "
                "committed: run again, or raise output.lease_seconds"
            )
        ahead = [
            s
            for s in states.values()
            if s.run_id != self.run_id
            and s.live(now, self.lease_seconds)
            and (s.began, s.run_id) < (own.began, own.run_id)
        ]
        if ahead:
            first = min(ahead, key=lambda s: (s.began, s.run_id))
            raise _held(first, self.root, self.lease_seconds)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            with contextlib.suppress(Exception):  # a missed beat only shortens the lease
                self._append("heartbeat")

    def _append(self, event: str, versions: Mapping[str, int] | None = None) -> None:
        append_event(
            self.spark,
            self.root,
            self._event(event, versions or {}),
            tag=f"{next(self._sequence):05d}",
        )

    def _event(self, event: str, versions: Mapping[str, int]) -> LogEvent:
        return LogEvent(
            run_id=self.run_id,
            event=event,
            run_date=self.run_date,
            datasets=self.datasets,
            at=_now(),
            owner=OWNER,
            format=self.format,
            tables=self.tables,
            versions=versions,
        )


def refuse_if_held(spark: SparkSession, output_path: str, *, lease_seconds: float) -> None:
    """Fail fast, before a job computes anything, when another run holds the lease on the
    output (the lease itself is taken, and checked again, when the job writes)."""
    root = report_root(output_path)
    now = _now()
    live = [s for s in run_states(read_log(spark, root)).values() if s.live(now, lease_seconds)]
    if live:
        raise _held(min(live, key=lambda s: (s.began, s.run_id)), root, lease_seconds)


def _held(other: RunState, root: str, lease_seconds: float) -> WriterConflict:
    return WriterConflict(
        f"output.path: run {other.run_id} ({other.owner}, run date {other.run_date}) is "
        f"writing to {root} since {other.began:%Y-%m-%dT%H:%M:%SZ}; one writer at a time: run "
        f"again when it ends (a killed run's lease lapses after {lease_seconds:g} s, "
        "output.lease_seconds)"
    )


def append_event(spark: SparkSession, root: str, event: LogEvent, *, tag: str) -> None:
    """Add one event to the log as its own small Parquet folder ``<run>.<tag>.<event>``
    (written by Spark; its file appears whole when Spark's commit moves it into place)."""
    table = event.format != "parquet"
    row = (
        *(event.run_id, event.event, event.run_date, list(event.datasets), event.at, event.owner),
        *((event.format, dict(event.tables), dict(event.versions)) if table else (None,) * 3),
    )
    folder = f"{root}/{LOG}/{event.run_id}.{tag}.{event.event}"
    spark.createDataFrame([row], LOG_SCHEMA).coalesce(1).write.mode("error").parquet(folder)


def discard_superseded(
    spark: SparkSession,
    root: str,
    events: Sequence[LogEvent],
    *,
    lease_seconds: float,
    own: str,
) -> list[str]:
    """Remove the rows of every run that readers no longer see and that holds no lease:
    runs superseded by a later commit of their date, and runs that never committed (killed or
    failed). A ``discard`` event goes first, so a run that was only slow finds it and refuses
    to commit. Returns the discarded run ids."""
    now = _now()
    visible = {state.run_id for state in committed_runs(events).values()}
    discarded: list[LogEvent] = []
    for state in sorted(run_states(events).values(), key=lambda s: s.began):
        if (
            state.run_id == own
            or state.run_id in visible
            or state.discarded
            or state.live(now, lease_seconds)
        ):
            continue
        discard = LogEvent(
            state.run_id,
            "discard",
            state.run_date,
            state.datasets,
            now,
            OWNER,
            format=state.format,
            tables=state.tables,
        )
        append_event(spark, root, discard, tag=f"by-{own}")
        discarded.append(discard)
    remove_rows(spark, root, discarded)
    return [event.run_id for event in discarded]


def remove_rows(spark: SparkSession, root: str, runs: Sequence[LogEvent]) -> None:
    """Remove the rows of ``runs`` (their discard events): empty their Parquet folders, or
    delete them from each table in one transaction of its format."""
    doomed: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for run in runs:
        for name in run.datasets:
            if run.format == "parquet":
                empty_folder(spark, run_folder(root, name, run.run_date, run.run_id))
            else:
                table = (run.format, run.tables[name])
                doomed.setdefault(table, []).append((run.run_date, run.run_id))
    for (table_format, location), pairs in sorted(doomed.items()):
        lake.delete_runs(spark, table_format, location, pairs)


def empty_folder(spark: SparkSession, folder: str) -> None:
    """Delete a folder's files through Spark's writer: overwriting it with an empty
    partitioned DataFrame deletes the folder and writes no data file (only ``_SUCCESS``)."""
    spark.createDataFrame([], "discarded INT, value INT").write.partitionBy("discarded").mode(
        "overwrite"
    ).parquet(folder)


OWNER = f"{socket.gethostname()}:{os.getpid()}"


def _dead_here(owner: str) -> bool:
    """True when ``owner`` is a process of this host that no longer runs."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
