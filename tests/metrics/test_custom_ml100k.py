"""User-defined metrics and a user-segment table on MovieLens 100K against pandas: a
price-weighted hit rate read by import path (prices from data.items attributes), a
provider-group exposure share registered from Python, and u.user's occupations as segments,
whose rows add up to ``all``. Both metrics are recomputed here from their definitions on the
reference top-k lists (tests/reference.py), to 1e-12."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import reference as ref
from helpers import ML100K_COLUMNS, ML100K_CUTOFF, ml100k_interactions

import receval_spark as rv
from receval_spark import extensions

KS = (5, 10)
TOL = 1e-12


def prices(items: np.ndarray) -> pd.DataFrame:
    """A price and a provider for every item (deterministic, 13 price levels, 4 providers)."""
    return pd.DataFrame(
        {
            "item_id": items,
            "price": 1.0 + (items % 13) * 0.75,
            "provider": [f"p{i % 4}" for i in items],
        }
    )


@pytest.fixture(scope="module")
def run(spark, shared_data, ml100k_external, tmp_path_factory):
    """(Evaluation, committed metrics as pandas, the reference inputs) of one job."""
    import custom_metrics

    folder = tmp_path_factory.mktemp("custom-ml100k")
    interactions = pd.read_csv(
        shared_data / "ml-100k" / "u.data", sep="\t", header=None, names=ML100K_COLUMNS
    )
    items = prices(np.sort(interactions["item_id"].unique()))
    items.to_parquet(folder / "items.parquet", index=False)
    users = pd.read_csv(
        shared_data / "ml-100k" / "u.user",
        sep="|",
        header=None,
        names=["user_id", "age", "gender", "occupation", "zip"],
    )
    rv.register_metric("provider_share", custom_metrics.provider_share, larger_is_better=False)
    config = {
        "run": {"name": "custom-ml100k", "date": "2026-12-03"},
        "output": {"path": str(folder / "reports"), "per_user": True},
        "data": {
            "interactions": ml100k_interactions(shared_data / "ml-100k" / "u.data"),
            "items": {
                "path": str(folder / "items.parquet"),
                "columns": {"item": "item_id", "attributes": ["price", "provider"]},
            },
        },
        "split": {"method": "global_temporal", "cutoff": ML100K_CUTOFF.isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": list(KS),
            "segments": [],
            "metrics": ["ndcg"],
            "bootstrap_samples": 0,
            "custom_metrics": [
                {"name": "revenue_hit", "path": "custom_metrics:revenue_hit"},
                {"name": "provider_share"},
                {
                    "name": "provider_exposure",
                    "path": "custom_metrics:provider_exposure",
                    "scope": "group",
                },
            ],
            "user_segments": {
                "path": str(shared_data / "ml-100k" / "u.user"),
                "format": "csv",
                "header": False,
                "delimiter": "|",
                "column_names": ["user_id", "age", "gender", "occupation", "zip"],
                "columns": {"user": "user_id", "segment": "occupation"},
            },
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "external", "kind": "external", "path": str(ml100k_external[1])},
        ],
    }
    try:
        with rv.evaluate(spark, config, keep_cached=True) as result:
            rv.write_reports(result)
            outcome = result.outcome
    finally:
        extensions._REGISTERED.pop("provider_share")
    committed = rv.read_reports(spark, str(folder / "reports"), dataset="metrics").toPandas()
    return outcome, committed, interactions, items, users, ml100k_external[0]


def reference_values(interactions, items, external) -> pd.DataFrame:
    """(model, user_id, k, revenue_hit, provider_share, slots, p0_slots) from the definitions:
    price of the relevant list items / price of the list; share of list slots from provider
    p0 (0 for a user without a list); the list's slots and those of provider p0 (for the
    group metric provider_exposure = p0 slots / slots over a group's lists)."""
    train, test = ref.global_temporal_split(interactions, ML100K_CUTOFF)
    truth = ref.relevant_items(test, kind="threshold", threshold=4.0)
    relevance = ref.relevance_by_user(truth)
    seen = ref.seen_items(train)
    price = dict(zip(items["item_id"], items["price"], strict=True))
    provider = dict(zip(items["item_id"], items["provider"], strict=True))
    candidates = {
        "popularity": ref.popularity_candidates(train, relevance),
        "external": external,
    }
    rows = []
    for model, scored in candidates.items():
        ranking = ref.top_k(scored, k=max(KS), seen=seen, users=list(relevance))
        for user, rel in relevance.items():
            for k in KS:
                top = ranking.get(user, [])[:k]
                total = sum(price[i] for i in top)
                revenue = sum(price[i] for i in top if i in rel) / total if top else 0.0
                share = sum(provider[i] == "p0" for i in top) / len(top) if top else 0.0
                p0 = sum(provider[i] == "p0" for i in top)
                rows.append((model, user, k, revenue, share, len(top), p0))
    return pd.DataFrame(
        rows,
        columns=["model", "user_id", "k", "revenue_hit", "provider_share", "slots", "p0_slots"],
    )


def test_custom_metrics_equal_pandas_on_ml100k_by_occupation(run):
    _, committed, interactions, items, users, external = run
    expected = reference_values(interactions, items, external).merge(
        users[["user_id", "occupation"]], on="user_id", how="left"
    )
    got = committed[committed.metric.isin(["revenue_hit", "provider_share", "provider_exposure"])]
    checked = 0
    for (model, k), group in expected.groupby(["model", "k"]):
        for segment, users_of in [("all", group)] + [
            (f"occupation={o}", g) for o, g in group.groupby("occupation")
        ]:
            listed = users_of[users_of.slots > 0]
            row = got[
                (got.model == model)
                & (got.k == k)
                & (got.segment == segment)
                & (got.metric == "provider_exposure")
            ]
            assert row.n_users.iloc[0] == len(listed)  # a group metric: over the lists
            exposure = listed.p0_slots.sum() / listed.slots.sum()
            assert abs(row.value.iloc[0] - exposure) <= TOL, (model, k, segment)
            checked += 1
            for metric in ("revenue_hit", "provider_share"):
                row = got[
                    (got.model == model)
                    & (got.k == k)
                    & (got.segment == segment)
                    & (got.metric == metric)
                ]
                assert len(row) == 1, (model, k, segment, metric)
                assert row.n_users.iloc[0] == len(users_of)
                assert abs(row.value.iloc[0] - users_of[metric].mean()) <= TOL, (model, k, metric)
                checked += 1
    assert checked == len(got)  # and no row beyond these


def test_the_occupation_rows_add_up_to_all_and_carry_intervals_and_tests(run):
    outcome, committed, *_ = run
    ndcg = committed[(committed.metric == "revenue_hit") & (committed.k == 10)]
    for model, rows in ndcg.groupby("model"):
        everyone = rows[rows.segment == "all"].n_users.iloc[0]
        parts = rows[rows.segment.str.startswith("occupation=")]
        assert parts.n_users.sum() == everyone, model  # each user in exactly one occupation
        assert (parts.segment != "occupation=unassigned").all()  # u.user covers every user
        assert ((rows.ci_low <= rows.value) & (rows.value <= rows.ci_high)).all()
        assert ((rows.ci_low >= 0) & (rows.ci_high <= 1)).all()
    tests = [c for c in outcome.comparisons if c.metric == "revenue_hit" and c.segment == "all"]
    assert {(c.model, c.baseline, c.k) for c in tests} == {
        ("external", "popularity", k) for k in KS
    }
    assert all(c.p_holm is not None and c.mde is not None for c in tests)
    assert {c.name: c.passed for c in outcome.checks}["custom_metric_bounds"]
