"""Reading a job configuration: a YAML file, ``--set KEY=VALUE`` overrides, relative paths
resolved, and the checks that every input has a readable path (or a DataFrame given to the
API) and that a local output folder is writable. The schemas themselves are in
:mod:`receval_spark.config`.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, overload
from urllib.parse import urlparse

import yaml

from receval_spark.config.common import _FileSource
from receval_spark.config.ranking_job import JobConfig
from receval_spark.config.ranking_models import ExternalModel
from receval_spark.config.session_job import ExternalSessionModel, SessionJobConfig
from receval_spark.config.validation import validate_config
from receval_spark.errors import ConfigError

_PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("output", "path"),
    ("data", "interactions", "path"),
    ("data", "items", "path"),
    ("data", "impressions", "path"),
    ("data", "clicks", "path"),
    ("data", "train", "path"),
    ("data", "test", "path"),
    ("data", "catalogue", "path"),
    ("evaluation", "user_segments", "path"),
    ("evaluation", "item_segments", "path"),
)


@overload
def load_config(
    path: str | os.PathLike[str], overrides: Sequence[str] = (), *, schema: type[JobConfig] = ...
) -> JobConfig: ...


@overload
def load_config(
    path: str | os.PathLike[str], overrides: Sequence[str] = (), *, schema: type[SessionJobConfig]
) -> SessionJobConfig: ...


def load_config(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    *,
    schema: type[JobConfig] | type[SessionJobConfig] = JobConfig,
) -> JobConfig | SessionJobConfig:
    """Read a YAML config, apply ``KEY=VALUE`` overrides, resolve paths and validate.

    Relative paths written in the file resolve against the file's folder; relative paths
    given with ``--set`` resolve against the current directory. Local input paths must exist
    and be readable; a local output path must be (or be creatable as) a writable folder.
    """
    config = validate_config(read_config_file(path, overrides), schema=schema)
    check_sources(config)
    check_output_path(config.output.path)
    return config


def read_config_file(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The raw mapping of a YAML config with ``overrides`` applied and relative local paths
    made absolute (against the file's folder, and the current directory for ``--set``)."""
    config_path = Path(path)
    try:
        raw = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--config: cannot read {config_path}: {exc.strerror}") from exc
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: undecodable text, a bad date
        raise ConfigError(
            f"--config: {config_path} is not valid YAML: {_yaml_problem(exc)}"
        ) from exc
    if not isinstance(raw, dict):
        raise ConfigError(
            f"--config: {config_path} must hold a mapping of sections (run, data, ...)"
        )
    resolve_paths(raw, base=config_path.resolve().parent)
    for override in overrides:
        _apply_override(raw, override)
    resolve_paths(raw, base=Path.cwd())
    return raw


def _apply_override(raw: dict[str, Any], override: str) -> None:
    """Set a dotted key (list positions as numbers: ``models.3.path``) to a YAML-parsed value."""
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {override!r}: expected KEY=VALUE, e.g. --set evaluation.k=[5,10]")
    try:
        value = yaml.safe_load(text) if text else None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: e.g. a date like 2026-13-45
        raise ConfigError(f"--set {key}: value is not valid YAML: {_yaml_problem(exc)}") from exc
    parts = key.split(".")
    if parts[:2] == ["spark", "conf"] and len(parts) > 2:
        parts = [*parts[:2], ".".join(parts[2:])]  # Spark option names contain dots
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        node = _child(node, part, ".".join(parts[: i + 1]))
    last = parts[-1]
    if isinstance(node, list):
        node[_index(node, last, key)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError(f"--set {key}: {'.'.join(parts[:-1])} is not a section")


def _yaml_problem(exc: Exception) -> str:
    """What is wrong in a YAML text, and where (a bad date raises a plain ValueError)."""
    problem = getattr(exc, "problem", None)
    if problem is None:
        return str(exc)
    context = getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{context + ': ' if context else ''}{problem}{where}"


def _child(node: Any, part: str, key: str) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, key)]
    if not isinstance(node, dict):
        raise ConfigError(f"--set {key}: parent is not a section")
    return node.setdefault(part, {})


def _index(node: list[Any], part: str, key: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"--set {key}: {part!r} is not a position in a list of {len(node)}")
    return int(part)


def _is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is no scheme


def _local_path(path: str) -> Path:
    return Path(urlparse(path).path) if path.startswith("file:") else Path(path)


def resolve_paths(raw: dict[str, Any], *, base: Path) -> None:
    """Make relative local paths absolute against ``base`` (URIs such as s3a:// are left alone)."""

    def fix(node: Any, key: str, name: str) -> None:
        if isinstance(node, dict) and isinstance(node.get(key), str):
            value = node[key]
            if "\0" in value:
                raise ConfigError(f"{name}: {value!r} holds a NUL character; fix the path")
            if _is_local(value) and not value.startswith("file:") and not Path(value).is_absolute():
                node[key] = str((base / value).resolve())

    for keys in _PATH_KEYS:
        node: Any = raw
        for part in keys[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        fix(node, keys[-1], ".".join(keys))
    models = raw.get("models")
    for i, model in enumerate(models if isinstance(models, list) else []):
        fix(model, "path", f"models.{i}.path")


def check_sources(config: JobConfig | SessionJobConfig, given: Collection[str] = ()) -> None:
    """Every input source has a path, a catalog table or a DataFrame (``given``: the keys,
    e.g. ``data.interactions`` or ``models.my_model``, the caller passed as DataFrames), and
    every local path (or glob) exists and is readable."""
    for source, key, table in _sources(config):
        if source in given:
            continue
        if table.location is None:
            raise ConfigError(
                f"{key}: required key is missing; set it to the table's path (or .table to a "
                f"catalog table), or pass the table as a DataFrame "
                f"({_api_argument(source, config)})"
            )
        if table.path is not None and _is_local(table.path):
            _check_readable(table.path, key)


def _sources(config: JobConfig | SessionJobConfig) -> list[tuple[str, str, _FileSource]]:
    """(source key, config key of its path, its section) of every input the config reads."""
    if isinstance(config, JobConfig):
        logs: dict[str, _FileSource] = dict(config.interaction_sources)
        data = config.data
        named = {
            "data.items": data.items,
            "data.catalogue": data.catalogue,
            "data.impressions": data.impressions,
            "evaluation.user_segments": config.evaluation.user_segments,
            "evaluation.item_segments": config.evaluation.item_segments,
        }
        logs |= {key: section for key, section in named.items() if section is not None}
    else:
        logs = {
            f"data.{name}": section
            for name in ("clicks", "train", "test")
            if (section := getattr(config.data, name)) is not None
        }
    sources = [(key, f"{key}.path", section) for key, section in logs.items()]
    sources += [
        (f"models.{m.name}", f"models.{i}.path ({m.name})", m)
        for i, m in enumerate(config.models)
        if isinstance(m, ExternalModel | ExternalSessionModel)
    ]
    return sources


def _check_readable(path: str, key: str) -> None:
    """A local path (or every match of a glob) exists and is readable by this user."""
    local = _local_path(path)
    matches = [Path(p) for p in glob.glob(str(local))] if glob.has_magic(str(local)) else [local]
    if not matches or not os.path.exists(matches[0]):
        raise ConfigError(f"{key}: {path} does not exist; point it at a readable file or folder")
    for match in matches:
        if not os.access(match, os.R_OK | (os.X_OK if os.path.isdir(match) else 0)):
            raise ConfigError(
                f"{key}: {match} is not readable by this user; fix its permissions or point "
                "it at a readable copy"
            )


def _api_argument(source: str, config: JobConfig | SessionJobConfig) -> str:
    """The Python API's argument that gives ``source`` as a DataFrame."""
    function = "evaluate" if isinstance(config, JobConfig) else "evaluate_sessions"
    section, _, name = source.partition(".")
    if section == "models":
        table = "recommendations" if isinstance(config, JobConfig) else "predictions"
        return f"{table}={{{name!r}: df}} of receval_spark.{function}"
    return f"{name}=df of receval_spark.{function}"


def check_output_path(path: str) -> None:
    """A local output.path must be a folder, or creatable as one, that this user can write."""
    if not _is_local(path):
        return
    local = _local_path(path)
    existing = next(p for p in (local, *local.parents) if os.path.exists(p))
    if not os.path.isdir(existing):
        raise ConfigError(
            f"output.path: {existing} is a file, not a folder; point output.path at a folder "
            "(it is created when missing)"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            f"output.path: {existing} is not writable by this user; fix its permissions or "
            "choose another folder"
        )
