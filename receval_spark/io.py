"""Reading, through Spark and the Hadoop filesystem it is configured with: input tables (any
Spark source or a catalog table, with the reading errors named by their config key), and the
paths of outputs. The committed report datasets are read and written by
receval_spark.commit (docs/datasets.md)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark.config import _FileSource
from receval_spark.errors import ConfigError, InputError, first_line


def to_uri(path: str) -> str:
    """A Hadoop-style URI: local paths become ``file://`` URIs, other schemes pass through.

    Hadoop reads a URI's path literally, so local paths are not percent-encoded.
    """
    scheme = urlparse(path).scheme
    if scheme and len(scheme) > 1:
        return path
    return "file://" + Path(path).resolve().as_posix()


def local_path(path: str) -> Path | None:
    """The local filesystem path of ``path`` (a plain path or ``file://`` URI); None for other
    filesystems (``hdfs://``, ``s3a://``, ...)."""
    uri = to_uri(path)
    return Path(uri.removeprefix("file://")) if uri.startswith("file://") else None


# formats whose data source is not part of Spark itself, and what adds it to a session
_PACKAGES = {
    "avro": "the org.apache.spark:spark-avro_2.13 package of your Spark version",
    "delta": "delta-spark (io.delta:delta-spark_2.13) with its SQL extension and catalog",
    "iceberg": "the org.apache.iceberg:iceberg-spark-runtime package of your Spark version",
}


@contextmanager
def reading(key: str, source: _FileSource) -> Iterator[None]:
    """Turn Spark's failures to read or parse an input into one InputError naming the key
    (the path and format, or the catalog table, it is read from, else the DataFrame given)."""
    try:
        yield
    except (PySparkException, Py4JJavaError) as exc:
        raise _input_error(key, source, exc) from exc


def _input_error(key: str, source: _FileSource, exc: Exception) -> InputError:
    reason = first_line(exc)
    if re.search(r"DATA_SOURCE_NOT_(FOUND|ENABLED)|Failed to find (the )?data source", reason):
        needs = _PACKAGES.get(source.format.lower(), "the package that provides it")
        return InputError(
            f"{key}.format: this Spark session has no data source {source.format!r}; add "
            f"{needs} to the session (spark.jars.packages, or spark-submit --packages), or "
            "convert the table to parquet, orc, json or csv"
        )
    if source.table is not None:
        if "TABLE_OR_VIEW_NOT_FOUND" in reason:
            return InputError(
                f"{key}.table: the session catalog has no table {source.table!r}; check the "
                "name (db.name) and that the job runs with the catalog that holds it "
                "(spark.sql.catalogImplementation=hive for a Hive metastore)"
            )
        return InputError(
            f"{key}: cannot read the catalog table {source.table}: {reason}. Check {key}.table, "
            ".options and .where."
        )
    if source.path is None:
        return InputError(
            f"{key}: Spark cannot evaluate the DataFrame given for it: {reason}. Check the "
            "DataFrame (e.g. df.limit(5).show()), its columns and "
            f"{key}.where."
        )
    return InputError(
        f"{key}: cannot read {source.path} as {source.format}: {reason}. Check {key}.path, "
        ".format, .options, .where and the CSV options (header, delimiter, column_names)."
    )


def read_table(spark: SparkSession, source: _FileSource, *, key: str) -> DataFrame:
    """Read a table as declared in the config: a catalog table (``table``), or a file, folder
    or glob (``path``) in any format the session's DataFrameReader knows, with the reader
    ``options`` (CSV: header, delimiter and encoding from their keys, types inferred, malformed
    rows an error), restricted by ``where`` (pushed down where the format can) and renamed by
    ``column_names``."""
    if source.location is None:
        raise ConfigError(
            f"{key}.path: required key is missing; set it to the table's path (or {key}.table "
            "to a catalog table)"
        )
    with reading(key, source):
        if source.table is not None:
            spark.catalog.refreshTable(source.table)
            reader = spark.read.options(**_options(source.options), **_time_travel(source))
            df = reader.table(source.table)
        else:
            uri = to_uri(str(source.path))
            # a long-lived session (Spark Connect server, notebook) may hold a listing or
            # cached plan of this path from an earlier run, before new files were written
            spark.catalog.refreshByPath(uri)
            reader = spark.read.format(source.format)
            if source.format.lower() == "csv":
                reader = reader.options(
                    header=source.header,
                    sep=source.delimiter,
                    encoding=source.encoding,
                    inferSchema=True,
                    mode="FAILFAST",
                )
            df = reader.options(**_options(source.options), **_time_travel(source)).load(uri)
        columns = df.columns
    if not columns:
        raise InputError(
            f"{key}: {source.location} has no columns (an empty file?); point {key}.path at the "
            "table."
        )
    return restrict(_renamed(df, source, key=key), source, key=key)


def _time_travel(source: _FileSource) -> dict[str, str]:
    """The reader options of ``version`` / ``as_of``: Delta's (and Spark's, for catalog
    tables) ``versionAsOf`` / ``timestampAsOf``, an Iceberg path's ``snapshot-id`` /
    ``as-of-timestamp`` (epoch milliseconds)."""
    moment = source.as_of
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    if source.table is None and source.format.lower() == "iceberg":
        if moment is not None:
            return {"as-of-timestamp": str(int(moment.timestamp() * 1000))}
        return {} if source.version is None else {"snapshot-id": str(source.version)}
    if moment is not None:
        return {"timestampAsOf": moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")}
    return {} if source.version is None else {"versionAsOf": str(source.version)}


def _options(options: dict[str, str | int | float | bool]) -> dict[str, str]:
    """Reader options as Spark's strings (booleans lower-case, as Spark spells them)."""
    return {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in options.items()
    }


def _renamed(df: DataFrame, source: _FileSource, *, key: str) -> DataFrame:
    """The table with its columns named by ``column_names`` (one name a column)."""
    if source.column_names is None:
        return df
    if len(source.column_names) != len(df.columns):
        raise InputError(
            f"{key}.column_names: {len(source.column_names)} names given but the table has "
            f"{len(df.columns)} columns (delimiter {source.delimiter!r}); one name a column."
        )
    return df.toDF(*source.column_names)


def restrict(df: DataFrame, source: _FileSource, *, key: str) -> DataFrame:
    """The rows of ``df`` that satisfy the source's ``where`` predicate (all without one); a
    predicate Spark cannot parse or resolve on the table's columns is an InputError naming
    ``<key>.where``."""
    if source.where is None:
        return df
    try:
        restricted = df.filter(F.expr(source.where))
        _ = restricted.schema  # resolves the predicate on the columns (analysis, no job)
    except (PySparkException, Py4JJavaError) as exc:
        raise InputError(
            f"{key}.where: Spark cannot apply {source.where!r} to the table (columns "
            f"{df.columns}): {first_line(exc)}; write a SQL predicate on those columns"
        ) from exc
    return restricted


# The commit log (one row an event). Events: begin (a writer takes the lease, naming the run
# date and datasets it will write), heartbeat (it still holds it), commit (the run date now
# reads from this run), end (the lease is given back), discard (a later writer emptied this
# run's folders).
