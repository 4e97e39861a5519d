"""The report's night-over-night sentences (docs/nightly.md): why each model's NDCG@k moved
since the previous date (the ``attribution`` dataset) and how much its lists changed (the
stability rows of ``metrics``, ``output.lists``)."""

from __future__ import annotations

import pandas as pd

from receval_spark.attribution import WARM_COLD

ATTRIBUTED_METRIC = "ndcg"


def attribution_sentences(attribution: pd.DataFrame, k: int | None) -> list[str]:
    """Per model, its NDCG@k change since the previous date split into the user mix and the
    change within segments, over warm/cold where the run has it (else its first
    segmentation), naming the segment whose share moved most, e.g. "popularity: NDCG@10
    -0.0090 vs 2026-11-01: -0.0070 from the user mix (cold 10.0% -> 18.0% of the evaluated
    users, scoring 0.0310 against 0.1120 overall), -0.0020 within segments (warm/cold)."
    (the segment's and the total's values tonight, or last night's for a segment gone)."""
    if attribution.empty or k is None:
        return []
    rows = attribution[
        (attribution["metric"] == ATTRIBUTED_METRIC)
        & (attribution["k"] == k)
        & (attribution["protocol"] == "full")
    ]
    out = []
    for model, frame in sorted(rows.groupby("model"), key=lambda pair: str(pair[0])):
        names = list(frame["segmentation"].unique())
        chosen = WARM_COLD if WARM_COLD in names else sorted(names)[0]
        chosen_rows = frame[frame["segmentation"] == chosen]
        total = chosen_rows[chosen_rows["segment"] == "all"].iloc[0]
        parts = chosen_rows[chosen_rows["segment"] != "all"]
        moved = parts.loc[(parts["share"] - parts["share_previous"]).abs().idxmax()]
        change = total["value"] - total["value_previous"]
        out.append(
            f"{model}: NDCG@{k} {change:+.4f} vs {total['previous_date']}: "
            f"{total['mix']:+.4f} from the user mix ({moved['segment']} "
            f"{moved['share_previous']:.1%} -> {moved['share']:.1%} of the evaluated users, "
            f"scoring {_value(moved)} against {_value(total)} overall), "
            f"{total['within']:+.4f} within segments ({chosen})."
        )
    return out


def stability_sentences(metrics: pd.DataFrame, k: int | None) -> list[str]:
    """Per model with stability rows at k: its lists' Jaccard@k with the previous date's over
    all users present both nights and over the idle ones, and its exposure churn."""
    if metrics.empty or k is None:
        return []
    at_k = metrics[metrics["k"] == k].set_index(["model", "segment", "metric"])
    out = []
    for model in sorted(metrics.loc[metrics["metric"] == "stability_jaccard", "model"].unique()):
        if (model, "all", "stability_jaccard") not in at_k.index:
            continue
        overall = at_k.loc[(model, "all", "stability_jaccard")]
        text = (
            f"{model}'s top-{k} lists against the previous night's: Jaccard "
            f"{overall['value']:.3f} over the {int(overall['n_users'])} users listed both nights"
        )
        if (model, "idle", "stability_jaccard") in at_k.index:
            idle = at_k.loc[(model, "idle", "stability_jaccard")]
            text += f", {idle['value']:.3f} over the {int(idle['n_users'])} idle ones"
        if (model, "all", "exposure_churn") in at_k.index:
            churn = at_k.loc[(model, "all", "exposure_churn")]
            text += f"; exposure churn {churn['value']:.3f}"
        out.append(text + ".")
    return out


def _value(row: pd.Series) -> str:
    """An attribution row's value tonight (last night's when the segment has none now)."""
    value = row["value"] if pd.notna(row["value"]) else row["value_previous"]
    return f"{value:.4f}"
