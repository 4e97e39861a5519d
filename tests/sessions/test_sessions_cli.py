"""``receval sessions`` as a user runs it: a small raw click log through the whole job, the
reports it writes, and bad input rejected with exit 2 and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import TINY_SPARK_CONF, diginetica_clicks, kept_sql_conf

from receval_spark.cli import main


def click_log(path: Path) -> Path:
    """60 sessions of 4 clicks over items 1..6 on 10 days (the last days are the test part)."""
    rows = [
        (s, 1 + (s + j) % 6, f"2024-01-{1 + s // 6:02d}", 1000 * j)
        for s in range(60)
        for j in range(4)
    ]
    pd.DataFrame(rows, columns=["session_id", "item_id", "eventdate", "timeframe"]).to_csv(
        path, sep=";", index=False
    )
    return path


def config(tmp: Path, **changes) -> Path:
    raw = {
        "run": {"name": "sessions-cli", "date": "2024-02-01"},
        "spark": {"master": "local[2]", "conf": dict(TINY_SPARK_CONF)},
        "output": {"path": str(tmp / "reports")},
        "data": diginetica_clicks(click_log(tmp / "clicks.csv")),
        "preprocessing": {"test_days": 2},
        "evaluation": {"k": [1, 3]},
        "models": [{"name": "pop", "kind": "pop"}, {"name": "markov", "kind": "markov"}],
    }
    for key, value in changes.items():
        section, _, name = key.partition("__")
        raw[section][name] = value
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_sessions_command_writes_session_metrics(spark, tmp_path, capsys):
    summary_path = tmp_path / "summary.json"
    with kept_sql_conf(spark):
        status = main(
            ["sessions", "--config", str(config(tmp_path)), "--summary-json", str(summary_path)]
        )

    out = capsys.readouterr().out
    assert status == 0, out
    summary = json.loads(summary_path.read_text())
    assert (summary["exit_status"], summary["run_status"], summary["protocol"]) == (
        0,
        "succeeded",
        "session",
    )
    assert list(summary["stage_seconds"]) == [
        "read",
        "split",
        "top_k",
        "accuracy",
        "beyond",
        "write",
    ]
    assert f"run {summary['run_id']} (2024-02-01)" in out
    assert {(m["model"], m["metric"], m["k"]) for m in summary["metrics"]} >= {
        ("markov", "recall", 1)
    }
    assert "prediction events" in out and "%" in out
    # a time-stamped line as each stage starts and ends, the write included
    progress = [line.split(" ", 2)[2] for line in out.splitlines() if " · " in line]
    assert [line.split(" done in ")[0] for line in progress if " done in " in line] == [
        f"sessions-cli · {stage}" for stage in ("read", "split", "top_k", "accuracy", "beyond")
    ] + ["sessions-cli · write"]
    events = re.search(r"\): (\d+) prediction events", out).group(1)
    assert any(line.endswith(f"(prediction_events {events})") for line in progress), progress
    metrics = spark.read.parquet(str(tmp_path / "reports" / "metrics")).collect()
    assert {r.protocol for r in metrics} == {"session"}
    assert {(r.model, r.metric, r.k) for r in metrics} >= {
        ("markov", "recall", 1),
        ("pop", "mrr", 3),
        ("pop", "coverage", 3),
    }
    # every session is a cycle over the 6 items: the Markov successor is always right
    markov = {(r.metric, r.k): r.value for r in metrics if r.model == "markov"}
    assert markov[("recall", 1)] == 1.0 and markov[("mrr", 3)] == 1.0
    runs = spark.read.parquet(str(tmp_path / "reports" / "runs")).collect()
    assert [c.name for c in runs[0].checks] == ["prefix_expansion"]
    assert '"step": "drop test sessions shorter than 2"' in runs[0].split


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"evaluation__k": [0]}, "evaluation.k"),
        ({"preprocessing__test_days": 400}, "preprocessing"),
    ],
)
def test_sessions_bad_input_exits_2_and_writes_nothing(spark, tmp_path, capsys, change, named):
    path = config(tmp_path, **change)

    with kept_sql_conf(spark):
        status = main(["sessions", "--config", str(path)])

    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("error: ") and named in err
    assert not (tmp_path / "reports").exists()


def test_sessions_unknown_model_kind_is_a_config_error(tmp_path, capsys):
    path = config(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["models"].append({"name": "gru", "kind": "gru4rec"})
    path.write_text(yaml.safe_dump(raw))

    assert main(["sessions", "--config", str(path)]) == 2
    assert "models.2" in capsys.readouterr().err


def test_a_tiny_test_set_and_events_without_lists_are_warned_about(spark, tmp_path, capsys):
    """Train (Jan 1-8): ten sessions 1 2 3 and five sessions 4 5; test (Jan 10): one session
    1 2 3 5, so 3 prediction events. Markov knows 1 -> 2 and 2 -> 3 but no successor of 3:
    1 of its 3 events has no list; POP has a list for every event."""
    rows = [
        (s, item, f"2024-01-0{1 + s % 8}", j) for s in range(10) for j, item in enumerate([1, 2, 3])
    ]
    rows += [
        (10 + s, item, f"2024-01-0{1 + s}", j) for s in range(5) for j, item in enumerate([4, 5])
    ]
    rows += [(99, item, "2024-01-10", j) for j, item in enumerate([1, 2, 3, 5])]
    path = tmp_path / "tiny.csv"
    frame = pd.DataFrame(rows, columns=["session_id", "item_id", "eventdate", "timeframe"])
    frame.to_csv(path, sep=";", index=False)
    job = config(tmp_path)
    raw = yaml.safe_load(job.read_text())
    raw["data"] = diginetica_clicks(path)
    raw["preprocessing"] = {"test_days": 1}
    job.write_text(yaml.safe_dump(raw), encoding="utf-8")

    with kept_sql_conf(spark):
        status = main(["sessions", "--config", str(job), "--json", "--quiet"])

    out, err = capsys.readouterr()
    assert status == 0, err
    summary = json.loads(out)
    facts = {(f["fact"], f["model"]): (f["count"], f["total"]) for f in summary["data_quality"]}
    assert facts == {
        ("test_events", None): (3, 4),
        ("events_without_list", "pop"): (0, 3),
        ("events_without_list", "markov"): (1, 3),
    }
    assert summary["warnings"] == [
        "only 3 prediction events (evaluation.data_quality.min_test_events = 1000): Recall "
        "and MRR over so few events are unreliable",
        "data quality: markov: 33.33% of prediction events (1 of 3): prediction events have "
        "no list (they score 0); evaluation.data_quality.events_without_list = 0.1",
    ]
    assert "warning: only 3 prediction events" in err
