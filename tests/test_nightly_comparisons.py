"""Tonight against last night: every model against its own per-user values of the previous
committed run date (baseline ``<model>@<date>``) or each user's mean over a trailing window of
dates (``<model>@<first>..<last>``), and the significance-aware alert rule that fires only when
that paired comparison is significant after Holm."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from helpers import Nights
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark import read_reports
from receval_spark.alerts import regressions
from receval_spark.cli import EXIT_REGRESSED
from receval_spark.config import AlertRule
from receval_spark.metrics.compare import (
    comparison_rows,
    earlier_differences,
    family_adjusted,
)
from receval_spark.results import MetricRow

USERS = 100
PREVIOUS = "2026-11-02"


def per_user(spark, values: np.ndarray, run_date: str | None = None):
    """The per_user dataset's rows of model m: ndcg@10 on segment all for users 0..n-1."""
    rows = [("r", "m", "all", str(u), "ndcg", 10, float(v), run_date) for u, v in enumerate(values)]
    schema = "run_id string, model string, segment string, user_id string, metric string, "
    return spark.createDataFrame(rows, schema + "k int, value double, run_date string")


def judged(
    spark, nights: dict[str, np.ndarray], tonight: np.ndarray, rules: list[AlertRule]
) -> list[str]:
    """The rules' alerts for tonight's mean after the earlier ``nights`` (date -> per-user
    values), with the paired comparisons the job makes (against the previous date and each
    rule's window, one Holm family) computed by the job's own functions."""
    dates = sorted(nights)
    earlier = functools.reduce(
        DataFrame.unionByName, [per_user(spark, v, d) for d, v in nights.items()]
    )
    windows = {(dates[-1],)} | {tuple(r.earlier_dates(dates)) for r in rules}
    differences = [
        earlier_differences(
            per_user(spark, tonight), earlier.filter(F.col("run_date").isin(*w)), dates=w
        )
        for w in sorted(windows)
    ]
    comparisons = family_adjusted(
        comparison_rows(functools.reduce(DataFrame.unionByName, differences))
    )
    history = pd.DataFrame(
        [
            {
                "model": "m",
                "segment": "all",
                "protocol": "full",
                "metric": "ndcg",
                "k": 10,
                "value": float(values.mean()),
                "run_date": date,
            }
            for date, values in nights.items()
        ]
    )
    current = MetricRow(
        model="m", segment="all", metric="ndcg", k=10, value=float(tonight.mean()), n_users=USERS
    )
    return regressions([current], history, rules, comparisons=comparisons, per_user_dates=dates)


def test_a_noisy_6_percent_drop_does_not_fire_and_a_consistent_3_percent_drop_does(spark):
    """100 users with values in [0.3, 0.7]. Noisy night: every user moves by -0.03 ± 0.25
    (mean drop 6%, paired t = -1.2, p = 0.23). Consistent night: every user loses 3% of
    their value (p < 1e-50). With max_relative_drop 2%, the plain rule fires on both, the
    significance-aware rule (alpha 0.05) only on the consistent one."""
    before = np.linspace(0.3, 0.7, USERS)
    noisy = before - 0.03 + 0.25 * np.where(np.arange(USERS) % 2 == 0, 1.0, -1.0)
    consistent = 0.97 * before
    assert (noisy.mean() - before.mean()) / before.mean() < -0.05
    plain = AlertRule(metric="ndcg", k=10, max_relative_drop=0.02)
    significant = AlertRule(metric="ndcg", k=10, max_relative_drop=0.02, significance=0.05)

    nights = {"2026-11-01": before, PREVIOUS: before}
    assert len(judged(spark, nights, noisy, [plain])) == 1
    assert judged(spark, nights, noisy, [significant]) == []
    assert len(judged(spark, nights, consistent, [plain])) == 1
    (alert,) = judged(spark, nights, consistent, [significant])
    assert alert.startswith("regression: ndcg@10 of m on all is 0.4850, 3.0% below")
    assert f"paired t-test against m@{PREVIOUS} on 100 users: mean difference -0.0150" in alert


def test_a_regression_that_began_last_night_is_significant_only_against_the_window(spark):
    """Two normal nights, a bad one (every user at 90%: last night's alert), and tonight
    still at 90% with ±0.02 noise. Against last night the paired mean difference is 0 (p = 1:
    no alert); against each user's mean over the three nights it is -6.7% of their value on
    every user (p < 1e-30): the window rule fires, naming its baseline."""
    before = np.linspace(0.3, 0.7, USERS)
    bad = 0.9 * before
    tonight = bad + 0.02 * np.where(np.arange(USERS) % 2 == 0, 1.0, -1.0)
    nights = {"2026-10-31": before, "2026-11-01": before, PREVIOUS: bad}
    rule = {"metric": "ndcg", "k": 10, "max_relative_drop": 0.05, "window": 3}
    last_night = AlertRule(**rule, significance=0.05)
    window = AlertRule(**rule, significance=0.05, against="window")

    assert len(judged(spark, nights, tonight, [AlertRule(**rule)])) == 1  # 6.9% below the mean
    assert judged(spark, nights, tonight, [last_night]) == []
    (alert,) = judged(spark, nights, tonight, [last_night, window])
    assert alert.startswith("regression: ndcg@10 of m on all is 0.4500, 6.9% below its mean")
    assert "paired t-test against m@2026-10-31..2026-11-02 on 100 users: mean difference " in alert
    assert "-0.0333" in alert


@pytest.mark.nightly  # several committed nights: make test-all and CI
def test_three_nights_compare_each_model_with_its_previous_night(spark, tmp_path, capsys):
    """The job with output.per_user on, three nights: the third night's comparisons hold
    ext against ext@<second night> on the users both nights evaluated, in the run's one Holm
    family; two users losing their hit is a 33% drop that the plain rule flags and the
    significance-aware rule (6 users, p = 0.17) does not."""
    good = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 7)], columns=["user_id", "item_id", "score"]
    )
    worse = good.assign(item_id=[200, 200, 103, 104, 105, 106])  # users 1, 2 lose their hit
    nights = Nights.crafted(spark, tmp_path)
    raw = nights.raw
    raw["output"]["per_user"] = True
    raw["evaluation"]["alerts"] = [
        {"metric": "ndcg", "k": 2, "max_relative_drop": 0.05},
        {"metric": "ndcg", "k": 2, "max_relative_drop": 0.05, "significance": 0.05},
        {"metric": "ndcg", "k": 2, "significance": 0.05, "against": "window", "window": 2},
    ]

    def nightly(date: str, recommendations: pd.DataFrame) -> int:
        return nights.run(date, recommendations, "--quiet")

    assert nightly("2026-11-01", good) == 0
    assert nightly(PREVIOUS, good) == 0
    assert nightly("2026-11-03", worse) == EXIT_REGRESSED
    alerts = [line for line in capsys.readouterr().err.splitlines() if line.startswith("alert:")]
    assert len(alerts) == 1 and "paired t-test" not in alerts[0], alerts  # the plain rule only

    rows = read_reports(spark, str(tmp_path / "reports"), dataset="comparisons").toPandas()
    third = rows[rows.run_date == "2026-11-03"]
    window = f"@2026-11-01..{PREVIOUS}"  # the third rule's: each user's mean over both nights
    assert set(third.baseline) == {
        "popularity",
        f"ext@{PREVIOUS}",
        f"popularity@{PREVIOUS}",
        f"ext{window}",
        f"popularity{window}",
    }
    nightly_rows = third[(third.baseline == f"ext@{PREVIOUS}") & (third.segment == "all")]
    ndcg = nightly_rows[nightly_rows.metric == "ndcg"].iloc[0]
    assert ndcg.n_users == 6 and ndcg.mean_diff == -1 / 3
    assert (third.holm_family_size == len(third)).all()
    second = rows[rows.run_date == PREVIOUS]
    assert set(second.baseline) == {"popularity", "ext@2026-11-01", "popularity@2026-11-01"}
    assert (second[second.baseline == "ext@2026-11-01"].mean_diff == 0).all()
