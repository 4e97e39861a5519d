"""Regression alert rules of both jobs (docs/nightly.md#regression-alerts) and the checks that
a rule names what a run computes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from receval_spark.config.common import _Strict


class AlertRule(_Strict):
    """Flag a regression when ``metric@k`` of a model on ``segment`` is worse than the mean of
    its previous ``window`` run dates by more than ``max_relative_drop`` (relative; for a
    metric where lower is better, registry ``larger_is_better`` false, e.g. gini, a rise
    counts). With ``significance`` (alpha), only when the paired comparison of the model's
    per-user values with its own values ``against`` the previous run date, or each user's mean
    over the last ``window`` dates that committed per_user rows, is also worse and significant
    after Holm (needs output.per_user). With ``significance: sequential``, a mixture sequential
    probability ratio test over the nights since ``start`` against each user's mean over the
    ``window`` run dates before ``start`` decides instead, keeping the probability of any false
    alarm over all nights at ``alpha`` (docs/nightly.md#always-valid-sequential-rules)."""

    metric: str = Field(
        description="The metric watched: one the run computes (custom metrics included)."
    )
    k: int | None = Field(default=10, description="The metric's cut-off: one of evaluation.k.")
    segment: str = Field(
        default="all",
        description="The segment watched, e.g. `all`, `cold`, `items=head`, `market=fr`.",
    )
    max_relative_drop: float = Field(
        default=0.05,
        gt=0.0,
        lt=1.0,
        description="The relative worsening from the trailing mean that fires the rule (0.05: 5%).",
    )
    window: int = Field(
        default=7,
        ge=1,
        description="Earlier run dates whose mean is the reference (and, with `against: "
        "window`, whose per-user values are).",
    )
    significance: Annotated[float, Field(gt=0.0, lt=1.0)] | Literal["sequential"] | None = Field(
        default=None,
        description="Alpha of the paired test that must also find the worsening (after Holm); "
        "`sequential`: the always-valid mixture SPRT since `start` decides; null: no test.",
    )
    start: dt.date | None = Field(
        default=None,
        description="A sequential rule's first night; its reference is each user's mean over "
        "the `window` run dates before it with per-user rows.",
    )
    alpha: float = Field(
        default=0.05,
        gt=0.0,
        lt=1.0,
        description="A sequential rule's probability of any false alarm over all its nights.",
    )
    horizon: int = Field(
        default=90,
        ge=1,
        description="A sequential rule's change nights: a shift may begin on any of its first "
        "`horizon` nights from `start` (each weighted 1/horizon).",
    )
    mixing_sd: float | None = Field(
        default=None,
        gt=0.0,
        description="A sequential rule's mixing sd tau (metric units); null: max_relative_drop "
        "times the model's mean over the reference dates.",
    )
    against: Literal["previous_date", "window"] = Field(
        default="previous_date",
        description="What the paired test compares tonight's per-user values with: the "
        "previous run date's, or each user's mean over `window` dates.",
    )

    @property
    def label(self) -> str:
        """The watched number as messages name it: ``metric@k`` (``metric`` without a k)."""
        return f"{self.metric}@{self.k}" if self.k is not None else self.metric

    @property
    def sequential(self) -> bool:
        """Whether the always-valid sequential test decides (``significance: sequential``)."""
        return self.significance == "sequential"

    def earlier_dates(self, dates: Sequence[str]) -> list[str]:
        """The run dates (of ``dates``, ascending) its paired comparison is against: a
        sequential rule's last ``window`` dates before ``start``."""
        if self.sequential:
            start = str(self.start)
            return [d for d in dates if d < start][-self.window :]
        return list(dates[-self.window :] if self.against == "window" else dates[-1:])


def _alerts_exit_code(code: int) -> int:
    if code in (1, 2):
        raise ValueError(
            f"{code} means {'a failure' if code == 1 else 'bad input'}; use 3 (the default), "
            "another code from 4 to 255, or 0 to succeed when an alert fires"
        )
    return code


# the exit status of a run an alert made regressed: 0 for schedulers that treat any other as
# a failure (the run record and --summary-json still say regressed)
AlertsExitCode = Annotated[int, Field(ge=0, le=255), AfterValidator(_alerts_exit_code)]


def _check_sequential(where: str, rule: AlertRule) -> None:
    """``start`` with ``significance: sequential`` (and only there); ``against`` is not its."""
    if rule.sequential and rule.start is None:
        raise ValueError(
            f"{where}.start: a sequential rule needs its first night (e.g. start: 2026-12-01)"
        )
    if not rule.sequential and rule.start is not None:
        raise ValueError(
            f"{where}.start is the first night of a sequential rule; set significance: "
            "sequential or remove start"
        )
    if rule.sequential and rule.against != "previous_date":
        raise ValueError(
            f"{where}.against: a sequential rule compares with its users' means over the "
            "window dates before start; remove against"
        )


def _check_alert(
    i: int, rule: AlertRule, *, metrics: list[str], ks: list[int], segments: list[str]
) -> None:
    """A rule names a metric, k and segment the run computes (else it could never fire), and
    ``against`` only with the significance test it configures."""
    where = f"evaluation.alerts.{i}"
    _check_sequential(where, rule)
    if rule.against != "previous_date" and rule.significance is None:
        raise ValueError(
            f"{where}.against chooses what the significance test compares with; set "
            "significance (e.g. 0.05) or remove against"
        )
    if rule.metric not in metrics:
        raise ValueError(
            f"{where}: metric {rule.metric!r} is not computed by this run (computed: "
            f"{metrics}); add it to evaluation.metrics or change the rule"
        )
    if rule.k not in ks:
        raise ValueError(
            f"{where}: k {rule.k} is not one of evaluation.k {ks}; add it there or change the rule"
        )
    if rule.segment not in segments and not any(
        s.endswith("=*") and rule.segment.startswith(s[:-1]) for s in segments
    ):
        raise ValueError(
            f"{where}: segment {rule.segment!r} is not computed for {rule.metric} by this run "
            f"(computed: {segments}); add its segment to evaluation.segments or change the rule"
        )
