"""The human report (docs/usage.md#the-human-report): one self-contained HTML page and a
Markdown summary, rendered from the committed report datasets alone (read through Spark; they
are small per run date)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from receval_spark.commit import committed_runs, read_log, report_root
from receval_spark.committed import read_committed
from receval_spark.errors import InputError
from receval_spark.registry import SESSION_PROTOCOL
from receval_spark.report import plots
from receval_spark.report.backtest import window_table
from receval_spark.report.corrections import adjusted_p, correction_label, randomization_p
from receval_spark.report.nightly import attribution_sentences, stability_sentences
from receval_spark.report.protocols import is_labelled, protocol_caveat
from receval_spark.report.run_record import quality_rows, split_parts, split_settings
from receval_spark.results import (
    PREVIOUS_DATE_MARK,
    REPORT_SCHEMAS,
    WINDOW_MARK,
    against_own_previous_date,
)

HEADLINE = ("ndcg", "precision", "recall", "map", "mrr", "coverage", "novelty")
RATING_HEADLINE = ("rmse", "mae", "mse")  # task rating_prediction: no cut-off
SIGNIFICANCE = 0.05
PERCENT_PROTOCOLS = (SESSION_PROTOCOL,)
HISTORY_METRICS = ("ndcg", "recall")
OFF_POLICY_ESTIMATORS = ("logged_mean", "ips", "clipped_ips", "snips")


@dataclass(frozen=True)
class ReportData:
    """One run date's report datasets as pandas frames (bounded: one row per aggregate)."""

    date: str
    metrics: pd.DataFrame
    comparisons: pd.DataFrame
    long_tail: pd.DataFrame
    run: dict[str, Any]
    history: pd.DataFrame  # segment-"all" metrics of this and every earlier date, with run_date
    off_policy: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty without impressions
    labelled: pd.DataFrame = field(default_factory=pd.DataFrame)  # protocols but full: apart
    attribution: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no earlier date
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)  # a rolling backtest's windows


def load_report(spark: SparkSession, output: str, date: str | None = None) -> ReportData:
    """The committed datasets of ``date`` (default: the latest committed run date) and the
    metric history of it and every earlier date, read through Spark."""
    committed = committed_runs(read_log(spark, report_root(output)))
    dates = sorted(day for day, run in committed.items() if "runs" in run.datasets)
    if not dates:
        raise InputError(f"--reports: no committed run under {output}; run receval first.")
    date = date or dates[-1]
    if date not in dates:
        raise InputError(f"--date: no run for {date} under {output} (dates: {', '.join(dates)}).")

    def read(name: str) -> pd.DataFrame:
        schema = REPORT_SCHEMAS[name]
        rows = read_committed(spark, output, name, schema=schema, dates=[date], committed=committed)
        return rows.drop("run_date").toPandas()

    run = read("runs").iloc[0].to_dict()
    run["tuning"] = run.get("tuning") or "{}"  # runs written before tuning existed lack it
    for key in ("config", "split", "versions", "tuning"):
        run[key] = json.loads(run[key])
    run["checks"] = [c.asDict() if hasattr(c, "asDict") else dict(c) for c in run["checks"]]
    for key in ("warnings", "alerts"):
        run[key] = [] if run.get(key) is None else list(run[key])
    earlier = [day for day in dates if day <= date]
    history: pd.DataFrame = (
        read_committed(
            spark,
            output,
            "metrics",
            schema=REPORT_SCHEMAS["metrics"],
            dates=earlier,
            committed=committed,
        )
        .filter((F.col("segment") == "all") & F.col("window").isNull())
        .toPandas()
    )
    metrics, comparisons = read("metrics"), read("comparisons")
    windowed = metrics["window"].notna()  # a rolling backtest's windows; the rest: pooled
    metrics, windows = metrics[~windowed], metrics[windowed]
    comparisons = comparisons[comparisons["window"].isna()]
    return ReportData(
        date=date,
        metrics=_full(metrics),
        windows=windows,
        comparisons=_full(comparisons),
        long_tail=read("long_tail"),
        off_policy=read("off_policy"),
        attribution=read("attribution"),
        labelled=metrics[~_is_full(metrics)] if not metrics.empty else pd.DataFrame(),
        run=run,
        history=_full(history) if not history.empty else pd.DataFrame(),
    )


def history_rows(data: ReportData, k: int | None, *, dates: int = 10) -> dict[str, Any] | None:
    """{metric, dates, rows: [{model, values}]}: the first of ``HISTORY_METRICS`` at k per model
    over the last ``dates`` run dates up to the report's; None without such rows."""
    present = set(data.history["metric"]) if not data.history.empty else set()
    metric = next((m for m in HISTORY_METRICS if m in present), None)
    if metric is None:
        return None
    frame = data.history[(data.history["metric"] == metric) & (data.history["k"] == k)]
    protocol = frame["protocol"].iloc[0]
    days = sorted(frame["run_date"].unique())[-dates:]
    table = frame.pivot_table(index="model", columns="run_date", values="value")
    return {
        "metric": f"{metric}@{k}",
        "dates": days,
        "rows": [
            {
                "model": model,
                "values": [
                    _number(table.at[model, day], protocol) if day in table.columns else ""
                    for day in days
                ],
            }
            for model in table.index
        ],
    }


def _is_full(frame: pd.DataFrame) -> pd.Series:
    return ~frame["protocol"].astype(str).map(is_labelled).astype(bool)


def _full(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the full-catalogue (or session) protocol: labelled rows are shown apart."""
    return frame if frame.empty else frame[_is_full(frame)]


def labelled_tables(data: ReportData) -> dict[str, dict[str, Any]]:
    """One :func:`metric_table` per labelled protocol (``debiased_iqr``, ``sampled_<N>``,
    ``sampled_<N>_corrected``) with its caveat, never mixed with full-catalogue numbers."""
    if data.labelled.empty:
        return {}
    return {
        str(protocol): {
            **metric_table(dataclasses.replace(data, metrics=group)),
            "caveat": protocol_caveat(str(protocol), data.run["split"]),
        }
        for protocol, group in data.labelled.groupby("protocol", sort=True)
    }


def tuning_rows(data: ReportData) -> list[dict[str, str]]:
    """Per tuned model: the chosen hyperparameters and their validation score."""
    return [
        {
            "model": model,
            "chosen": ", ".join(f"{k} = {v}" for k, v in record["chosen"].items()),
            "score": f"{record['metric']} {record['validation_score']:.4f}",
            "grid": str(len(record["grid"])),
        }
        for model, record in sorted(data.run.get("tuning", {}).items())
    ]


def metric_table(data: ReportData) -> dict[str, Any]:
    """Every metric on segment ``all``: one row per (metric, k), one column per model, the
    value with its interval."""
    frame = data.metrics[data.metrics["segment"] == "all"]
    models = sorted(frame["model"].unique())
    rows = []
    for (metric, k), group in frame.groupby(["metric", frame["k"].fillna(-1)], sort=True):
        by_model = {r.model: r for r in group.itertuples()}
        rows.append(
            {
                "metric": metric if k < 0 else f"{metric}@{int(k)}",
                "cells": [
                    (
                        _number(by_model[m].value, by_model[m].protocol),
                        _interval(by_model[m].ci_low, by_model[m].ci_high, by_model[m].protocol),
                    )
                    if m in by_model
                    else ("", "")
                    for m in models
                ],
            }
        )
    return {"models": models, "rows": rows}


def headline_metrics(data: ReportData, k: int | None) -> list[str]:
    """The summary's columns: the headline metrics (of rating prediction without a cut-off),
    then the run's custom metrics (evaluation.custom_metrics)."""
    custom = [m["name"] for m in data.run["config"].get("evaluation", {}).get("custom_metrics", [])]
    return [*(HEADLINE if k is not None else RATING_HEADLINE), *custom]


def headline_k(data: ReportData) -> int | None:
    """The cut-off the summary uses: 10 when evaluated, else the largest k; None when no metric
    has a cut-off (task rating_prediction)."""
    ks = sorted(int(k) for k in data.metrics["k"].dropna().unique())
    if not ks:
        return None
    return 10 if 10 in ks else ks[-1]


def model_label(data: ReportData, model: str) -> str:
    """The model's name, with the users its popularity fallback served when there were any
    (``runs.split.fallback_users``): "als (+ popularity for 88 users)"."""
    served = data.run["split"].get("fallback_users", {}).get(model, 0)
    return f"{model} (+ popularity for {served} users)" if served else model


def against_baseline(comparisons: pd.DataFrame) -> pd.DataFrame:
    """The comparisons with evaluation.baseline, without those of a model with its own
    previous run date (baseline ``<model>@<date>``)."""
    return comparisons if comparisons.empty else comparisons[~_own_previous(comparisons)]


def against_previous_date(comparisons: pd.DataFrame) -> pd.DataFrame:
    """The comparisons of each model with its own previous run date."""
    return comparisons if comparisons.empty else comparisons[_own_previous(comparisons)]


def _own_previous(comparisons: pd.DataFrame) -> pd.Series:
    pairs = zip(comparisons["model"], comparisons["baseline"], strict=True)
    own = [against_own_previous_date(model, baseline) for model, baseline in pairs]
    return pd.Series(own, index=comparisons.index, dtype=bool)


def sanity_models(data: ReportData) -> set[str]:
    """The run's oracle models: a sanity upper bound, kept out of the comparison figures."""
    return {m["name"] for m in data.run["config"].get("models", []) if m.get("kind") == "oracle"}


def summary_rows(data: ReportData, k: int | None) -> list[dict[str, Any]]:
    """Per model: the headline metrics at k on segment ``all`` as (value, interval, marker);
    marker ▲/▼ when the adjusted paired t-test against the baseline (the run's correction)
    is < 0.05."""
    at_k = data.metrics["k"].isna() if k is None else data.metrics["k"] == k
    metrics = data.metrics[(data.metrics["segment"] == "all") & at_k]
    comparisons = against_baseline(data.comparisons)
    rows = []
    for model, group in metrics.groupby("model", sort=True):
        cells = {}
        for r in group.itertuples():
            if r.metric not in headline_metrics(data, k):
                continue
            marker = ""
            if not comparisons.empty:
                c = comparisons[
                    (comparisons["model"] == model)
                    & (comparisons["segment"] == "all")
                    & (comparisons["metric"] == r.metric)
                    & (comparisons["k"] == k)
                ]
                p = adjusted_p(c.iloc[0]) if len(c) else None
                if p is not None and p < SIGNIFICANCE:
                    marker = "▲" if c.iloc[0]["mean_diff"] > 0 else "▼"
            cells[r.metric] = {
                "value": _number(r.value, r.protocol),
                "interval": _interval(r.ci_low, r.ci_high, r.protocol),
                "marker": marker,
            }
        rows.append({"model": model_label(data, model), "cells": cells})
    return rows


def sentences(data: ReportData, k: int | None) -> list[str]:
    """One sentence per compared model: its NDCG@k difference to the baseline with interval and
    adjusted p-value, joined by "but" to the catalogue coverage of both when coverage moves the
    other way (a trade-off), else by "and"; then one for the baseline itself; then one per
    model compared with its own earlier run (:func:`previous_date_sentences`)."""
    if data.comparisons.empty:
        return []
    at_k = data.metrics[(data.metrics["segment"] == "all") & (data.metrics["k"] == k)]
    coverage = at_k[at_k["metric"] == "coverage"].set_index("model")["value"]
    ndcg_values = at_k[at_k["metric"] == "ndcg"].set_index("model")["value"]
    out = []
    ndcg = data.comparisons[
        (data.comparisons["segment"] == "all")
        & (data.comparisons["metric"] == "ndcg")
        & (data.comparisons["k"] == k)
    ]
    focus = against_baseline(ndcg)
    for r in focus.sort_values("model").itertuples():
        text = _baseline_sentence(data, r, k, ndcg_values.get(r.baseline))
        if r.model in coverage and r.baseline in coverage:
            wider = coverage[r.model] > coverage[r.baseline]
            joint = "but" if wider != (r.mean_diff > 0) else "and"
            text += (
                f", {joint} covers {100 * coverage[r.model]:.1f}% of the catalogue vs "
                f"{100 * coverage[r.baseline]:.1f}%"
            )
        out.append(text + ".")
    baseline = focus["baseline"].iloc[0] if len(focus) else None
    if baseline in ndcg_values:
        text = f"{baseline} is the baseline: NDCG@{k} {ndcg_values[baseline]:.4f}"
        if baseline in coverage:
            text += f", covering {100 * coverage[baseline]:.1f}% of the catalogue"
        out.append(text + ".")
    return out + previous_date_sentences(ndcg, ndcg_values, k)


def _baseline_sentence(data: ReportData, r: Any, k: int | None, reference: float | None) -> str:
    """A model's NDCG@k difference to the baseline, its interval, adjusted p-value and the
    randomization test's p where recorded (``r``: a comparison row), and whether it is below
    the minimum detectable effect."""
    verb = "beats" if r.mean_diff > 0 else "trails"
    p, label = adjusted_p(r), correction_label(r)
    significant = p is not None and p < SIGNIFICANCE
    family = getattr(r, "holm_family_size", None)  # absent from reports before it existed
    adjusted = (
        f"{label}-adjusted over the run's {int(family or 0)} comparisons: p"
        if pd.notna(family)
        else f"{label}-adjusted p"
    )
    return (
        f"{model_label(data, r.model)} {verb} {r.baseline} on NDCG@{k} "
        f"by {abs(r.mean_diff):.4f} "
        f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] over {r.n_users} users "
        f"({adjusted} = {_p(p)}{'' if significant else ', not significant'}"
        + ("" if (q := randomization_p(r)) is None else f"; randomization test p = {_p(q)}")
        + ")"
    ) + _detectable(r, significant, reference)


def previous_date_sentences(ndcg: pd.DataFrame, ndcg_values: pd.Series, k: int | None) -> list[str]:
    """One sentence per model compared with its own earlier run (the previous date, or its
    users' means over a window of dates): the NDCG@k change, its interval and p-value."""
    out = []
    for r in against_previous_date(ndcg).sort_values("model").itertuples():
        p = adjusted_p(r)
        significant = p is not None and p < SIGNIFICANCE
        first, _, last = r.baseline.removeprefix(f"{r.model}{PREVIOUS_DATE_MARK}").partition(
            WINDOW_MARK
        )
        against, users = (
            (f"its own run of {first}", "both nights")
            if not last
            else (f"its users' own means over its runs of {first} to {last}", "both then and now")
        )
        value = ndcg_values.get(r.model)
        reference = None if value is None else value - r.mean_diff  # the users' mean before
        out.append(
            f"Against {against}, {r.model} moved NDCG@{k} by {r.mean_diff:+.4f} "
            f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] on the {r.n_users} users {users} "
            f"evaluated ({correction_label(r)}-adjusted p = {_p(p)}"
            f"{'' if significant else ', not significant'})"
            + _detectable(r, significant, reference)
            + "."
        )
    return out


def _detectable(r: Any, significant: bool, reference: float | None) -> str:
    """For a difference that is not significant: whether it is below the minimum detectable
    effect of the comparison, relative to ``reference`` (the baseline's value) when known."""
    mde = getattr(r, "mde", None)  # absent from reports before it existed
    if significant or mde is None or pd.isna(mde) or abs(r.mean_diff) >= mde:
        return ""
    relative = (
        f", {100 * abs(r.mean_diff) / reference:.1f}% vs an MDE of {100 * mde / reference:.1f}%"
        if reference
        else ""
    )
    return (
        f"; a difference of {abs(r.mean_diff):.4f} is below what {r.n_users} users can detect "
        f"(MDE {mde:.4f} at alpha 0.05, power 0.8{relative})"
    )


OFF_POLICY_ASSUMPTIONS = (
    "Estimates of each model's mean reward per logged impression from the logging policy's "
    "impressions (a model's ranking shows an item at a position with probability 1 or 0). "
    "They assume common support (every logged propensity > 0), that the logged propensities "
    "are the logging policy's true probabilities, that an impression's reward depends on the "
    "user, the item and its position only, and that impressions are independent."
)


def off_policy_rows(data: ReportData) -> list[dict[str, str]]:
    """The off_policy dataset as display rows (model, estimator, value, interval, n, effective
    n, largest weight), the logging policy's own mean first."""
    frame = data.off_policy
    if frame.empty:
        return []
    order = {name: i for i, name in enumerate(OFF_POLICY_ESTIMATORS)}
    frame = frame.assign(
        _logging=frame["estimator"] != "logged_mean", _order=frame["estimator"].map(order)
    ).sort_values(["_logging", "model", "_order"])
    return [
        {
            "model": r.model,
            "estimator": r.estimator
            + (f" (M = {r.clip:g})" if r.estimator == "clipped_ips" and pd.notna(r.clip) else ""),
            "value": _number(r.value, "full"),
            "interval": _interval(r.ci_low, r.ci_high, "full"),
            "n": f"{r.n_impressions}",
            "effective_n": "" if pd.isna(r.effective_n) else f"{r.effective_n:.1f}",
            "max_weight": "" if pd.isna(r.max_weight) else f"{r.max_weight:g}",
        }
        for r in frame.itertuples()
    ]


def _template_source(name: str) -> str:
    """A template's text, read through importlib.resources: also from a zipped package
    (``spark-submit --py-files receval_spark.zip``), where jinja2's PackageLoader finds none."""
    return (resources.files("receval_spark.report") / "templates" / name).read_text("utf-8")


def render(data: ReportData) -> tuple[str, str]:
    """(HTML, Markdown) of one run date."""
    k = headline_k(data)
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(_template_source),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    context = {
        "data": data,
        "k": k,
        "failed": [c for c in data.run["checks"] if not c["passed"]],
        "parts": split_parts(data.run["split"]),
        "settings": split_settings(data.run["split"]),
        "quality": quality_rows(data.run["split"]),
        "summary": summary_rows(data, k),
        "headline": [m for m in headline_metrics(data, k) if m in set(data.metrics["metric"])],
        "sentences": sentences(data, k),
        "backtest": window_table(data.windows, data.metrics, data.run["split"], k),
        "nightly": attribution_sentences(data.attribution, k)
        + stability_sentences(data.metrics, k),
        "all_metrics": metric_table(data),
        "custom": data.run["split"].get("custom_metrics", []),
        "labelled": labelled_tables(data),
        "tuning": tuning_rows(data),
        "history": history_rows(data, k),
        "off_policy": off_policy_rows(data),
        "off_policy_assumptions": OFF_POLICY_ASSUMPTIONS,
        "figures": []
        if k is None
        else plots.figures(
            data.metrics,
            k=k,
            long_tail=data.long_tail,
            history=data.history,
            leave_out=sanity_models(data),
        ),
    }
    return (
        environment.get_template("report.html.j2").render(**context),
        environment.get_template("report.md.j2").render(**context),
    )


def write_report(data: ReportData, target: Path) -> Path:
    """Render ``data`` and write ``target`` (HTML) and the Markdown beside it, each replaced
    whole (written to a temporary file, then renamed); returns ``target``."""
    html, markdown = render(data)
    target.parent.mkdir(parents=True, exist_ok=True)
    for path, text in ((target, html), (target.with_suffix(".md"), markdown)):
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    return target


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def _number(value: float | None, protocol: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.2f}%" if protocol in PERCENT_PROTOCOLS else f"{value:.4f}"


def _interval(low: float | None, high: float | None, protocol: str) -> str:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return ""
    return f"[{_number(low, protocol)}, {_number(high, protocol)}]"
