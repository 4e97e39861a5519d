"""Reading, through Spark and the Hadoop filesystem it is configured with: input tables (any
Spark source or a catalog table, with the reading errors named by their config key), and the
paths of outputs. The committed report datasets are read and written by
receval_spark.commit (docs/datasets.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

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


@contextmanager
def reading(key: str, source: _FileSource) -> Iterator[None]:
    """Turn Spark's failures to read or parse an input into one InputError naming the key
    (the path and format when the table is read from a file, else the DataFrame given)."""
    try:
        yield
    except (PySparkException, Py4JJavaError) as exc:
        reason = first_line(exc)
        if source.path is None:
            raise InputError(
                f"{key}: Spark cannot evaluate the DataFrame given for it: {reason}. Check the "
                "DataFrame (e.g. df.limit(5).show()) and its columns."
            ) from exc
        raise InputError(
            f"{key}: cannot read {source.path} as {source.format}: {reason}. Check {key}.path, "
            ".format and the CSV options (header, delimiter, column_names)."
        ) from exc


def read_table(spark: SparkSession, source: _FileSource, *, key: str) -> DataFrame:
    """Read a Parquet or CSV table as declared in the config (CSV types are inferred)."""
    if source.path is None:
        raise ConfigError(f"{key}.path: required key is missing; set it to the table's path")
    uri = to_uri(source.path)
    with reading(key, source):
        # a long-lived session (Spark Connect server, notebook) may hold a listing or cached
        # plan of this path from an earlier run, before new files were written into it
        spark.catalog.refreshByPath(uri)
        if source.format == "csv":
            df = spark.read.csv(
                uri,
                header=source.header,
                sep=source.delimiter,
                encoding=source.encoding,
                inferSchema=True,
                mode="FAILFAST",
            )
        else:
            df = spark.read.parquet(uri)
        columns = df.columns
    if not columns:
        raise InputError(
            f"{key}: {source.path} has no columns (an empty file?); point {key}.path at the table."
        )
    if source.column_names is not None:
        if len(source.column_names) != len(columns):
            raise InputError(
                f"{key}.column_names: {len(source.column_names)} names given but the file has "
                f"{len(columns)} columns (delimiter {source.delimiter!r}); one name a column."
            )
        df = df.toDF(*source.column_names)
    return df


# The commit log (one row an event). Events: begin (a writer takes the lease, naming the run
# date and datasets it will write), heartbeat (it still holds it), commit (the run date now
# reads from this run), end (the lease is given back), discard (a later writer emptied this
# run's folders).
