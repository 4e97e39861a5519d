"""The human report (DESIGN §9): one self-contained HTML page and a Markdown summary, rendered
from the Parquet report datasets alone (read with pyarrow; they are small per run date)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from receval_spark.errors import InputError
from receval_spark.report import plots

HEADLINE = ("ndcg", "precision", "recall", "map", "mrr", "coverage", "novelty")
SIGNIFICANCE = 0.05
PERCENT_PROTOCOLS = ("session",)


@dataclass(frozen=True)
class ReportData:
    """One run date's report datasets as pandas frames (bounded: one row per aggregate)."""

    date: str
    metrics: pd.DataFrame
    comparisons: pd.DataFrame
    run: dict[str, Any]


def load_report(reports: Path, date: str | None = None) -> ReportData:
    """The datasets of ``date`` (default: the latest run date under ``reports/runs``)."""
    runs_path = reports / "runs"
    dates = sorted(p.name.removeprefix("run_date=") for p in runs_path.glob("run_date=*"))
    if not dates:
        raise InputError(f"--reports: no run found under {runs_path}; run receval first.")
    date = date or dates[-1]
    if date not in dates:
        raise InputError(f"--date: no run for {date} under {reports} (dates: {', '.join(dates)}).")

    def read(name: str) -> pd.DataFrame:
        folder = reports / name / f"run_date={date}"
        return pd.read_parquet(folder) if folder.exists() else pd.DataFrame()

    runs = read("runs")
    run = runs.iloc[0].to_dict()
    for key in ("config", "split", "versions"):
        run[key] = json.loads(run[key])
    run["checks"] = [dict(c) for c in run["checks"]]
    run["warnings"] = list(run["warnings"])
    return ReportData(date=date, metrics=read("metrics"), comparisons=read("comparisons"), run=run)


def headline_k(data: ReportData) -> int:
    """The cut-off the summary uses: 10 when evaluated, else the largest k."""
    ks = sorted(int(k) for k in data.metrics["k"].dropna().unique())
    return 10 if 10 in ks else ks[-1]


def summary_rows(data: ReportData, k: int) -> list[dict[str, Any]]:
    """Per model: the headline metrics at k on segment ``all`` as (value, interval, marker);
    marker ▲/▼ when the Holm-adjusted paired t-test against the baseline is < 0.05."""
    metrics = data.metrics[(data.metrics["segment"] == "all") & (data.metrics["k"] == k)]
    comparisons = data.comparisons
    rows = []
    for model, group in metrics.groupby("model", sort=True):
        cells = {}
        for r in group.itertuples():
            if r.metric not in HEADLINE:
                continue
            marker = ""
            if not comparisons.empty:
                c = comparisons[
                    (comparisons["model"] == model)
                    & (comparisons["segment"] == "all")
                    & (comparisons["metric"] == r.metric)
                    & (comparisons["k"] == k)
                ]
                if len(c) and pd.notna(c.iloc[0]["p_holm"]) and c.iloc[0]["p_holm"] < SIGNIFICANCE:
                    marker = "▲" if c.iloc[0]["mean_diff"] > 0 else "▼"
            cells[r.metric] = {
                "value": _number(r.value, r.protocol),
                "interval": _interval(r.ci_low, r.ci_high, r.protocol),
                "marker": marker,
            }
        rows.append({"model": model, "cells": cells})
    return rows


def sentences(data: ReportData, k: int) -> list[str]:
    """One sentence per compared model: its NDCG@k difference to the baseline with interval and
    adjusted p-value, and the catalogue coverage of both."""
    if data.comparisons.empty:
        return []
    coverage = data.metrics[
        (data.metrics["metric"] == "coverage")
        & (data.metrics["segment"] == "all")
        & (data.metrics["k"] == k)
    ].set_index("model")["value"]
    out = []
    focus = data.comparisons[
        (data.comparisons["segment"] == "all")
        & (data.comparisons["metric"] == "ndcg")
        & (data.comparisons["k"] == k)
    ]
    for r in focus.sort_values("model").itertuples():
        verb = "beats" if r.mean_diff > 0 else "trails"
        significant = pd.notna(r.p_holm) and r.p_holm < SIGNIFICANCE
        text = (
            f"{r.model} {verb} {r.baseline} on NDCG@{k} by {abs(r.mean_diff):.4f} "
            f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] over {r.n_users} users "
            f"(Holm-adjusted p = {r.p_holm:.2g}{'' if significant else ', not significant'})"
        )
        if r.model in coverage and r.baseline in coverage:
            text += (
                f", and covers {100 * coverage[r.model]:.1f}% of the catalogue vs "
                f"{100 * coverage[r.baseline]:.1f}%"
            )
        out.append(text + ".")
    return out


def render(data: ReportData) -> tuple[str, str]:
    """(HTML, Markdown) of one run date."""
    k = headline_k(data)
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("receval_spark.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    context = {
        "data": data,
        "k": k,
        "failed": [c for c in data.run["checks"] if not c["passed"]],
        "summary": summary_rows(data, k),
        "headline": [m for m in HEADLINE if m in set(data.metrics["metric"])],
        "sentences": sentences(data, k),
        "figures": plots.figures(data.metrics, k=k),
    }
    return (
        environment.get_template("report.html.j2").render(**context),
        environment.get_template("report.md.j2").render(**context),
    )


def write_report(reports: Path, *, date: str | None = None, out: Path | None = None) -> Path:
    """Render and write report.html and report.md (default: reports/report/<date>/)."""
    data = load_report(reports, date)
    html, markdown = render(data)
    target = out or reports / "report" / data.date / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    target.with_suffix(".md").write_text(markdown, encoding="utf-8")
    return target


def _number(value: float | None, protocol: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.2f}%" if protocol in PERCENT_PROTOCOLS else f"{value:.4f}"


def _interval(low: float | None, high: float | None, protocol: str) -> str:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return ""
    return f"[{_number(low, protocol)}, {_number(high, protocol)}]"
