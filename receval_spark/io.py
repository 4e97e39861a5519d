"""All reading and writing: input tables, and Parquet reports committed atomically per run date.

Report commit protocol (one run date, all datasets together or none):
1. every dataset is written by Spark under ``<output>/_staging/<run_id>/<dataset>/run_date=D``;
2. a ``_COMMITTED`` marker is written into ``_staging/<run_id>``: from here the run wins;
3. for each dataset the old ``<dataset>/run_date=D`` (if any) is renamed into
   ``_trash/<run_id>/`` and the staged one renamed into its place; then trash and staging go.
A run that dies before step 2 leaves only an ignored ``_staging`` folder (names starting with
``_`` are invisible to Spark readers); one that dies during step 3 is rolled forward by the
next commit to the same output path. Other dates are never touched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyarrow import fs as pafs
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from receval_spark.config import _FileSource
from receval_spark.errors import ConfigError, InputError, first_line

REPORT_DATASETS = ("metrics", "comparisons", "long_tail", "off_policy", "per_user", "runs")
_MARKER = "_COMMITTED"


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


def write_reports(
    tables: Mapping[str, DataFrame], *, output_path: str, run_date: str, run_id: str
) -> None:
    """Write the report datasets for ``run_date`` and commit them together (see module doc)."""
    unknown = set(tables) - set(REPORT_DATASETS)
    if unknown:
        raise ValueError(f"unknown report datasets {sorted(unknown)}")
    root = to_uri(output_path).rstrip("/")
    filesystem, root_path = _filesystem(root)
    staging = f"{root_path}/_staging/{run_id}"
    try:
        for name, table in tables.items():
            table.write.mode("error").parquet(
                f"{root}/_staging/{run_id}/{name}/run_date={run_date}"
            )
        with filesystem.open_output_stream(f"{staging}/{_MARKER}") as marker:
            marker.write(json.dumps({"run_date": run_date, "written": sorted(tables)}).encode())
    except BaseException:
        _delete_dir(filesystem, staging)
        raise
    _roll_forward(filesystem, root_path)


def _roll_forward(filesystem: pafs.FileSystem, root_path: str) -> None:
    """Finish every committed staging folder under the output root, oldest run first.

    Idempotent: a dataset whose staged partition is gone was already promoted.
    """
    selector = pafs.FileSelector(f"{root_path}/_staging", allow_not_found=True)
    runs = sorted(
        (
            info
            for info in filesystem.get_file_info(selector)
            if info.type == pafs.FileType.Directory
        ),
        key=lambda info: info.base_name,
    )
    for info in runs:
        marker = f"{info.path}/{_MARKER}"
        if not _exists(filesystem, marker):
            continue
        with filesystem.open_input_stream(marker) as stream:
            manifest = json.loads(stream.read())
        partition = f"run_date={manifest['run_date']}"
        trash = f"{root_path}/_trash/{info.base_name}"
        for name in REPORT_DATASETS:
            staged = f"{info.path}/{name}/{partition}"
            target = f"{root_path}/{name}/{partition}"
            if name in manifest["written"] and not _exists(filesystem, staged):
                continue  # promoted before
            if _exists(filesystem, target):
                filesystem.create_dir(f"{trash}/{name}", recursive=True)
                filesystem.move(target, f"{trash}/{name}/{partition}")
            if name in manifest["written"]:
                filesystem.create_dir(f"{root_path}/{name}", recursive=True)
                filesystem.move(staged, target)
        _delete_dir(filesystem, trash)
        _delete_dir(filesystem, info.path)


def read_report_history(output_path: str, dataset: str, *, before: str) -> pd.DataFrame:
    """Rows of a committed report dataset for every run date earlier than ``before``
    (pandas, via pyarrow; report datasets hold one row per aggregate, so this stays small).
    An absent dataset gives an empty frame."""
    filesystem, root = _filesystem(to_uri(output_path).rstrip("/"))
    folder = f"{root}/{dataset}"
    selector = pafs.FileSelector(folder, allow_not_found=True)
    frames = []
    for info in filesystem.get_file_info(selector):
        date = info.base_name.removeprefix("run_date=")
        if (
            info.type == pafs.FileType.Directory
            and info.base_name.startswith("run_date=")
            and (date < before)
        ):
            table = pq.read_table(info.path, filesystem=filesystem)
            frames.append(table.to_pandas().assign(run_date=date))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path of a URI; local paths are used as they are."""
    if uri.startswith("file://"):
        return pafs.LocalFileSystem(), uri.removeprefix("file://")
    return pafs.FileSystem.from_uri(uri)


def _exists(filesystem: pafs.FileSystem, path: str) -> bool:
    return filesystem.get_file_info(path).type != pafs.FileType.NotFound


def _delete_dir(filesystem: pafs.FileSystem, path: str) -> None:
    if _exists(filesystem, path):
        filesystem.delete_dir(path)
