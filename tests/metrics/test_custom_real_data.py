"""User-defined metrics and a user-segment table on real data, against pandas from the
definitions (tests/reference.py top-k lists), to 1e-12.

MovieLens ml-latest-small (shipped with the package): a price-weighted hit rate read by import
path (prices from data.items attributes), a provider share registered from Python and a
provider-exposure group metric, for popularity and a tie-rich external model, with intervals,
paired comparisons and report rows. MovieLens 100K: u.user's occupations as user segments,
whose rows add up to ``all`` and whose NDCG equals the reference per occupation.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import reference as ref
from helpers import ML100K_COLUMNS, ML100K_CUTOFF, external_score, ml100k_interactions

import receval_spark as rv
from receval_spark import extensions

LATEST = Path(rv.__file__).parent / "data" / "ml-latest-small" / "ratings.csv"
CUTOFF = dt.datetime(2017, 1, 1, tzinfo=dt.UTC)  # 92 test users in ml-latest-small
KS = (5, 10)
TOL = 1e-12
CUSTOM = ("revenue_hit", "provider_share", "provider_exposure")


def shop_items(items: np.ndarray) -> pd.DataFrame:
    """A price and a provider for every item (deterministic: 13 price levels, 4 providers)."""
    return pd.DataFrame(
        {
            "item_id": items,
            "price": 1.0 + (items % 13) * 0.75,
            "provider": [f"p{i % 4}" for i in items],
        }
    )


@pytest.fixture(scope="module")
def latest(spark, tmp_path_factory):
    """(outcome, committed metrics, Markdown report, ratings, items, external) of the job."""
    import custom_metrics

    folder = tmp_path_factory.mktemp("custom-latest")
    ratings = pd.read_csv(LATEST).rename(columns={"userId": "user_id", "movieId": "item_id"})
    items = shop_items(np.sort(ratings["item_id"].unique()))
    items.to_parquet(folder / "items.parquet", index=False)
    users = np.sort(ratings.loc[ratings["timestamp"] >= CUTOFF.timestamp(), "user_id"].unique())
    u, i = np.repeat(users, len(items)), np.tile(items["item_id"].to_numpy(), len(users))
    external = pd.DataFrame({"user_id": u, "item_id": i, "score": external_score(u, i)})
    external.to_parquet(folder / "external.parquet", index=False)
    config = {
        "run": {"name": "custom-latest", "date": "2026-12-03"},
        "output": {"path": str(folder / "reports")},
        "data": {
            "interactions": {
                "path": str(LATEST),
                "format": "csv",
                "columns": {"user": "userId", "item": "movieId", "rating": "rating"},
            },
            "items": {
                "path": str(folder / "items.parquet"),
                "columns": {"item": "item_id", "attributes": ["price", "provider"]},
            },
        },
        "split": {"method": "global_temporal", "cutoff": CUTOFF.isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": list(KS),
            "segments": [],
            "metrics": ["ndcg"],
            "bootstrap_samples": 20,
            "min_users": 0,
            "custom_metrics": [
                {"name": "revenue_hit", "path": "custom_metrics:revenue_hit"},
                {"name": "provider_share"},
                {
                    "name": "provider_exposure",
                    "path": "custom_metrics:provider_exposure",
                    "scope": "group",
                },
            ],
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "external", "kind": "external", "path": str(folder / "external.parquet")},
        ],
    }
    rv.register_metric("provider_share", custom_metrics.provider_share, larger_is_better=False)
    try:
        with rv.evaluate(spark, config, keep_cached=True) as result:
            commit = rv.write_reports(result)
            # the committed comparisons: the judgement's, Holm-adjusted once
            outcome = dataclasses.replace(result.outcome, comparisons=commit.comparisons)
    finally:
        extensions._REGISTERED.pop("provider_share")
    output = str(folder / "reports")
    committed = rv.read_reports(spark, output, dataset="metrics").toPandas()
    markdown = rv.render_report(spark, output).with_suffix(".md").read_text(encoding="utf-8")
    return outcome, committed, markdown, ratings, items, external


def reference_values(ratings, items, external) -> pd.DataFrame:
    """(model, user_id, k, revenue_hit, provider_share, slots, p0_slots) from the
    definitions: price of the relevant list items / price of the list; share of list slots
    from provider p0 (0 for a user without a list); the list's slots and those of provider
    p0 (provider_exposure = p0 slots / slots over a group's lists)."""
    train, test = ref.global_temporal_split(ratings, CUTOFF)
    relevance = ref.relevance_by_user(ref.relevant_items(test, kind="threshold", threshold=4.0))
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
                p0 = sum(provider[i] == "p0" for i in top)
                share = p0 / len(top) if top else 0.0
                rows.append((model, user, k, revenue, share, len(top), p0))
    return pd.DataFrame(
        rows,
        columns=["model", "user_id", "k", "revenue_hit", "provider_share", "slots", "p0_slots"],
    )


@pytest.mark.real_data
def test_custom_metrics_equal_pandas_on_ml_latest_small(latest):
    _, committed, _, ratings, items, external = latest
    expected = reference_values(ratings, items, external)
    got = committed[committed.metric.isin(CUSTOM)].set_index(["model", "k", "metric"])
    assert len(got) == 2 * len(KS) * len(CUSTOM) and (got.segment == "all").all()
    for (model, k), users in expected.groupby(["model", "k"]):
        listed = users[users.slots > 0]
        want = {
            "revenue_hit": (users.revenue_hit.mean(), len(users)),
            "provider_share": (users.provider_share.mean(), len(users)),
            "provider_exposure": (listed.p0_slots.sum() / listed.slots.sum(), len(listed)),
        }
        for metric, (value, n_users) in want.items():
            row = got.loc[(model, k, metric)]
            assert abs(row.value - value) <= TOL, (model, k, metric, row.value, value)
            assert row.n_users == n_users and row.ci_low <= row.value <= row.ci_high
            assert row.ci_low >= 0.0 and row.ci_high <= 1.0  # inside the declared bounds
        assert got.loc[(model, k, "provider_exposure")]["std"] > 0  # a bootstrap interval


@pytest.mark.real_data
def test_custom_metrics_get_comparisons_checks_and_report_rows(latest):
    outcome, _, markdown, *_ = latest
    tests = [c for c in outcome.comparisons if c.metric in ("revenue_hit", "provider_share")]
    assert {(c.metric, c.model, c.baseline, c.k) for c in tests} == {
        (m, "external", "popularity", k) for m in ("revenue_hit", "provider_share") for k in KS
    }
    assert all(c.p_holm is not None and c.effect_size is not None for c in tests)
    assert {c.name: c.passed for c in outcome.checks}["custom_metric_bounds"]
    for metric in CUSTOM:
        assert f"| {metric}@10 |" in markdown, metric  # the report's table of every metric
    assert (  # each definition, from its function's docstring
        "- **revenue_hit**: Price-weighted precision: the price of the relevant list items / "
        "the price of the list. (user, range [0.0, 1.0], larger is better; "
        "`custom_metrics:revenue_hit`)"
    ) in markdown
    assert "- **provider_exposure**: Share of all list slots" in markdown


@pytest.fixture(scope="module")
def occupations(spark, shared_data, tmp_path_factory):
    """(committed metrics, u.data, u.user) of a popularity job with u.user's occupations."""
    folder = tmp_path_factory.mktemp("occupations")
    user_columns = ["user_id", "age", "gender", "occupation", "zip"]
    config = {
        "run": {"name": "occupations", "date": "2026-12-03"},
        "output": {"path": str(folder / "reports")},
        "data": {"interactions": ml100k_interactions(shared_data / "ml-100k" / "u.data")},
        "split": {"method": "global_temporal", "cutoff": ML100K_CUTOFF.isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": [10],
            "segments": [],
            "metrics": ["ndcg"],
            "bootstrap_samples": 0,
            "baseline": None,
            "user_segments": {
                "path": str(shared_data / "ml-100k" / "u.user"),
                "format": "csv",
                "header": False,
                "delimiter": "|",
                "column_names": user_columns,
                "columns": {"user": "user_id", "segment": "occupation"},
            },
        },
        "models": [{"name": "popularity", "kind": "popularity"}],
    }
    metrics = pd.DataFrame(
        [dataclasses.asdict(r) for r in rv.evaluate(spark, config).outcome.metrics]
    )
    interactions = pd.read_csv(
        shared_data / "ml-100k" / "u.data", sep="\t", header=None, names=ML100K_COLUMNS
    )
    users = pd.read_csv(shared_data / "ml-100k" / "u.user", sep="|", names=user_columns)
    return metrics, interactions, users


def test_occupation_segments_add_up_to_all_and_equal_the_reference(occupations):
    metrics, interactions, users = occupations
    train, test = ref.global_temporal_split(interactions, ML100K_CUTOFF)
    truth = ref.relevant_items(test, kind="threshold", threshold=4.0)
    per_user, _ = ref.evaluate_model(
        ref.popularity_candidates(train, truth["user_id"].unique()),
        truth=truth,
        ks=[10],
        seen=ref.seen_items(train),
    )
    ndcg = per_user[per_user.metric == "ndcg"].merge(users, on="user_id")
    rows = metrics[metrics.metric == "ndcg"].set_index("segment")
    everyone = rows.loc["all"].n_users
    parts = rows[rows.index.str.startswith("occupation=")]
    assert parts.n_users.sum() == everyone == len(ndcg)  # each user in exactly one occupation
    assert "occupation=unassigned" not in parts.index  # u.user covers every user
    for occupation, group in ndcg.groupby("occupation"):
        row = rows.loc[f"occupation={occupation}"]
        assert row.n_users == len(group) and abs(row.value - group.value.mean()) <= TOL
