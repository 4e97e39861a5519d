"""The report's figures (matplotlib, rendered to embedded PNG): metric@k curves, the
precision-recall curve over k, the accuracy / coverage trade-off, the long tail, segment bars
and the nightly history."""

from __future__ import annotations

import base64
import io
from collections.abc import Collection
from typing import Any

import pandas as pd
from matplotlib.figure import Figure  # not pyplot: no backend, the user's figures untouched

from receval_spark import registry

CURVE_METRICS = ("ndcg", "precision", "recall", "map")
HISTORY_METRICS = ("ndcg", "recall", "mrr", "coverage")
STABILITY_METRICS = registry.names("stability")


def figures(
    metrics: pd.DataFrame,
    *,
    k: int,
    long_tail: pd.DataFrame,
    history: pd.DataFrame,
    leave_out: Collection[str] = (),
) -> list[dict[str, str]]:
    """[{title, caption, png (base64)}] for the figures the data supports; the models of
    ``leave_out`` (sanity models such as the oracle, whose values would squeeze every other
    model against zero) are in no figure."""
    metrics = metrics[~metrics["model"].isin(list(leave_out))]
    if not long_tail.empty:
        long_tail = long_tail[~long_tail["model"].isin(list(leave_out))]
    if not history.empty:
        history = history[~history["model"].isin(list(leave_out))]
    return _overall_figures(metrics, k) + _detail_figures(metrics, k, long_tail, history)


def _overall_figures(metrics: pd.DataFrame, k: int) -> list[dict[str, str]]:
    """The figures of segment ``all``: metrics at each k, precision-recall, accuracy vs
    coverage."""
    overall = metrics[(metrics["segment"] == "all") & metrics["k"].notna()]
    out = []
    curves = overall[overall["metric"].isin(CURVE_METRICS)]
    if not curves.empty:
        out.append(
            _figure(
                "Metrics at each k", "Macro averages over all evaluated users.", _curves(curves)
            )
        )
    wide = overall.pivot_table(index=["model", "k"], columns="metric", values="value")
    if {"precision", "recall"} <= set(wide.columns):
        out.append(
            _figure(
                "Precision-recall over k",
                "One point per cut-off k, per model.",
                _precision_recall(wide),
            )
        )
    at_k = overall[overall["k"] == k].pivot_table(index="model", columns="metric", values="value")
    if {"ndcg", "coverage"} <= set(at_k.columns):
        out.append(
            _figure(
                f"Accuracy vs catalogue coverage at k = {k}",
                "Up and to the right is better on both.",
                _trade_off(at_k, k),
            )
        )
    return out


def _detail_figures(
    metrics: pd.DataFrame, k: int, long_tail: pd.DataFrame, history: pd.DataFrame
) -> list[dict[str, str]]:
    """The long tail, NDCG by segment and the history figures, where the data has them."""
    out = []
    if not long_tail.empty and (long_tail["k"] == k).any():
        out.append(
            _figure(
                f"Long tail at k = {k}",
                "Catalogue items binned by train interactions (bin b: 2^b to 2^(b+1) - 1). "
                "Left: share of train interactions (dashed) and of recommendation slots per "
                "model in each bin. Right: share of each bin's items recommended at least once.",
                _long_tail(long_tail[long_tail["k"] == k]),
            )
        )
    segments = metrics[
        (metrics["metric"] == "ndcg") & (metrics["k"] == k) & (metrics["segment"] != "all")
    ]
    if not segments.empty:
        out.append(
            _figure(
                f"NDCG@{k} by segment",
                "Users (warm, cold, activity) and items (head, tail).",
                _segments(segments, k),
            )
        )
    return out + _history_figures(history, k)


def _history_figures(history: pd.DataFrame, k: int) -> list[dict[str, str]]:
    """The accuracy and coverage history and, with ``output.lists``, the stability history
    (each where at least two run dates have the metrics)."""
    out = []
    for title, names, caption in (
        ("History", HISTORY_METRICS, "Each model's metrics"),
        (
            "Stability history",
            STABILITY_METRICS,
            "Each model's night-over-night stability (its lists against the previous date "
            "with lists; docs: evaluation.md#stability)",
        ),
    ):
        trend = (
            history[history["metric"].isin(names) & (history["k"] == k)]
            if not history.empty
            else history
        )
        if not trend.empty and trend["run_date"].nunique() > 1:
            text = f"{caption} at k = {k} over the run dates found in the reports."
            out.append(_figure(title, text, _history(trend, k, names)))
    return out


def _figure(title: str, caption: str, fig: Figure) -> dict[str, str]:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return {
        "title": title,
        "caption": caption,
        "png": base64.b64encode(buffer.getvalue()).decode("ascii"),
    }


def _curves(curves: pd.DataFrame) -> Figure:
    names = [m for m in CURVE_METRICS if m in set(curves["metric"])]
    fig = Figure(figsize=(3.2 * len(names), 2.8))
    axes = fig.subplots(1, len(names), squeeze=False)
    for ax, metric in zip(axes[0], names, strict=True):
        for model, group in curves[curves["metric"] == metric].groupby("model"):
            group = group.sort_values("k")
            ax.plot(group["k"], group["value"], marker="o", label=model)
        ax.set_title(f"{metric}@k")
        ax.set_xlabel("k")
    fig.tight_layout()
    _legend_outside(axes[0][-1])
    return fig


def _legend_outside(ax: Any) -> None:
    """The legend to the right of ``ax``, off the data (savefig's tight bounding box keeps it)."""
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


def _precision_recall(wide: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(4.2, 3.2))
    ax = fig.subplots()
    for model, group in wide.reset_index().groupby("model"):
        group = group.sort_values("k")
        ax.plot(group["recall"], group["precision"], marker="o", label=model)
        for row in group.itertuples():
            ax.annotate(f"k={int(row.k)}", (row.recall, row.precision), fontsize=7)
    ax.set_xlabel("recall@k")
    ax.set_ylabel("precision@k")
    _legend_outside(ax)
    return fig


def _trade_off(at_k: pd.DataFrame, k: int) -> Figure:
    fig = Figure(figsize=(4.2, 3.2))
    ax = fig.subplots()
    for model, row in at_k.iterrows():
        ax.scatter(row["coverage"], row["ndcg"], s=40)
        ax.annotate(model, (row["coverage"], row["ndcg"]), fontsize=8)
    ax.set_xlabel(f"coverage@{k}")
    ax.set_ylabel(f"NDCG@{k}")
    return fig


def _segments(segments: pd.DataFrame, k: int) -> Figure:
    table = segments.pivot_table(index="segment", columns="model", values="value")
    fig = Figure(figsize=(1.0 + 0.8 * len(table), 3.2))
    ax = fig.subplots()
    table.plot.bar(ax=ax, rot=30)
    ax.set_ylabel(f"NDCG@{k}")
    ax.set_xlabel("")
    _legend_outside(ax)
    return fig


def _long_tail(long_tail: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(9.0, 3.2))
    share, reach = fig.subplots(1, 2)
    bins = long_tail[long_tail["popularity_bin"] >= 0]
    train = bins.drop_duplicates("popularity_bin").sort_values("popularity_bin")
    share.plot(
        train["min_interactions"],
        train["train_interactions"] / train["train_interactions"].sum(),
        "k--",
        label="train interactions",
    )
    for model, group in long_tail.groupby("model"):
        total = group["recommendations"].sum()
        group = group[group["popularity_bin"] >= 0].sort_values("popularity_bin")
        share.plot(
            group["min_interactions"], group["recommendations"] / total, marker="o", label=model
        )
        reach.plot(
            group["min_interactions"],
            group["n_recommended_items"] / group["n_items"],
            marker="o",
            label=model,
        )
    for ax, label in ((share, "share of slots"), (reach, "share of the bin's items")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("train interactions per item (bin start)")
        ax.set_ylabel(label)
    fig.tight_layout()
    _legend_outside(reach)
    return fig


def _history(trend: pd.DataFrame, k: int, metrics: tuple[str, ...]) -> Figure:
    names = [m for m in metrics if m in set(trend["metric"])]
    fig = Figure(figsize=(3.4 * len(names), 2.8))
    axes = fig.subplots(1, len(names), squeeze=False)
    dates = sorted(trend["run_date"].unique())
    for ax, metric in zip(axes[0], names, strict=True):
        for model, group in trend[trend["metric"] == metric].groupby("model"):
            group = group.sort_values("run_date")
            ax.plot(
                [dates.index(d) for d in group["run_date"]], group["value"], marker="o", label=model
            )
        ax.set_xticks(range(len(dates)), [d[5:] for d in dates], rotation=45, fontsize=7)
        ax.set_title(f"{metric}@{k}")
    fig.tight_layout()
    _legend_outside(axes[0][-1])
    return fig
