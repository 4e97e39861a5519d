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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark.alerts import regressions
from receval_spark.commit import (
    RunState,
    committed_runs,
    read_committed,
    read_log,
    report_root,
)
from receval_spark.config import AlertRule
from receval_spark.metrics.compare import comparison_rows, earlier_differences, holm_adjusted
from receval_spark.results import REPORT_SCHEMAS, ComparisonRow, Outcome

SUCCEEDED, REGRESSED, FAILED_CHECKS = "succeeded", "regressed", "failed_checks"


@dataclass(frozen=True)
class Judgement:
    """Tonight's verdict: ``comparisons`` (every model against the baseline and, where earlier
    dates committed per-user rows, against its own values there; p_holm over all of them, one
    family), the ``alerts`` that fired, the run's ``status`` (``failed_checks`` if a check
    failed, else ``regressed`` if an alert fired, else ``succeeded``), and the earlier
    ``output`` dates it read per-user rows of (ascending)."""

    output: str | None
    comparisons: list[ComparisonRow] = field(repr=False)
    alerts: list[str]
    status: str
    earlier_dates: list[str] = field(default_factory=list)


def judge_outcome(
    outcome: Outcome,
    *,
    run_date: str,
    rules: Sequence[AlertRule],
    per_user: DataFrame | None,
    spark: SparkSession,
    output: str | None,
) -> Judgement:
    """The :class:`Judgement` of one outcome of run date ``run_date`` against the committed
    history at ``output`` (None: no history). ``per_user``: tonight's per-user table in the
    ``per_user`` dataset's columns (None: no comparison with earlier dates). One Holm
    adjustment, over tonight's baseline comparisons and the earlier-date ones together."""
    committed = committed_runs(read_log(spark, report_root(output))) if output else {}
    earlier = sorted(
        date
        for date, state in committed.items()
        if date < run_date and "per_user" in state.datasets
    )
    own = list(outcome.comparisons)
    if per_user is not None and earlier:
        assert output is not None  # committed dates come from an output
        own += _earlier_comparisons(spark, output, per_user, earlier, rules, committed)
    comparisons = holm_adjusted(own) if own else []
    alerts: list[str] = []
    if rules and output is not None:
        history = read_committed(
            spark, output, "metrics", schema=REPORT_SCHEMAS["metrics"], committed=committed
        ).filter(F.col("run_date") < run_date)
        alerts = regressions(
            outcome.metrics,
            history.toPandas(),
            rules,
            comparisons=comparisons,
            per_user_dates=earlier,
        )
    return Judgement(
        output=output,
        comparisons=comparisons,
        alerts=alerts,
        status=run_status(outcome, alerts),
        earlier_dates=earlier,
    )


def run_status(outcome: Outcome, alerts: Sequence[str]) -> str:
    """failed_checks if a check failed, else regressed if an alert fired, else succeeded."""
    if not outcome.passed:
        return FAILED_CHECKS
    return REGRESSED if alerts else SUCCEEDED


def _earlier_comparisons(
    spark: SparkSession,
    output: str,
    per_user: DataFrame,
    earlier: list[str],
    rules: Sequence[AlertRule],
    committed: Mapping[str, RunState],
) -> list[ComparisonRow]:
    """Every model against its own per-user values of the latest earlier date (baseline
    ``<model>@<date>``) and, for each alert rule with a significance test ``against: window``,
    against each user's mean over the rule's window of earlier dates
    (``<model>@<first>..<last>``); not yet adjusted."""
    windows = {(earlier[-1],)} | {
        tuple(rule.earlier_dates(earlier)) for rule in rules if rule.significance is not None
    }
    rows = read_committed(
        spark,
        output,
        "per_user",
        schema=REPORT_SCHEMAS["per_user"],
        dates=sorted(set().union(*windows)),
        committed=committed,
    )
    differences = [
        earlier_differences(per_user, rows.filter(F.col("run_date").isin(*dates)), dates=dates)
        for dates in sorted(windows)
    ]
    return comparison_rows(functools.reduce(DataFrame.unionByName, differences))
