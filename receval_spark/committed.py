"""The committed rows of the report datasets (docs/datasets.md): for each run date, the rows of
the run whose commit event readers resolve it to (receval_spark.commit), read through Spark
from that run's Parquet folders or, in a table format's output, from the dataset's table
filtered on the run (docs/tables.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark import tables as lake
from receval_spark.commit import (
    RUN_PARTITION,
    LogEvent,
    RunState,
    committed_runs,
    read_log,
    report_root,
    run_folder,
)
from receval_spark.errors import InputError
from receval_spark.results import REPORT_SCHEMAS


def committed_states(
    committed: Mapping[str, RunState], dataset: str, dates: Sequence[str] | None = None
) -> dict[str, RunState]:
    """Run date -> the committed run readers see ``dataset`` of (only the runs that wrote
    it; only ``dates``)."""
    return {
        date: state
        for date, state in sorted(committed.items())
        if dataset in state.datasets and (dates is None or date in dates)
    }


def read_committed(
    spark: SparkSession,
    output_path: str,
    dataset: str,
    *,
    schema: T.StructType,
    dates: Sequence[str] | None = None,
    committed: Mapping[str, RunState] | None = None,
    version: int | None = None,
) -> DataFrame:
    """The committed rows of one report dataset (every run date, or ``dates``), with a string
    ``run_date`` column; no rows (in ``schema``) when nothing is committed; a column of
    ``schema`` that no file read has is null. ``committed`` (:func:`committed_runs`) saves
    reading the log again; ``version``: a table format's version to read (time travel)."""
    root = report_root(output_path)
    if committed is None:
        committed = committed_runs(read_log(spark, root))
    chosen = committed_states(committed, dataset, dates)
    if not chosen:
        empty = spark.createDataFrame([], schema)
        return empty.withColumn("run_date", F.lit(None).cast("string"))
    formats = {(state.format, state.tables.get(dataset, "")) for state in chosen.values()}
    if len(formats) > 1:
        raise InputError(f"output: {root} holds {dataset} in more than one format: {formats}")
    table_format, location = formats.pop()
    if table_format == "parquet":
        paths = [run_folder(root, dataset, d, s.run_id) for d, s in chosen.items()]
        # read in the dataset's schema, not one merged from every file's footer (a Spark job
        # per read, and on an object store every footer fetched): a column a file lacks (one
        # written before the column existed) reads as null
        partitions = [T.StructField(name, T.StringType()) for name in ("run_date", RUN_PARTITION)]
        rows = (
            spark.read.schema(T.StructType([*schema.fields, *partitions]))
            .option("basePath", f"{root}/{dataset}")
            .parquet(*paths)
            .drop(RUN_PARTITION)
        )
    else:
        run_ids = [s.run_id for s in chosen.values()]
        rows = lake.read_runs(spark, table_format, location, run_ids, version=version)
        rows = rows.filter(F.col("run_date").isin(*chosen))
    # columns added since some of these dates were written read as null there
    missing = {f.name: F.lit(None).cast(f.dataType) for f in schema.fields}
    missing = {name: value for name, value in missing.items() if name not in rows.columns}
    if missing:  # Spark Connect refuses an empty withColumns
        rows = rows.withColumns(missing)
    return rows.withColumn("run_date", F.col("run_date").cast("string"))


def read_as_of(
    spark: SparkSession, output_path: str, dataset: str, events: Sequence[LogEvent], *, run_id: str
) -> DataFrame:
    """The committed rows of ``dataset`` as readers saw them right after run ``run_id``
    committed: the dates resolved by the log up to that commit, read from the table version
    the latest of those commits recorded for the dataset (every committed run's rows stay in
    the table until a later commit supersedes it, so that version holds them all; Iceberg
    snapshot ids are not ordered, commit times are)."""
    commits = [e for e in events if e.run_id == run_id and e.event == "commit"]
    if not commits:
        raise InputError(f"as_of: run {run_id} has no commit under {output_path}")
    if commits[0].format == "parquet":
        raise InputError(
            "as_of: time travel needs output.format delta or iceberg; a Parquet output keeps "
            "only the latest commit of each date"
        )
    moment = max(e.at for e in commits)
    committed = committed_runs([e for e in events if e.at <= moment])
    chosen = committed_states(committed, dataset)
    latest = max(chosen.values(), key=lambda s: (s.committed, s.run_id), default=None)
    version = None if latest is None else latest.versions[dataset]
    return read_committed(
        spark,
        output_path,
        dataset,
        schema=REPORT_SCHEMAS[dataset],
        committed=committed,
        version=version,
    )
