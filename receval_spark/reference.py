"""The documentation's reference pages, generated from the code (docs/hooks.py builds them
into the site): every configuration key from the config schema, every metric from the
registry. Pure Python: no Spark."""

from __future__ import annotations

import inspect
import json
import math
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from receval_spark import registry
from receval_spark.config.ranking_job import JobConfig
from receval_spark.config.session_job import SessionJobConfig

Row = tuple[str, str, str, str]  # key, type, default, meaning


def configuration_page() -> str:
    """Markdown: one table per section of each job's configuration (key, type, default,
    meaning: the field's description) under the section's own description; a section per
    variant where a key takes one of several shapes (split methods, model kinds, data
    sources)."""
    out = [
        "# Configuration reference",
        "",
        "Generated from the configuration schema (`receval_spark.config`) when the site is "
        "built, so it lists exactly the keys the job accepts. A YAML file, `--set KEY=VALUE` "
        "and the Python API's mapping take the same keys; an unknown key is an error.",
        "",
    ]
    for title, schema in (
        ("Ranking job (`receval evaluate`, `evaluate`)", JobConfig),
        ("Session job (`receval sessions`, `evaluate_sessions`)", SessionJobConfig),
    ):
        out += [f"## {title}", ""]
        for heading, doc, rows in sections(schema):
            out += [f"### {heading}", ""]
            if doc:
                out += [doc, ""]
            if rows:
                out += ["| key | type | default | meaning |", "|---|---|---|---|"]
                out += [f"| `{k}` | {t} | {d} | {_cell(m)} |" for k, t, d, m in rows]
                out.append("")
    return "\n".join(out)


def sections(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, list[Row]]]:
    """(heading, the model's docstring, its scalar keys) for ``model`` and, depth first, every
    model a key of it holds, that key's description leading the first variant's docstring."""
    rows: list[Row] = []
    nested: list[tuple[str, type[BaseModel], str]] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        shapes = _models(field.annotation)
        if shapes:
            many = _is_list(field.annotation)
            for i, shape in enumerate(shapes):
                label = f"{key}[]" if many else key
                variant = f"{label} ({_variant(shape)})" if len(shapes) > 1 else label
                nested.append((variant, shape, (field.description or "") if i == 0 else ""))
            continue
        kind = type_text(field.annotation) + _constraints(field.metadata)
        rows.append((key, kind, _default(field), field.description or ""))
    yield (f"`{prefix.rstrip('.')}`" if prefix else "top level"), _doc(model), rows
    for label, shape, meaning in nested:
        yield from sections_under(shape, label, f"{label.split(' ')[0]}.", meaning)


def sections_under(
    model: type[BaseModel], label: str, prefix: str, meaning: str = ""
) -> Iterator[tuple[str, str, list[Row]]]:
    """:func:`sections` of ``model`` under the heading ``label``, the first led by
    ``meaning`` (the description of the key that holds it)."""
    for i, (heading, doc, rows) in enumerate(sections(model, prefix)):
        if i == 0:
            yield f"`{label}`", " ".join(text for text in (meaning, doc) if text), rows
        else:
            yield heading, doc, rows


def type_text(annotation: Any) -> str:
    """A readable type: literals as their values, unions with "or", constraints as ranges."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return ", ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(type_text(a) for a in args)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"map of {type_text(args[0])} to {type_text(args[1])}"
    if origin is Annotated:
        return type_text(args[0]) + _constraints(args[1:])
    return getattr(annotation, "__name__", str(annotation))


FAMILIES: tuple[tuple[registry.Family, str], ...] = (
    ("accuracy", "Accuracy (per evaluated user at k, then the macro average)"),
    ("beyond", "Beyond accuracy"),
    (
        "stability",
        "Night-over-night stability (`output.lists`; per user of both nights at k, by segment "
        "and for `idle` users)",
    ),
    ("rating", "Rating prediction (`task: rating_prediction` only)"),
    ("session", "Session protocol (per prediction event)"),
)

# what differs before any formula: whom a tool averages over, which lists it scores
PROTOCOL_DIFFERENCES = (
    (
        "evaluated users",
        "every user with a relevant test item; no list scores 0",
        "the same (an empty prediction array scores 0)",
        "only users with a recommendation (inner join): dropping users who would score 0 can "
        "only raise the means",
        "the users of the ground truth; no list scores 0",
        "every test user, ranked against the full catalogue",
    ),
    (
        "seen items",
        "removed from the lists (`filter_seen`)",
        "whatever the lists hold",
        "whatever the lists hold",
        "removed by the models (`filter_seen_items`)",
        "masked in the full ranking",
    ),
    (
        "ties",
        "score descending, then item id ascending",
        "the array order given",
        "`row_number` over the score alone: arbitrary",
        "score descending, then the larger item id",
        "`torch.topk` over scores: unspecified",
    ),
    (
        "relevance",
        "`Rel(u)` by an explicit rule (implicit, threshold, graded)",
        "the label array",
        "every row of the truth table, whatever its rating",
        "every row of the ground truth",
        "every test interaction (or its `threshold` on a label field)",
    ),
)


def metrics_page() -> str:
    """Markdown: every metric of the registry with its definition and properties, then how
    other tools (:data:`registry.PEER_TOOLS`) define the metrics they share with us."""
    out = [
        "# Metric reference",
        "",
        "Generated from the metric registry (`receval_spark/registry.py`) when the site is "
        "built: the one definition every part of the job reads (intervals, alerts, reports). "
        "*Profiles*: reported under `evaluation.definitions: spark_mllib` / `recommenders` too, "
        "as those tools compute it.",
        "",
    ]
    for family, title in FAMILIES:
        out += [f"## {title}", ""]
        out += [
            "| metric | definition | range | better | per k | interval | profiles | reference |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m in registry.family(family):
            out.append(
                f"| `{m.name}` | {_cell(m.formula)} | {_range(m.bounds)} | "
                f"{'larger' if m.larger_is_better else 'smaller'} | "
                f"{'yes' if m.has_k else 'no'} | {_interval(m)} | "
                f"{'yes' if m.peer_defined else 'no'} | {_cell(m.reference)} |"
            )
        out.append("")
    return "\n".join(out + _peers_section())


def _peers_section() -> list[str]:
    """How each tool of :data:`registry.PEER_TOOLS` differs: first in protocol, then per
    metric (the tool's name for it and what differs; — where it has none)."""
    tools = list(registry.PEER_TOOLS)
    head = ["| | receval_spark | " + " | ".join(tools) + " |", "|---" * (len(tools) + 2) + "|"]
    out = [
        "## How other tools define them",
        "",
        "Read from their code: "
        + "; ".join(registry.PEER_TOOLS.values())
        + ". The same name does not mean the same number: the protocol differs before any "
        "formula does.",
        "",
        *head,
        *(f"| {' | '.join(row)} |" for row in PROTOCOL_DIFFERENCES),
        "",
        "Per metric (*same*: the same value on the same lists and `Rel(u)`; —: none in the "
        "version read):",
        "",
        "| metric | " + " | ".join(tools) + " |",
        "|---" * (len(tools) + 1) + "|",
    ]
    for family, _ in FAMILIES:
        for m in registry.family(family):
            if m.peers:
                cells = " | ".join(_cell(m.peers.get(tool, "—")) for tool in tools)
                out.append(f"| `{m.name}` | {cells} |")
    return [*out, ""]


def _cell(text: str) -> str:
    return text.replace("|", "&#124;")


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The config models a key holds (through None, lists and unions), in declaration order."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) is Annotated:
        return _models(get_args(annotation)[0])
    found = [m for a in get_args(annotation) for m in _models(a)]
    return found if get_origin(annotation) in (Union, types.UnionType, list) else []


def _is_list(annotation: Any) -> bool:
    """Whether a key holds a list (through None and unions)."""
    return get_origin(annotation) is list or any(_is_list(a) for a in get_args(annotation))


def _variant(model: type[BaseModel]) -> str:
    """``kind: als`` / ``method: leave_last_n`` from the model's discriminating literal."""
    for name, field in model.model_fields.items():
        if get_origin(field.annotation) is Literal and len(get_args(field.annotation)) == 1:
            return f"{name}: {get_args(field.annotation)[0]}"
    return model.__name__


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "its section's defaults"
    try:
        return f"`{json.dumps(value)}`"
    except TypeError:
        return f"`{value}`"


def _constraints(metadata: tuple[Any, ...] | list[Any]) -> str:
    """The range an Annotated type's constraints allow: " (≥ 1, ≤ 1000)"."""
    bounds = []
    for item in metadata:
        for kind, attribute, sign in (
            (annotated_types.Ge, "ge", "≥"),
            (annotated_types.Gt, "gt", ">"),
            (annotated_types.Le, "le", "≤"),
            (annotated_types.Lt, "lt", "<"),
        ):
            if isinstance(item, kind):
                bounds.append(f"{sign} {getattr(item, attribute)}")
        inner = getattr(item, "metadata", None)  # a pydantic Field(ge=...) holds its own
        if inner:
            bounds.append(_constraints(inner).strip(" ()"))
    text = ", ".join(b for b in bounds if b)
    return f" ({text})" if text else ""


def _doc(model: type[BaseModel]) -> str:
    doc = model.__doc__ or ""  # its own, not an inherited one
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _range(bounds: tuple[float, float]) -> str:
    low, high = (("∞" if math.isinf(b) else f"{b:g}") for b in bounds)
    return f"[{low}, {high}]"


def _interval(m: registry.Metric) -> str:
    if m.binary:
        return "Wilson"
    if m.bootstrapped:
        return "bootstrap (Poisson, over users)"
    return "t" if m.scope == "user" else "none"
