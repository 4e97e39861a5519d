"""A rolling backtest's outcome (docs/evaluation.md#rolling-backtests): each window's rows keyed
by ``window`` (1 = the oldest), and the pooled rows (``window`` null) every reader of a single
split reads: per metric the mean over the windows with the across-window spread and a
t-interval over the windows; per comparison one paired test over every (window, user).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import USER
from receval_spark.config import RandomizationTest
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.compare import compare_run
from receval_spark.results import Check, ComparisonRow, MetricRow, Outcome
from receval_spark.stats import metric_bounds, t_interval

WINDOW = "window"


def pooled_metrics(rows: Sequence[MetricRow]) -> list[MetricRow]:
    """Per (model, segment, protocol, metric, k) over the windows' rows (``window`` set): the
    mean of the windows' values, their standard deviation (n - 1; null for one window), the
    users summed over the windows, and the t-interval of the mean over the windows (n - 1
    degrees of freedom, inside the metric's bounds; null for one window). Windows without
    a value (no user in that segment then) do not count."""
    groups: dict[tuple[str, str, str, str, int | None], list[MetricRow]] = {}
    for r in rows:
        groups.setdefault((r.model, r.segment, r.protocol, r.metric, r.k), []).append(r)
    pooled = []
    for (model, segment, protocol, metric, k), group in groups.items():
        values = [r.value for r in group if r.value is not None]
        mean = statistics.fmean(values) if values else None
        std = statistics.stdev(values) if len(values) >= 2 else None
        low, high = (None, None)
        if mean is not None:
            bounds = metric_bounds(metric, protocol=protocol)
            low, high = t_interval(mean, std, len(values), bounds=bounds)
        pooled.append(
            MetricRow(
                model=model,
                segment=segment,
                protocol=protocol,
                metric=metric,
                k=k,
                value=mean,
                n_users=sum(r.n_users for r in group),
                std=std,
                ci_low=low,
                ci_high=high,
            )
        )
    return pooled


def window_keyed(per_user: DataFrame) -> DataFrame:
    """A windowed per-user table with each (window, user) as its own unit: user_id becomes
    ``<window>:<user_id>``, so a paired test pairs a model with the baseline per window and
    user (a user of two windows is two units)."""
    unit = F.concat_ws(":", F.col(WINDOW).cast("string"), F.col(USER).cast("string"))
    return per_user.withColumn(USER, unit).drop(WINDOW)


def pooled_outcome(
    outcomes: Sequence[Outcome],
    *,
    baseline: str | None,
    randomization: RandomizationTest | None = None,
) -> Outcome:
    """One outcome of the windows' outcomes (oldest first): their metrics and comparisons
    keyed by window, plus the pooled metrics and, with a baseline, the pooled comparisons
    (one paired test over the (window, user) units of the full protocol; with
    ``randomization``, its randomization test too); per-user rows keyed
    by window; the checks of every window (their details prefixed by the window); the
    warnings every window gave once, the others prefixed; the users evaluated summed over
    the windows; the long tail of the last window."""
    windows = list(enumerate(outcomes, 1))
    metrics = [dataclasses.replace(r, window=w) for w, o in windows for r in o.metrics]
    per_user = union_all(
        [o.per_user.withColumn(WINDOW, F.lit(w)) for w, o in windows if o.per_user is not None]
    )
    comparisons: list[ComparisonRow] = [
        dataclasses.replace(c, window=w) for w, o in windows for c in o.comparisons
    ]
    if baseline is not None and per_user is not None:
        comparisons += compare_run(
            {"full": window_keyed(per_user)}, baseline=baseline, randomization=randomization
        )
    last = outcomes[-1]
    return dataclasses.replace(
        last,
        metrics=metrics + pooled_metrics(metrics),
        comparisons=comparisons,
        per_user=per_user,
        split={"method": "rolling", "windows": [o.split for o in outcomes]},
        n_users_evaluated=sum(o.n_users_evaluated for o in outcomes),
        checks=[
            Check(c.name, c.passed, f"window {w}: {c.detail}") for w, o in windows for c in o.checks
        ],
        warnings=_warnings([o.warnings for o in outcomes]),
        off_policy=[],
        tuning={f"window {w}": o.tuning for w, o in windows if o.tuning},
        lists=None,
    )


def _warnings(by_window: Sequence[Sequence[str]]) -> list[str]:
    """The warnings every window gave, once; then each other one prefixed by its window."""
    common = set(by_window[0]).intersection(*map(set, by_window[1:]))
    out = [w for w in by_window[0] if w in common]
    for window, warnings in enumerate(by_window, 1):
        out += [f"window {window}: {w}" for w in warnings if w not in common]
    return out
