"""User-defined metrics and user segments on the crafted log, by hand: a Column metric read
by import path, a DataFrame metric registered from Python, a segment table with an unassigned
user; a failing function and a mean outside the declared bounds."""

from __future__ import annotations

import pytest
from helpers import SHOP_RECOMMENDATIONS, shop_job

import receval_spark as rv
from receval_spark import extensions


@pytest.fixture
def job(tmp_path):
    return shop_job(tmp_path)


@pytest.fixture
def registered():
    import custom_metrics

    rv.register_metric("provider_share", custom_metrics.provider_share, larger_is_better=False)
    yield
    extensions._REGISTERED.pop("provider_share")


def values(result, metric: str) -> dict:
    rows = result.metrics.filter(f"metric = '{metric}'").collect()
    return {(r.model, r.segment): (r.value, r.n_users) for r in rows}


def test_custom_metrics_and_user_segments_by_hand(spark, job, registered, restore_sql_conf):
    """revenue_hit@2 of ext for user u is u / (u + 10) (users 1-6), of popularity 0;
    provider_share@2 is 0.5 for ext, 0 for popularity. Tiers: gold = users 1, 2, 5; silver
    3, 4; user 6 has no row: tier=unassigned. mean_rank (1.5 for two-item lists) breaks its
    declared bounds [0, 1]: the custom_metric_bounds check fails, naming it alone."""
    job["evaluation"]["custom_metrics"].append(
        {"name": "mean_rank", "path": "custom_metrics:mean_rank"}
    )
    result = rv.evaluate(
        spark, job, recommendations={"ext": spark.createDataFrame(SHOP_RECOMMENDATIONS)}
    )

    revenue = values(result, "revenue_hit")
    share = [u / (u + 10) for u in range(1, 7)]
    assert revenue[("ext", "all")] == (pytest.approx(sum(share) / 6, abs=1e-15), 6)
    assert revenue[("ext", "warm")][0] == pytest.approx(sum(share[:4]) / 4, abs=1e-15)
    assert revenue[("ext", "tier=gold")] == (pytest.approx((share[0] + share[1] + share[4]) / 3), 3)
    assert revenue[("ext", "tier=silver")][1] == 2
    assert revenue[("ext", "tier=unassigned")] == (pytest.approx(share[5]), 1)
    assert revenue[("popularity", "all")] == (0.0, 6)
    margin = values(result, "margin")  # from ext's rows: 0.25 and 0.75; popularity has none
    assert margin[("ext", "all")] == (0.5, 6) and margin[("popularity", "all")] == (0.0, 6)
    provider = values(result, "provider_share")
    assert provider[("ext", "all")] == (0.5, 6) and provider[("popularity", "all")] == (0.0, 6)
    ndcg = values(result, "ndcg")  # the built-in metrics get the tier rows too
    assert ndcg[("ext", "tier=gold")] == (1.0, 3)
    # item segments restrict Rel(u): users 1-3's relevant items are on shelf a, the others'
    # on no shelf; custom metrics are not restricted (no shelf rows)
    assert ndcg[("ext", "shelf=a")] == (1.0, 3) and ndcg[("ext", "shelf=unassigned")] == (1.0, 3)
    assert ("ext", "shelf=a") not in revenue
    exposure = values(result, "provider_exposure")  # a group metric: n_users = lists
    assert exposure[("ext", "all")] == (0.5, 6) and exposure[("popularity", "tier=gold")] == (0, 3)
    group = result.metrics.filter("metric = 'provider_exposure' AND model = 'ext'").collect()
    assert all(r.std == 0.0 and r.ci_low == r.ci_high == 0.5 for r in group)  # every list 1/2

    row = result.metrics.filter("metric = 'revenue_hit' AND model = 'ext' AND segment = 'all'")
    low, high = row.select("ci_low", "ci_high").first()
    assert 0.0 <= low < sum(share) / 6 < high <= 1.0  # a t-interval inside the bounds
    compared = result.comparisons.filter("metric = 'revenue_hit' AND segment = 'all'").first()
    assert (compared.model, compared.baseline) == ("ext", "popularity")
    assert compared.mean_diff == pytest.approx(sum(share) / 6) and compared.p_holm < 0.05
    (check,) = [c for c in result.outcome.checks if c.name == "custom_metric_bounds"]
    assert not check.passed
    assert check.detail.startswith("outside the declared bounds of mean_rank [0.0, 1.0] (")
    assert "): mean_rank@2 of ext on all = 1.5;" in check.detail


def test_a_function_failing_on_the_table_is_one_input_error(spark, job, restore_sql_conf):
    job["evaluation"]["custom_metrics"] = [
        {"name": "misspelled", "path": "custom_metrics:misspelled"}
    ]
    with pytest.raises(rv.InputError, match=r"evaluation.custom_metrics 'misspelled': its func"):
        rv.evaluate(
            spark, job, recommendations={"ext": spark.createDataFrame(SHOP_RECOMMENDATIONS)}
        )
