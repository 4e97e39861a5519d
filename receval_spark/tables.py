"""Report datasets as Delta Lake or Apache Iceberg tables (``output.format``; docs/tables.md):
the format's own operations, each through Spark SQL or the DataFrame writer, and nothing of
the commit itself (receval_spark.commit: the lease, the commit event, the committed reads).

Each dataset is one table partitioned by ``run_date`` that holds every run's rows, told apart
by ``run_id``. A run appends its rows (one transaction of the format per dataset) and records
the table version that holds them; readers keep only the committed runs' rows; superseded and
abandoned runs' rows are deleted afterwards (one ``DELETE`` per table).

Tables: Delta path tables ``delta.`<output.path>/<dataset>``` (with ``output.catalog`` also
registered by that location as ``<database>.<prefix><dataset>``); Iceberg catalog tables
``<database>.<prefix><dataset>``, where ``database`` names the namespace of an Iceberg catalog
(``lake.receval`` with ``spark.sql.catalog.lake`` an Iceberg ``SparkCatalog``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.config import CatalogConfig
from receval_spark.errors import ConfigError

TABLE_FORMATS = ("delta", "iceberg")
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOGS = (
    "org.apache.iceberg.spark.SparkCatalog",
    "org.apache.iceberg.spark.SparkSessionCatalog",
)
SETUP = {
    "delta": (
        "the jars io.delta:delta-spark_2.13 and delta-storage (spark.jars, e.g. version 4.3.1 "
        f"on Spark 4.1) and spark.sql.extensions={DELTA_EXTENSION}"
    ),
    "iceberg": (
        "the jar org.apache.iceberg:iceberg-spark-runtime-4.1_2.13 (spark.jars, e.g. version "
        f"1.12.0 on Spark 4.1), spark.sql.extensions={ICEBERG_EXTENSION} and an "
        "Iceberg catalog spark.sql.catalog.<name>=org.apache.iceberg.spark.SparkCatalog"
    ),
}


def table_locations(
    root: str, table_format: str, catalog: CatalogConfig | None, datasets: Iterable[str]
) -> dict[str, str]:
    """Where each dataset's table is (module doc): a Delta table's path, an Iceberg table's
    catalog name."""
    if table_format == "delta":
        return {name: f"{root}/{name}" for name in datasets}
    assert catalog is not None  # OutputConfig: format iceberg needs a catalog
    return {name: f"{catalog.database}.{catalog.prefix}{name}" for name in datasets}


def identifier(table_format: str, location: str) -> str:
    """The SQL identifier of the table at ``location`` (:func:`table_locations`)."""
    if table_format == "delta":
        return f"delta.{_quoted_part(location)}"
    return ".".join(_quoted_part(part) for part in location.split("."))


def require_format(spark: SparkSession, table_format: str, catalog: CatalogConfig | None) -> None:
    """ConfigError (one line: the jar and the setting) unless the session can write and
    delete rows of ``table_format`` tables."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    wanted = DELTA_EXTENSION if table_format == "delta" else ICEBERG_EXTENSION
    usable = wanted in extensions and _classes_load(spark, table_format, catalog)
    if not usable:
        raise ConfigError(
            f"output.format: {table_format} needs {SETUP[table_format]} in the Spark session "
            "(spark.conf of the config; docs/tables.md)"
        )


def _classes_load(spark: SparkSession, table_format: str, catalog: CatalogConfig | None) -> bool:
    """Whether the format's classes are on the session's class path (no Spark job)."""
    if table_format == "delta":
        try:
            spark.read.format("delta").load("file:/nonexistent/receval-probe")
        except AnalysisException as exc:
            return exc.getCondition() != "DATA_SOURCE_NOT_FOUND"
        return True
    name = (catalog.database if catalog else "spark_catalog").split(".")[0]
    if not spark.conf.get(f"spark.sql.catalog.{name}", ""):
        name = "spark_catalog"  # a database of the session catalog (SparkSessionCatalog)
    if spark.conf.get(f"spark.sql.catalog.{name}", "") not in ICEBERG_CATALOGS:
        return False
    try:
        spark.sql(f"SHOW NAMESPACES IN {_quoted_part(name)}").collect()
    except Exception as exc:  # a catalog that loads may still fail (e.g. a new warehouse)
        text = str(exc)
        return "CATALOG_PLUGIN_CLASS_NOT_FOUND" not in text and "plugin class" not in text
    return True


def append_run(
    tables: Mapping[str, DataFrame],
    locations: Mapping[str, str],
    *,
    table_format: str,
    run_date: str,
) -> dict[str, int]:
    """Append each dataset's rows with their ``run_date`` to its table (created on first use,
    partitioned by run_date; columns a newer version adds are added), one transaction of
    the format per dataset; the table version (Delta) or snapshot id (Iceberg) holding them."""
    versions = {}
    for name, table in tables.items():
        rows = table.withColumn("run_date", F.lit(run_date))
        target = refreshed(rows.sparkSession, table_format, locations[name])
        if table_format == "delta":
            rows.write.format("delta").mode("append").option("mergeSchema", "true").partitionBy(
                "run_date"
            ).save(locations[name])
        else:
            _create_iceberg(rows, target)
            rows.writeTo(target).option("mergeSchema", "true").append()
        versions[name] = latest_version(rows.sparkSession, target, table_format)
    return versions


def _create_iceberg(rows: DataFrame, name: str) -> None:
    """Create the Iceberg table of ``rows`` (every column nullable, partitioned by run_date,
    accepting columns a later version adds) unless it exists."""
    spark = rows.sparkSession
    namespace = name.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    if spark.catalog.tableExists(name.replace("`", "")):
        return
    schema = _nullable(rows.schema)
    assert isinstance(schema, T.StructType)
    empty = spark.createDataFrame([], schema)
    empty.writeTo(name).using("iceberg").partitionedBy(F.col("run_date")).tableProperty(
        "write.spark.accept-any-schema", "true"
    ).create()


def _nullable(data_type: T.DataType) -> T.DataType:
    """``data_type`` with every field, element and value nullable."""
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _nullable(f.dataType), True) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type


def latest_version(spark: SparkSession, name: str, table_format: str) -> int:
    """The table's current Delta version or Iceberg snapshot id: for Iceberg the snapshot its
    ``main`` branch points to (the ``refs`` metadata table), not the newest ``committed_at``,
    which two commits within one millisecond would share."""
    if table_format == "delta":
        row = spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").first()
        assert row is not None  # a table has at least its creating version
        return int(row["version"])
    row = spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").first()
    assert row is not None  # the append made one, and a table's current state is main
    return int(row["snapshot_id"])


def delete_runs(
    spark: SparkSession, table_format: str, location: str, runs: Sequence[tuple[str, str]]
) -> None:
    """Delete the rows of ``runs`` ((run_date, run_id) pairs) from a table, in one
    transaction of its format (nothing when the table does not exist yet)."""
    if not runs:
        return
    name = refreshed(spark, table_format, location)
    dates = ", ".join(sorted({_literal(date) for date, _ in runs}))
    run_ids = ", ".join(sorted({_literal(run_id) for _, run_id in runs}))
    try:
        # literals, not parameters: Delta's DELETE is planned before parameters are bound
        spark.sql(f"DELETE FROM {name} WHERE run_date IN ({dates}) AND run_id IN ({run_ids})")
    except AnalysisException as exc:
        if exc.getCondition() not in ("TABLE_OR_VIEW_NOT_FOUND", "DELTA_TABLE_NOT_FOUND"):
            raise


def read_runs(
    spark: SparkSession,
    table_format: str,
    location: str,
    run_ids: Sequence[str],
    *,
    version: int | None = None,
) -> DataFrame:
    """The rows of ``run_ids`` in a table, as of ``version`` (Delta version or Iceberg
    snapshot id; None: the current one, as committed by any process)."""
    name = refreshed(spark, table_format, location)
    travel = "" if version is None else f" VERSION AS OF {int(version)}"
    rows = spark.sql(f"SELECT * FROM {name}{travel}")
    return rows.filter(F.col("run_id").isin(*run_ids))


def refreshed(spark: SparkSession, table_format: str, location: str) -> str:
    """The table's identifier, after dropping what the session cached of it: an Iceberg
    catalog caches a table's metadata per session, so another process's commits (a re-run, a
    killed run's rows) are unseen until it is refreshed."""
    name = identifier(table_format, location)
    if table_format == "iceberg" and spark.catalog.tableExists(location):
        spark.sql(f"REFRESH TABLE {name}")
    return name


def register_delta(
    spark: SparkSession, locations: Mapping[str, str], catalog: CatalogConfig
) -> None:
    """Register each Delta path table in the session catalog by its location, as
    ``<database>.<prefix><dataset>`` (once; Delta keeps its schema in its own log)."""
    database = _quoted_part(catalog.database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    for dataset, location in locations.items():
        table = f"{database}.{_quoted_part(catalog.prefix + dataset)}"
        quoted = location.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table} USING delta LOCATION '{quoted}'")


def _literal(value: str) -> str:
    """A run date or run id as a SQL string literal (they are made of letters, digits, -, :)."""
    if not re.fullmatch(r"[\w:.-]+", value):
        raise ValueError(f"not a run date or run id: {value!r}")
    return f"'{value}'"


def _quoted_part(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
