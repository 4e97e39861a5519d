"""Parity on MovieLens 100K: the Spark job against the numpy/pandas reference (tests/reference.py).

Setup: global temporal split at 1998-03-01T00:00:00Z, relevance rating >= 4, k = 5, 10, 20,
filter_seen on. Models: popularity, oracle, and an "external" model with a deterministic,
tie-rich score read from Parquet. The Spark side is the ml-100k job this module shares with
test_beyond_parity.py (``ml100k_run``: helpers.ml100k_job, run once per test run through the
public job API, ``validate_config`` + ``pipeline.evaluate_ranking``; it also has a random model and
the beyond-accuracy metrics, left out here); every accuracy macro average, its n_users and
sample std, and every per-user value must match the reference to 1e-9.

A second, lighter run (popularity and oracle) uses graded relevance at the same threshold
(grade = rating - 4 + 1: 4 stars -> 1, 5 stars -> 2): its NDCG must match the reference's graded
NDCG, and every binary metric must equal the threshold run's exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import reference as ref
from helpers import ML100K_COLUMNS, ML100K_CUTOFF, external_score, ml100k_interactions

from receval_spark.ranking.pipeline import JOB_STAGES

pytestmark = pytest.mark.shared_data


KS = (5, 10, 20)
CUTOFF = ML100K_CUTOFF
THRESHOLD = 4.0
TOL = 1e-9
MODELS = ("popularity", "oracle", "external")
ORACLE_PERFECT = ("ndcg", "map", "mrr", "hit_rate")
COLUMNS = ML100K_COLUMNS


# --- module fixtures: the data, the reference results; the shared Spark evaluation ---------


@pytest.fixture(scope="module")
def u_data(shared_data: Path) -> Path:
    return shared_data / "ml-100k" / "u.data"


@pytest.fixture(scope="module")
def interactions(u_data: Path) -> pd.DataFrame:
    return pd.read_csv(u_data, sep="\t", header=None, names=COLUMNS)


@pytest.fixture(scope="module")
def split(interactions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return ref.global_temporal_split(interactions, CUTOFF)


@pytest.fixture(scope="module")
def truth(split) -> pd.DataFrame:
    return ref.relevant_items(split[1], kind="threshold", threshold=THRESHOLD)


@pytest.fixture(scope="module")
def external_recs(ml100k_external) -> pd.DataFrame:
    """Every (test user, catalogue item) pair with the deterministic score (the Parquet file
    of the shared job's ``external`` model)."""
    return ml100k_external[0]


@pytest.fixture(scope="module")
def reference_results(split, truth, external_recs) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """model -> (per-user long table, macro averages) from the reference."""
    train, _ = split
    seen = ref.seen_items(train)
    users = truth["user_id"].unique()
    candidates = {
        "popularity": ref.popularity_candidates(train, users),
        "oracle": ref.oracle_candidates(truth),
        "external": external_recs,
    }
    return {
        name: ref.evaluate_model(c, truth=truth, ks=KS, seen=seen) for name, c in candidates.items()
    }


def job_config(u_data: Path, output: Path, *, relevance: dict, models: list[dict]) -> dict:
    """The graded parity job on u.data: accuracy metrics only, segment 'all', per-user rows
    kept."""
    return {
        "run": {"name": "parity-ml100k-graded"},
        "output": {"path": str(output), "per_user": True},
        "data": {"interactions": ml100k_interactions(u_data)},
        "split": {"method": "global_temporal", "cutoff": "1998-03-01T00:00:00Z"},
        "relevance": relevance,
        "evaluation": {
            "k": list(KS),
            "filter_seen": True,
            "baseline": None,  # comparisons are tested in test_statistics_ml100k
            "segments": [],  # only segment 'all' is compared; keep the Spark plan small
            "metrics": list(ref.METRICS),
            "embeddings": {"source": "none"},
        },
        "models": models,
    }


@pytest.fixture(scope="module")
def evaluation(ml100k_run):
    """The shared ml-100k job (threshold relevance): popularity, random, oracle, external."""
    return ml100k_run[1]


def macro_table(evaluation) -> pd.DataFrame:
    """Accuracy macro averages of segment 'all': model, metric, k, value, n_users, std."""
    rows = [
        (r.model, r.metric, r.k, r.value, r.n_users, r.std)
        for r in evaluation.metrics
        if r.segment == "all" and r.protocol == "full" and r.metric in ref.METRICS
    ]
    return pd.DataFrame(rows, columns=["model", "metric", "k", "value", "n_users", "std"])


@pytest.fixture(scope="module")
def spark_metrics(evaluation) -> pd.DataFrame:
    return macro_table(evaluation)


@pytest.fixture(scope="module")
def spark_per_user(evaluation) -> pd.DataFrame:
    """Per-user accuracy rows of segment 'all': model, user_id, k, metric, value."""
    from pyspark.sql import functions as F

    table = evaluation.per_user.filter(
        (F.col("segment") == "all") & F.col("metric").isin(*ref.METRICS)
    ).select("model", "user_id", "k", "metric", "value")
    return table.toPandas()


# --- helpers ----------------------------------------------------------------------------


def _merge(spark_side: pd.DataFrame, ref_side: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Outer-join both sides on ``keys`` and fail on rows present on one side only."""
    merged = spark_side.merge(
        ref_side, on=keys, how="outer", suffixes=("_spark", "_ref"), indicator=True
    )
    lonely = merged[merged["_merge"] != "both"]
    assert lonely.empty, f"rows on one side only:\n{lonely.head(20)}"
    return merged


def _assert_close(merged: pd.DataFrame, column: str, what: str) -> None:
    got = merged[f"{column}_spark"].to_numpy(dtype="float64")
    want = merged[f"{column}_ref"].to_numpy(dtype="float64")
    bad = ~np.isclose(got, want, rtol=0.0, atol=TOL, equal_nan=True)
    assert not bad.any(), f"{what}: {bad.sum()} mismatches\n{merged[bad].head(20)}"


def _normalise_per_user(df: pd.DataFrame) -> pd.DataFrame:
    out = df[["user_id", "k", "metric", "value"]].copy()
    out["user_id"] = out["user_id"].astype("int64")
    out["k"] = out["k"].astype("int64")
    return out


# --- tests ------------------------------------------------------------------------------


def test_split_and_evaluated_users_match(evaluation, split, truth) -> None:
    train, test = split
    assert evaluation.split["train"]["rows"] == len(train)
    assert evaluation.split["test"]["rows"] == len(test)
    assert evaluation.split["train"]["users"] == train["user_id"].nunique()
    assert evaluation.split["test"]["users"] == test["user_id"].nunique()
    assert evaluation.n_users_evaluated == truth["user_id"].nunique()


def test_run_checks_pass(evaluation) -> None:
    failed = [c for c in evaluation.checks if not c.passed]
    assert not failed, failed


@pytest.mark.parametrize("model", MODELS)
def test_macro_averages_match_reference(model, spark_metrics, reference_results) -> None:
    spark_side = spark_metrics[spark_metrics["model"] == model].drop(columns="model")
    spark_side = spark_side.astype({"k": "int64", "n_users": "int64"})
    ref_side = reference_results[model][1]
    assert len(ref_side) == len(ref.METRICS) * len(KS)
    merged = _merge(spark_side, ref_side, ["metric", "k"])
    assert (merged["n_users_spark"] == merged["n_users_ref"]).all(), merged
    _assert_close(merged, "value", f"{model} macro averages")
    _assert_close(merged, "std", f"{model} sample std (ddof=1)")


@pytest.mark.parametrize("model", MODELS)
def test_per_user_values_match_reference(model, spark_per_user, reference_results) -> None:
    spark_side = _normalise_per_user(spark_per_user[spark_per_user["model"] == model])
    ref_side = _normalise_per_user(reference_results[model][0])
    assert not spark_side.duplicated(["user_id", "k", "metric"]).any()
    merged = _merge(spark_side, ref_side, ["user_id", "k", "metric"])
    _assert_close(merged, "value", f"{model} per-user values")


@pytest.mark.parametrize("model", MODELS)
def test_std_is_numpy_sample_std_of_spark_per_user(model, spark_metrics, spark_per_user) -> None:
    """The reported std is the sample std (ddof=1) of the Spark per-user values themselves."""
    rows = spark_per_user[spark_per_user["model"] == model]
    for (metric, k), group in rows.groupby(["metric", "k"]):
        values = group["value"].to_numpy(dtype="float64")
        row = spark_metrics[
            (spark_metrics["model"] == model)
            & (spark_metrics["metric"] == metric)
            & (spark_metrics["k"] == k)
        ]
        assert len(row) == 1
        assert row["n_users"].iloc[0] == len(values)
        assert abs(row["value"].iloc[0] - np.mean(values)) <= TOL
        assert abs(row["std"].iloc[0] - np.std(values, ddof=1)) <= TOL


@pytest.mark.parametrize("source", ["spark", "reference"])
def test_oracle_is_perfect_where_design_says_so(
    source, spark_metrics, spark_per_user, reference_results, truth
) -> None:
    """DESIGN §5: oracle NDCG, MAP, MRR and HitRate are 1, and Recall@k where |Rel(u)| <= k."""
    if source == "spark":
        per_user = _normalise_per_user(spark_per_user[spark_per_user["model"] == "oracle"])
        macro = spark_metrics[spark_metrics["model"] == "oracle"]
    else:
        per_user = _normalise_per_user(reference_results["oracle"][0])
        macro = reference_results["oracle"][1]
    perfect = per_user[per_user["metric"].isin(ORACLE_PERFECT)]
    assert len(perfect) == truth["user_id"].nunique() * len(KS) * len(ORACLE_PERFECT)
    np.testing.assert_allclose(perfect["value"], 1.0, rtol=0.0, atol=TOL)
    macro_perfect = macro[macro["metric"].isin(ORACLE_PERFECT)]
    np.testing.assert_allclose(macro_perfect["value"], 1.0, rtol=0.0, atol=TOL)

    n_rel = truth.groupby("user_id").size().rename("n_rel").reset_index()
    recall = per_user[per_user["metric"] == "recall"].merge(n_rel, on="user_id")
    small = recall[recall["n_rel"] <= recall["k"]]
    assert not small.empty
    np.testing.assert_allclose(small["value"], 1.0, rtol=0.0, atol=TOL)
    large = recall[recall["n_rel"] > recall["k"]]
    np.testing.assert_allclose(large["value"], large["k"] / large["n_rel"], rtol=0.0, atol=TOL)


def test_external_model_exercises_tie_breaking(external_recs, split, truth) -> None:
    """External scores tie inside the top-20 lists and across the k cuts, so the item-id
    tie-break decides which items are kept and at which rank."""
    seen = ref.seen_items(split[0])
    ranking = ref.top_k(external_recs, k=max(KS) + 1, seen=seen, users=truth["user_id"].unique())
    users_with_ties = 0
    ties_at_cut = dict.fromkeys(KS, 0)
    for user, items in ranking.items():
        scores = external_score(np.full(len(items), user), np.asarray(items)).tolist()
        keys = [(-score, item) for score, item in zip(scores, items, strict=True)]
        assert keys == sorted(keys)  # score descending, then item id ascending
        if len(set(scores[: max(KS)])) < max(KS):
            users_with_ties += 1
        for k in KS:
            ties_at_cut[k] += scores[k - 1] == scores[k]
    assert users_with_ties > len(ranking) // 2
    assert all(n > 0 for n in ties_at_cut.values()), ties_at_cut


def test_reversed_tie_break_would_change_external_metrics(
    external_recs, split, truth, reference_results
) -> None:
    """Sensitivity: with ties broken by item id descending (ids negated) the reference's
    per-user values differ, so the external parity test does check the tie-break."""
    negated = external_recs.assign(item_id=-external_recs["item_id"])
    seen = {u: {-i for i in items} for u, items in ref.seen_items(split[0]).items()}
    per_user, _ = ref.evaluate_model(
        negated, truth=truth.assign(item_id=-truth["item_id"]), ks=KS, seen=seen
    )
    merged = _merge(
        _normalise_per_user(per_user),
        _normalise_per_user(reference_results["external"][0]),
        ["user_id", "k", "metric"],
    )
    # "_spark" is the left side here: the reversed tie-break
    differs = ~np.isclose(merged["value_spark"], merged["value_ref"], rtol=0.0, atol=TOL)
    assert differs.any()


def test_popularity_values_are_plausible(spark_metrics) -> None:
    """Popularity on ml-100k is far from 0 and far from the oracle (a coarse sanity check)."""
    pop = spark_metrics[spark_metrics["model"] == "popularity"].set_index(["metric", "k"])
    assert 0.05 < pop.loc[("ndcg", 10), "value"] < 0.9
    assert 0.05 < pop.loc[("map", 10), "value"] < 0.9


def test_every_stage_of_the_job_is_timed(evaluation) -> None:
    """evaluate() charges its wall time to the job's stages, in the order they run."""
    assert list(evaluation.stage_seconds) == list(JOB_STAGES)
    assert all(seconds >= 0 for seconds in evaluation.stage_seconds.values())
    assert evaluation.stage_seconds["top_k"] > 0 and evaluation.stage_seconds["accuracy"] > 0


# --- graded relevance (DESIGN §3): a second run, popularity and oracle ---------------------

GRADED_MODELS = ("popularity", "oracle")
BINARY = tuple(m for m in ref.METRICS if m != "ndcg")


@pytest.fixture(scope="module")
def graded_truth(split) -> pd.DataFrame:
    return ref.relevant_items(split[1], kind="graded", threshold=THRESHOLD)


@pytest.fixture(scope="module")
def graded_reference(split, graded_truth) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    train, _ = split
    seen = ref.seen_items(train)
    users = graded_truth["user_id"].unique()
    candidates = {
        "popularity": ref.popularity_candidates(train, users),
        "oracle": ref.oracle_candidates(graded_truth),
    }
    return {
        name: ref.evaluate_model(c, truth=graded_truth, ks=KS, seen=seen)
        for name, c in candidates.items()
    }


@pytest.fixture(scope="module")
def graded_evaluation(u_data: Path, tmp_path_factory, spark):
    from receval_spark import evaluate

    raw = job_config(
        u_data,
        tmp_path_factory.mktemp("reports-graded"),
        relevance={"kind": "graded", "threshold": THRESHOLD},
        models=[{"name": name, "kind": name} for name in GRADED_MODELS],
    )
    return evaluate(spark, raw, keep_cached=True).outcome


@pytest.fixture(scope="module")
def graded_metrics(graded_evaluation) -> pd.DataFrame:
    return macro_table(graded_evaluation).astype({"k": "int64", "n_users": "int64"})


def test_graded_truth_has_grades_1_and_2_on_the_threshold_items(graded_truth, truth) -> None:
    assert set(graded_truth["grade"]) == {1.0, 2.0}
    key = ["user_id", "item_id"]
    pd.testing.assert_frame_equal(graded_truth[key], truth[key])


@pytest.mark.parametrize("model", GRADED_MODELS)
def test_graded_ndcg_matches_reference(model, graded_metrics, graded_evaluation, graded_reference):
    from pyspark.sql import functions as F

    ref_per_user, ref_macro = graded_reference[model]
    spark_side = graded_metrics[
        (graded_metrics["model"] == model) & (graded_metrics["metric"] == "ndcg")
    ].drop(columns="model")
    merged = _merge(spark_side, ref_macro[ref_macro["metric"] == "ndcg"], ["metric", "k"])
    assert sorted(merged["k"]) == list(KS)
    assert (merged["n_users_spark"] == merged["n_users_ref"]).all(), merged
    _assert_close(merged, "value", f"{model} graded ndcg")
    _assert_close(merged, "std", f"{model} graded ndcg std")
    per_user = graded_evaluation.per_user.filter(
        (F.col("segment") == "all") & (F.col("model") == model) & (F.col("metric") == "ndcg")
    ).toPandas()
    merged = _merge(
        _normalise_per_user(per_user),
        _normalise_per_user(ref_per_user[ref_per_user["metric"] == "ndcg"]),
        ["user_id", "k", "metric"],
    )
    _assert_close(merged, "value", f"{model} graded per-user ndcg")
    if model == "oracle":  # best grade first: still perfect
        np.testing.assert_allclose(merged["value_spark"], 1.0, rtol=0.0, atol=TOL)


def test_graded_ndcg_differs_from_binary(graded_metrics, spark_metrics) -> None:
    """The grades do reach the gains: popularity's graded NDCG is not its binary NDCG."""
    at = {
        name: table[(table["model"] == "popularity") & (table["metric"] == "ndcg")]
        .set_index("k")["value"]
        .astype("float64")
        for name, table in (("graded", graded_metrics), ("binary", spark_metrics))
    }
    print(f"\nml-100k popularity ndcg binary {dict(at['binary'])} graded {dict(at['graded'])}")
    assert (abs(at["graded"] - at["binary"]) > 1e-4).all()


@pytest.mark.parametrize("model", GRADED_MODELS)
def test_graded_binary_metrics_equal_the_threshold_run(model, graded_metrics, spark_metrics):
    """DESIGN §3: graded relevance uses the threshold rule for relevance, so precision, recall,
    hit rate, MRR, MAP, ARHR and F1 are the threshold run's, exactly (same users, same sums)."""

    def binary(table: pd.DataFrame) -> pd.DataFrame:
        rows = table[(table["model"] == model) & table["metric"].isin(BINARY)]
        return rows.astype({"k": "int64", "n_users": "int64"}).sort_values(
            ["metric", "k"], ignore_index=True
        )

    graded, threshold = binary(graded_metrics), binary(spark_metrics)
    assert len(graded) == len(BINARY) * len(KS)
    pd.testing.assert_frame_equal(graded, threshold, check_exact=True)
