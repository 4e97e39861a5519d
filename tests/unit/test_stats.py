"""Intervals, paired tests and Holm's correction (receval_spark.stats) against scipy and
statsmodels on the same arrays, and the Spark side of the paired tests on literal examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from receval_spark.metrics.compare import paired_differences, paired_statistics
from receval_spark.stats import (
    SignedRanks,
    holm,
    normal_interval,
    paired_t_pvalue,
    t_interval,
    wilcoxon_pvalue,
)

TOL = 1e-9
PER_USER = "model string, segment string, metric string, k int, user_id int, value double"


def signed_ranks(d: np.ndarray) -> SignedRanks:
    """The sufficient statistics, computed with numpy/scipy from the definition."""
    nonzero = d[d != 0]
    ranks = stats.rankdata(np.abs(nonzero))
    _, ties = np.unique(np.abs(nonzero), return_counts=True)
    return SignedRanks(
        len(d), len(nonzero), float(ranks[nonzero > 0].sum()), float((ties**3 - ties).sum())
    )


ARRAYS = {
    "normal, n = 200": np.random.default_rng(1).normal(0.1, 1, 200),
    "rounded (ties), n = 200": np.round(np.random.default_rng(2).normal(0.1, 1, 200), 1),
    "zeros and ties, n = 130": np.r_[
        np.zeros(30), np.round(np.random.default_rng(3).normal(0.2, 1, 100), 1)
    ],
    "exact, n = 20": np.random.default_rng(4).normal(0.3, 1, 20),
    "exact, n = 50": np.random.default_rng(5).normal(0.0, 1, 50),
    "one zero, n = 30 (normal approximation)": np.r_[
        0.0, np.random.default_rng(6).normal(0, 1, 29)
    ],
    "ties, n = 40 (normal approximation)": np.round(np.random.default_rng(7).normal(0.5, 1, 40)),
    "grades, n = 500": np.random.default_rng(8).choice([-1, -0.5, 0, 0, 0.5, 1, 1], 500) * 0.1,
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_wilcoxon_pvalue_equals_scipy(name):
    d = ARRAYS[name]
    assert wilcoxon_pvalue(signed_ranks(d)) == pytest.approx(stats.wilcoxon(d).pvalue, abs=TOL)


@pytest.mark.parametrize("name", list(ARRAYS))
def test_paired_t_pvalue_and_interval_equal_scipy(name):
    d = ARRAYS[name]
    x = np.random.default_rng(9).uniform(size=len(d))
    result = stats.ttest_rel(x + d, x)
    mean, std = float(d.mean()), float(d.std(ddof=1))

    assert paired_t_pvalue(mean, std, len(d)) == pytest.approx(result.pvalue, abs=TOL)
    low, high = t_interval(mean, std, len(d))
    interval = result.confidence_interval(0.95)
    assert (low, high) == pytest.approx((interval.low, interval.high), abs=TOL)


def test_tests_are_undefined_without_variation():
    assert paired_t_pvalue(0.0, 0.0, 10) is None  # every difference equal: t undefined
    assert paired_t_pvalue(0.5, None, 1) is None
    assert wilcoxon_pvalue(SignedRanks(n=10, n_nonzero=0, rank_plus=0.0, tie_term=0.0)) is None
    assert t_interval(0.3, None, 1) == (None, None)


def test_exact_wilcoxon_worked_example():
    # d = (1, 2, -3): ranks 1, 2, 3; R+ = 3. Of the 2^3 sign patterns, R+ <= 3 for
    # {}, {1}, {2}, {3}, {1, 2} -> 5/8, R+ >= 3 for {3}, {1, 2}, {1, 3}, {2, 3}, {1, 2, 3} -> 5/8
    # p = min(1, 2 * 5/8) = 1
    assert wilcoxon_pvalue(SignedRanks(3, 3, 3.0, 0.0)) == 1.0
    # d = (1, 2, 3, 4, 5) all positive: R+ = 15, P(R+ >= 15) = 1/32 -> p = 2/32
    assert wilcoxon_pvalue(SignedRanks(5, 5, 15.0, 0.0)) == pytest.approx(1 / 16, abs=TOL)
    assert stats.wilcoxon([1, 2, 3, 4, 5]).pvalue == pytest.approx(1 / 16, abs=TOL)


def test_holm_equals_statsmodels_and_keeps_missing_values():
    p = [0.01, 0.04, 0.03, None, 0.005, 0.5, 0.04]
    present = [v for v in p if v is not None]
    want = iter(multipletests(present, method="holm")[1])

    got = holm(p)

    assert got[3] is None
    assert [g for g in got if g is not None] == pytest.approx(list(want), abs=TOL)


def test_holm_worked_example():
    # sorted 0.01, 0.02, 0.03 with m = 3: 3 * 0.01, max(0.03, 2 * 0.02), max(0.04, 1 * 0.03)
    assert holm([0.03, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04], abs=TOL)
    assert holm([0.6, 0.9]) == [1.0, 1.0]  # capped at 1


def test_normal_interval_is_value_plus_minus_z_std():
    low, high = normal_interval(0.5, 0.1)
    assert (low, high) == pytest.approx((0.5 - 0.1959963985, 0.5 + 0.1959963985), abs=1e-9)
    assert normal_interval(0.5, None) == (None, None)
    # clipped to the statistic's range (e.g. a coverage or personalization near 1)
    assert normal_interval(0.99, 0.01, bounds=(0.0, 1.0)) == pytest.approx(
        (0.99 - 0.0196, 1.0), abs=1e-4
    )


# --- Spark: paired differences and their sufficient statistics ---------------------------


def test_paired_differences_use_only_users_both_models_have(spark):
    rows = [
        ("base", "all", "ndcg", 10, 1, 0.5),
        ("base", "all", "ndcg", 10, 2, 0.2),
        ("base", "all", "ndcg", 10, 3, 0.9),
        ("new", "all", "ndcg", 10, 1, 0.7),
        ("new", "all", "ndcg", 10, 2, 0.2),
        ("new", "all", "ndcg", 10, 4, 0.1),  # user 4 has no baseline value
        ("new", "all", "ndcg", 5, 1, 0.3),  # no baseline row at k = 5
    ]
    per_user = spark.createDataFrame(rows, PER_USER)

    got = paired_differences(per_user, baseline="base").collect()

    assert sorted((r.model, r.baseline, r.k, r.user_id, round(r.diff, 12)) for r in got) == [
        ("new", "base", 10, 1, 0.2),
        ("new", "base", 10, 2, 0.0),
    ]


def test_paired_statistics_worked_example(spark):
    # d = (0, 0.5, -0.5, 1, 0.5, -2): zeros dropped -> |d| = 0.5, 0.5, 1, 0.5, 2
    # average ranks: the three 0.5s share ranks 1..3 -> 2; 1 -> 4; 2 -> 5
    # R+ = 2 (0.5) + 4 (1) + 2 (0.5) = 8; tie term = 3^3 - 3 = 24
    d = [0.0, 0.5, -0.5, 1.0, 0.5, -2.0]
    rows = [("m", "b", "all", "ndcg", 10, u, v) for u, v in enumerate(d)]
    differences = spark.createDataFrame(
        rows,
        "model string, baseline string, segment string, metric string, k int, "
        "user_id int, diff double",
    )

    row = paired_statistics(
        differences, by=["model", "baseline", "segment", "metric", "k"]
    ).collect()[0]

    assert (row.n_users, row.n_nonzero, row.rank_plus, row.tie_term) == (6, 5, 8.0, 24.0)
    assert row.mean_diff == pytest.approx(np.mean(d), abs=TOL)
    assert row.std_diff == pytest.approx(np.std(d, ddof=1), abs=TOL)
    ranks = SignedRanks(row.n_users, row.n_nonzero, row.rank_plus, row.tie_term)
    assert wilcoxon_pvalue(ranks) == pytest.approx(
        stats.wilcoxon(d, method="asymptotic").pvalue, abs=TOL
    )
    assert math.isfinite(paired_t_pvalue(row.mean_diff, row.std_diff, row.n_users))


def test_paired_statistics_of_all_zero_differences(spark):
    differences = spark.createDataFrame(
        [("m", 10, 1, 0.0), ("m", 10, 2, 0.0)], "model string, k int, user_id int, diff double"
    )

    row = paired_statistics(differences, by=["model", "k"]).collect()[0]

    assert (row.n_users, row.n_nonzero, row.rank_plus, row.tie_term, row.std_diff) == (
        2,
        0,
        0.0,
        0.0,
        0.0,
    )
