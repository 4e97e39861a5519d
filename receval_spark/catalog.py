"""Catalog tables over the committed report datasets (docs/datasets.md#catalog-tables): after
a commit, each dataset's table points at exactly the committed runs' folders, so SQL readers
(the Thrift Server, a notebook's spark.sql) see what receval_spark.commit readers see."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from receval_spark.config import CatalogConfig
from receval_spark.errors import ConfigError


def register_tables(
    spark: SparkSession,
    root: str,
    catalog: CatalogConfig,
    written: Mapping[str, T.StructType],
    folders: Mapping[str, Mapping[str, str | None]],
) -> None:
    """Point each report dataset's catalog table at the committed runs: created on first use
    (a partitioned Parquet table over ``<root>/<dataset>``, ``written`` its schema), given the
    columns a newer version of the dataset added (earlier dates read them as null), one
    partition per committed run date located at ``folders[dataset][date]``; partitions of
    dates without the dataset (folder None) dropped."""
    database = _identifier(catalog.database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    for name, schema in written.items():
        table = f"{database}.{_identifier(catalog.prefix + name)}"
        _create_or_widen(spark, table, schema, location=f"{root}/{name}")
        present = {
            row[0].removeprefix("run_date=")
            for row in spark.sql(f"SHOW PARTITIONS {table}").collect()
        }
        for date, folder in sorted(folders[name].items()):
            spec = f"PARTITION (run_date = '{date}')"
            if folder is None:
                if date in present:
                    spark.sql(f"ALTER TABLE {table} DROP IF EXISTS {spec}")
            elif date in present:
                spark.sql(f"ALTER TABLE {table} {spec} SET LOCATION '{_quoted(folder)}'")
            else:
                spark.sql(f"ALTER TABLE {table} ADD {spec} LOCATION '{_quoted(folder)}'")
        spark.catalog.refreshTable(table)


def _create_or_widen(
    spark: SparkSession, table: str, schema: T.StructType, *, location: str
) -> None:
    """Create ``table`` (partitioned by run_date, at ``location``) or add the columns of
    ``schema`` it lacks."""
    if not spark.catalog.tableExists(table):
        columns = ", ".join(_column(f) for f in schema.fields)
        spark.sql(
            f"CREATE TABLE {table} ({columns}, run_date STRING) USING parquet "
            f"PARTITIONED BY (run_date) LOCATION '{_quoted(location)}'"
        )
        return
    known = {c.name for c in spark.catalog.listColumns(table)}
    added = [f for f in schema.fields if f.name not in known]
    if added:
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({', '.join(map(_column, added))})")


def _column(field: T.StructField) -> str:
    """A column definition of a CREATE / ALTER TABLE statement."""
    return f"{_identifier(field.name)} {field.dataType.simpleString()}"


def _identifier(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ConfigError(
            f"output.catalog: {name!r} is not a plain identifier; use letters, digits and _"
        )
    return f"`{name}`"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
