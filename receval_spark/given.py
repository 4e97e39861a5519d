"""The API's arguments: the DataFrames a caller gives in place of the config's sources, and
the validated job config they complete (docs/index.md#from-python)."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from pyspark.sql import DataFrame

from receval_spark.columns import PREDICTION, RATING, TIMESTAMP
from receval_spark.config import JobConfig, SessionJobConfig, validate_config
from receval_spark.config_files import check_sources, read_config_file, resolve_paths
from receval_spark.errors import ConfigError, InputError

ConfigLike = JobConfig | SessionJobConfig | Mapping[str, Any] | str | os.PathLike[str]
_Config = TypeVar("_Config", JobConfig, SessionJobConfig)


def given_frames(
    data: Mapping[str, DataFrame | None], models: Mapping[str, DataFrame] | None
) -> dict[str, DataFrame]:
    """The DataFrames given, keyed as the config's sources: ``data.<name>``, ``models.<name>``."""
    given = {f"data.{name}": df for name, df in data.items() if df is not None}
    given |= {f"models.{name}": df for name, df in (models or {}).items()}
    for key, df in given.items():
        if not isinstance(df, DataFrame):
            raise ConfigError(
                f"{key}: expected a Spark DataFrame, got {type(df).__name__}; pass "
                "spark.createDataFrame(...) of it"
            )
    return given


def load_job_config(config: ConfigLike, schema: type[_Config]) -> _Config:
    """The validated config of ``schema`` from a mapping, a YAML path or a config object, its
    input paths checked (ConfigError / InputError naming the problem)."""
    return job_config(config, schema, {})


def job_config(
    config: ConfigLike, schema: type[_Config], given: Mapping[str, DataFrame]
) -> _Config:
    """The validated config of ``schema`` with the given DataFrames' sources filled in: a
    ``data.<name>`` section is created where absent, and a model ``{name, kind: external}``
    added for each given model the config does not name."""
    if isinstance(config, JobConfig | SessionJobConfig) and not isinstance(config, schema):
        function = "evaluate" if schema is JobConfig else "evaluate_sessions"
        raise ConfigError(
            f"config: {type(config).__name__} is not the configuration of {function}; "
            f"pass a {schema.__name__}"
        )
    if isinstance(config, schema) and not given:
        job = config
    else:
        if isinstance(config, BaseModel):
            raw = config.model_dump(exclude_unset=True)
        elif isinstance(config, str | os.PathLike):
            raw = read_config_file(config)
        elif isinstance(config, Mapping):
            raw = copy.deepcopy(dict(config))
            resolve_paths(raw, base=Path.cwd())
        else:
            raise ConfigError(
                f"config: expected a mapping, a YAML path or a {schema.__name__}, got "
                f"{type(config).__name__}"
            )
        _fill_sources(raw, given, schema)
        job = validate_config(raw, schema=schema)
        rated: list[str] = _canonical_ratings(job, given) if isinstance(job, JobConfig) else []
        for key in rated:
            raw["data"][key.removeprefix("data.")].setdefault("columns", {})["rating"] = RATING
        if rated:
            job = validate_config(raw, schema=schema)
        if isinstance(job, JobConfig) and _untimed_parts(raw, given):
            job = validate_config(raw, schema=schema)
    check_sources(job, given)
    return job


def _canonical_ratings(job: JobConfig, given: Mapping[str, DataFrame]) -> list[str]:
    """The interaction tables given as DataFrames (``data.interactions``, or ``data.train``
    and ``data.test``) that supply the ratings the job needs under the canonical name
    ``rating`` (no rating column mapped); InputError when the log or the test set has no such
    column (a train set without ratings is left as it is)."""
    needs = job.needs_ratings
    if needs is None:
        return []
    keys = []
    for key, source in job.interaction_sources.items():
        frame = given.get(key)
        if frame is None or source.columns.rating is not None:
            continue
        if RATING in frame.columns:
            keys.append(key)
        elif key != "data.train":
            raise InputError(
                f"{key}: {needs} needs ratings, but the DataFrame given has no column "
                f"{RATING!r} (it has {frame.columns}); add one, or map yours with "
                f"{key}.columns.rating."
            )
    return keys


def _untimed_parts(raw: dict[str, Any], given: Mapping[str, DataFrame]) -> bool:
    """Under the given split, a train or test DataFrame without the default ``timestamp``
    column, whose config does not name one, has no timestamps (``columns.timestamp: null``
    set in ``raw``): pre-split data needs none. Whether ``raw`` changed."""
    changed = False
    for name in ("train", "test"):
        frame = given.get(f"data.{name}")
        section = raw.get("data", {}).get(name)
        if frame is None or not isinstance(section, dict):
            continue
        columns = section.setdefault("columns", {})
        if (
            isinstance(columns, dict)
            and "timestamp" not in columns
            and TIMESTAMP not in frame.columns
        ):
            columns["timestamp"] = None
            changed = True
    return changed


def _fill_sources(
    raw: dict[str, Any], given: Mapping[str, DataFrame], schema: type[BaseModel]
) -> None:
    if schema is JobConfig and "data.test" in given:
        raw.setdefault("split", {"method": "given"})  # a given test set: the given split
    data = raw.setdefault("data", {})
    models = raw.setdefault("models", [])
    for key in given:
        section, _, name = key.partition(".")
        if section == "data" and isinstance(data, dict) and data.get(name) is None:
            data[name] = {}
        if section == "models" and isinstance(models, list):
            named = [m for m in models if isinstance(m, dict) and m.get("name") == name]
            if not named:
                added: dict[str, Any] = {"name": name, "kind": "external"}
                if raw.get("task") == "rating_prediction":  # it gives predicted ratings
                    added["columns"] = {"prediction": PREDICTION}
                models.append(added)
            elif named[0].get("kind") != "external":
                raise ConfigError(
                    f"models.{name}: a DataFrame was given for it, but the config's model "
                    f"{name!r} has kind {named[0].get('kind')!r}; give the DataFrame another "
                    "name, or make the model kind: external"
                )
