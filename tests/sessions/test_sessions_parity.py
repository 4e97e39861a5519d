"""The session protocol on the real samples (DESIGN §8) against the plain-Python reference
(tests/reference.py): preprocessing counts step by step on the DIGINETICA sample (time split
by session end, the default), and every baseline's Recall@k and MRR@k (SR and shrunk
item-kNN included) on it and on session-rec's preprocessed YOOCHOOSE sample
(evaluated as given, without re-filtering)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import reference as ref
from helpers import diginetica_clicks

pytestmark = pytest.mark.shared_data


KS = (5, 10, 20)
TOL = 1e-12
MODELS = [
    {"name": "pop", "kind": "pop"},
    {"name": "s-pop", "kind": "s-pop"},
    {"name": "item-knn", "kind": "item-knn", "neighbours": 100},
    {"name": "markov", "kind": "markov"},
    {"name": "item-knn-shrunk", "kind": "item-knn", "neighbours": 100, "shrinkage": 20},
    {"name": "sr", "kind": "sr"},  # window 10
    {"name": "sr-3", "kind": "sr", "window": 3},
]


def reference_scores(train: pd.DataFrame, test: pd.DataFrame) -> dict:
    """(model, metric, k) -> value from the reference models."""
    train_seq, test_seq = ref.session_sequences(train), ref.session_sequences(test)
    events = ref.next_item_events(test_seq)
    k = max(KS)
    predictors = {
        "pop": ref.session_pop(train_seq, k),
        "s-pop": ref.session_s_pop(train_seq, k),
        "item-knn": ref.session_item_knn(train_seq, k, 100),
        "markov": ref.session_markov(train_seq, k),
        "item-knn-shrunk": ref.session_item_knn(train_seq, k, 100, shrinkage=20),
        "sr": ref.session_sr(train_seq, k, window=10),
        "sr-3": ref.session_sr(train_seq, k, window=3),
    }
    out = {}
    for name, predict in predictors.items():
        for cut in KS:
            recall, mrr = ref.recall_mrr(events, predict, cut)
            out[(name, "recall", cut)], out[(name, "mrr", cut)] = recall, mrr
    return out, len(events)


def spark_scores(evaluation) -> dict:
    return {
        (r.model, r.metric, r.k): r.value
        for r in evaluation.metrics
        if r.metric in ("recall", "mrr")
    }


@pytest.fixture(scope="module")
def diginetica(shared_data: Path) -> Path:
    return shared_data / "diginetica-sample" / "sample_train-item-views.csv"


@pytest.fixture(scope="module")
def diginetica_evaluation(spark, diginetica: Path, tmp_path_factory):
    from receval_spark import evaluate_sessions

    raw = {
        "output": {"path": str(tmp_path_factory.mktemp("reports"))},
        "data": diginetica_clicks(diginetica),
        "preprocessing": {"test_days": 7},
        "evaluation": {"k": list(KS)},
        "models": MODELS,
    }
    return evaluate_sessions(spark, raw).outcome


@pytest.fixture(scope="module")
def diginetica_reference(diginetica: Path):
    raw = pd.read_csv(diginetica, sep=";")
    clicks = pd.DataFrame(
        {
            "session_id": raw["session_id"],
            "item_id": raw["item_id"],
            "time": pd.to_datetime(raw["eventdate"], utc=True),
            "order": raw["timeframe"].astype("float64"),
        }
    )
    return ref.preprocess_sessions(clicks, min_length=2, min_support=5, test_days=7)


def test_diginetica_preprocessing_counts_equal_the_reference(
    diginetica_evaluation, diginetica_reference
):
    _, _, want = diginetica_reference
    steps = diginetica_evaluation.split["steps"]
    got = [{k: s[k] for k in ("clicks", "sessions", "items")} for s in steps]
    assert got == want
    assert steps[0] == {"step": "input", "clicks": 12391, "sessions": 2986, "items": 7139}


def test_diginetica_metrics_equal_the_reference(diginetica_evaluation, diginetica_reference):
    train, test, _ = diginetica_reference
    want, n_events = reference_scores(train, test)

    assert diginetica_evaluation.n_users_evaluated == n_events
    assert spark_scores(diginetica_evaluation) == pytest.approx(want, abs=TOL)
    assert all(c.passed for c in diginetica_evaluation.checks)


def test_yoochoose_sample_as_given_equals_the_reference(spark, shared_data: Path, tmp_path):
    from receval_spark import evaluate_sessions

    folder = shared_data / "yoochoose-clicks-100k"
    files = {part: folder / f"yoochoose-clicks-100k_{part}.txt" for part in ("train_full", "test")}
    source = {
        "format": "csv",
        "delimiter": "\t",
        "columns": {"session": "SessionId", "item": "ItemId", "time": "Time"},
    }
    raw = {
        "output": {"path": str(tmp_path)},
        "data": {
            "train": {**source, "path": str(files["train_full"])},
            "test": {**source, "path": str(files["test"])},
        },
        "evaluation": {"k": list(KS)},
        "models": MODELS,
    }

    evaluation = evaluate_sessions(spark, raw).outcome

    def read(path):
        df = pd.read_csv(path, sep="\t")
        return pd.DataFrame(
            {"session_id": df.SessionId, "item_id": df.ItemId, "time": df.Time, "order": 0.0}
        )

    train, test = read(files["train_full"]), read(files["test"])
    want, n_events = reference_scores(train, test)
    assert [s["clicks"] for s in evaluation.split["steps"]] == [70278, 13568]
    assert evaluation.n_users_evaluated == n_events == 13568 - test["session_id"].nunique()
    assert spark_scores(evaluation) == pytest.approx(want, abs=TOL)
