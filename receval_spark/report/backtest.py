"""The report's rolling-backtest table (docs/evaluation.md#rolling-backtests): each model's
headline metric per window, then pooled over the windows with its spread and interval."""

from __future__ import annotations

from typing import Any

import pandas as pd

BACKTEST_METRIC = "ndcg"


def window_table(
    windows: pd.DataFrame, pooled: pd.DataFrame, split: dict[str, Any], k: int | None
) -> dict[str, Any] | None:
    """{metric, windows: [test period], rows: [{model, values, pooled, spread, interval}]} of
    NDCG@k (segment all, protocol full): ``windows`` the rows keyed by window, ``pooled`` the
    run's pooled rows, ``split`` the run record's split (its windows' test periods); None for
    a run that is not a rolling backtest."""
    periods = split.get("windows")
    if windows.empty or not periods or k is None:
        return None
    chosen = windows[
        (windows["metric"] == BACKTEST_METRIC)
        & (windows["k"] == k)
        & (windows["segment"] == "all")
        & (windows["protocol"] == "full")
    ]
    table = chosen.pivot_table(index="model", columns="window", values="value")
    totals = pooled[
        (pooled["metric"] == BACKTEST_METRIC) & (pooled["k"] == k) & (pooled["segment"] == "all")
    ].set_index("model")
    rows = []
    for model in table.index:
        total = totals.loc[model]
        rows.append(
            {
                "model": model,
                "values": [
                    "" if pd.isna(table.at[model, w]) else f"{table.at[model, w]:.4f}"
                    for w in range(1, len(periods) + 1)
                    if w in table.columns
                ],
                "pooled": f"{total['value']:.4f}",
                "spread": "" if pd.isna(total["std"]) else f"{total['std']:.4f}",
                "interval": ""
                if pd.isna(total["ci_low"])
                else f"[{total['ci_low']:.4f}, {total['ci_high']:.4f}]",
            }
        )
    return {
        "metric": f"NDCG@{k}",
        "windows": [f"{p['cutoff'][:10]} to {p['test_end'][:10]}" for p in periods],
        "rows": rows,
    }
