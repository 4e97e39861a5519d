"""The report's figures (matplotlib, rendered to embedded PNG): metric@k curves, the
precision-recall curve over k, the accuracy / coverage trade-off and segment bars."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")  # no display: figures are rendered to PNG bytes
import matplotlib.pyplot as plt
import pandas as pd

CURVE_METRICS = ("ndcg", "precision", "recall", "map")


def figures(metrics: pd.DataFrame, *, k: int) -> list[dict[str, str]]:
    """[{title, caption, png (base64)}] for the figures the data supports."""
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
    return out


def _figure(title: str, caption: str, fig: plt.Figure) -> dict[str, str]:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return {
        "title": title,
        "caption": caption,
        "png": base64.b64encode(buffer.getvalue()).decode("ascii"),
    }


def _curves(curves: pd.DataFrame) -> plt.Figure:
    names = [m for m in CURVE_METRICS if m in set(curves["metric"])]
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 2.8), squeeze=False)
    for ax, metric in zip(axes[0], names, strict=True):
        for model, group in curves[curves["metric"] == metric].groupby("model"):
            group = group.sort_values("k")
            ax.plot(group["k"], group["value"], marker="o", label=model)
        ax.set_title(f"{metric}@k")
        ax.set_xlabel("k")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def _precision_recall(wide: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for model, group in wide.reset_index().groupby("model"):
        group = group.sort_values("k")
        ax.plot(group["recall"], group["precision"], marker="o", label=model)
        for row in group.itertuples():
            ax.annotate(f"k={int(row.k)}", (row.recall, row.precision), fontsize=7)
    ax.set_xlabel("recall@k")
    ax.set_ylabel("precision@k")
    ax.legend(fontsize="small")
    return fig


def _trade_off(at_k: pd.DataFrame, k: int) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for model, row in at_k.iterrows():
        ax.scatter(row["coverage"], row["ndcg"], s=40)
        ax.annotate(model, (row["coverage"], row["ndcg"]), fontsize=8)
    ax.set_xlabel(f"coverage@{k}")
    ax.set_ylabel(f"NDCG@{k}")
    return fig


def _segments(segments: pd.DataFrame, k: int) -> plt.Figure:
    table = segments.pivot_table(index="segment", columns="model", values="value")
    fig, ax = plt.subplots(figsize=(1.0 + 0.8 * len(table), 3.2))
    table.plot.bar(ax=ax, rot=30)
    ax.set_ylabel(f"NDCG@{k}")
    ax.set_xlabel("")
    ax.legend(fontsize="small")
    return fig
