"""The shipped demo (conf/demo.yaml exactly as `make demo` runs it) in its own process: every
model it names, both protocols, the tuning. The run is the session's ``shipped_demo``, shared
with the browser test of its report (tests/report/test_report_browser.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers import ACCURACY_METRICS, DATE_A, ShippedDemo, explain

pytestmark = pytest.mark.integration


def test_the_shipped_demo_evaluates_the_candidate_models_as_configured(
    shipped_demo: ShippedDemo,
) -> None:
    """ALS (a grid tuned on the validation period) and item-kNN next to popularity and random,
    full and sampled_100 rows apart, the tuning in runs/, ild_embedding from ALS factors, the
    sampled caveat and the tuning in the human report."""
    assert shipped_demo.proc.returncode == 0, explain(shipped_demo.proc)
    output = shipped_demo.output
    metrics = pd.read_parquet(output / "metrics" / f"run_date={DATE_A}")
    ndcg = metrics[(metrics["metric"] == "ndcg") & (metrics["k"] == 10)]
    ndcg = ndcg[ndcg["segment"] == "all"].set_index(["model", "protocol"])["value"]
    models = {"popularity", "random", "oracle", "als", "item_knn"}
    labels = ("full", "sampled_100", "sampled_100_corrected")  # the correction beside the raw
    assert set(ndcg.index) == {(m, p) for m in models for p in labels}
    for model in models - {"oracle"}:
        assert ndcg[(model, "sampled_100")] > ndcg[(model, "sampled_100_corrected")], model
        assert ndcg[(model, "sampled_100_corrected")] > ndcg[(model, "full")], model
    sampled = metrics[metrics["protocol"].str.startswith("sampled_100")]
    assert set(sampled["metric"]) <= set(ACCURACY_METRICS)
    (record,) = pd.read_parquet(output / "runs" / f"run_date={DATE_A}").itertuples()
    tuning = json.loads(record.tuning)
    assert set(tuning) == {"als"} and len(tuning["als"]["grid"]) == 2
    assert tuning["als"]["chosen"]["reg_param"] in (0.1, 1.0)
    # ild_embedding from ALS item factors with blocks sized to the history (auto: 2 here)
    split = json.loads(record.split)
    assert split["embeddings"] == "als" and split["embedding_blocks"] == 2
    assert set(metrics.loc[metrics["metric"] == "ild_embedding", "model"]) == models
    report = (output / "report" / DATE_A / "report.md").read_text(encoding="utf-8")
    assert "## Protocol sampled_100" in report and "not comparable with the full" in report
    assert "## Tuning on the validation period" in report
