"""Sections both jobs share: run, spark, output, tracking, catalog, file sources, cut-offs,
and the model-name rule (docs/configuration.md)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    """A config section: unknown keys are errors, values immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RunConfig(_Strict):
    name: str = Field(default="receval", description="Name of the run, written into `runs/`.")
    date: dt.date | None = Field(
        default=None,
        description="The `run_date` partition the reports are written to; null: today (UTC) "
        "when the job starts.",
    )


class SparkConfig(_Strict):
    master: str = Field(
        default="local[*]",
        description="Master of the local session the job starts, e.g. `local[2]`; ignored "
        "under spark-submit and with `remote`.",
    )
    remote: str | None = Field(
        default=None,
        description="A Spark Connect server to run as a client of, `sc://HOST:PORT`; null: "
        "a local session.",
    )
    conf: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Spark settings over the job's defaults (UTC session time zone, AQE on, 16 "
        "shuffle partitions).",
    )
    class_archive: bool = Field(
        default=True,
        description="Whether a driver JVM the job starts maps a class-data archive of an "
        "earlier run's classes (a faster start); false: it loads Spark's classes anew.",
    )

    @field_validator("remote")
    @classmethod
    def _connect_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"sc://[^/\s]+", value):
            raise ValueError(
                f"{value!r} is not a Spark Connect URL; give sc://HOST:PORT (e.g. "
                "sc://127.0.0.1:15002), or leave spark.remote out for local Spark"
            )
        return value


class CatalogConfig(_Strict):
    """Register every report dataset as a partitioned table ``<database>.<prefix><dataset>``
    of the session catalog (the Hive metastore on a cluster), pointed at the committed runs."""

    database: str = Field(
        default="receval", description="Database of the session catalog the tables are in."
    )
    prefix: str = Field(
        default="", description="Prefix of every table name: `<database>.<prefix><dataset>`."
    )


class MlflowConfig(_Strict):
    """Log each evaluation run as an MLflow run: the config as params, the headline metrics at
    each k as metrics, the summary, the metrics table and the human report as artifacts.
    ``tracking_uri``: the tracking server or store (default: MLflow's own, MLFLOW_TRACKING_URI)."""

    tracking_uri: str | None = Field(
        default=None,
        description="The MLflow tracking server or store; null: MLflow's own default "
        "(MLFLOW_TRACKING_URI).",
    )
    experiment: str = Field(default="receval", description="MLflow experiment of the runs.")

    @model_validator(mode="after")
    def _installed(self) -> MlflowConfig:
        if importlib.util.find_spec("mlflow") is None:
            raise ValueError(
                "tracking.mlflow needs MLflow: pip install 'receval_spark[mlflow]' "
                "(or remove tracking.mlflow)"
            )
        return self


class TrackingConfig(_Strict):
    mlflow: MlflowConfig | None = Field(
        default=None, description="Log each run to MLflow; null: no tracking."
    )


class OutputConfig(_Strict):
    path: str = Field(default="reports", description="Root folder (or URI) of the reports.")
    per_user: bool = Field(
        default=False,
        description="Also write `per_user/`, each evaluated user's values (alerts with "
        "`significance` compare them).",
    )
    lists: bool = Field(
        default=False,
        description="Also write `lists/`, every model's top-k lists, and report each model's "
        "night-over-night stability against the previous date that wrote them (ranking job).",
    )
    catalog: CatalogConfig | None = Field(
        default=None,
        description="Register the report datasets as tables of the session catalog; null: no "
        "tables.",
    )
    lease_seconds: float = Field(
        default=600.0,
        gt=0,
        description="Seconds a writer's lease on `output.path` lasts: a killed driver's lease "
        "lapses after this long.",
    )
    format: Literal["parquet", "delta", "iceberg"] = Field(
        default="parquet",
        description="How the report datasets are stored: `parquet` (folders per run under "
        "`path`, no extra jars), `delta` (one Delta Lake table per dataset under `path`) or "
        "`iceberg` (one Iceberg table per dataset in the namespace `catalog.database` of an "
        "Iceberg catalog); the commit log stays under `path` (docs/tables.md).",
    )

    @model_validator(mode="after")
    def _iceberg_catalog(self) -> OutputConfig:
        if self.format == "iceberg" and self.catalog is None:
            raise ValueError(
                "format iceberg writes catalog tables: set output.catalog.database to a "
                "namespace of an Iceberg catalog (e.g. lake.receval, with "
                "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog)"
            )
        return self


ReaderOption = str | int | float | bool


class _FileSource(_Strict):
    """Where a table lives and how to read it: a file or folder (``path``, any format Spark's
    DataFrameReader knows, with reader ``options``) or a catalog table (``table``), optionally
    restricted at the read by a SQL predicate (``where``); the CSV keys apply to
    ``format: csv`` only (docs/configuration.md#input-tables).

    Neither ``path`` nor ``table`` is needed when the table is given to the Python API as a
    DataFrame (``receval_spark.evaluate(..., interactions=df)``); the column names and
    ``where`` still apply to it."""

    path: str | None = Field(
        default=None,
        description="File, folder or glob of the table (any Hadoop filesystem URI); left out "
        "with `table` or for a DataFrame given to the Python API.",
    )
    table: str | None = Field(
        default=None,
        min_length=1,
        description="A table of the session catalog, `name`, `db.name` or `catalog.db.name` "
        "(Hive metastore, Unity, Glue, Delta, Iceberg), instead of `path`.",
    )
    format: str = Field(
        default="parquet",
        pattern=r"^[A-Za-z][A-Za-z0-9_.\-]*$",
        description="With `path`: the DataFrameReader format (parquet, csv, json, orc, text; "
        "avro, delta, iceberg where the session has their jars).",
    )
    options: dict[str, ReaderOption] = Field(
        default_factory=dict,
        description="Options handed to the reader as given (e.g. `versionAsOf` of a Delta "
        "table, `multiLine` of JSON); for CSV they override the keys below.",
    )
    where: str | None = Field(
        default=None,
        min_length=1,
        description="A Spark SQL predicate on the source's own columns applied at the read "
        "(pushed down to the files or table where the format can), e.g. "
        "`ts >= '2026-11-01'`; null: every row.",
    )
    header: bool = Field(default=True, description="CSV: the first row holds the column names.")
    delimiter: str = Field(default=",", description="CSV: the field separator.")
    encoding: str = Field(default="UTF-8", description="CSV: the character encoding.")
    column_names: list[str] | None = Field(
        default=None,
        description="CSV without a header row (`header: false`), or any source: its columns' "
        "names, in order.",
    )
    version: int | None = Field(
        default=None,
        ge=0,
        description="Time travel (`format: delta` or `iceberg`, or a catalog table of those "
        "formats): read the table as of this Delta version or Iceberg snapshot id, so a re-run "
        "of a date reads the same rows; null: the current version (docs/tables.md#inputs).",
    )
    as_of: dt.datetime | None = Field(
        default=None,
        description="Time travel like `version`, by instant: the table as it was at this "
        "ISO-8601 time (UTC unless it names a zone); null: the current version.",
    )

    @model_validator(mode="after")
    def _time_travel(self) -> _FileSource:
        if self.version is None and self.as_of is None:
            return self
        if self.version is not None and self.as_of is not None:
            raise ValueError("give version or as_of, not both")
        if self.table is None and self.format.lower() not in ("delta", "iceberg"):
            raise ValueError(
                f"version and as_of read a Delta or Iceberg table; format {self.format} has no "
                "versions (set format: delta or iceberg, or table: for a catalog table)"
            )
        travel = {"versionasof", "timestampasof", "snapshot-id", "as-of-timestamp"}
        if travel & {name.lower() for name in self.options}:
            raise ValueError("give the version through version or as_of, not options")
        return self

    @model_validator(mode="after")
    def _path_or_table(self) -> _FileSource:
        if self.path is not None and self.table is not None:
            raise ValueError("give path or table, not both")
        if self.table is not None and "format" in self.model_fields_set:
            raise ValueError(
                "format applies to a path; a catalog table is read in its own format "
                "(remove format, or give path instead of table)"
            )
        return self

    @property
    def location(self) -> str | None:
        """What is read: the path or the catalog table's name (None: a DataFrame given)."""
        return self.path if self.path is not None else self.table


class _Job(_Strict):
    """The sections every job starts with; each job's schema adds its own."""

    run: RunConfig = Field(default_factory=RunConfig, description="The run's name and date.")
    spark: SparkConfig = Field(
        default_factory=SparkConfig,
        description="The Spark session the job runs on (docs/cluster.md).",
    )
    output: OutputConfig = Field(
        default_factory=OutputConfig,
        description="Where the report datasets are written (docs/datasets.md).",
    )


def _cut_offs(ks: list[int]) -> list[int]:
    """The cut-offs k, sorted, each once; at least one."""
    if not ks:
        raise ValueError("evaluation.k needs at least one cut-off")
    return sorted(set(ks))


CutOffs = Annotated[list[Annotated[int, Field(ge=1, le=1000)]], AfterValidator(_cut_offs)]


Timepoint = dt.datetime | dt.date | float


# a model's name, as both jobs' models take it
ModelName = Annotated[
    str, Field(description="The model's name in every report row; unique among the models.")
]


def _check_model_names(names: list[str]) -> None:
    """At least one model, and unique names."""
    if not names:
        raise ValueError("models: configure at least one model")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"models: model names must be unique, repeated: {duplicated}")
