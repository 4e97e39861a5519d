"""The statistics step of a run, once, before anything is written: tonight's comparisons
against the baseline and against the model's own earlier committed dates, Holm-adjusted as one
family, the regression alerts and the run's status (docs/statistics.md#comparisons,
docs/nightly.md).

``judge`` reads what it needs of the history at ``output`` in one pass (the commit log once,
then the earlier dates' ``per_user`` and ``metrics`` rows); the commit only writes what the
judgement says. Without an output (an evaluation nobody commits yet) the family is the run's
own comparisons.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark.alerts import regressions
from receval_spark.attribution import Segmentation, shift_share
from receval_spark.commit import RunState
from receval_spark.committed import read_committed
from receval_spark.config import AlertRule, RandomizationTest
from receval_spark.metrics.compare import comparison_rows, earlier_differences, family_adjusted
from receval_spark.results import (
    REPORT_SCHEMAS,
    AttributionRow,
    ComparisonRow,
    MetricRow,
    Outcome,
)
from receval_spark.sequential import EVERY_DATE_MARK, reference_differences, sequential_alerts

SUCCEEDED, REGRESSED, FAILED_CHECKS = "succeeded", "regressed", "failed_checks"


@dataclass(frozen=True)
class Judgement:
    """Tonight's verdict: ``comparisons`` (every model against the baseline and, where earlier
    dates committed per-user rows, against its own values there; p_holm over all of them, one
    family), the ``alerts`` that fired, the run's ``status`` (``failed_checks`` if a check
    failed, else ``regressed`` if an alert fired, else ``succeeded``), and the earlier
    ``output`` dates it read per-user rows of (ascending); ``stability``: the
    night-over-night stability rows of the ``metrics`` dataset (``output.lists``), which the
    alerts saw with tonight's metrics; ``attribution``: the shift-share rows of tonight's
    per-user metrics against the previous committed date (receval_spark.attribution)."""

    output: str | None
    comparisons: list[ComparisonRow] = field(repr=False)
    alerts: list[str]
    status: str
    earlier_dates: list[str] = field(default_factory=list)
    stability: list[MetricRow] = field(default_factory=list, repr=False)
    attribution: list[AttributionRow] = field(default_factory=list, repr=False)


def judge_outcome(
    outcome: Outcome,
    *,
    run_date: str,
    rules: Sequence[AlertRule],
    per_user: DataFrame | None,
    spark: SparkSession,
    output: str | None,
    segmentations: Sequence[Segmentation] = (),
    correction: str = "holm",
    randomization: RandomizationTest | None = None,
    committed: Mapping[str, RunState],
) -> Judgement:
    """The :class:`Judgement` of one outcome of run date ``run_date`` against the committed
    history at ``output`` (None: no history). ``per_user``: tonight's per-user table in the
    ``per_user`` dataset's columns (None: no comparison with earlier dates). One Holm
    adjustment, over tonight's baseline comparisons and the earlier-date ones together. The
    change attribution runs over ``segmentations`` against the latest earlier date's
    ``metrics`` rows, read with the alerts' history (one read). ``correction``: the
    adjustment that decides (evaluation.correction; all three are recorded);
    ``randomization``: the randomization test of the earlier-date comparisons (tonight's
    come with ``outcome``); ``committed``: :func:`committed_runs` of ``output``'s log (none
    without an output)."""
    earlier = sorted(
        date
        for date, state in committed.items()
        if date < run_date and "per_user" in state.datasets
    )
    own = list(outcome.comparisons)
    if per_user is not None and earlier:
        assert output is not None  # committed dates come from an output
        own += _earlier_comparisons(
            spark,
            output,
            per_user,
            earlier,
            _references(rules, earlier, run_date),
            committed,
            randomization=randomization,
        )
    comparisons = family_adjusted(own, correction=correction) if own else []
    alerts, attribution = (
        _against_history(
            outcome,
            Tonight(run_date, rules, comparisons, earlier, segmentations),
            spark=spark,
            output=output,
            committed=committed,
        )
        if output is not None
        else ([], [])
    )
    return Judgement(
        output=output,
        comparisons=comparisons,
        alerts=alerts,
        status=run_status(outcome, alerts),
        earlier_dates=earlier,
        attribution=attribution,
    )


@dataclass(frozen=True)
class Tonight:
    """What the judgement of the history needs of tonight: the run date, the alert rules,
    the adjusted comparisons, the earlier dates with per-user rows and the segmentations of
    the change attribution."""

    run_date: str
    rules: Sequence[AlertRule]
    comparisons: list[ComparisonRow]
    per_user_dates: list[str]
    segmentations: Sequence[Segmentation]


def _against_history(
    outcome: Outcome,
    tonight: Tonight,
    *,
    spark: SparkSession,
    output: str,
    committed: Mapping[str, RunState],
) -> tuple[list[str], list[AttributionRow]]:
    """(the alerts that fired, the attribution rows): the regression and sequential rules
    over the ``metrics`` history before tonight, and the shift-share decomposition against
    the latest earlier date with ``metrics`` (one read of that dataset: every earlier date
    with rules, else that date only)."""
    run_date, rules = tonight.run_date, tonight.rules
    previous = max(
        (d for d, state in committed.items() if d < run_date and "metrics" in state.datasets),
        default=None,
    )
    if not rules and not (tonight.segmentations and previous):
        return [], []
    metrics: pd.DataFrame = (
        read_committed(
            spark,
            output,
            "metrics",
            schema=REPORT_SCHEMAS["metrics"],
            dates=None if rules or previous is None else [previous],
            committed=committed,
        )
        .filter((F.col("run_date") < run_date) & F.col("window").isNull())
        .toPandas()
    )
    tonight_rows = [r for r in outcome.metrics if r.window is None]  # rolling: the pooled
    attribution = (
        shift_share(
            tonight_rows,
            metric_rows(metrics[metrics["run_date"] == previous]),
            tonight.segmentations,
            previous_date=previous,
        )
        if previous is not None
        else []
    )
    if not rules:
        return [], attribution
    alerts = regressions(
        tonight_rows,
        metrics,
        rules,
        comparisons=tonight.comparisons,
        per_user_dates=tonight.per_user_dates,
    ) + sequential_alerts(
        tonight_rows,
        metrics,
        rules,
        comparisons=tonight.comparisons,
        past=_sequential_history(spark, output, rules, run_date, committed),
        per_user_dates=tonight.per_user_dates,
        run_date=run_date,
    )
    return alerts, attribution


def metric_rows(frame: pd.DataFrame) -> list[MetricRow]:
    """The ``metrics`` dataset's rows of a pandas frame (a null k: None) as MetricRows."""
    return [
        MetricRow(
            model=r.model,
            segment=r.segment,
            protocol=r.protocol,
            metric=r.metric,
            k=None if pd.isna(r.k) else int(r.k),
            value=None if pd.isna(r.value) else float(r.value),
            n_users=int(r.n_users),
        )
        for r in frame.itertuples()
    ]


def run_status(outcome: Outcome, alerts: Sequence[str]) -> str:
    """failed_checks if a check failed, else regressed if an alert fired, else succeeded."""
    if not outcome.passed:
        return FAILED_CHECKS
    return REGRESSED if alerts else SUCCEEDED


@dataclass(frozen=True)
class References:
    """The earlier dates tonight's per-user values are compared with: ``windows`` (the
    previous date, and each ``against: window`` rule's dates) and ``sequential`` (each
    sequential rule's reference dates, users on every one of them)."""

    windows: set[tuple[str, ...]]
    sequential: set[tuple[str, ...]]


def _references(rules: Sequence[AlertRule], earlier: list[str], run_date: str) -> References:
    """The :class:`References` of tonight (``earlier``: the earlier per-user dates)."""
    return References(
        windows={(earlier[-1],)}
        | {
            tuple(rule.earlier_dates(earlier))
            for rule in rules
            if rule.significance is not None and not rule.sequential
        },
        sequential={
            dates
            for rule in rules
            if rule.sequential
            and run_date >= str(rule.start)
            and (dates := tuple(rule.earlier_dates(earlier)))
        },
    )


def _earlier_comparisons(
    spark: SparkSession,
    output: str,
    per_user: DataFrame,
    earlier: list[str],
    references: References,
    committed: Mapping[str, RunState],
    *,
    randomization: RandomizationTest | None = None,
) -> list[ComparisonRow]:
    """Every model against its own per-user values of the latest earlier date (baseline
    ``<model>@<date>``), for each alert rule with a significance test ``against: window``,
    against each user's mean over the rule's window of earlier dates
    (``<model>@<first>..<last>``), and for each sequential rule from its start on, against
    its reference (``<model>@<first>..<last> (every date)``), each with the randomization
    test's p-value when ``randomization`` is given; not yet adjusted."""
    dates = set().union(*references.windows, *references.sequential)
    rows = read_committed(
        spark,
        output,
        "per_user",
        schema=REPORT_SCHEMAS["per_user"],
        dates=sorted(dates),
        committed=committed,
    )
    differences = [
        earlier_differences(per_user, rows.filter(F.col("run_date").isin(*w)), dates=w)
        for w in sorted(references.windows)
    ] + [
        reference_differences(per_user, rows.filter(F.col("run_date").isin(*w)), dates=w)
        for w in sorted(references.sequential)
    ]
    return comparison_rows(
        functools.reduce(DataFrame.unionByName, differences), randomization=randomization
    )


def _sequential_history(
    spark: SparkSession,
    output: str,
    rules: Sequence[AlertRule],
    run_date: str,
    committed: Mapping[str, RunState],
) -> pd.DataFrame:
    """The committed ``comparisons`` rows of the sequential rules' nights before tonight (from
    the earliest start on): the state of their tests, a few rows per night."""
    starts = [str(rule.start) for rule in rules if rule.sequential]
    dates = sorted(
        d
        for d, state in committed.items()
        if starts and min(starts) <= d < run_date and "comparisons" in state.datasets
    )
    if not dates:
        return pd.DataFrame()
    rows = read_committed(
        spark,
        output,
        "comparisons",
        schema=REPORT_SCHEMAS["comparisons"],
        dates=dates,
        committed=committed,
    )
    columns = ["model", "baseline", "protocol", "segment", "metric", "k", "n_users"]
    marked = rows.filter(F.col("baseline").endswith(EVERY_DATE_MARK))
    return marked.select(*columns, "mean_diff", "std_diff", "run_date").toPandas()
