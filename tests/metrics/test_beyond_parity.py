"""Parity of the beyond-accuracy metrics (DESIGN §6) on real data: the Spark job against the
numpy/pandas reference (tests/reference.py).

MovieLens 100K: global temporal split at 1998-03-01T00:00:00Z, relevance rating >= 4,
k = 5, 10, 20, filter_seen on, genres from the 19 flag columns of u.item. Models: popularity,
seeded random, and an "external" model with a deterministic score read from Parquet.
MovieLens latest-small: split at 2016-01-01, popularity, random and external at k = 10,
genres from the '|'-separated movies.csv column.

The Spark side runs once per dataset through the public job API (``validate_config`` +
``pipeline.evaluate_ranking``); on ml-100k it is the job this module shares with
test_parity_ml100k.py (``ml100k_run``: helpers.ml100k_job, with the oracle and the accuracy
metrics too, left out here). The reference gets the same top-k lists, recomputed with the public
model and ranking functions and collected (a few hundred users x 20 items); everything else
(catalogue, popularity, categories, Rel(u), the popularity baseline used by serendipity) it
derives itself from the raw files. Every metric must match to 1e-9; the sampled Jaccard
personalization must match the reference evaluated on the same documented pair sample.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import reference as ref
import reference_lists
from helpers import (
    BEYOND_METRICS,
    ML100K_COLUMNS,
    ML100K_CUTOFF,
    ML100K_ITEM_FIXED,
    ML100K_KS,
    PERSONALIZATION_PAIRS,
    SEED,
    external_score,
    ml100k_genres,
)

pytestmark = pytest.mark.shared_data


TOL = 1e-9
THRESHOLD = 4.0
PAIRS = PERSONALIZATION_PAIRS  # fewer than half the users, so the sample is a real one
BEYOND = BEYOND_METRICS
GROUP = {"coverage", "gini", "entropy", "popularity_bias", "personalization", "exposure_gap"}

ML100K_MODELS = ("popularity", "random", "external")
U_DATA_COLUMNS = ML100K_COLUMNS
U_ITEM_FIXED = ML100K_ITEM_FIXED

SMALL_KS = (10,)
SMALL_MODELS = ("popularity", "random", "external")
SMALL_CUTOFF = dt.datetime(2016, 1, 1, tzinfo=dt.UTC)
SMALL_PAIRS = 30  # about 120 evaluated users


# --- the two sides ------------------------------------------------------------------------


def spark_side(spark, raw: dict) -> tuple[object, pd.DataFrame]:
    """(Evaluation, the ranked top-max(k) lists (model, user_id, item_id, rank) it scored)."""
    from receval_spark import evaluate
    from receval_spark.config import validate_config

    config = validate_config(raw)
    return evaluate(spark, config, keep_cached=True).outcome, ranked_lists(spark, config)


def ranked_lists(spark, config, models=None) -> pd.DataFrame:
    """The ranked top-max(k) lists (model, user_id, item_id, rank) a job of ``config`` scores
    for the models named in ``models`` (None: all), recomputed with the same public functions
    the job uses (load, split, relevance, fit_model, rank_candidates) and collected."""
    from pyspark.sql import functions as F

    from receval_spark.cache import releasing_cache
    from receval_spark.ranking.models import fit_model
    from receval_spark.ranking.relevance import relevant_items
    from receval_spark.ranking.split import split_interactions
    from receval_spark.ranking.topk import rank_candidates
    from receval_spark.sources import read_ranking_inputs

    k = max(config.evaluation.k)
    with releasing_cache():  # drops only what this read cached, not the shared run's entries
        inputs = read_ranking_inputs(spark, config)
    interactions = inputs.interactions
    split = split_interactions(config.split, interactions)
    history = split.history
    truth = relevant_items(split.test, config.relevance)
    users = truth.select("user_id").distinct()
    seen = history.select("user_id", "item_id").distinct()
    frames = []
    for model in config.models:
        if models is not None and model.name not in models:
            continue
        external = inputs.recommendations.get(model.name)
        scorer = fit_model(model, history=history, truth=truth, k=k, seen=seen, external=external)
        candidates = scorer.candidates(users)
        ranked = rank_candidates(candidates, k=k, seen=seen)
        frames.append(ranked.select(F.lit(model.name).alias("model"), "user_id", "item_id", "rank"))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    ranked = union.toPandas().astype({"user_id": "int64", "item_id": "int64", "rank": "int64"})
    return ranked


def lists_table(ranked: pd.DataFrame, ks) -> pd.DataFrame:
    """(user_id, k, item_id) for every k from ranked (user_id, item_id, rank) rows."""
    parts = [ranked.loc[ranked["rank"] <= k, ["user_id", "item_id"]].assign(k=k) for k in ks]
    return pd.concat(parts, ignore_index=True)[["user_id", "k", "item_id"]]


def reference_popularity_lists(train, truth, ks) -> pd.DataFrame:
    """The popularity baseline's top-k lists for the evaluated users (reference model)."""
    users = truth["user_id"].unique()
    ranking = ref.top_k(
        ref.popularity_candidates(train, users), k=max(ks), seen=ref.seen_items(train)
    )
    rows = [(u, r, i) for u, items in ranking.items() for r, i in enumerate(items, start=1)]
    return lists_table(pd.DataFrame(rows, columns=["user_id", "rank", "item_id"]), ks)


def reference_metrics(
    ranked: pd.DataFrame, *, models, ks, train, truth, categories, expected, pairs
) -> pd.DataFrame:
    """(model, metric, k, value, n_users, std) for every model and k, incl. the Jaccard
    personalization on the documented pair sample."""
    frames = []
    for model in models:
        lists = lists_table(ranked[ranked["model"] == model], ks)
        table, _ = ref.beyond_metrics(
            lists, train, categories=categories, truth=truth, expected=expected
        )
        jaccard = []
        for k in ks:
            values = ref.jaccard_distances(lists, k, pairs=pairs, seed=SEED)
            n_lists = lists.loc[lists["k"] == k, "user_id"].nunique()
            std = float(np.std(values, ddof=1))
            jaccard.append((k, "personalization_jaccard", float(np.mean(values)), n_lists, std))
        table = pd.concat([table, pd.DataFrame(jaccard, columns=table.columns)])
        frames.append(table.assign(model=model))
    frames.append(  # calibration, exposure of item groups, agreement with popularity's lists
        reference_lists.list_metrics(
            ranked,
            models=models,
            ks=ks,
            train=train,
            categories=categories,
            reference_model="popularity",
        )
    )
    return pd.concat(frames, ignore_index=True)


def metric_rows(evaluation, models) -> pd.DataFrame:
    """The beyond-accuracy macro rows of segment 'all' of ``models``."""
    rows = [
        (r.model, r.metric, r.k, r.value, r.n_users, r.std)
        for r in evaluation.metrics
        if r.segment == "all" and r.protocol == "full" and r.metric in BEYOND and r.model in models
    ]
    table = pd.DataFrame(rows, columns=["model", "metric", "k", "value", "n_users", "std"])
    return table.astype({"k": "int64", "n_users": "int64", "value": "float64", "std": "float64"})


def assert_parity(spark_metrics: pd.DataFrame, reference: pd.DataFrame, model: str) -> None:
    got = spark_metrics[spark_metrics["model"] == model]
    want = reference[reference["model"] == model].astype({"k": "int64", "n_users": "int64"})
    merged = got.merge(
        want, on=["model", "metric", "k"], how="outer", suffixes=("_spark", "_ref"), indicator=True
    )
    lonely = merged[merged["_merge"] != "both"]
    assert lonely.empty, f"rows on one side only:\n{lonely}"
    assert (merged["n_users_spark"] == merged["n_users_ref"]).all(), merged
    for column in ("value", "std"):
        bad = ~np.isclose(
            merged[f"{column}_spark"], merged[f"{column}_ref"], rtol=0.0, atol=TOL, equal_nan=True
        )
        assert not bad.any(), f"{model} {column}:\n{merged[bad]}"


def k10_summary(spark_metrics: pd.DataFrame, models) -> str:
    wanted = ["coverage", "gini", "novelty", "personalization", "ild_category", "category_coverage"]
    table = spark_metrics[(spark_metrics["k"] == 10) & spark_metrics["metric"].isin(wanted)]
    pivot = table.pivot(index="model", columns="metric", values="value").loc[list(models), wanted]
    return pivot.to_string(float_format=lambda v: f"{v:.6f}")


# --- MovieLens 100K -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ml100k(shared_data: Path) -> Path:
    return shared_data / "ml-100k"


@pytest.fixture(scope="module")
def genres(ml100k: Path) -> list[str]:
    return ml100k_genres(ml100k)


@pytest.fixture(scope="module")
def ml100k_categories(ml100k: Path, genres: list[str]) -> dict[int, set[str]]:
    """item -> the genres whose u.item flag is 1 (parsed line by line, '|'-separated)."""
    categories = {}
    for line in (ml100k / "u.item").read_text(encoding="ISO-8859-1").splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        assert len(fields) == len(U_ITEM_FIXED) + len(genres) == 24
        flags = fields[len(U_ITEM_FIXED) :]
        categories[int(fields[0])] = {g for g, f in zip(genres, flags, strict=True) if f == "1"}
    return categories


@pytest.fixture(scope="module")
def ml100k_split(ml100k: Path):
    interactions = pd.read_csv(ml100k / "u.data", sep="\t", header=None, names=U_DATA_COLUMNS)
    return ref.global_temporal_split(interactions, ML100K_CUTOFF), interactions


@pytest.fixture(scope="module")
def ml100k_truth(ml100k_split) -> pd.DataFrame:
    (_, test), _ = ml100k_split
    return ref.relevant_items(test, kind="threshold", threshold=THRESHOLD)


@pytest.fixture(scope="module")
def ml100k_side(spark, ml100k_run):
    """(Evaluation, ranked lists of ML100K_MODELS) of the shared ml-100k job."""
    config, evaluation = ml100k_run
    return evaluation, ranked_lists(spark, config, models=ML100K_MODELS)


@pytest.fixture(scope="module")
def ml100k_metrics(ml100k_side) -> pd.DataFrame:
    return metric_rows(ml100k_side[0], ML100K_MODELS)


@pytest.fixture(scope="module")
def ml100k_expected(ml100k_split, ml100k_truth) -> pd.DataFrame:
    (train, _), _ = ml100k_split
    return reference_popularity_lists(train, ml100k_truth, ML100K_KS)


@pytest.fixture(scope="module")
def ml100k_reference(
    ml100k_side, ml100k_split, ml100k_truth, ml100k_categories, ml100k_expected
) -> pd.DataFrame:
    (train, _), _ = ml100k_split
    return reference_metrics(
        ml100k_side[1],
        models=ML100K_MODELS,
        ks=ML100K_KS,
        train=train,
        truth=ml100k_truth,
        categories=ml100k_categories,
        expected=ml100k_expected,
        pairs=PAIRS,
    )


def test_ml100k_lists_are_those_of_the_evaluated_users(ml100k_side, ml100k_truth):
    ranked = ml100k_side[1]
    evaluated = set(ml100k_truth["user_id"])
    for model in ML100K_MODELS:
        lists = ranked[ranked["model"] == model]
        assert set(lists["user_id"]) <= evaluated
        assert (lists.groupby("user_id").size() == max(ML100K_KS)).all(), model
    assert ml100k_side[0].n_users_evaluated == len(evaluated)


def test_ml100k_popularity_lists_equal_the_reference_popularity_model(ml100k_side, ml100k_expected):
    """The baseline the reference uses for serendipity is the job's popularity model."""
    ranked = ml100k_side[1]
    spark_lists = lists_table(ranked[ranked["model"] == "popularity"], ML100K_KS)
    key = ["user_id", "k", "item_id"]
    pd.testing.assert_frame_equal(
        spark_lists.sort_values(key, ignore_index=True),
        ml100k_expected.astype("int64").sort_values(key, ignore_index=True),
    )


def test_ml100k_external_lists_reach_outside_the_catalogue(ml100k_side, ml100k_split):
    """Items first rated after the cut-off are recommended by the external model, so the
    parity covers list items outside I (not counted in coverage / gini / entropy, p floored
    in novelty, 0 train interactions in popularity_bias)."""
    (train, _), _ = ml100k_split
    ranked = ml100k_side[1]
    external = ranked[ranked["model"] == "external"]
    outside = ~external["item_id"].isin(set(train["item_id"]))
    assert outside.sum() > 0
    assert (
        not ranked.loc[ranked["model"] != "external", "item_id"]
        .isin(set(external.loc[outside, "item_id"]))
        .any()
    )


def test_ml100k_reports_every_beyond_metric(ml100k_metrics):
    got = ml100k_metrics.groupby("model").size().to_dict()
    assert got == dict.fromkeys(ML100K_MODELS, len(BEYOND) * len(ML100K_KS))


@pytest.mark.parametrize("model", ML100K_MODELS)
def test_ml100k_beyond_metrics_match_reference(model, ml100k_metrics, ml100k_reference):
    assert_parity(ml100k_metrics, ml100k_reference, model)


def test_ml100k_auc_matches_the_rank_sum_reference(ml100k_side, ml100k_split, ml100k_truth):
    """AUC per user (catalogue: the train items; negatives without the user's train items)
    against the Mann-Whitney rank sum of tests/reference_lists.py, per user and averaged."""
    evaluation, ranked = ml100k_side
    (train, _), _ = ml100k_split
    catalogue = set(train["item_id"])
    seen = train.groupby("user_id")["item_id"].apply(set).to_dict()
    relevant = ml100k_truth.groupby("user_id")["item_id"].apply(set).to_dict()
    want = {}
    for model in ML100K_MODELS:
        for k in ML100K_KS:
            lists = reference_lists.ordered_lists(ranked, model, k)
            values = reference_lists.auc(lists, relevant, catalogue, seen, k)
            want |= {(model, user, k): v for user, v in values.items()}
    from pyspark.sql import functions as F

    rows = (
        evaluation.per_user.filter(
            (F.col("segment") == "all")
            & (F.col("metric") == "auc")
            & F.col("model").isin(*ML100K_MODELS)
        )
        .select("model", "user_id", "k", "value")
        .collect()
    )
    got = {(r["model"], int(r["user_id"]), r["k"]): r["value"] for r in rows}
    assert got.keys() == want.keys()
    assert max(abs(got[key] - want[key]) for key in want) < TOL
    means = {
        (r.model, r.k): r.value
        for r in evaluation.metrics
        if r.metric == "auc" and r.segment == "all"
    }
    for model in ML100K_MODELS:
        for k in ML100K_KS:
            values = [v for (m, _, kk), v in want.items() if m == model and kk == k]
            assert abs(means[(model, k)] - float(np.mean(values))) < TOL


def test_ml100k_jaccard_is_a_distance_on_a_real_sample(ml100k_metrics, ml100k_side):
    jaccard = ml100k_metrics[ml100k_metrics["metric"] == "personalization_jaccard"]
    assert ((jaccard["value"] >= 0) & (jaccard["value"] <= 1)).all()
    ci = [
        (r.ci_low, r.ci_high)
        for r in ml100k_side[0].metrics
        if r.metric == "personalization_jaccard"
    ]
    assert all(low is not None and low <= high for low, high in ci)
    # PAIRS pairs were drawn from more than 2 * PAIRS lists
    assert (jaccard["n_users"] > 2 * PAIRS).all()


def test_ml100k_popularity_is_less_diverse_than_random(ml100k_metrics):
    at10 = ml100k_metrics[ml100k_metrics["k"] == 10].set_index(["model", "metric"])["value"]
    print("\nml-100k @10\n" + k10_summary(ml100k_metrics, ML100K_MODELS))
    assert at10[("popularity", "coverage")] < at10[("random", "coverage")]
    assert at10[("popularity", "gini")] > at10[("random", "gini")]
    assert at10[("popularity", "novelty")] < at10[("random", "novelty")]
    assert at10[("popularity", "personalization")] < at10[("random", "personalization")]


# --- MovieLens latest-small ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small(shared_data: Path) -> Path:
    path = shared_data / "ml-latest-small"
    if not (path / "ratings.csv").exists():
        pytest.skip(f"{path}/ratings.csv not found")
    return path


@pytest.fixture(scope="module")
def small_split(small: Path):
    ratings = pd.read_csv(small / "ratings.csv").rename(
        columns={"userId": "user_id", "movieId": "item_id"}
    )
    return ref.global_temporal_split(ratings, SMALL_CUTOFF)


@pytest.fixture(scope="module")
def small_truth(small_split) -> pd.DataFrame:
    return ref.relevant_items(small_split[1], kind="threshold", threshold=THRESHOLD)


@pytest.fixture(scope="module")
def small_categories(small: Path) -> dict[int, set[str]]:
    """movie -> its '|'-separated genres (taken as given, '(no genres listed)' included)."""
    movies = pd.read_csv(small / "movies.csv")
    return {
        int(m): {g.strip() for g in str(genres).split("|") if g.strip()}
        for m, genres in zip(movies["movieId"], movies["genres"], strict=True)
    }


@pytest.fixture(scope="module")
def small_external_path(small_split, tmp_path_factory) -> Path:
    """Every (test user, item with id divisible by 3) pair with the deterministic score."""
    train, test = small_split
    users = np.sort(test["user_id"].unique()).astype("int64")
    every_item = np.union1d(train["item_id"].unique(), test["item_id"].unique())
    items = every_item[every_item % 3 == 0].astype("int64")
    u = np.repeat(users, len(items))
    i = np.tile(items, len(users))
    path = tmp_path_factory.mktemp("external-small") / "recs.parquet"
    pd.DataFrame({"user_id": u, "item_id": i, "score": external_score(u, i)}).to_parquet(
        path, index=False
    )
    return path


@pytest.fixture(scope="module")
def small_run(spark, small: Path, small_external_path: Path):
    raw = {
        "run": {"name": "beyond-parity-ml-latest-small"},
        "data": {
            "interactions": {
                "path": str(small / "ratings.csv"),
                "format": "csv",
                "columns": {
                    "user": "userId",
                    "item": "movieId",
                    "timestamp": "timestamp",
                    "rating": "rating",
                },
            },
            "items": {
                "path": str(small / "movies.csv"),
                "format": "csv",
                "columns": {"item": "movieId", "category": "genres"},
                "category_separator": "|",
            },
        },
        "split": {"method": "global_temporal", "cutoff": "2016-01-01T00:00:00Z"},
        "relevance": {"kind": "threshold", "threshold": THRESHOLD},
        "evaluation": {
            "k": list(SMALL_KS),
            "baseline": "popularity",
            "segments": [],
            "bootstrap_samples": 0,  # bootstrap spreads: tests/metrics/test_beyond.py
            "metrics": BEYOND,
            "embeddings": {"source": "none"},
            "personalization_pairs": SMALL_PAIRS,
            "seed": SEED,
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 42},
            {"name": "external", "kind": "external", "path": str(small_external_path)},
        ],
    }
    return spark_side(spark, raw)


def test_ml_latest_small_beyond_metrics_match_reference(
    small_run, small_split, small_truth, small_categories
):
    evaluation, ranked = small_run
    train, _ = small_split
    expected = reference_popularity_lists(train, small_truth, SMALL_KS)
    spark_popular = lists_table(ranked[ranked["model"] == "popularity"], SMALL_KS)
    key = ["user_id", "k", "item_id"]
    pd.testing.assert_frame_equal(
        spark_popular.sort_values(key, ignore_index=True),
        expected.astype("int64").sort_values(key, ignore_index=True),
    )
    reference = reference_metrics(
        ranked,
        models=SMALL_MODELS,
        ks=SMALL_KS,
        train=train,
        truth=small_truth,
        categories=small_categories,
        expected=expected,
        pairs=SMALL_PAIRS,
    )
    spark_metrics = metric_rows(evaluation, SMALL_MODELS)
    print("\nml-latest-small @10\n" + k10_summary(spark_metrics, SMALL_MODELS))
    for model in SMALL_MODELS:
        assert_parity(spark_metrics, reference, model)
