"""Statistics on MovieLens 100K (DESIGN §7): the comparisons of the job equal scipy's paired
t-test, its interval, Wilcoxon signed-rank and statsmodels' Holm adjustment (one family over
both protocols) computed on the job's own per-user values; every interval stays inside its
metric's range (Wilson for hit rate, as statsmodels); user segments partition the users;
every check passes.

Setup: global temporal split at 1998-03-01, relevance rating >= 4, k = 5, 10; popularity
(the baseline), random and oracle; segments warm, cold, activity; protocols full and
sampled_100.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint

from receval_spark.stats import difference_bounds, metric_bounds

pytestmark = pytest.mark.shared_data

TOL = 1e-9
COLUMNS = ["user_id", "item_id", "rating", "timestamp"]


@pytest.fixture(scope="module")
def evaluation(shared_data: Path, tmp_path_factory, spark):
    from receval_spark import evaluate

    raw = {
        "run": {"name": "statistics-ml100k"},
        "output": {"path": str(tmp_path_factory.mktemp("reports")), "per_user": True},
        "data": {
            "interactions": {
                "path": str(shared_data / "ml-100k" / "u.data"),
                "format": "csv",
                "header": False,
                "delimiter": "\t",
                "column_names": COLUMNS,
                "columns": {
                    "user": "user_id",
                    "item": "item_id",
                    "timestamp": "timestamp",
                    "rating": "rating",
                },
            }
        },
        "split": {"method": "global_temporal", "cutoff": "1998-03-01T00:00:00Z"},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [5, 10],
            "protocol": ["full", "sampled_100"],
            "baseline": "popularity",
            "segments": ["warm", "cold", "activity"],
            "metrics": [
                "precision",
                "recall",
                "hit_rate",
                "mrr",
                "map",
                "ndcg",
                "novelty",
                "coverage",
            ],
            "bootstrap_samples": 20,
            "embeddings": {"source": "none"},
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 3},
            {"name": "oracle", "kind": "oracle"},
        ],
    }
    result = evaluate(spark, raw, keep_cached=True)
    # the run's comparisons as the evaluation's judgement states them (Holm-adjusted once)
    return dataclasses.replace(result.outcome, comparisons=result.judgement.comparisons)


@pytest.fixture(scope="module")
def per_user(evaluation) -> pd.DataFrame:
    return evaluation.per_user.toPandas()


@pytest.fixture(scope="module")
def comparisons(evaluation) -> pd.DataFrame:
    return pd.DataFrame([vars(c) for c in evaluation.comparisons])


def paired(per_user: pd.DataFrame, model: str, segment: str, metric: str, k: int) -> np.ndarray:
    """model - popularity per user, on the users both have, from the per-user table."""
    rows = per_user[(per_user.segment == segment) & (per_user.metric == metric) & (per_user.k == k)]
    wide = rows.pivot(index="user_id", columns="model", values="value").dropna(
        subset=[model, "popularity"]
    )
    return (wide[model] - wide["popularity"]).to_numpy()


def test_random_vs_popularity_equals_scipy_on_the_per_user_arrays(per_user, comparisons):
    checked = 0
    full = comparisons[comparisons.protocol == "full"]  # the per-user table is the full one's
    for row in full[full.model == "random"].itertuples():
        d = paired(per_user, "random", row.segment, row.metric, row.k)
        assert row.n_users == len(d)
        assert row.mean_diff == pytest.approx(d.mean(), abs=TOL)
        t = stats.ttest_rel(d, np.zeros_like(d))
        if np.std(d) == 0:
            assert row.p_ttest == (0.0 if d.mean() != 0 else 1.0)
        else:
            assert row.p_ttest == pytest.approx(t.pvalue, abs=TOL)
            ci = t.confidence_interval(0.95)
            low, high = difference_bounds(row.metric)
            want = (max(ci.low, low), min(ci.high, high))  # clipped to the difference's range
            assert (row.ci_low, row.ci_high) == pytest.approx(want, abs=TOL)
        if np.any(d != 0):
            assert row.p_wilcoxon == pytest.approx(stats.wilcoxon(d).pvalue, abs=TOL)
        else:
            assert row.p_wilcoxon == 1.0
        spread = np.std(d, ddof=1)
        if spread > 0:  # Cohen's d_z, and the MDE has power 0.8 in statsmodels' t-test power
            assert row.effect_size == pytest.approx(d.mean() / spread, abs=TOL)
            power = TTestPower().power(effect_size=row.mde / spread, nobs=len(d), alpha=0.05)
            assert power == pytest.approx(0.8, abs=TOL)
        else:
            assert pd.isna(row.effect_size) and row.mde == 0.0
        checked += 1
    # 7 per-user metrics x 2 k x 5 segments (all, warm, cold, and the activity buckets present)
    assert checked >= 7 * 2 * 4
    ndcg = full[(full.model == "random") & (full.segment == "all") & (full.metric == "ndcg")]
    assert (ndcg.mean_diff < 0).all() and (ndcg.p_holm < 1e-6).all()


def test_holm_adjusts_once_over_every_comparison_of_both_protocols(comparisons):
    assert set(comparisons.protocol) == {"full", "sampled_100", "sampled_100_corrected"}
    assert (comparisons.holm_family_size == len(comparisons)).all()
    for column, adjusted in (("p_ttest", "p_holm"), ("p_wilcoxon", "p_wilcoxon_holm")):
        assert comparisons[column].notna().all()  # no comparison leaves the family
        want = multipletests(comparisons[column].to_numpy(), method="holm")[1]
        assert comparisons[adjusted].to_numpy() == pytest.approx(want, abs=TOL)
    assert set(comparisons.model) == {"random", "oracle"}
    assert set(comparisons.baseline) == {"popularity"}


def test_every_interval_stays_inside_its_metrics_range(evaluation, per_user, comparisons):
    rows = [r for r in evaluation.metrics if r.ci_low is not None]
    assert {r.metric for r in rows} >= {"map", "hit_rate", "novelty", "coverage"}
    for r in rows:
        low, high = metric_bounds(r.metric)
        assert low <= r.ci_low <= r.value <= r.ci_high <= high, r
    for r in comparisons.itertuples():
        low, high = difference_bounds(r.metric)
        assert low <= r.ci_low <= r.mean_diff <= r.ci_high <= high, r
    # hit rate: the Wilson interval of the job's own per-user hits
    hits = per_user[per_user.metric == "hit_rate"]
    checked = 0
    for r in (r for r in rows if r.metric == "hit_rate" and r.protocol == "full"):
        x = hits[(hits.model == r.model) & (hits.segment == r.segment) & (hits.k == r.k)]
        successes = int((x.value == 1.0).sum())
        assert len(x) == r.n_users and set(x.value) <= {0.0, 1.0}
        want = proportion_confint(successes, len(x), alpha=0.05, method="wilson")
        assert (r.ci_low, r.ci_high) == pytest.approx(want, abs=1e-12)
        checked += 1
    assert checked >= 3 * 2 * 4


def test_warm_and_cold_add_up_to_all_and_activity_buckets_partition_warm(evaluation):
    users = {
        r.segment: r.n_users
        for r in evaluation.metrics
        if r.model == "popularity" and r.metric == "ndcg" and r.k == 10
    }
    assert users["warm"] + users["cold"] == users["all"] == evaluation.n_users_evaluated
    assert users["cold"] > 0
    buckets = [users.get(f"activity=q{q}", 0) for q in range(1, 5)]
    assert sum(buckets) == users["warm"]
    assert min(buckets) > 0
    t1, t2, t3 = evaluation.split["activity_quartiles"]
    assert 0 < t1 <= t2 <= t3


def test_group_statistics_carry_bootstrap_intervals(evaluation):
    coverage = [r for r in evaluation.metrics if r.metric == "coverage" and r.segment == "all"]
    assert len(coverage) == 3 * 2
    for r in coverage:
        assert r.std > 0 and r.ci_low < r.value < r.ci_high


def test_every_check_passes_on_real_data(evaluation):
    assert {c.name for c in evaluation.checks} == {
        "no_temporal_leakage",
        "oracle_ndcg[oracle]",
        "heldout_not_in_train",
        "same_users_all_models",
        "list_coverage",
    }
    assert all(c.passed for c in evaluation.checks), evaluation.checks
