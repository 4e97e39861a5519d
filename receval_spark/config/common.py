"""Sections both jobs share: run, spark, output, tracking, catalog, file sources, cut-offs,
and the model-name rule (docs/configuration.md)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunConfig(_Strict):
    name: str = "receval"
    date: dt.date | None = None  # defaults to today (UTC) when the job starts


class SparkConfig(_Strict):
    master: str = "local[*]"
    remote: str | None = None  # a Spark Connect server, sc://host:15002
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # a driver JVM the job starts maps a class-data archive of an earlier run's classes
    # (receval_spark.class_archive); false: every start loads Spark's classes anew
    class_archive: bool = True

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

    database: str = "receval"
    prefix: str = ""


class MlflowConfig(_Strict):
    """Log each evaluation run as an MLflow run: the config as params, the headline metrics at
    each k as metrics, the summary, the metrics table and the human report as artifacts.
    ``tracking_uri``: the tracking server or store (default: MLflow's own, MLFLOW_TRACKING_URI)."""

    tracking_uri: str | None = None
    experiment: str = "receval"

    @model_validator(mode="after")
    def _installed(self) -> MlflowConfig:
        if importlib.util.find_spec("mlflow") is None:
            raise ValueError(
                "tracking.mlflow needs MLflow: pip install 'receval_spark[mlflow]' "
                "(or remove tracking.mlflow)"
            )
        return self


class TrackingConfig(_Strict):
    mlflow: MlflowConfig | None = None


class OutputConfig(_Strict):
    path: str = "reports"
    per_user: bool = False
    catalog: CatalogConfig | None = None
    # a writer's lease on output.path; a killed driver's lease lapses after this long
    lease_seconds: float = Field(default=600.0, gt=0)


class _FileSource(_Strict):
    """Where a table lives and how to parse it (CSV options apply to ``format: csv`` only).

    ``path`` may be left out when the table is given to the Python API as a DataFrame
    (``receval_spark.evaluate(..., interactions=df)``); the column names still apply to it."""

    path: str | None = None
    format: Literal["parquet", "csv"] = "parquet"
    header: bool = True
    delimiter: str = ","
    encoding: str = "UTF-8"
    column_names: list[str] | None = None  # names for a CSV without a header row


def _cut_offs(ks: list[int]) -> list[int]:
    """The cut-offs k, sorted, each once; at least one."""
    if not ks:
        raise ValueError("evaluation.k needs at least one cut-off")
    return sorted(set(ks))


CutOffs = Annotated[list[Annotated[int, Field(ge=1, le=1000)]], AfterValidator(_cut_offs)]


Timepoint = dt.datetime | dt.date | float


def _check_model_names(names: list[str]) -> None:
    """At least one model, and unique names."""
    if not names:
        raise ValueError("models: configure at least one model")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"models: model names must be unique, repeated: {duplicated}")
