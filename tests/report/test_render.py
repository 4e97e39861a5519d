"""The human report's text, tables and page from small hand-made report frames (no Spark)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

import receval_spark
from receval_spark.report import plots
from receval_spark.report.render import (
    ReportData,
    headline_metrics,
    history_rows,
    metric_table,
    off_policy_rows,
    render,
    sentences,
    summary_rows,
)
from receval_spark.report.run_record import split_parts


def metric(model, name, value, k=10, date="2026-11-03", segment="all", low=None, high=None):
    return {
        "run_id": f"r-{date}",
        "model": model,
        "segment": segment,
        "protocol": "full",
        "metric": name,
        "k": k,
        "value": value,
        "n_users": 100,
        "std": None,
        "ci_low": low,
        "ci_high": high,
        "run_date": date,
    }


METRICS = [
    metric("popularity", "ndcg", 0.30, low=0.25, high=0.35),
    metric("popularity", "coverage", 0.01),
    metric("random", "ndcg", 0.01),
    metric("random", "coverage", 0.14),
    metric("knn", "ndcg", 0.35),
    metric("knn", "coverage", 0.20),
    metric("popularity", "ndcg", 0.25, k=5),
    metric("popularity", "gini", 0.99, k=None),  # a metric without a cut-off
]
HISTORY = [
    metric("popularity", "ndcg", 0.28, date="2026-11-01"),
    metric("popularity", "ndcg", 0.29, date="2026-11-02"),
    metric("random", "ndcg", 0.02, date="2026-11-02"),
]


def comparison(model, diff, low, high, p):
    return {
        "model": model,
        "baseline": "popularity",
        "segment": "all",
        "metric": "ndcg",
        "k": 10,
        "n_users": 100,
        "mean_diff": diff,
        "ci_low": low,
        "ci_high": high,
        "p_holm": p,
    }


def data() -> ReportData:
    metrics = pd.DataFrame(METRICS)
    return ReportData(
        date="2026-11-03",
        metrics=metrics.drop(columns="run_date"),
        comparisons=pd.DataFrame(
            [
                comparison("random", -0.29, -0.33, -0.25, 1e-12),
                comparison("knn", 0.05, -0.01, 0.11, 0.2),
            ]
        ),
        long_tail=pd.DataFrame(),
        run={
            "run_id": "r-2026-11-03",
            "run_name": "nightly",
            "status": "regressed",
            "n_users_evaluated": 100,
            "config": {"run": {"name": "nightly"}},
            "split": {
                "method": "global_temporal",
                "cutoff": "2026-01-01T00:00:00+00:00",
                "train": {"rows": 900, "users": 90, "items": 50},
                "test": {"rows": 100, "users": 40, "items": 30},
            },
            "versions": {"receval_spark": "0"},
            "checks": [{"name": "no_temporal_leakage", "passed": True, "detail": "ok"}],
            "warnings": [],
            "alerts": ["regression: ndcg@10 of knn on all is 0.35 <crafted>"],
        },
        history=pd.DataFrame(HISTORY + METRICS),
    )


def test_sentences_state_each_models_trade_off_in_words():
    said = sentences(data(), 10)

    assert said == [
        "knn beats popularity on NDCG@10 by 0.0500 [-0.0100, +0.1100] over 100 users "
        "(Holm-adjusted p = 0.2, not significant), and covers 20.0% of the catalogue vs 1.0%.",
        "random trails popularity on NDCG@10 by 0.2900 [-0.3300, -0.2500] over 100 users "
        "(Holm-adjusted p = 1e-12), but covers 14.0% of the catalogue vs 1.0%.",
        "popularity is the baseline: NDCG@10 0.3000, covering 1.0% of the catalogue.",
    ]


def test_sentences_name_the_holm_family_of_the_run():
    report = data()
    report = dataclasses.replace(report, comparisons=report.comparisons.assign(holm_family_size=48))

    said = sentences(report, 10)

    assert "(Holm-adjusted over the run's 48 comparisons: p = 0.2, not significant)" in said[0]


def test_history_lists_every_date_up_to_the_report_with_gaps_left_blank():
    rows = history_rows(data(), 10)

    assert rows["metric"] == "ndcg@10"
    assert rows["dates"] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    values = {r["model"]: r["values"] for r in rows["rows"]}
    assert values["popularity"] == ["0.2800", "0.2900", "0.3000"]
    assert values["knn"] == ["n/a", "n/a", "0.3500"]  # new model: no history


def test_metric_table_has_every_metric_and_cut_off_per_model():
    table = metric_table(data())

    assert table["models"] == ["knn", "popularity", "random"]
    rows = {r["metric"]: r["cells"] for r in table["rows"]}
    assert set(rows) == {"coverage@10", "gini", "ndcg@5", "ndcg@10"}
    assert rows["ndcg@10"][1] == ("0.3000", "[0.2500, 0.3500]")
    assert rows["ndcg@5"][0] == ("", "")  # knn has no ndcg@5


def test_split_parts_are_the_parts_with_counts():
    parts = split_parts(data().run["split"])
    assert [(p["part"], p["rows"]) for p in parts] == [("train", 900), ("test", 100)]


def test_page_escapes_text_and_shows_alerts_first():
    html, markdown = render(data())

    assert html.index('id="alerts"') < html.index('id="summary"')
    assert "&lt;crafted&gt;" in html and "<crafted>" not in html  # autoescaped
    assert "**Regression alerts:**" in markdown and "<crafted>" in markdown
    assert html.count("data:image/png;base64,") >= 3  # curves, trade-off, history
    assert "<th>2026-11-01</th>" in html


def test_the_report_leaves_the_callers_matplotlib_alone():
    """Its figures are bare matplotlib Figures: importing the API keeps a notebook's backend
    (an Agg switch on import blanked the plots a notebook drew after rv.evaluate), and rendering
    leaves no figure open in pyplot."""
    probe = (
        "import matplotlib; matplotlib.use('svg'); import receval_spark.api; "
        "print(matplotlib.get_backend())"
    )
    package_root = str(Path(receval_spark.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]),
    }
    backend = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert backend == "svg"

    open_figures = plt.get_fignums()
    html, _ = render(data())
    assert html.count("data:image/png;base64,") >= 3
    assert plt.get_fignums() == open_figures


def test_a_session_run_renders_with_percentages_and_no_comparisons():
    rows = [
        {**metric(model, name, value, k=k), "protocol": "session"}
        for model in ("pop", "s-pop")
        for k in (5, 10, 20)
        for name, value in (("recall", 0.1234), ("mrr", 0.05), ("coverage", 0.3))
    ]
    session = ReportData(
        date="2026-11-03",
        metrics=pd.DataFrame(rows).drop(columns="run_date"),
        comparisons=pd.DataFrame(),
        long_tail=pd.DataFrame(),
        run={
            **data().run,
            "status": "succeeded",
            "alerts": [],
            "split": {"steps": [{"step": "raw", "clicks": 10}], "test": {"rows": 5, "sessions": 2}},
        },
        history=pd.DataFrame(rows),
    )

    html, markdown = render(session)

    assert "12.34%" in html and "| pop |" in markdown
    assert "<td>test</td><td>5</td><td>2</td>" in html
    assert 'id="alerts"' not in html


def off_policy_row(model, estimator, value, low, high, clip=None):
    return {
        "run_id": "r-2026-11-03",
        "model": model,
        "estimator": estimator,
        "value": value,
        "std_error": 0.01,
        "ci_low": low,
        "ci_high": high,
        "n_impressions": 500,
        "effective_n": 62.5,
        "max_weight": 8.0,
        "clip": clip,
    }


def test_off_policy_section_only_when_the_dataset_exists():
    without = render(data())
    assert all("Off-policy estimates" not in page for page in without)

    with_estimates = dataclasses.replace(
        data(),
        off_policy=pd.DataFrame(
            [
                off_policy_row("knn", "snips", 0.2, 0.15, 0.25),
                off_policy_row("knn", "clipped_ips", 0.18, 0.1, 0.26, clip=5.0),
                off_policy_row("logging", "logged_mean", 0.1, 0.08, 0.12),
            ]
        ),
    )
    rows = off_policy_rows(with_estimates)
    html, markdown = render(with_estimates)

    assert [(r["model"], r["estimator"]) for r in rows] == [
        ("logging", "logged_mean"),  # the logging policy first, then ips, clipped_ips, snips
        ("knn", "clipped_ips (M = 5)"),
        ("knn", "snips"),
    ]
    assert rows[2]["value"] == "0.2000" and rows[2]["interval"] == "[0.1500, 0.2500]"
    assert 'id="off-policy"' in html and "common support" in html
    assert "## Off-policy estimates" in markdown
    assert "| knn | snips | 0.2000 | [0.1500, 0.2500] | 500 | 62.5 | 8 |" in markdown


def test_sampled_rows_and_tuning_get_their_own_sections():
    sampled = pd.DataFrame([{**metric("knn", "ndcg", 0.61), "protocol": "sampled_100"}]).drop(
        columns="run_date"
    )
    run = {
        **data().run,
        "tuning": {
            "knn": {
                "metric": "ndcg@10",
                "grid": [{"neighbours": 50, "validation_score": 0.1}],
                "chosen": {"neighbours": 50},
                "validation_score": 0.1,
            }
        },
    }
    page, markdown = render(dataclasses.replace(data(), labelled=sampled, run=run))
    assert "## Protocol sampled_100 (all users)" in markdown and "not comparable" in markdown
    summary = markdown[markdown.index("## Summary") : markdown.index("## Protocol")]
    assert "0.6100" not in summary  # sampled numbers never in the full-catalogue tables
    assert "| knn | neighbours = 50 | ndcg@10 0.1000 | 1 |" in markdown
    assert 'id="protocol-sampled_100"' in page and 'id="tuning"' in page


def test_a_rating_task_report_has_no_cut_off():
    rows = [
        metric(model, name, value, k=None)
        for model, name, value in (("bias", "rmse", 0.98), ("bias", "mae", 0.78))
    ]
    frame = pd.DataFrame(rows).drop(columns="run_date")
    rating = dataclasses.replace(
        data(), metrics=frame, comparisons=pd.DataFrame(), history=pd.DataFrame(rows)
    )
    _, markdown = render(rating)
    assert "## Summary\n\n| model | rmse | mae |" in markdown
    assert "| bias | 0.9800  | 0.7800  |" in markdown  # no interval given


def test_a_model_served_by_the_popularity_fallback_is_labelled_with_its_user_count():
    base = data()
    split = {**base.run["split"], "fallback_users": {"knn": 88, "other": 0}}
    labelled = dataclasses.replace(base, run={**base.run, "split": split})

    said = sentences(labelled, 10)
    assert said[0].startswith("knn (+ popularity for 88 users) beats popularity on NDCG@10")
    assert said[1].startswith("random trails")  # no fallback: the bare name
    assert [r["model"] for r in summary_rows(labelled, 10)] == [
        r["model"] if r["model"] != "knn" else "knn (+ popularity for 88 users)"
        for r in summary_rows(base, 10)
    ]
    html, markdown = render(labelled)
    assert (
        "knn (+ popularity for 88 users)" in html
        and "| knn (+ popularity for 88 users) |" in markdown
    )
    assert "fallback_users" not in str(split_parts(split))


def test_sentences_say_when_a_difference_is_below_what_the_users_can_detect():
    """knn's +0.05 is not significant and below its MDE of 0.08 (0.05 / 0.30 = 16.7% of the
    baseline's NDCG vs 26.7%); a significant difference gets no MDE clause."""
    report = data()
    report = dataclasses.replace(report, comparisons=report.comparisons.assign(mde=0.08))

    knn, random, _ = sentences(report, 10)

    assert knn == (
        "knn beats popularity on NDCG@10 by 0.0500 [-0.0100, +0.1100] over 100 users "
        "(Holm-adjusted p = 0.2, not significant); a difference of 0.0500 is below what 100 "
        "users can detect (MDE 0.0800 at alpha 0.05, power 0.8, 16.7% vs an MDE of 26.7%), "
        "and covers 20.0% of the catalogue vs 1.0%."
    )
    assert "MDE" not in random


def test_a_models_own_previous_night_is_a_sentence_of_its_own_not_a_baseline():
    """Comparisons with baseline <model>@<date> (tonight vs last night) get their own
    sentence and never stand in for the baseline in the summary's markers."""
    report = data()
    previous = {
        **comparison("knn", -0.02, -0.03, -0.01, 1e-4),
        "baseline": "knn@2026-11-02",
        "mde": 0.005,
    }
    window = {**previous, "baseline": "knn@2026-10-27..2026-11-02", "mean_diff": -0.03}
    report = dataclasses.replace(
        report,
        comparisons=pd.concat(
            [pd.DataFrame([previous, window]), report.comparisons.assign(mde=0.08)]
        ),
    )

    said = sentences(report, 10)
    summary = {r["model"]: r["cells"] for r in summary_rows(report, 10)}

    assert said[-2:] == [
        "Against its own run of 2026-11-02, knn moved NDCG@10 by -0.0200 [-0.0300, -0.0100] on "
        "the 100 users both nights evaluated (Holm-adjusted p = 0.0001).",
        "Against its users' own means over its runs of 2026-10-27 to 2026-11-02, knn moved "
        "NDCG@10 by -0.0300 [-0.0300, -0.0100] on the 100 users both then and now evaluated "
        "(Holm-adjusted p = 0.0001).",
    ]
    assert said[2] == "popularity is the baseline: NDCG@10 0.3000, covering 1.0% of the catalogue."
    assert summary["knn"]["ndcg"]["marker"] == ""  # vs popularity: p = 0.2, not the -0.02


def test_the_oracle_is_in_no_figure():
    """A sanity model scales every comparison figure: the figures leave the oracle out."""
    report = data()
    oracle = pd.DataFrame([metric("oracle", "ndcg", 1.0), metric("oracle", "coverage", 0.02)])
    metrics = pd.concat([report.metrics, oracle.drop(columns="run_date")])
    config = {"run": {"name": "nightly"}, "models": [{"name": "oracle", "kind": "oracle"}]}
    report = dataclasses.replace(report, metrics=metrics, run={**report.run, "config": config})
    captured = []
    original = plots._trade_off
    plots._trade_off = lambda at_k, k: captured.append(set(at_k.index)) or original(at_k, k)
    try:
        render(report)
    finally:
        plots._trade_off = original

    assert captured == [{"popularity", "random", "knn"}]


def test_custom_metrics_join_the_summary_after_the_headline_metrics():
    """A run's evaluation.custom_metrics are summary columns too (after the headline ones)."""
    report = data()
    config = {
        "run": {"name": "nightly"},
        "evaluation": {"custom_metrics": [{"name": "revenue_hit"}]},
    }
    extra = pd.DataFrame([metric("knn", "revenue_hit", 0.125)]).drop(columns="run_date")
    report = dataclasses.replace(
        report,
        metrics=pd.concat([report.metrics, extra]),
        run={**report.run, "config": config},
    )

    assert headline_metrics(report, 10)[-1] == "revenue_hit"
    cells = {r["model"]: r["cells"] for r in summary_rows(report, 10)}
    assert cells["knn"]["revenue_hit"]["value"] == "0.1250"
    html, markdown = render(report)
    assert "revenue_hit" in html and "revenue_hit" in markdown
