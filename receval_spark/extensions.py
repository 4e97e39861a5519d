"""User-defined metrics: registered from Python (:func:`register_metric`) or named in the config
by import path (``evaluation.custom_metrics``), then computed and reported like the built-in
metrics. Pure Python: importable before a Spark session exists (receval_spark.config checks a
configured metric without Spark).

A metric is a function of one argument (``receval_spark.metrics.custom`` describes the tables):
a per-user metric (scope ``user``) gets the ranked-list table and returns an aggregate Column,
evaluated once per (model, user, k), or a DataFrame of (model, user_id, k, value); a group
metric (scope ``group``, like coverage) gets the item-exposure table and returns an aggregate
Column, evaluated once per (model, segment, k).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from receval_spark import registry
from receval_spark.registry import Bounds, Metric, Scope

MetricFunction = Callable[[Any], Any]  # DataFrame -> Column | DataFrame (no Spark import here)


@dataclass(frozen=True)
class CustomMetric:
    """A user-defined per-user metric: its registry definition and the function computing it."""

    metric: Metric
    function: MetricFunction


_REGISTERED: dict[str, CustomMetric] = {}


def register_metric(
    name: str,
    function: MetricFunction | None = None,
    *,
    bounds: Bounds = registry.UNIT,
    larger_is_better: bool = True,
    k: bool = True,
    scope: Scope = "user",
) -> Any:
    """Register ``function`` as the per-user metric ``name`` (also usable as a decorator:
    ``@register_metric("revenue_hit")``); a job computes it when its config names it in
    ``evaluation.custom_metrics``. ``bounds``: the range of a user's value (intervals stay
    inside it; a mean outside it fails the run's ``custom_metric_bounds`` check);
    ``larger_is_better``: the direction alerts watch; ``k``: one value per cut-off (else one
    value over each user's whole list, k null); ``scope``: ``user`` (a mean over users, with
    t-intervals and paired tests) or ``group`` (one value per list group, with bootstrap
    intervals). Its docstring's first line is its formula. Registering a name again
    replaces it."""

    def register(f: MetricFunction) -> MetricFunction:
        _REGISTERED[name] = custom_metric(
            name, f, bounds=bounds, larger_is_better=larger_is_better, k=k, scope=scope
        )
        return f

    return register if function is None else register(function)


def registered(name: str) -> CustomMetric | None:
    """The metric registered from Python under ``name``, if any."""
    return _REGISTERED.get(name)


def custom_metric(
    name: str,
    function: MetricFunction,
    *,
    bounds: Bounds,
    larger_is_better: bool,
    k: bool,
    scope: Scope = "user",
) -> CustomMetric:
    """A checked custom metric; ValueError naming the problem when the name clashes with a
    built-in metric, the bounds are empty or the function does not take one argument."""
    if name in registry.BUILT_IN_NAMES:
        raise ValueError(
            f"{name!r} is the name of a built-in metric; give the custom metric another name"
        )
    low, high = bounds
    if not low < high:
        raise ValueError(
            f"bounds {list(bounds)} of {name!r} are empty; give [low, high], low < high"
        )
    _check_signature(name, function)
    formula = inspect.getdoc(function) or f"user-defined ({_qualified(function)})"
    metric = Metric(
        name=name,
        family="custom",
        scope=scope,
        formula=formula.splitlines()[0],
        bounds=(float(low), float(high)),
        larger_is_better=larger_is_better,
        has_k=k,
        bootstrapped=scope == "group",
    )
    return CustomMetric(metric=metric, function=function)


def import_function(path: str) -> MetricFunction:
    """The function at ``package.module:attribute``; ValueError naming what is missing."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"path {path!r}: write it as package.module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"path {path!r}: module {module_name!r} cannot be imported ({exc}); install it or "
            "put it on the PYTHONPATH (on a cluster: ship it with --py-files)"
        ) from exc
    except Exception as exc:  # the module's own code failed while it was imported
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"path {path!r}: importing module {module_name!r} failed ({reason}); it is "
            "imported before the Spark session starts, so module-level code must not need one "
            "(e.g. give pandas_udf a DataType object, not a DDL string)"
        ) from exc
    function = getattr(module, attribute, None)
    if function is None or not callable(function):
        raise ValueError(f"path {path!r}: module {module_name!r} has no function {attribute!r}")
    return function  # type: ignore[no-any-return]


def _check_signature(name: str, function: MetricFunction) -> None:
    """One positional parameter (the table); any others must have defaults."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [
        p for p in parameters if p.default is inspect.Parameter.empty and p.kind != p.VAR_KEYWORD
    ]
    if len(required) != 1 or required[0].kind not in positional:
        raise ValueError(
            f"the function of {name!r} ({_qualified(function)}) takes "
            f"({', '.join(p.name for p in parameters)}); it must take one argument, the "
            "table of its scope, and return a Column (or, per user, a DataFrame)"
        )


def _qualified(function: MetricFunction) -> str:
    module = getattr(function, "__module__", "?")
    return f"{module}:{getattr(function, '__qualname__', repr(function))}"
