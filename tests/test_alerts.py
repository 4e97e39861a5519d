"""Nightly history and regression alerts: three run dates, a crafted drop on the third."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import Nights, ReportRoot
from storage import storages

from receval_spark import read_reports
from receval_spark.alerts import regressions
from receval_spark.cli import EXIT_REGRESSED, main
from receval_spark.config import AlertRule
from receval_spark.io import local_path
from receval_spark.results import MetricRow


def row(model, value, metric="ndcg", k=10):
    return MetricRow(model=model, segment="all", metric=metric, k=k, value=value, n_users=50)


def history(values: dict[str, list[float]], metric="ndcg", k=10) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": m,
                "segment": "all",
                "protocol": "full",
                "metric": metric,
                "k": k,
                "value": v,
                "run_date": f"2026-11-{d + 1:02d}",
            }
            for m, vs in values.items()
            for d, v in enumerate(vs)
        ]
    )


def test_regression_against_the_trailing_window_mean():
    past = history({"a": [0.9, 0.30, 0.30, 0.30], "b": [0.2, 0.2, 0.2, 0.2]})
    rule = AlertRule(metric="ndcg", k=10, max_relative_drop=0.05, window=3)

    # a: mean of the last 3 dates = 0.30; 0.28 is 6.7% below -> alert; b: 0.195 is 2.5% below
    alerts = regressions([row("a", 0.28), row("b", 0.195), row("new", 0.01)], past, [rule])

    assert len(alerts) == 1
    assert alerts[0].startswith("regression: ndcg@10 of a on all is 0.2800, 6.7% below")
    assert regressions([row("a", 0.29)], past, [rule]) == []  # 3.3%: within the threshold


def test_lower_is_better_metrics_alert_on_a_rise():
    past = history({"a": [0.50, 0.50]}, metric="gini")
    rule = AlertRule(metric="gini", k=10, max_relative_drop=0.05)
    assert regressions([row("a", 0.60, metric="gini")], past, [rule])
    assert regressions([row("a", 0.40, metric="gini")], past, [rule]) == []


def test_a_session_run_takes_the_direction_of_its_protocol_s_metric():
    past = history({"pop": [2.0, 2.0]}, metric="popularity_bias").assign(protocol="session")
    rule = AlertRule(metric="popularity_bias", k=10)
    rising = MetricRow(
        model="pop",
        segment="all",
        protocol="session",
        metric="popularity_bias",
        k=10,
        value=2.5,
        n_users=50,
    )
    (alert,) = regressions([rising], past, [rule])
    assert alert.startswith("regression: popularity_bias@10 of pop on all is 2.5000, 25.0% above")


@pytest.mark.nightly
@pytest.mark.parametrize("report_root", storages("file", "s3a"), indirect=True)
def test_three_nightly_runs_with_a_drop_on_the_third(
    spark, tmp_path, capsys, report_root: ReportRoot
):
    """On file:// and s3a:// (viewfs://: the sequential and stability nights): the alert
    reads the earlier nights through Spark, and the report (rendered by the job, or by
    ``receval report --out`` off a non-local output) shows the history."""
    good = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 5)], columns=["user_id", "item_id", "score"]
    )
    bad = pd.DataFrame(
        [(u, 200, 1.0) for u in range(1, 5)], columns=["user_id", "item_id", "score"]
    )
    nights = Nights.crafted(spark, tmp_path)
    raw = nights.raw
    raw["output"]["path"] = report_root.uri
    raw["evaluation"]["alerts"] = [{"metric": "ndcg", "k": 2, "max_relative_drop": 0.05}]
    raw["evaluation"].update(metrics=["ndcg", "precision", "coverage"], bootstrap_samples=0)
    nightly = nights.run

    assert nightly("2026-11-01", good) == 0
    assert nightly("2026-11-02", good) == 0
    assert nightly("2026-11-03", bad) == EXIT_REGRESSED
    assert "alert: regression: ndcg@2 of ext on all" in capsys.readouterr().err
    runs = read_reports(spark, report_root.uri, dataset="runs")
    status = {r.run_date: (r.status, list(r.alerts)) for r in runs.collect()}
    assert status["2026-11-01"] == ("succeeded", [])
    assert status["2026-11-03"][0] == "regressed" and len(status["2026-11-03"][1]) == 1

    if report_root.uri.startswith("file:"):
        rendered = local_path(report_root.uri) / "report" / "2026-11-03" / "report.html"
    else:
        assert not report_root.names("report/")  # the job says how to render it instead
        rendered = tmp_path / "page.html"
        argv = ["report", "--reports", report_root.uri, "--date", "2026-11-03"]
        argv += ["--out", str(rendered)]
        argv += [arg for kv in report_root.conf.items() for arg in ("--spark-conf", "=".join(kv))]
        assert main(argv) == 0
    page = rendered.read_text(encoding="utf-8")
    alerts = page[page.index('id="alerts"') : page.index("</div>", page.index('id="alerts"'))]
    assert "regression: ndcg@2 of ext on all" in alerts
    history = page[page.index('<table id="history">') :]
    history = history[: history.index("</table>")]
    assert all(f"<th>{d}</th>" in history for d in ("2026-11-01", "2026-11-02", "2026-11-03"))
    assert "<td>ext</td>" in history and "<td>popularity</td>" in history
    assert "History" in page  # the figure of the metrics over the three dates

    def others() -> dict[str, bytes]:
        dates = ("2026-11-01", "2026-11-03")
        return {
            name: content
            for pattern in [
                *(f"*/run_date={d}/**" for d in dates),
                *(f"report/{d}/*" for d in dates),
            ]
            for name, content in report_root.files(pattern).items()
        }

    before = others()
    assert nightly("2026-11-02", good) == 0  # a re-run of date 2 (history: date 1 only)
    assert others() == before
