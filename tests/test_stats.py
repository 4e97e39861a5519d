"""Intervals, paired tests and Holm's correction (receval_spark.stats) against scipy and
statsmodels on the same arrays, and the Spark side of the paired tests on literal examples."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from pyspark.sql import Row
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint

from receval_spark.judgement import judge_outcome
from receval_spark.metrics.compare import (
    compare_run,
    family_adjusted,
    paired_differences,
    paired_statistics,
)
from receval_spark.ranking.accuracy_stage import macro_rows
from receval_spark.registry import METRICS
from receval_spark.results import Outcome, metric_row
from receval_spark.stats import (
    SignedRanks,
    benjamini_hochberg,
    bonferroni,
    cohens_dz,
    detectable_dz,
    difference_bounds,
    holm,
    mean_interval,
    metric_bounds,
    minimum_detectable_effect,
    normal_interval,
    paired_t_pvalue,
    t_interval,
    wilcoxon_pvalue,
    wilson_interval,
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


def test_tests_without_spread_have_a_p_value():
    # every difference equal and non-zero: t = ±inf, p = 0 (as scipy); all zero: p = 1
    assert paired_t_pvalue(0.1, 0.0, 10) == 0.0
    assert paired_t_pvalue(-0.1, 0.0, 10) == 0.0
    assert stats.ttest_rel(np.full(10, 1.1), np.ones(10)).pvalue == 0.0
    assert paired_t_pvalue(0.0, 0.0, 10) == 1.0
    assert wilcoxon_pvalue(SignedRanks(n=10, n_nonzero=0, rank_plus=0.0, tie_term=0.0)) == 1.0
    assert stats.wilcoxon(np.zeros(10)).pvalue == 1.0
    # one user: no t-test, no interval
    assert paired_t_pvalue(0.5, None, 1) is None
    assert t_interval(0.3, None, 1) == (None, None)


def test_exact_wilcoxon_worked_example():
    # d = (1, 2, -3): ranks 1, 2, 3; R+ = 3. Of the 2^3 sign patterns, R+ <= 3 for
    # {}, {1}, {2}, {3}, {1, 2} -> 5/8, R+ >= 3 for {3}, {1, 2}, {1, 3}, {2, 3}, {1, 2, 3} -> 5/8
    # p = min(1, 2 * 5/8) = 1
    assert wilcoxon_pvalue(SignedRanks(3, 3, 3.0, 0.0)) == 1.0
    # d = (1, 2, 3, 4, 5) all positive: R+ = 15, P(R+ >= 15) = 1/32 -> p = 2/32
    assert wilcoxon_pvalue(SignedRanks(5, 5, 15.0, 0.0)) == pytest.approx(1 / 16, abs=TOL)
    assert stats.wilcoxon([1, 2, 3, 4, 5]).pvalue == pytest.approx(1 / 16, abs=TOL)


def test_holm_equals_statsmodels_and_counts_missing_values_in_the_family():
    p = [0.01, 0.04, 0.03, None, 0.005, 0.5, 0.04]
    # the test that could not be run stays in the family as p = 1 (m = 7, not 6)
    want = multipletests([1.0 if v is None else v for v in p], method="holm")[1]

    got = holm(p)

    assert got[3] is None
    assert [g for g in got if g is not None] == pytest.approx(
        [w for w, v in zip(want, p, strict=True) if v is not None], abs=TOL
    )
    assert got[4] == pytest.approx(7 * 0.005, abs=TOL)


def test_bonferroni_and_benjamini_hochberg_worked_example():
    """p = 1/64, 1/16, 3/64, 1/128 (m = 4; dyadic, so the doubles are exact). Bonferroni: 4p.
    Benjamini-Hochberg, sorted 1/128, 1/64, 3/64, 1/16: m·p/j = 1/32, 1/32, 1/16, 1/16, then
    the running minimum from the largest down: 1/32, 1/32, 1/16, 1/16."""
    p = [1 / 64, 1 / 16, 3 / 64, 1 / 128]
    assert bonferroni(p) == [1 / 16, 1 / 4, 3 / 16, 1 / 32]
    assert benjamini_hochberg(p) == [1 / 32, 1 / 16, 1 / 16, 1 / 32]
    assert bonferroni([0.6, None]) == [1.0, None]
    # a missing test counts in m as p = 1: m = 2, 2·0.01/1
    assert benjamini_hochberg([None, 0.01]) == [None, 0.02]


@pytest.mark.parametrize("method", ["bonferroni", "fdr_bh"])
def test_bonferroni_and_benjamini_hochberg_equal_statsmodels(method):
    ours = bonferroni if method == "bonferroni" else benjamini_hochberg
    p = [0.01, 0.04, 0.03, None, 0.005, 0.5, 0.04, 0.2, 0.0]
    want = multipletests([1.0 if v is None else v for v in p], method=method)[1]
    got = ours(p)
    assert got[3] is None
    assert [g for g in got if g is not None] == pytest.approx(
        [w for w, v in zip(want, p, strict=True) if v is not None], abs=TOL
    )


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


# --- bounded intervals (DESIGN §7: an interval never leaves the metric's range) -----------


def test_every_metric_has_its_range():
    for m in METRICS:
        protocol = "session" if m.family == "session" else "full"
        assert metric_bounds(m.name, protocol=protocol) == m.bounds
    assert metric_bounds("map") == metric_bounds("hit_rate") == (0.0, 1.0)
    assert metric_bounds("novelty") == metric_bounds("popularity_bias") == (0.0, math.inf)
    assert metric_bounds("unlisted") == (-math.inf, math.inf)
    assert difference_bounds("ndcg") == (-1.0, 1.0)
    assert difference_bounds("novelty") == (-math.inf, math.inf)


@pytest.mark.parametrize(("successes", "n"), [(0, 5), (1, 5), (5, 5), (3, 10), (17, 40), (1, 1)])
def test_wilson_interval_equals_statsmodels(successes, n):
    low, high = wilson_interval(successes / n, n)
    want = proportion_confint(successes, n, alpha=0.05, method="wilson")
    assert (low, high) == pytest.approx(want, abs=1e-12)
    assert 0.0 <= low <= successes / n <= high <= 1.0
    if successes in (0, n):
        assert (low, high)[successes // n] == successes / n  # an end exactly at 0 or 1


def test_wilson_worked_example():
    # p = 1/5, n = 5, z = 1.959964: centre (0.2 + z^2/10) / (1 + z^2/5) = 0.5841 / 1.7683,
    # half z sqrt(0.16/5 + z^2/100) / 1.7683 -> [0.0362, 0.6245]
    low, high = wilson_interval(0.2, 5)
    assert (round(low, 4), round(high, 4)) == (0.0362, 0.6245)


def test_small_skewed_sample_stays_in_range():
    # 5 users, MAP@k = (0.5, 0, 0, 0, 0): the t-interval 0.1 ± 2.776 · 0.2236 / √5 starts at
    # -0.178; clipped at 0, the upper end unchanged
    values = np.array([0.5, 0, 0, 0, 0])
    mean, std = float(values.mean()), float(values.std(ddof=1))
    raw_low, raw_high = stats.t.interval(0.95, 4, loc=mean, scale=std / math.sqrt(5))
    assert raw_low < 0

    assert mean_interval("map", mean, std, 5) == pytest.approx((0.0, raw_high), abs=TOL)
    # a hit rate over the same users is a proportion: Wilson, strictly above 0 after a hit
    hits = np.array([1.0, 0, 0, 0, 0])
    low, high = mean_interval("hit_rate", hits.mean(), hits.std(ddof=1), 5)
    assert (low, high) == pytest.approx(proportion_confint(1, 5, method="wilson"), abs=1e-12)
    assert low > 0
    # near the top: 4 of 5 users at NDCG 1, one at 0.9 -> the upper end stops at 1
    top = np.array([1.0, 1, 1, 1, 0.9])
    assert mean_interval("ndcg", top.mean(), top.std(ddof=1), 5)[1] == 1.0
    # novelty is only bounded below; a metric without a range keeps scipy's t-interval
    assert mean_interval("novelty", mean, std, 5) == pytest.approx((0.0, raw_high), abs=TOL)
    assert mean_interval("unlisted", mean, std, 5) == pytest.approx((raw_low, raw_high), abs=TOL)


def test_session_recall_is_a_proportion_and_ranking_recall_a_mean():
    # one hit in 5 prediction events: each event's recall is 0 or 1 (Wilson); a user's
    # recall hits/|Rel(u)| is not, so the same values there get the clipped t-interval
    values = np.array([1.0, 0, 0, 0, 0])
    mean, std = float(values.mean()), float(values.std(ddof=1))
    wilson = proportion_confint(1, 5, method="wilson")
    assert mean_interval("recall", mean, std, 5, protocol="session") == pytest.approx(wilson)
    raw_high = stats.t.interval(0.95, 4, loc=mean, scale=std / math.sqrt(5))[1]
    assert mean_interval("recall", mean, std, 5) == pytest.approx((0.0, raw_high), abs=TOL)


def test_macro_rows_of_a_skewed_sample_stay_in_range(spark):
    rows = [("m", "all", "map", 10, u, v) for u, v in enumerate([0.5, 0.0, 0.0, 0.0, 0.0])] + [
        ("m", "all", "hit_rate", 10, u, v) for u, v in enumerate([1.0, 0.0, 0.0, 0.0, 0.0])
    ]
    per_user = spark.createDataFrame(rows, PER_USER)

    got = {r.metric: r for r in macro_rows(per_user)}

    assert got["map"].ci_low == 0.0 and got["map"].ci_high == pytest.approx(0.3776, abs=1e-4)
    assert (got["hit_rate"].ci_low, got["hit_rate"].ci_high) == pytest.approx(
        proportion_confint(1, 5, method="wilson"), abs=1e-12
    )


def test_group_statistic_intervals_are_clipped():
    def group_row(metric, value, std, *, interval, n_samples=None):
        return Row(
            model="m",
            segment="all",
            metric=metric,
            k=10,
            value=value,
            n_users=50,
            std=std,
            n_samples=n_samples,
            interval=interval,
        )

    # personalization_jaccard 0.99 over 5 sampled pairs with std 0.02: t-interval up to 1.015
    jaccard = metric_row(
        group_row("personalization_jaccard", 0.99, 0.02, interval="t", n_samples=5)
    )
    assert jaccard.ci_high == 1.0 and jaccard.ci_low < 0.99
    coverage = metric_row(group_row("coverage", 0.01, 0.02, interval="bootstrap"))
    assert coverage.ci_low == 0.0 and coverage.ci_high == pytest.approx(0.01 + 1.96 * 0.02, 1e-3)
    entropy = metric_row(group_row("entropy", 0.05, 0.1, interval="bootstrap"))
    assert entropy.ci_low == 0.0 and entropy.ci_high > 0.2


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


# --- Holm over every comparison of the run ------------------------------------------------


def test_holm_adjusts_once_over_both_protocols_and_drops_no_comparison(spark):
    rng = np.random.default_rng(12)
    users = range(8)

    def frame(shift: float, noise: float, seed: int):
        values = np.random.default_rng(seed).uniform(0.2, 0.6, len(users))
        rows = []
        for u, base in zip(users, values, strict=True):
            rows.append(("base", "all", "ndcg", 10, u, float(base)))
            rows.append(("new", "all", "ndcg", 10, u, float(base + shift + noise * rng.normal())))
            # without spread: every user +0.1 (p = 0) and every user equal (p = 1)
            rows.append(("base", "all", "precision", 10, u, 0.2))
            rows.append(("new", "all", "precision", 10, u, 0.3))
            rows.append(("base", "all", "recall", 10, u, float(base)))
            rows.append(("new", "all", "recall", 10, u, float(base)))
        return spark.createDataFrame(rows, PER_USER)

    per_user = {"full": frame(0.05, 0.05, 1), "sampled_10": frame(0.02, 0.05, 2)}

    raw = compare_run(per_user, baseline="base")
    # the run's comparisons come unadjusted; the judge adjusts them once, with the earlier
    # dates' comparisons in the same family (receval_spark.judgement)
    assert all(r.p_holm is None and r.holm_family_size is None for r in raw)
    outcome = Outcome(metrics=[], split={}, n_users_evaluated=8, checks=[], warnings=[])
    verdict = judge_outcome(
        dataclasses.replace(outcome, comparisons=raw),
        run_date="2026-01-01",
        rules=[],
        per_user=None,
        spark=spark,
        output=None,
        committed={},
    )
    got = verdict.comparisons
    assert got == family_adjusted(raw) and verdict.status == "succeeded"
    assert {r.correction for r in got} == {"holm"} and all(r.p_adjusted == r.p_holm for r in got)
    bh = judge_outcome(
        dataclasses.replace(outcome, comparisons=raw),
        run_date="2026-01-01",
        rules=[],
        per_user=None,
        spark=spark,
        output=None,
        committed={},
        correction="benjamini_hochberg",
    ).comparisons
    assert [r.p_adjusted for r in bh] == [r.p_bh for r in got]
    want_bh = multipletests([r.p_ttest for r in got], method="fdr_bh")[1]
    assert [r.p_bh for r in got] == pytest.approx(list(want_bh), abs=TOL)

    assert len(got) == 6 and {r.protocol for r in got} == {"full", "sampled_10"}
    assert all(r.holm_family_size == 6 for r in got)
    by_key = {(r.protocol, r.metric): r for r in got}
    assert by_key[("full", "precision")].p_ttest == 0.0
    assert by_key[("full", "recall")].p_ttest == 1.0
    assert by_key[("sampled_10", "recall")].p_wilcoxon == 1.0
    for test, adjusted in (("p_ttest", "p_holm"), ("p_wilcoxon", "p_wilcoxon_holm")):
        p = [getattr(r, test) for r in got]
        want = multipletests(p, method="holm")[1]
        assert [getattr(r, adjusted) for r in got] == pytest.approx(list(want), abs=TOL)
        # not the per-protocol adjustment: the family spans both protocols
        full = [r for r in got if r.protocol == "full"]
        per_protocol = multipletests([getattr(r, test) for r in full], method="holm")[1]
        assert [getattr(r, adjusted) for r in full] != pytest.approx(list(per_protocol), abs=TOL)
    # differences of proportions stay within [-1, 1]
    assert all(-1.0 <= r.ci_low <= r.mean_diff <= r.ci_high <= 1.0 for r in got)


@pytest.mark.parametrize("n", [3, 5, 10, 116, 1000, 44_833])
def test_the_detectable_effect_has_power_0_8_in_statsmodels(n):
    """detectable_dz(n) is where statsmodels' two-sided one-sample/paired t-test power at
    alpha 0.05 is 0.8 (to 1e-9), and a smaller effect has less power."""
    dz = detectable_dz(n)
    power = TTestPower()
    assert power.power(effect_size=dz, nobs=n, alpha=0.05) == pytest.approx(0.8, abs=1e-9)
    assert power.power(effect_size=0.99 * dz, nobs=n, alpha=0.05) < 0.8


def test_two_users_need_a_large_effect_and_one_user_has_no_test():
    """n = 2: one degree of freedom, t_{0.975, 1} = 12.7; the lower tail is negligible (scipy
    returns nan for it there), so the upper tail alone has power 0.8."""
    dz = detectable_dz(2)
    critical = stats.t.ppf(0.975, 1)
    assert stats.nct.sf(critical, 1, dz * np.sqrt(2)) == pytest.approx(0.8, abs=1e-9)
    assert 11 < dz < 12
    assert detectable_dz(1) is None and minimum_detectable_effect(0.3, 1) is None


def test_effect_size_and_mde_in_the_metrics_units():
    """A worked example: d = (0.1, 0.3, 0.2, 0.4), mean 0.25, sample std 0.1291:
    d_z = 1.936; MDE = detectable_dz(4) · 0.1291."""
    d = np.array([0.1, 0.3, 0.2, 0.4])
    mean, std = d.mean(), d.std(ddof=1)
    assert cohens_dz(mean, std) == pytest.approx(0.25 / 0.12909944487358055, abs=1e-12)
    assert minimum_detectable_effect(std, 4) == pytest.approx(detectable_dz(4) * std, abs=1e-15)
    assert cohens_dz(0.2, 0.0) is None and cohens_dz(0.2, None) is None
    assert minimum_detectable_effect(0.0, 10) == 0.0
