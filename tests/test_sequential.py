"""Always-valid sequential alert rules (``significance: sequential``): the mixture SPRT against
the plain-Python reference of Johari et al., the rule's judgement from committed comparisons,
and the job over nights on file:// and viewfs:// (a re-run of a date decides the same)."""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pandas as pd
import pytest
from helpers import REPO, Nights, ReportRoot
from reference import msprt_by_integration, msprt_iid
from storage import storages

from receval_spark import read_reports
from receval_spark.cli import EXIT_REGRESSED
from receval_spark.config import AlertRule
from receval_spark.results import ComparisonRow, MetricRow
from receval_spark.sequential import (
    Night,
    evidence,
    mixture_log_ratio,
    sequential_alerts,
    sequential_baseline,
)

sys.path.insert(0, str(REPO / "benchmarks"))

DIFFERENCES = [-0.004, 0.001, -0.007, -0.002, -0.005, 0.0005, -0.006, -0.003]

# not on s3a://, for the suite's time (docs/datasets.md, "On object storage"): the commit this
# test goes through runs on s3a:// in tests/test_io.py, and nights of the job in test_alerts.py
# the rule reads the history through Hadoop's filesystem API: once, on viewfs:// (not file:// too)
STORAGES = storages("viewfs")


def test_independent_nights_give_johari_s_msprt():
    """Without a shared reference (share 0) and one variance V, Λ_n is Johari et al.'s
    sqrt(V/(V + n tau^2)) exp(n^2 tau^2 ybar^2 / (2V(V + n tau^2))) after every night."""
    variance, tau = 0.0025**2, 0.004
    for n in range(1, len(DIFFERENCES) + 1):
        nights = [Night(str(i), d, variance) for i, d in enumerate(DIFFERENCES[:n])]
        log_ratio, _, _ = mixture_log_ratio(nights, mixing_variance=tau**2, shared=0.0)
        assert math.exp(log_ratio) == pytest.approx(msprt_iid(DIFFERENCES[:n], variance, tau))


def test_a_shared_reference_gives_the_mixture_likelihood_ratio_by_its_definition():
    """Nights of different variances V_i, a share 1/(W + 1) of each the reference's (W = 3):
    the covariance D + r r^T (r_i = sqrt(V_i / 4)); the closed form equals the integral of
    f_theta / f_0 over the N(0, tau^2) mixture."""
    variances = np.array([4.0, 6.0, 5.0, 3.0, 8.0, 4.5, 5.5, 6.5]) * 1e-6
    shared, tau = 1 / 4, 0.003
    roots = np.sqrt(shared * variances)
    covariance = np.diag((1 - shared) * variances) + np.outer(roots, roots)
    nights = [
        Night(str(i), d, v) for i, (d, v) in enumerate(zip(DIFFERENCES, variances, strict=True))
    ]
    log_ratio, _, _ = mixture_log_ratio(nights, mixing_variance=tau**2, shared=shared)
    expected = msprt_by_integration(DIFFERENCES, covariance, tau)
    assert math.exp(log_ratio) == pytest.approx(expected, rel=1e-7)
    independent, _, _ = mixture_log_ratio(nights, mixing_variance=tau**2, shared=0.0)
    assert expected < math.exp(independent)  # the reference's noise is not evidence


def test_a_change_on_any_night_mixes_the_ratios_of_every_change_night():
    """Horizon H = 12 change nights over 8 nights: Λ = (Σ_c Λ_c + (H - 8)) / H, Λ_c the
    reference's integral for a shift from night c on (0 before it), a night not yet seen
    counting 1; a shift from night 5 weighs most for these differences."""
    variance, shared, tau, horizon = 4e-6, 1 / 8, 0.003, 12
    y = [0.001, -0.001, 0.0005, 0.0, -0.006, -0.005, -0.007, -0.006]
    root = math.sqrt(shared * variance)
    covariance = np.diag([(1 - shared) * variance] * len(y)) + root**2
    by_night = [
        msprt_by_integration(y, covariance, tau, shape=[float(i >= c) for i in range(len(y))])
        for c in range(len(y))
    ]
    nights = [Night(str(i), d, variance) for i, d in enumerate(y)]
    log_ratio, a, b = mixture_log_ratio(
        nights, mixing_variance=tau**2, shared=shared, horizon=horizon
    )
    expected = (sum(by_night) + horizon - len(y)) / horizon
    assert math.exp(log_ratio) == pytest.approx(expected, rel=1e-7)
    assert int(np.argmax(by_night)) == 4 and b / a < -0.004


def test_the_simulation_benchmark_computes_the_rule_s_statistic():
    """benchmarks/sequential_alerts.py vectorises the statistic over simulated quarters; on
    two quarters of 90 nights it equals the rule's own (horizon 90) after nights 1, 30, 90."""
    simulation = importlib.import_module("sequential_alerts")
    rng = np.random.default_rng(3)
    y = rng.normal(-0.002, 0.003, size=(2, 90))
    variance = rng.uniform(0.5, 1.5, size=(2, 90)) * 9e-6
    log_ratio, worse = simulation.mixture_log_ratios(y, variance, 7, tau=0.005)
    for quarter in range(2):
        nights = [
            Night(str(i), d, v)
            for i, (d, v) in enumerate(zip(y[quarter], variance[quarter], strict=True))
        ]
        for n in (0, 29, 89):
            expected, a, b = mixture_log_ratio(
                nights[: n + 1], mixing_variance=0.005**2, shared=1 / 8, horizon=90
            )
            assert log_ratio[quarter, n] == pytest.approx(expected, rel=1e-9, abs=1e-12)
            assert worse[quarter, n] == (b / a < 0)


def test_the_p_value_is_the_smallest_1_over_lambda_so_far():
    """After a night that crossed, a night back at 0 lowers Λ but not the evidence's p-value."""
    variance, tau = 1e-6, 0.003
    nights = [Night("1", -0.004, variance), Night("2", -0.004, variance)]
    crossed = evidence(nights, mixing_variance=tau**2, shared=0.0)
    later = evidence([*nights, Night("3", 0.004, variance)], mixing_variance=tau**2, shared=0.0)
    assert later.log_ratio < crossed.log_ratio
    assert later.p_value == crossed.p_value == pytest.approx(math.exp(-crossed.log_ratio))
    assert crossed.estimate == pytest.approx(-0.004)


RULE = AlertRule(
    metric="ndcg",
    k=10,
    significance="sequential",
    start="2026-11-03",
    window=2,
    mixing_sd=0.003,
    horizon=1,
)
REFERENCE = ["2026-11-01", "2026-11-02"]
BASELINE = sequential_baseline("m", REFERENCE)


def comparison(mean_diff: float, std_diff: float = 0.1, n_users: int = 10_000, **row):
    return ComparisonRow(
        model="m",
        baseline=BASELINE,
        segment="all",
        metric="ndcg",
        k=10,
        n_users=n_users,
        mean_diff=mean_diff,
        std_diff=std_diff,
        ci_low=None,
        ci_high=None,
        p_ttest=None,
        p_wilcoxon=None,
        **row,
    )


def judged(past: dict[str, float], tonight: float, run_date: str, rule=RULE) -> list[str]:
    """The sequential rule's alerts tonight after committed comparisons ``past`` (date ->
    mean difference; std 0.1 over 10,000 users: V = 1e-6)."""
    committed = pd.DataFrame(
        [{**vars(comparison(d)), "run_date": date} for date, d in past.items()]
    )
    metrics = pd.DataFrame(
        [
            {"model": "m", "protocol": "full", "segment": "all", "metric": "ndcg", "k": 10}
            | {"value": 0.3, "run_date": d}
            for d in REFERENCE
        ]
    )
    current = MetricRow(model="m", segment="all", metric="ndcg", k=10, value=0.29, n_users=10**4)
    return sequential_alerts(
        [current],
        metrics,
        [rule],
        comparisons=[comparison(tonight)],
        past=committed,
        per_user_dates=[*REFERENCE, *past],
        run_date=run_date,
    )


def test_the_rule_accumulates_the_nights_since_its_start_and_fires_on_a_worsening():
    """-0.003 a night (V = 1e-6, W = 2, a shift from the start: horizon 1): Λ = 18 after one
    night (< 1/0.05), 141 after two."""
    assert judged({}, -0.003, "2026-11-03") == []
    (alert,) = judged({"2026-11-03": -0.003}, -0.003, "2026-11-04")
    assert alert.startswith("regression: ndcg@10 of m on all: sequential test (mixture SPRT)")
    assert f"over 2 nights since 2026-11-03 against {BASELINE}: estimated change -0.0030" in alert
    assert judged({"2026-11-03": 0.003}, 0.003, "2026-11-04") == []  # an improvement
    # nights before the start do not count; a date before the start is not judged
    assert judged({"2026-11-02": -0.003}, -0.003, "2026-11-03") == []
    assert judged({}, -0.01, "2026-11-02") == []


def test_tau_defaults_to_the_rule_s_drop_of_the_reference_level():
    """Without mixing_sd, tau = max_relative_drop (0.01) x the reference mean 0.3 = 0.003:
    the same decision as the explicit 0.003."""
    implicit = RULE.model_copy(update={"mixing_sd": None, "max_relative_drop": 0.01})
    (alert,) = judged({"2026-11-03": -0.003}, -0.003, "2026-11-04", rule=implicit)
    assert alert.endswith("(tau 0.003)")


@pytest.mark.nightly
@pytest.mark.parametrize("report_root", STORAGES, indirect=True)
def test_nights_sequential_rule_on_the_job(spark, tmp_path, capsys, report_root: ReportRoot):
    """The job with per_user rows, reference night 1 (window 1), start night 2: ext loses the
    hit of 4 of its 6 users on nights 2 and 3 (mean difference -2/3, std 0.52). Night 2 alone:
    Λ = 16 < 20, succeeded; night 3: Λ = 67, regressed. Re-running night 2 after night 3 is
    committed decides as before (night 3 is not read)."""
    good = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 7)], columns=["user_id", "item_id", "score"]
    )
    worse = good.assign(item_id=[200, 200, 200, 200, 105, 106])
    nights = Nights.crafted(spark, tmp_path)
    nights.raw["output"].update(per_user=True, path=report_root.uri)
    nights.raw["evaluation"].update(metrics=["ndcg"], bootstrap_samples=0)
    nights.raw["evaluation"]["alerts"] = [
        {"metric": "ndcg", "k": 2, "significance": "sequential", "start": "2026-11-02"}
        | {"window": 1, "mixing_sd": 0.3, "horizon": 1}
    ]

    def nightly(date: str, recommendations: pd.DataFrame) -> int:
        return nights.run(date, recommendations, "--quiet")

    assert nightly("2026-11-01", good) == 0
    assert nightly("2026-11-02", worse) == 0
    assert nightly("2026-11-03", worse) == EXIT_REGRESSED
    (alert,) = [line for line in capsys.readouterr().err.splitlines() if "alert:" in line]
    assert "ndcg@2 of ext on all: sequential test (mixture SPRT) over 2 nights since " in alert
    assert "against ext@2026-11-01 (every date): estimated change -0.6667" in alert

    def decisions() -> dict[str, tuple[str, list[str]]]:
        runs = read_reports(spark, report_root.uri, dataset="runs").collect()
        return {r.run_date: (r.status, list(r.alerts)) for r in runs}

    before = decisions()
    assert nightly("2026-11-02", worse) == 0
    assert decisions() == before
    rows = read_reports(spark, report_root.uri, dataset="comparisons").toPandas()
    own = rows[(rows.baseline == "ext@2026-11-01 (every date)") & (rows.metric == "ndcg")]
    assert sorted(own[own.segment == "all"].run_date) == ["2026-11-02", "2026-11-03"]
    assert (own[own.segment == "all"].mean_diff == -2 / 3).all()
