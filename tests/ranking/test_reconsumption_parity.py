"""Parity on a log with repeats, as logs arrive: ml-latest-small with string user and item ids,
exact duplicate rows and re-consumed items (train items rated again, 5 stars, after the
cut-off). The Spark job against tests/reference.py (DESIGN §3: under the seen filter seen
items leave Rel(u)), per user to 1e-9, and the run's data-quality counts against pandas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import reference as ref

from receval_spark.api import evaluate

pytestmark = pytest.mark.shared_data

CUTOFF = "2017-01-01T00:00:00Z"
KS = (5, 10)
TOL = 1e-9


@pytest.fixture(scope="module")
def log(shared_data: Path) -> pd.DataFrame:
    """ml-latest-small with ids "u<userId>" / "m<movieId>"; every 97th row twice; for each
    user with test rows, their train rows with (userId + movieId) % 40 == 0 again after the
    cut-off at 5 stars; and user 1 (no test rows) re-rating one train item, so that all of that
    user's relevant test items were seen."""
    raw = pd.read_csv(shared_data / "ml-latest-small" / "ratings.csv")
    cut = int(pd.Timestamp(CUTOFF).timestamp())
    test_users = set(raw.loc[raw["timestamp"] >= cut, "userId"])
    assert 1 not in test_users
    again = raw[
        (raw["timestamp"] < cut)
        & raw["userId"].isin(test_users)
        & ((raw["userId"] + raw["movieId"]) % 40 == 0)
    ]
    first = raw[raw["userId"] == 1].head(1)
    repeats = pd.concat([again, first]).assign(rating=5.0, timestamp=cut + 3600)
    log = pd.concat([raw, raw.iloc[::97], repeats], ignore_index=True)
    return pd.DataFrame(
        {
            "user": "u" + log["userId"].astype(str),
            "item": "m" + log["movieId"].astype(str),
            "rating": log["rating"].astype("float64"),
            "ts": log["timestamp"].astype("int64"),
        }
    )


@pytest.fixture(scope="module")
def outcome(spark, log, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reconsumption")
    log.to_parquet(folder / "log.parquet", index=False)
    config = {
        "run": {"name": "reconsumption-parity"},
        "output": {"path": str(folder / "reports"), "per_user": True},
        "data": {
            "interactions": {
                "path": str(folder / "log.parquet"),
                "columns": {"user": "user", "item": "item", "timestamp": "ts", "rating": "rating"},
            }
        },
        "split": {"method": "global_temporal", "cutoff": CUTOFF},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": list(KS),
            "baseline": None,
            "segments": [],
            "metrics": list(ref.METRICS),
            "embeddings": {"source": "none"},
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "oracle", "kind": "oracle"},
        ],
    }
    return evaluate(spark, config, keep_cached=True).outcome


@pytest.fixture(scope="module")
def reference_side(log):
    frame = log.rename(columns={"user": "user_id", "item": "item_id", "ts": "timestamp"})
    train, test = ref.global_temporal_split(frame, pd.Timestamp(CUTOFF).to_pydatetime())
    truth = ref.relevant_items(test, kind="threshold", threshold=4.0)
    seen = ref.seen_items(train)
    users = truth["user_id"].unique()
    models = {
        "popularity": ref.popularity_candidates(train, users),
        "oracle": ref.oracle_candidates(truth),
    }
    results = {
        name: ref.evaluate_model(c, truth=truth, ks=KS, seen=seen) for name, c in models.items()
    }
    return frame, train, truth, seen, results


def test_seen_relevant_pairs_leave_rel_exactly_as_the_reference_says(outcome, reference_side):
    frame, _, truth, seen, _ = reference_side
    pairs = zip(truth["user_id"], truth["item_id"], strict=True)
    removed = sum(item in seen.get(user, set()) for user, item in pairs)
    kept = ref.relevance_by_user(truth, seen=seen)
    assert removed > 100  # the log does repeat
    assert outcome.n_users_evaluated == len(kept)
    facts = {f["fact"]: (f["count"], f["total"]) for f in outcome.split["data_quality"]}
    assert facts["reconsumed_pairs"] == (removed, len(truth))
    all_seen = truth["user_id"].nunique() - len(kept)
    assert facts["users_all_relevant_seen"] == (all_seen, truth["user_id"].nunique())
    assert all_seen >= 1  # user 1
    rows = len(frame)
    assert facts["duplicate_rows"] == (rows - len(frame.drop_duplicates()), rows)
    assert all(c.passed for c in outcome.checks), outcome.checks
    print(
        f"\nre-consumption parity: {removed} of {len(truth)} relevant pairs removed, "
        f"{all_seen} users lost all, {len(kept)} evaluated"
    )


@pytest.mark.parametrize("model", ["popularity", "oracle"])
def test_per_user_values_match_the_reference(model, outcome, reference_side):
    from pyspark.sql import functions as F

    results = reference_side[4]
    spark_side = (
        outcome.per_user.filter((F.col("segment") == "all") & (F.col("model") == model))
        .select("user_id", "k", "metric", "value")
        .toPandas()
        .astype({"k": "int64"})
    )
    ref_side = results[model][0][["user_id", "k", "metric", "value"]].astype({"k": "int64"})
    merged = spark_side.merge(
        ref_side,
        on=["user_id", "k", "metric"],
        how="outer",
        suffixes=("_spark", "_ref"),
        indicator=True,
    )
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"].head()
    bad = ~np.isclose(merged["value_spark"], merged["value_ref"], rtol=0.0, atol=TOL)
    assert not bad.any(), merged[bad].head(20)
    if model == "oracle":
        ndcg = merged[merged["metric"] == "ndcg"]
        assert (ndcg["value_spark"] == 1.0).all()
