"""``evaluation.users``: which users the accuracy means average over
(docs/evaluation.md#relevance-and-evaluated-users). ``relevant`` (the default) evaluates the
users with a relevant test item; ``listed_or_relevant`` (the default under ``definitions:
spark_mllib``) adds the users of the log with an external model's list, who score 0 on every
accuracy metric, as Spark MLlib's RankingMetrics averages over every query and scores an empty
label set 0. A hand-worked run first, then ml-100k against RankingMetrics itself."""

from __future__ import annotations

from math import log2

import pandas as pd
import pytest
import reference as ref
import yaml
from helpers import (
    DAY,
    ML100K_COLUMNS,
    ML100K_CUTOFF,
    ML100K_KS,
    T0,
    crafted_job_config,
    crafted_log,
    ml100k_interactions,
)

from receval_spark import evaluate
from receval_spark.config import validate_config
from receval_spark.config_files import read_config_file
from receval_spark.errors import ConfigError
from receval_spark.metrics.compat import COMPAT_METRICS
from receval_spark.quality import Fact
from receval_spark.ranking.checks import heldout_check, oracle_check
from receval_spark.results import MetricRow

TOL = 1e-9

# --- the config ------------------------------------------------------------------------------


def evaluation_section(**given):
    raw = crafted_job_config_raw()
    raw["evaluation"] |= given
    return validate_config(raw).evaluation


def crafted_job_config_raw():
    return {
        "data": {"interactions": {"path": "log.parquet"}},
        "split": {"method": "global_temporal", "quantile": 0.8},
        "models": [{"name": "popularity", "kind": "popularity"}],
        "evaluation": {},
    }


def test_the_user_rule_defaults_by_definitions_and_an_explicit_value_wins():
    assert evaluation_section().user_rule() == "relevant"
    assert evaluation_section(definitions="spark_mllib").user_rule() == "listed_or_relevant"
    assert evaluation_section(definitions="recommenders").user_rule() == "relevant"
    explicit = evaluation_section(definitions="spark_mllib", users="relevant")
    assert explicit.users == "relevant" and explicit.user_rule() == "relevant"
    assert evaluation_section(users="listed_or_relevant").user_rule() == "listed_or_relevant"


def test_the_user_rule_from_yaml_and_set_and_its_errors_name_the_key(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(crafted_job_config_raw()), encoding="utf-8")

    from_file = validate_config(read_config_file(path, ["evaluation.users=listed_or_relevant"]))
    nulled = validate_config(
        read_config_file(path, ["evaluation.definitions=spark_mllib", "evaluation.users=null"])
    )

    assert from_file.evaluation.user_rule() == "listed_or_relevant"
    assert nulled.evaluation.users is None
    assert nulled.evaluation.user_rule() == "listed_or_relevant"
    with pytest.raises(ConfigError, match=r"evaluation\.users: "):
        validate_config(read_config_file(path, ["evaluation.users=everyone"]))
    with pytest.raises(ConfigError) as info:
        validate_config(
            read_config_file(
                path, ["evaluation.definitions=recommenders", "evaluation.users=listed_or_relevant"]
            )
        )
    assert "evaluation.users: listed_or_relevant cannot be combined with definitions: " in str(
        info.value
    )


# --- a hand-worked run -------------------------------------------------------------------
#
# crafted_log: users 1-4 have 3 train rows (items 10u..10u+2) and one relevant test item 100+u;
# users 5, 6 only a relevant test item (cold). Added here, all without a relevant test item:
# user 7 (train 70, 71; test 107 at 2 stars), user 8 (only test 108 at 1 star, cold), user 9
# (only train 90). The external model ``ext`` lists users 1, 2, 7, 8, 9 and 999 (not in the
# log: never evaluated). k = 2; after the seen filter its lists are
#   1: [101 (relevant), 55]   2: [300, 102 (relevant)]   7: [107, 300]   8: [108, 300]
#   9: [300] (90 was seen)     3, 4, 5, 6: none
# Per user at k = 2 (Rel = {100 + u}):
#   1: P 1/2, R 1, NDCG 1, AP 1 / min(2, 1) = 1, HR 1, MRR 1, ARHR 1, F1 2/3
#   2: P 1/2, R 1, NDCG 1/log2(3) (MLlib: ln 2 / ln 3, the same), AP (1/2) / 1, HR 1, MRR 1/2,
#      ARHR 1/2, F1 2/3
#   every other evaluated user: 0 (no list, or an empty Rel(u)).
# listed_or_relevant evaluates users 1-9 (9; 7, 8, 9 with an empty Rel(u)), relevant 1-6 (6).

EXT_LISTS = {
    1: [(101, 0.9), (10, 0.8), (55, 0.7)],
    2: [(300, 0.9), (102, 0.8)],
    7: [(107, 0.9), (70, 0.8), (300, 0.7)],
    8: [(108, 0.9), (300, 0.8)],
    9: [(90, 0.9), (300, 0.8)],
    999: [(101, 0.9)],
}
LISTS = {1: [101, 55], 2: [300, 102], 7: [107, 300], 8: [108, 300], 9: [300]}  # seen filtered
NDCG_2 = 1 / log2(3)
# sums over users 1 and 2 of each metric at k = 2
SUMS = {
    "precision": 1.0,
    "recall": 2.0,
    "ndcg": 1 + NDCG_2,
    "map": 1.5,
    "hit_rate": 2.0,
    "mrr": 1.5,
    "arhr": 1.5,
    "f1": 4 / 3,
}


def hand_worked_config(tmp_path, **evaluation):
    log = crafted_log(reconsumed=False)
    start = int(T0.timestamp())
    extra = [
        (7, 70, start, 3.0),
        (7, 71, start + DAY, 3.0),
        (7, 107, start + 5 * DAY, 2.0),
        (8, 108, start + 5 * DAY, 1.0),
        (9, 90, start + DAY, 3.0),
    ]
    log = pd.concat([log, pd.DataFrame(extra, columns=log.columns)], ignore_index=True)
    recs = pd.DataFrame(
        [(user, item, score) for user, rows in EXT_LISTS.items() for item, score in rows],
        columns=["user_id", "item_id", "score"],
    )
    recs.to_parquet(tmp_path / "ext.parquet", index=False)
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "oracle", "kind": "oracle"},
        {"name": "ext", "kind": "external", "path": str(tmp_path / "ext.parquet")},
    ]
    raw = crafted_job_config(tmp_path, log, models)
    raw["evaluation"] |= {"metrics": ["precision", "recall", "ndcg", "map"], **evaluation}
    return raw


def values(outcome, model, segment="all"):
    """metric -> (value, n_users) of a model at k = 2 (protocol full)."""
    return {
        r.metric: (r.value, r.n_users)
        for r in outcome.metrics
        if r.model == model and r.segment == segment and r.k == 2 and r.protocol == "full"
    }


def assert_means(found, metrics, n_users, sums=SUMS):
    """Each metric's mean is its sum over users 1 and 2 over ``n_users`` users."""
    assert {m: n for m, (_, n) in found.items()} == dict.fromkeys(metrics, n_users)
    expected = {m: sums[m] / n_users for m in metrics}
    assert {m: v for m, (v, _) in found.items()} == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize(
    ("definitions", "metrics"),
    [("spark_mllib", list(COMPAT_METRICS)), ("receval", list(SUMS))],
)
def test_listed_users_without_relevant_items_score_zero_in_the_means(
    spark, tmp_path, definitions, metrics
):
    raw = hand_worked_config(
        tmp_path, definitions=definitions, users="listed_or_relevant", metrics=metrics
    )
    if definitions == "spark_mllib":
        del raw["evaluation"]["users"]  # its default
    else:  # the sampled protocol evaluates the same users
        raw["evaluation"]["protocol"] = ["full", "sampled_3"]

    outcome = evaluate(spark, raw).outcome

    assert_means(values(outcome, "ext"), metrics, 9)
    # the reference (tests/reference.py, from the docs) agrees: users 7, 8, 9 listed, k = 2
    relevance = {u: {100 + u: 1.0} for u in range(1, 7)}
    macro = ref.macro_average(ref.per_user_metrics(LISTS, relevance, [2], listed=[7, 8, 9]))
    assert set(macro["n_users"]) == {9}
    expected = dict(zip(macro["metric"], macro["value"], strict=True))
    assert {m: SUMS[m] / 9 for m in metrics} == pytest.approx(
        {m: expected[m] for m in metrics}, abs=TOL
    )
    # segments: warm 1, 2, 3, 4, 7, 9 (6 users); cold 5, 6, 8 (3 users, none with a hit)
    assert_means(values(outcome, "ext", "warm"), metrics, 6)
    assert values(outcome, "ext", "cold") == {m: (0.0, 3) for m in metrics}
    # the built-in models are evaluated on the same 9 users; the oracle scores 1 on the six
    # users with Rel(u), 0 on the others
    assert {v[1] for v in values(outcome, "popularity").values()} == {9}
    assert values(outcome, "oracle")["ndcg"][1] == 9
    assert values(outcome, "oracle")["ndcg"][0] == pytest.approx(6 / 9, abs=TOL)
    checks = {c.name: c for c in outcome.checks}
    assert all(c.passed for c in outcome.checks), outcome.checks
    sampled = [r for r in outcome.metrics if r.protocol == "sampled_3" and r.segment == "all"]
    assert {r.n_users for r in sampled} == ({9} if definitions == "receval" else set())
    assert checks["oracle_ndcg[oracle]"].detail == (
        "NDCG@k = 1 at every k over the 6 users with Rel(u) (3 evaluated users have none)"
    )
    assert outcome.n_users_evaluated == 9
    assert outcome.split["evaluated_users"] == "listed_or_relevant"
    facts = {f["fact"]: (f["count"], f["total"]) for f in outcome.split["data_quality"]}
    assert facts["empty_truth_users"] == (3, 9)
    assert facts["cold_users"] == (3, 9)
    assert facts["users_all_relevant_seen"] == (0, 6)


def test_users_relevant_keeps_todays_numbers_under_spark_mllib(spark, tmp_path):
    raw = hand_worked_config(tmp_path, definitions="spark_mllib", users="relevant")

    outcome = evaluate(spark, raw).outcome

    assert_means(values(outcome, "ext"), COMPAT_METRICS, 6)
    assert_means(values(outcome, "ext", "warm"), COMPAT_METRICS, 4)
    assert values(outcome, "oracle")["ndcg"][1] == 6
    assert values(outcome, "oracle")["ndcg"][0] == pytest.approx(1.0, abs=TOL)
    assert all(c.passed for c in outcome.checks), outcome.checks
    assert outcome.split["evaluated_users"] == "relevant"
    assert "empty_truth_users" not in {f["fact"] for f in outcome.split["data_quality"]}


def test_ranking_metrics_agrees_with_the_hand_worked_means(spark):
    from pyspark.mllib.evaluation import RankingMetrics  # RDD-based: the reference, tests only

    labels = {u: [100 + u] for u in range(1, 7)}
    queries = [(LISTS.get(u, []), labels.get(u, [])) for u in range(1, 10)]
    queries.sort(key=lambda query: not (query[0] and query[1]))  # schema from a full one
    metrics = RankingMetrics(spark.sparkContext.parallelize(queries, 2))

    assert metrics.precisionAt(2) == pytest.approx(SUMS["precision"] / 9, abs=TOL)
    assert metrics.recallAt(2) == pytest.approx(SUMS["recall"] / 9, abs=TOL)
    assert metrics.ndcgAt(2) == pytest.approx(SUMS["ndcg"] / 9, abs=TOL)
    assert metrics.meanAveragePrecisionAt(2) == pytest.approx(SUMS["map"] / 9, abs=TOL)


def test_oracle_check_reads_the_mean_over_users_with_relevant_items():
    def rows(value, n_users=9):
        return [
            MetricRow(model="o", segment="all", metric="ndcg", k=2, value=value, n_users=n_users)
        ]

    assert oracle_check("o", rows(6 / 9), empty_truth=3).passed
    assert not oracle_check("o", rows(6 / 9)).passed  # without the rule: users without lists
    failed = oracle_check("o", rows(5 / 9), coverage=5 / 9, empty_truth=3)
    assert not failed.passed
    assert failed.detail == (
        "NDCG@2 = 0.833333 over the 6 users with Rel(u) (3 evaluated users have none): the "
        "oracle has lists for 83.33% of the evaluated users with Rel(u) only (the others score 0)"
    )


def test_heldout_check_says_listed_users_who_lost_every_relevant_item_are_evaluated():
    facts = [
        Fact("reconsumed_pairs", 2, 7, "relevant test pairs"),
        Fact("users_all_relevant_seen", 1, 6, "users with Rel(u)"),
    ]
    listing = [*facts, Fact("empty_truth_users", 1, 6, "evaluated users")]

    assert heldout_check(facts).detail.endswith(
        "1 users lost all their relevant items and are not evaluated"
    )
    assert heldout_check(listing).detail.endswith(
        "1 users lost all their relevant items and are evaluated only where an external model "
        "lists them (empty Rel(u), scoring 0)"
    )


# --- ml-100k against RankingMetrics ----------------------------------------------------------


@pytest.fixture(scope="module")
def ml100k_listed(spark, shared_data, ml100k_external, tmp_path_factory):
    """The job on u.data (cut-off 1998-03-01, rating >= 4, seen items filtered) with
    popularity and the tie-rich external model listing every test user, under
    ``definitions: spark_mllib`` (users: listed_or_relevant); the outcome and the reference's
    (train, Rel(u) by user, seen items)."""
    u_data = shared_data / "ml-100k" / "u.data"
    output = tmp_path_factory.mktemp("listed-reports")
    raw = {
        "run": {"name": "listed-or-relevant"},
        "output": {"path": str(output)},
        "data": {"interactions": ml100k_interactions(u_data)},
        "split": {"method": "global_temporal", "cutoff": ML100K_CUTOFF.isoformat()},
        "relevance": {"kind": "threshold", "threshold": 4.0},
        "evaluation": {
            "k": list(ML100K_KS),
            "definitions": "spark_mllib",
            "baseline": None,
            "segments": [],
            "metrics": list(COMPAT_METRICS),
            "embeddings": {"source": "none"},
        },
        "models": [
            {"name": "popularity", "kind": "popularity"},
            {"name": "external", "kind": "external", "path": str(ml100k_external[1])},
        ],
    }
    outcome = evaluate(spark, raw).outcome
    log = pd.read_csv(u_data, sep="\t", header=None, names=ML100K_COLUMNS)
    train = log[log["timestamp"] < ML100K_CUTOFF.timestamp()]
    test = log[log["timestamp"] >= ML100K_CUTOFF.timestamp()]
    seen = ref.seen_items(train)
    relevance = ref.relevance_by_user(
        ref.relevant_items(test, kind="threshold", threshold=4.0), seen=seen
    )
    return outcome, train, relevance, seen


def test_ml100k_spark_mllib_profile_equals_ranking_metrics_with_listed_users(
    spark, ml100k_listed, ml100k_external
):
    from pyspark.mllib.evaluation import RankingMetrics  # RDD-based: the reference, tests only

    outcome, train, relevance, seen = ml100k_listed
    recs = ml100k_external[0]
    users = sorted(set(relevance) | set(recs["user_id"]))  # every listed user is a test user
    empty = [u for u in users if u not in relevance]
    candidates = {
        "external": recs,
        "popularity": ref.popularity_candidates(train, users),
    }
    assert len(empty) >= 12  # test users without a rating >= 4 (or only seen ones)
    assert outcome.n_users_evaluated == len(users)
    facts = {f["fact"]: (f["count"], f["total"]) for f in outcome.split["data_quality"]}
    assert facts["empty_truth_users"] == (len(empty), len(users))
    for model, scored in candidates.items():
        ranking = ref.top_k(scored, k=max(ML100K_KS), seen=seen, users=users)
        queries = [
            ([int(i) for i in ranking.get(u, [])], [int(i) for i in relevance.get(u, {})])
            for u in users
        ]
        queries.sort(key=lambda query: not (query[0] and query[1]))  # schema from a full one
        metrics = RankingMetrics(spark.sparkContext.parallelize(queries, 4))
        ours = {
            (r.metric, r.k): (r.value, r.n_users)
            for r in outcome.metrics
            if r.model == model and r.segment == "all" and r.protocol == "full"
        }
        for k in ML100K_KS:
            theirs = {
                "precision": metrics.precisionAt(k),
                "recall": metrics.recallAt(k),
                "ndcg": metrics.ndcgAt(k),
                "map": metrics.meanAveragePrecisionAt(k),
            }
            for metric, value in theirs.items():
                assert ours[(metric, k)][1] == len(users)
                assert ours[(metric, k)][0] == pytest.approx(value, abs=TOL), (model, metric, k)
    assert all(c.passed for c in outcome.checks), outcome.checks
