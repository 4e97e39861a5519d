"""Nightly regression alerts: a run's metrics against the trailing mean of earlier run dates."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from receval_spark.config.alert_rules import AlertRule
from receval_spark.registry import definitions
from receval_spark.results import ComparisonRow, MetricRow, earlier_baseline


def regressions(
    rows: Sequence[MetricRow],
    history: pd.DataFrame,
    rules: Sequence[AlertRule],
    *,
    comparisons: Sequence[ComparisonRow] = (),
    per_user_dates: Sequence[str] = (),
) -> list[str]:
    """One message per (rule, model, protocol) whose current value is worse than the mean over
    its last ``window`` earlier run dates by more than ``max_relative_drop``.

    relative change = (value - mean) / mean, negated where lower is better (the registry's
    ``larger_is_better`` false); models without history (or with a zero mean) are not judged.
    A rule with ``significance`` (alpha) also needs the model's paired comparison with its own
    per-user values of earlier run dates (``comparisons``) to move the same way with p_holm <
    alpha: against the latest of ``per_user_dates`` (the earlier dates with per_user rows,
    ascending; baseline ``<model>@<date>``) or, ``against: window``, each user's mean over the
    last ``window`` of them (``<model>@<first>..<last>``); without that comparison the model
    is not judged. Sequential rules are :func:`receval_spark.sequential.sequential_alerts`'.
    """
    alerts = []
    for rule in rules:
        if rule.sequential:
            continue
        current = {
            (r.model, r.protocol): r.value
            for r in rows
            if r.metric == rule.metric
            and r.k == rule.k
            and r.segment == rule.segment
            and r.value is not None
        }
        if history.empty or not current:
            continue
        means = _trailing_means(history, rule)
        for (model, protocol), value in sorted(current.items()):
            if (model, protocol) not in means.index:
                continue
            mean, n_dates = means.loc[(model, protocol)]
            message = _regression(rule, model, protocol, value, mean, int(n_dates))
            if message is not None and rule.significance is not None:
                message = _confirmed(message, rule, model, protocol, comparisons, per_user_dates)
            if message is not None:
                alerts.append(message)
    return alerts


def _trailing_means(history: pd.DataFrame, rule: AlertRule) -> pd.DataFrame:
    """(mean, count) per (model, protocol) of the rule's metric over its last ``window``
    earlier run dates."""
    past = history[
        (history["metric"] == rule.metric)
        & (history["segment"] == rule.segment)
        & ((history["k"] == rule.k) if rule.k is not None else history["k"].isna())
    ]
    trailing = past.sort_values("run_date").groupby(["model", "protocol"]).tail(rule.window)
    return trailing.groupby(["model", "protocol"])["value"].agg(["mean", "count"])


def _regression(
    rule: AlertRule, model: str, protocol: str, value: float, mean: float, n_dates: int
) -> str | None:
    """The alert message when ``value`` is worse than the trailing ``mean`` by more than the
    rule's relative threshold (the metric's direction from the registry), else None."""
    if mean == 0:
        return None
    sign = better_sign(rule, protocol)
    if sign * (value - mean) / mean >= -rule.max_relative_drop:
        return None
    return (
        f"regression: {rule.label} of {model} on {rule.segment} is {value:.4f}, "
        f"{100 * abs(value - mean) / mean:.1f}% "
        f"{'above' if sign < 0 else 'below'} its mean {mean:.4f} over the previous "
        f"{n_dates} run dates (threshold {100 * rule.max_relative_drop:g}%)"
    )


def better_sign(rule: AlertRule, protocol: str) -> float:
    """+1 where a larger value of the rule's metric is better (registry ``larger_is_better``),
    -1 where a smaller one is."""
    return 1.0 if definitions(protocol)[rule.metric].larger_is_better else -1.0


def _confirmed(
    message: str,
    rule: AlertRule,
    model: str,
    protocol: str,
    comparisons: Sequence[ComparisonRow],
    per_user_dates: Sequence[str],
) -> str | None:
    """``message`` with the paired test that confirms it (the model against its own per-user
    values of the rule's earlier dates, significant after Holm), or None without one."""
    sign = better_sign(rule, protocol)
    dates = rule.earlier_dates(per_user_dates)
    baseline = earlier_baseline(model, dates) if dates else None
    paired = _comparison(comparisons, rule, model, baseline, protocol)
    if paired is None or not _significant_drop(paired, rule, sign):
        return None
    return message + (
        f"; paired t-test against {paired.baseline} on {paired.n_users} users: "
        f"mean difference {paired.mean_diff:+.4f}, {paired.adjusted_column} "
        f"{paired.p_adjusted:.2g} < {rule.significance:g}"
    )


def _comparison(
    comparisons: Sequence[ComparisonRow],
    rule: AlertRule,
    model: str,
    baseline: str | None,
    protocol: str,
) -> ComparisonRow | None:
    """The comparison of ``model`` with ``baseline`` at the rule's metric, k and segment, if
    the run has one."""
    for c in comparisons:
        if (c.model, c.baseline, c.protocol, c.segment, c.metric, c.k) == (
            model,
            baseline,
            protocol,
            rule.segment,
            rule.metric,
            rule.k,
        ):
            return c
    return None


def _significant_drop(paired: ComparisonRow, rule: AlertRule, sign: float) -> bool:
    """The paired difference is worse (below zero, or above where lower is better) and
    significant after the run's correction (evaluation.correction) at the rule's alpha."""
    p = paired.p_adjusted
    if p is None or paired.mean_diff is None:
        return False
    if not isinstance(rule.significance, float):
        return False
    return sign * paired.mean_diff < 0 and p < rule.significance
