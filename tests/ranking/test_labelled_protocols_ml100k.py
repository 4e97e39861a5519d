"""``debiased_iqr`` and ``sampled_100`` with its corrected rows on MovieLens 100K, through the
job (rv.evaluate on u.data, as users run it), against the numpy/pandas reference
(tests/reference.py) to 1e-9: the debiased Rel(u) and its facts, and every accuracy macro
average (value, n_users, sample std) of popularity, random and oracle under each label.

The reference takes the sampled items as given (their draw, the random baseline's, is tested in
test_sampled.py): they are recomputed here with the same seeded, partition-independent
function on the same split; everything after the draw is the reference's own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import reference as ref
from helpers import ML100K_COLUMNS, ML100K_CUTOFF, ml100k_interactions

from receval_spark import evaluate
from receval_spark.ranking.sampled import sampled_candidates

pytestmark = pytest.mark.shared_data

KS = (5, 10, 20)
SEED = 42
RANDOM_SEED = 7
N = 100
TOL = 1e-9
LABELS = {"full", "debiased_iqr", "sampled_100", "sampled_100_corrected"}


def job(u_data: Path) -> dict:
    return {
        "run": {"name": "labelled-protocols-ml100k"},
        "data": {"interactions": ml100k_interactions(u_data)},
        "split": {"method": "global_temporal", "cutoff": "1998-03-01T00:00:00Z"},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": list(KS),
            "protocol": ["full", "debiased_iqr", f"sampled_{N}"],
            "baseline": "popularity",
            "segments": [],
            "metrics": list(ref.METRICS),
            "embeddings": {"source": "none"},
            "seed": SEED,
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": RANDOM_SEED},
            {"name": "oracle", "kind": "oracle"},
        ],
    }


@pytest.fixture(scope="module")
def interactions(shared_data: Path) -> pd.DataFrame:
    return pd.read_csv(
        shared_data / "ml-100k" / "u.data", sep="\t", header=None, names=ML100K_COLUMNS
    )


@pytest.fixture(scope="module")
def outcome(spark, shared_data: Path):
    return evaluate(spark, job(shared_data / "ml-100k" / "u.data")).outcome


@pytest.fixture(scope="module")
def parts(interactions):
    """(train, seen, Rel(u) by user under the seen filter) of the reference."""
    train, test = ref.global_temporal_split(interactions, ML100K_CUTOFF)
    seen = ref.seen_items(train)
    relevance = ref.relevance_by_user(
        ref.relevant_items(test, kind="threshold", threshold=4.0), seen=seen
    )
    return train, seen, relevance


def truth_frame(relevance) -> pd.DataFrame:
    rows = [(u, i, g) for u, items in relevance.items() for i, g in items.items()]
    return pd.DataFrame(rows, columns=[ref.USER, ref.ITEM, ref.GRADE])


def macro(outcome, protocol: str, model: str) -> pd.DataFrame:
    rows = [
        (r.metric, r.k, r.value, r.n_users, r.std)
        for r in outcome.metrics
        if r.protocol == protocol and r.model == model and r.segment == "all"
    ]
    return pd.DataFrame(rows, columns=["metric", "k", "value", "n_users", "std"])


def assert_parity(spark_side: pd.DataFrame, ref_side: pd.DataFrame, what: str) -> None:
    merged = spark_side.merge(ref_side, on=["metric", "k"], suffixes=("_spark", "_ref"))
    assert len(merged) == len(ref_side) == len(ref.METRICS) * len(KS), what
    assert (merged["n_users_spark"] == merged["n_users_ref"]).all(), what
    for column in ("value", "std"):
        got, want = merged[f"{column}_spark"], merged[f"{column}_ref"]
        bad = ~np.isclose(got, want, rtol=0.0, atol=TOL)
        assert not bad.any(), f"{what} {column}:\n{merged[bad]}"


def test_every_label_has_rows_comparisons_and_the_run_record_states_the_down_sampling(
    outcome, parts
):
    assert {r.protocol for r in outcome.metrics} == LABELS
    compared = {(c.protocol, c.model) for c in outcome.comparisons}
    assert compared == {(p, m) for p in LABELS for m in ("random", "oracle")}
    assert all(c.baseline == "popularity" for c in outcome.comparisons)
    assert not [c for c in outcome.checks if not c.passed]
    assert any("sampled_100, sampled_100_corrected" in w for w in outcome.warnings)

    _, facts = ref.debiased_truth(truth_frame(parts[2]), seed=SEED)
    record = outcome.split["debiased_iqr"]
    assert {key: record[key] for key in facts} == facts
    assert record["pairs"] == sum(len(items) for items in parts[2].values())
    assert facts["items_down_sampled"] > 0 and facts["pairs_removed"] > 0


@pytest.mark.parametrize("model", ["popularity", "oracle"])
def test_debiased_accuracy_matches_the_reference(outcome, parts, model):
    train, seen, relevance = parts
    kept, _ = ref.debiased_truth(truth_frame(relevance), seed=SEED)
    debiased = ref.relevance_by_user(kept)
    users = sorted(relevance)
    candidates = {
        "popularity": ref.popularity_candidates(train, users),
        "oracle": ref.oracle_candidates(truth_frame(relevance)),
    }[model]
    ranking = ref.top_k(candidates, k=max(KS), seen=seen, users=users)
    expected = ref.macro_average(ref.per_user_metrics(ranking, debiased, KS))
    assert_parity(macro(outcome, "debiased_iqr", model), expected, f"{model} debiased_iqr")


@pytest.fixture(scope="module")
def sampled_items(spark, interactions, parts) -> dict[int, list[int]]:
    """user -> the sampled items (Rel(u) and the negatives) of the job's sampled_100."""
    train, _, relevance = parts
    schema = "user_id int, item_id int"
    log = spark.createDataFrame(interactions[["user_id", "item_id"]], schema)
    history = spark.createDataFrame(train[["user_id", "item_id"]], schema)
    truth = spark.createDataFrame(truth_frame(relevance), "user_id int, item_id int, grade double")
    users = truth.select("user_id").distinct()
    pairs = sampled_candidates(log, history, truth, users, n=N, seed=SEED).collect()
    items: dict[int, list[int]] = {}
    for r in pairs:
        items.setdefault(r.user_id, []).append(r.item_id)
    return items


@pytest.mark.parametrize("model", ["popularity", "random", "oracle"])
def test_sampled_and_corrected_accuracy_match_the_reference(
    outcome, interactions, parts, sampled_items, model
):
    train, _, relevance = parts
    popularity = ref.popularity_scores(train)
    score = {
        "popularity": lambda u, i: popularity.get(i, 0.0),
        "random": lambda u, i: float(
            ref.spark_xxhash64((RANDOM_SEED, "int"), (u, "int"), (i, "int"))
        ),
        "oracle": lambda u, i: relevance[u].get(i, 0.0),
    }[model]
    pairs = [(u, i) for u, items in sampled_items.items() for i in items]
    ordered = ref.sampled_order(pairs, score, seed=SEED)
    catalogue = set(popularity)
    interacted: dict[int, set[int]] = {}
    for u, i in zip(interactions["user_id"], interactions["item_id"], strict=True):
        interacted.setdefault(u, set()).add(i)

    raw, corrected = [], []
    for user, rel in relevance.items():
        items = ordered[user]
        pool = len(catalogue - interacted[user])
        places = ref.corrected_positions(items, rel, pool=pool, negatives=len(items) - len(rel))
        for k in KS:
            raw += [(user, k, m, v) for m, v in ref.user_metrics(items, rel, k).items()]
            corrected += [(user, k, m, v) for m, v in ref.metrics_at_places(places, rel, k).items()]
    columns = [ref.USER, "k", "metric", "value"]
    for label, rows in (("sampled_100", raw), ("sampled_100_corrected", corrected)):
        expected = ref.macro_average(pd.DataFrame(rows, columns=columns))
        assert_parity(macro(outcome, label, model), expected, f"{model} {label}")
