r"""Always-valid sequential alert rules (``significance: sequential``,
docs/nightly.md#always-valid-sequential-rules): a Gaussian mixture sequential probability ratio
test (mSPRT; Johari, Koomen, Pekelis & Walsh, "Always Valid Inference: Continuous Monitoring
of A/B Tests", Operations Research 70(3), 2022, §4) over the nights since a rule's ``start``.

Night i (a run date on or after ``start`` that committed the rule's comparison) contributes
the paired mean difference y_i of a model's per-user values against each user's mean over the
rule's reference dates (its ``window`` run dates before ``start``, users evaluated on every one
of them), with variance V_i = std_diff_i² / n_i. Every night is compared with the same
reference, so the y_i share its noise: with the per-user noise of a night σ², a reference mean
over W nights holds σ²/W of it, i.e. a share 1/(W + 1) of V_i. The covariance is therefore
Σ = D + r rᵀ with r_i = √(V_i / (W + 1)) and D = diag(V_i - r_i²). Under H0 the y_i have mean
0; under H1 mean θ, mixed over θ ~ N(0, τ²). The mixture likelihood ratio of y_1..y_n is

.. math::

    \Lambda_n = \frac{1}{\sqrt{1 + \tau^2 a}}
        \exp\!\Big(\frac{\tau^2 b^2}{2 (1 + \tau^2 a)}\Big),
    \quad a = \mathbf 1^\top \Sigma^{-1} \mathbf 1,\ b = \mathbf 1^\top \Sigma^{-1} y

(Sherman-Morrison for Σ⁻¹). Without a shared part (W → ∞) and with equal V it is Johari et
al.'s √(V/(V + nτ²)) · exp(n²τ²ȳ²/(2V(V + nτ²))).

A regression may begin on any night, not only on the start: Λ_c is the same ratio for a shift
from night c on (mean θ u_c, u_c = 1 from c, 0 before; a and b with u_c for 1), and the rule's
statistic mixes the change nights too, Λ_n = Σ_{c<H} Λ_c / H over its ``horizon`` H (a change
night not reached yet counts Λ_c = 1; H = 1 is the plain mSPRT). The nights before a change
also tell the reference's own error, so a late change is caught about as fast as an early one.
Λ_n is a non-negative martingale of mean 1 under H0 (a likelihood ratio of the nights seen),
so P(Λ_n ≥ 1/alpha on any night) ≤ alpha (Ville's inequality): the rule fires when the
always-valid p-value min_{i≤n} 1/Λ_i is at most alpha and the estimate θ̂ = b / a of the
heaviest change night is a worsening.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.alerts import better_sign
from receval_spark.columns import USER
from receval_spark.config import AlertRule
from receval_spark.metrics.compare import COMPARISON_KEYS, earlier_differences
from receval_spark.results import ComparisonRow, MetricRow, earlier_baseline

EVERY_DATE_MARK = " (every date)"


@dataclass(frozen=True)
class Night:
    """One night's paired mean difference against the reference and its variance."""

    run_date: str
    mean_diff: float
    variance: float


@dataclass(frozen=True)
class Evidence:
    """The mixture likelihood ratio after the nights so far, its always-valid p-value
    (min over the nights of 1/Λ), the estimated shift θ̂ and its standard error."""

    log_ratio: float
    p_value: float
    estimate: float
    std_error: float


def sequential_baseline(model: str, dates: Sequence[str]) -> str:
    """The baseline of a sequential rule's comparisons: the users' means over ``dates``."""
    return earlier_baseline(model, dates) + EVERY_DATE_MARK


def change_ratios(
    nights: Sequence[Night], *, mixing_variance: float, shared: float
) -> list[tuple[float, float, float]]:
    """(log Λ_c, a_c, b_c) for each change night c (0-based) of ``nights``: the mixture
    likelihood ratio of a shift θ ~ N(0, τ²) from night c on (mean θ u_c, u_c the indicator
    of the nights from c), with a_c = u_cᵀ Σ⁻¹ u_c and b_c = u_cᵀ Σ⁻¹ y; of the nights'
    variances a share ``shared`` (1/(W + 1); 0: independent nights) is the reference's."""
    inverse = [1.0 / ((1.0 - shared) * n.variance) for n in nights]
    roots = [math.sqrt(shared * n.variance) for n in nights]
    q = sum(w * r * r for w, r in zip(inverse, roots, strict=True))
    ry = sum(w * r * n.mean_diff for w, r, n in zip(inverse, roots, nights, strict=True))
    out, total, weighted, p = [], 0.0, 0.0, 0.0
    for w, r, night in reversed(list(zip(inverse, roots, nights, strict=True))):
        total, weighted, p = total + w, weighted + w * night.mean_diff, p + w * r
        a = total - p * p / (1.0 + q)
        b = weighted - p * ry / (1.0 + q)
        spread = 1.0 + mixing_variance * a
        out.append((mixing_variance * b * b / (2.0 * spread) - 0.5 * math.log(spread), a, b))
    return out[::-1]


def mixture_log_ratio(
    nights: Sequence[Night], *, mixing_variance: float, shared: float, horizon: int = 1
) -> tuple[float, float, float]:
    """(log Λ_n, a, b): Λ_n = Σ_c Λ_c / horizon over the change nights c < ``horizon`` (a
    change night after the last night has no data yet: Λ_c = 1; horizon 1: a shift from the
    start, Johari et al.'s mSPRT), a and b of the component that weighs most."""
    ratios = change_ratios(nights, mixing_variance=mixing_variance, shared=shared)[:horizon]
    top = max(0.0, *(r[0] for r in ratios))
    pending = max(0, horizon - len(ratios)) * math.exp(-top)
    total = sum(math.exp(r[0] - top) for r in ratios) + pending
    log_ratio = top + math.log(total) - math.log(horizon)
    _, a, b = max(ratios, key=lambda r: r[0])
    return log_ratio, a, b


def evidence(
    nights: Sequence[Night], *, mixing_variance: float, shared: float, horizon: int = 1
) -> Evidence:
    """The :class:`Evidence` after ``nights`` (ascending dates), the p-value over every
    prefix."""
    ratios = [
        mixture_log_ratio(
            nights[: i + 1], mixing_variance=mixing_variance, shared=shared, horizon=horizon
        )
        for i in range(len(nights))
    ]
    best = max(r[0] for r in ratios)
    log_ratio, a, b = ratios[-1]
    return Evidence(log_ratio, min(1.0, math.exp(-best)), b / a, 1.0 / math.sqrt(a))


def reference_differences(
    tonight: DataFrame, earlier: DataFrame, *, dates: Sequence[str]
) -> DataFrame:
    """:func:`earlier_differences` against each user's mean over ``dates``, on the users
    evaluated tonight and on every one of ``dates`` (so each reference mean holds W nights),
    baseline :func:`sequential_baseline`."""
    keys = ["model", *COMPARISON_KEYS, USER]
    every = (
        earlier.groupBy(*keys)
        .agg(F.countDistinct("run_date").alias("_dates"))
        .filter(F.col("_dates") == len(dates))
        .drop("_dates")
    )
    held = earlier.join(every, on=[earlier[c].eqNullSafe(every[c]) for c in keys], how="left_semi")
    return earlier_differences(tonight, held, dates=dates).withColumn(
        "baseline", F.concat(F.col("baseline"), F.lit(EVERY_DATE_MARK))
    )


def sequential_alerts(
    rows: Sequence[MetricRow],
    history: pd.DataFrame,
    rules: Sequence[AlertRule],
    *,
    comparisons: Sequence[ComparisonRow],
    past: pd.DataFrame,
    per_user_dates: Sequence[str],
    run_date: str,
) -> list[str]:
    """One message per (sequential rule, model, protocol) whose evidence since the rule's
    ``start`` crosses 1/alpha with a worsening estimate. ``comparisons``: tonight's (with the
    rule's reference comparison); ``past``: the committed ``comparisons`` rows of earlier
    dates (run_date a column); ``history``: the committed ``metrics`` rows of earlier dates
    (the reference level that scales tau); ``per_user_dates``: the earlier dates with per-user
    rows, ascending. Reads nothing of ``run_date`` or later dates beyond tonight's rows."""
    alerts = []
    for rule in rules:
        if not rule.sequential or run_date < str(rule.start):
            continue
        dates = rule.earlier_dates(per_user_dates)
        watched = sorted(
            {(r.model, r.protocol) for r in rows if (r.metric, r.k, r.segment) == _key(rule)}
        )
        for model, protocol in watched if dates else []:
            message = _judged(rule, model, protocol, dates, comparisons, past, history)
            if message is not None:
                alerts.append(message)
    return alerts


def _key(rule: AlertRule) -> tuple[str, int | None, str]:
    return rule.metric, rule.k, rule.segment


def _judged(
    rule: AlertRule,
    model: str,
    protocol: str,
    dates: Sequence[str],
    comparisons: Sequence[ComparisonRow],
    past: pd.DataFrame,
    history: pd.DataFrame,
) -> str | None:
    """The alert message of one model under a sequential rule, or None."""
    baseline = sequential_baseline(model, dates)
    keys = (model, baseline, protocol, rule.segment, rule.metric, rule.k)
    tonight = [c for c in comparisons if (c.model, c.baseline, c.protocol, *_key_of(c)) == keys]
    tau = _mixing_sd(rule, model, protocol, dates, history)
    if not tonight or tau is None:
        return None
    earlier = _matching(past, rule, model, baseline, protocol)
    nights = _nights(earlier, tonight[0])
    if not nights or nights[-1].run_date != "":
        return None  # tonight has no spread: no variance to weigh it with
    found = evidence(
        nights, mixing_variance=tau * tau, shared=1.0 / (len(dates) + 1), horizon=rule.horizon
    )
    if found.p_value > rule.alpha or better_sign(rule, protocol) * found.estimate >= 0:
        return None
    return (
        f"regression: {rule.label} of {model} on {rule.segment}: sequential test (mixture SPRT) "
        f"over {len(nights)} nights since {rule.start} against {baseline}: estimated change "
        f"{found.estimate:+.4f} (se {found.std_error:.4f}), always-valid p {found.p_value:.2g} "
        f"<= {rule.alpha:g} (tau {tau:.4g})"
    )


def _key_of(c: ComparisonRow) -> tuple[str, str, int | None]:
    return c.segment, c.metric, c.k


def _same_k(column: pd.Series, k: int | None) -> pd.Series:
    return column.isna() if k is None else column == k


def _matching(
    past: pd.DataFrame, rule: AlertRule, model: str, baseline: str, protocol: str
) -> pd.DataFrame:
    """The committed comparison rows of the rule's nights before tonight."""
    if past.empty:
        return past
    return past[
        (past["model"] == model)
        & (past["baseline"] == baseline)
        & (past["protocol"] == protocol)
        & (past["segment"] == rule.segment)
        & (past["metric"] == rule.metric)
        & _same_k(past["k"], rule.k)
        & (past["run_date"] >= str(rule.start))
    ]


def _mixing_sd(
    rule: AlertRule, model: str, protocol: str, dates: Sequence[str], history: pd.DataFrame
) -> float | None:
    """tau: the rule's ``mixing_sd``, else ``max_relative_drop`` times the model's mean value
    over the reference ``dates`` (None without those values or with a zero mean)."""
    if rule.mixing_sd is not None:
        return rule.mixing_sd
    if history.empty:
        return None
    values = history[
        (history["model"] == model)
        & (history["protocol"] == protocol)
        & (history["segment"] == rule.segment)
        & (history["metric"] == rule.metric)
        & _same_k(history["k"], rule.k)
        & history["run_date"].isin(list(dates))
    ]["value"]
    level = float(values.mean()) if len(values) else 0.0
    return rule.max_relative_drop * abs(level) if level and not math.isnan(level) else None


def _nights(earlier: pd.DataFrame, tonight: ComparisonRow) -> list[Night]:
    """The nights with a spread (V > 0): the earlier ones ascending by run date, then tonight
    (run date "")."""
    columns = ("run_date", "n_users", "mean_diff", "std_diff")
    rows = zip(*(earlier[c] for c in columns), strict=True) if not earlier.empty else iter(())
    nights = sorted(
        (n for r in rows if (n := _night(str(r[0]), *r[1:])) is not None),
        key=lambda n: n.run_date,
    )
    own = _night("", tonight.n_users, tonight.mean_diff, tonight.std_diff)
    return [*nights, own] if own is not None else nights


def _night(run_date: str, n: int | None, mean: float | None, std: float | None) -> Night | None:
    if n is None or n < 2 or mean is None or std is None or math.isnan(mean) or not std > 0:
        return None
    return Night(run_date, float(mean), float(std) ** 2 / int(n))
