"""A raw mapping validated into a job configuration, every problem named by its key in one
ConfigError (docs/configuration.md)."""

from __future__ import annotations

from typing import Any, overload

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from receval_spark.config.ranking_job import JobConfig
from receval_spark.config.session_job import SessionJobConfig
from receval_spark.errors import ConfigError


@overload
def validate_config(raw: dict[str, Any], *, schema: type[JobConfig] = ...) -> JobConfig: ...
@overload
def validate_config(raw: dict[str, Any], *, schema: type[SessionJobConfig]) -> SessionJobConfig: ...
def validate_config(
    raw: dict[str, Any], *, schema: type[JobConfig] | type[SessionJobConfig] = JobConfig
) -> JobConfig | SessionJobConfig:
    """Validate a raw mapping into a JobConfig (or ``schema``), naming the offending key."""
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    """One line per offending key. A value that fits none of a union's types yields one error
    per type with the type's name appended to the location; those merge into one line."""
    lines: dict[str, str] = {}
    alternatives: dict[str, list[tuple[str, ErrorDetails]]] = {}
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if not _is_union_tag(p)]
        if len(parts) > 1 and _is_type_name(parts[-1]):
            alternatives.setdefault(".".join(parts[:-1]), []).append((parts[-1], err))
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key (check its spelling: docs/configuration.md lists the keys)"
        elif err["type"] == "missing":
            message = "required key is missing"
        elif err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            parts.append(err["ctx"]["discriminator"].strip("'"))
            message = (
                f"unknown value {err['ctx']['tag']!r}; use one of {err['ctx']['expected_tags']}"
                if err["type"] == "union_tag_invalid"
                else "required key is missing"
            )
        lines[".".join(parts)] = message
    for key, found in alternatives.items():
        if len(found) > 1:
            for name, _ in found:
                lines.pop(f"{key}.{name}", None)
            if all(err["type"] == "literal_error" for _, err in found):
                choices = ", ".join(e["ctx"]["expected"].replace(" or ", ", ") for _, e in found)
                lines[key] = f"unknown value {found[0][1]['input']!r}; use one of {choices}"
            else:
                lines[key] = f"expected a value of type {' or '.join(name for name, _ in found)}"
    return "invalid configuration:\n  " + "\n  ".join(
        f"{k}: {m}" if k else m for k, m in lines.items()
    )


def _is_type_name(part: str) -> bool:
    return "[" in part or part in {"str", "int", "float", "bool", "datetime", "date", "dict"}


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and part in {
        "global_temporal",
        "leave_last_n",
        "user_random",
        "user_holdout",
        "popularity",
        "random",
        "oracle",
        "external",
        "als",
        "item_knn",
        "bias",
        "pop",
        "s-pop",
        "item-knn",
        "markov",
    }
