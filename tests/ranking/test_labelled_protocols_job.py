"""The labelled protocols through the job as users run it (``receval evaluate``): their rows and
comparisons in the committed datasets, the CLI's summary lines, the run record's down-sampling
facts and the report's tables with their caveats (docs/evaluation.md#labelled-protocols)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from helpers import DAY, T0, crafted_job_config, read

from receval_spark.cli import main
from receval_spark.config import EvaluationConfig

LABELS = {"full", "debiased_iqr", "sampled_3", "sampled_3_corrected"}


def bestseller_log() -> pd.DataFrame:
    """Train (days 0-2): users 30-39 rate item 1000 and one of items 1-5; users 1-22 one of
    items 1-5 each. Test (day 5, rating 5): users 1-12 like bestseller 1000; users 13-22 items
    1001-1006 with popularities 1, 1, 1, 2, 2, 3. Test popularities 1 1 1 2 2 3 12: Q1 = 1,
    Q3 = 2.5, bound 4, so item 1000 keeps 4 of its 12 pairs."""
    t0 = int(T0.timestamp())
    rows = [(u, 1000, t0, 3.0) for u in range(30, 40)]
    rows += [(u, 1 + u % 5, t0 + DAY, 3.0) for u in [*range(1, 23), *range(30, 40)]]
    rows += [(u, 1000, t0 + 5 * DAY, 5.0) for u in range(1, 13)]
    niche = [1001, 1002, 1003, 1004, 1004, 1005, 1005, 1006, 1006, 1006]
    rows += [(u, item, t0 + 5 * DAY, 5.0) for u, item in zip(range(13, 23), niche, strict=True)]
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


def test_the_labelled_rows_reach_the_datasets_the_cli_and_the_report(spark, tmp_path, capsys):
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "random", "kind": "random", "seed": 3},
        {"name": "oracle", "kind": "oracle"},
    ]
    raw = crafted_job_config(tmp_path, bestseller_log(), models)
    raw["evaluation"] |= {
        "k": [1, 2],
        "segments": [],
        "protocol": ["sampled_3", "debiased_iqr"],
        "baseline": "popularity",
    }
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")

    status = main(["evaluate", "--config", str(config)])

    out, err = capsys.readouterr()
    assert status == 0, err
    assert "ndcg@2 [debiased_iqr]" in out and "recall@1 [sampled_3_corrected]" in out
    output, date = raw["output"]["path"], raw["run"]["date"]
    metrics = read(spark, output, "metrics", date).toPandas()
    comparisons = read(spark, output, "comparisons", date).toPandas()
    assert set(metrics["protocol"]) == LABELS and set(comparisons["protocol"]) == LABELS
    assert set(comparisons["model"]) == {"random", "oracle"}

    recall = metrics[(metrics["metric"] == "recall") & (metrics["k"] == 1)]
    popularity = recall[recall["model"] == "popularity"].set_index("protocol")
    assert popularity.loc["full", ["value", "n_users"]].tolist() == [12 / 22, 22]
    assert popularity.loc["debiased_iqr", ["value", "n_users"]].tolist() == [4 / 14, 14]

    runs = read(spark, output, "runs", date).toPandas()
    record = json.loads(runs.loc[0, "split"])["debiased_iqr"]
    assert record == {
        "iqr_coef": 1.5,
        "q1": 1.0,
        "q3": 2.5,
        "bound": 4,
        "items": 7,
        "items_down_sampled": 1,
        "pairs": 22,
        "pairs_removed": 8,
        "users": 22,
        "users_removed": 8,
    }
    report = (tmp_path / "reports" / "report" / date / "report.md").read_text(encoding="utf-8")
    assert "## Protocol debiased_iqr (all users)" in report
    assert (
        "Bound 4 (Q1 1, Q3 2.5, c 1.5): 1 of 7 items down-sampled, 8 of 22 relevant test "
        "pairs removed, 8 of 22 users left without a relevant item (not evaluated here)."
    ) in report
    assert "## Protocol sampled_3_corrected (all users)" in report
    assert "Corrected sampled protocol" in report
    summary = report[report.index("## Summary") : report.index("## Protocol")]
    assert "0.2857" not in summary  # 4/14: never in the full-catalogue tables


@pytest.mark.parametrize(
    ("given", "resolved"),
    [
        ("debiased_iqr", ["full", "debiased_iqr"]),
        (["sampled_100", "debiased_iqr", "full"], ["full", "sampled_100", "debiased_iqr"]),
    ],
)
def test_the_protocol_list_takes_debiased_iqr_and_keeps_full_first(given, resolved):
    assert EvaluationConfig(protocol=given).protocol == resolved


@pytest.mark.parametrize("name", ["sampled_100_corrected", "debiased", "debiased_iqr_2"])
def test_a_corrected_label_or_an_unknown_name_is_no_protocol_to_configure(name):
    with pytest.raises(ValueError, match="use full, debiased_iqr or sampled_<N>"):
        EvaluationConfig(protocol=["full", name])
