"""Each sanity check and warning of the run record (DESIGN §7) fails on a crafted input.
(They pass on real data in test_statistics_ml100k and the end-to-end demo tests.)"""

from __future__ import annotations

import json

import pandas as pd
import yaml
from helpers import at, crafted_job_config, crafted_log
from pyspark.sql import functions as F

from receval_spark import evaluate
from receval_spark.cli import main
from receval_spark.config import validate_config
from receval_spark.expressions import iso
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.aggregate import macro_average, to_long
from receval_spark.ranking.checks import (
    list_coverage_check,
    oracle_check,
    run_warnings,
    same_users_check,
    temporal_leakage_check,
    user_fingerprints,
)
from receval_spark.ranking.models.oracle import oracle_candidates
from receval_spark.ranking.split import Split
from receval_spark.ranking.topk import rank_candidates
from receval_spark.results import MetricRow

LOG = "user_id int, item_id int, timestamp timestamp, rating double"


def temporal_split(train, test, validation=None, *, validation_cutoff=None):
    params = {"method": "global_temporal", "cutoff": iso(at(4))}
    if validation_cutoff is not None:
        params["validation_cutoff"] = iso(validation_cutoff)
    return Split(train=train, test=test, validation=validation, params=params)


def test_temporal_leakage_fails_on_parts_that_cross_the_cutoff(spark):
    """The check reads the parts' rows, not the split's own description of them."""
    train = spark.createDataFrame([(1, 10, at(1), 3.0), (1, 11, at(4.5), 3.0)], LOG)  # leaks
    test = spark.createDataFrame([(1, 12, at(5), 5.0), (2, 13, at(3), 5.0)], LOG)  # early test row
    clean_train = spark.createDataFrame([(1, 10, at(1), 3.0)], LOG)
    clean_test = spark.createDataFrame([(1, 12, at(4), 5.0)], LOG)  # at the cut-off: test

    late_train = temporal_leakage_check(temporal_split(train, clean_test))
    early_test = temporal_leakage_check(temporal_split(clean_train, test))

    assert not late_train.passed and not early_test.passed
    assert late_train.detail == (
        "train has interactions at or after the cut-off (up to 2024-01-05T12:00:00.000000+00:00)"
    )
    assert early_test.detail == (
        "test has interactions before the cut-off (from 2024-01-04T00:00:00.000000+00:00)"
    )
    clean = temporal_leakage_check(temporal_split(clean_train, clean_test))
    assert clean.passed, clean.detail


def test_temporal_leakage_checks_the_validation_period(spark):
    train = spark.createDataFrame([(1, 10, at(1), 3.0)], LOG)
    test = spark.createDataFrame([(1, 12, at(5), 5.0)], LOG)
    inside = spark.createDataFrame([(1, 11, at(2), 3.0), (1, 13, at(3.9), 3.0)], LOG)
    past_cutoff = spark.createDataFrame([(1, 11, at(2), 3.0), (1, 13, at(4), 3.0)], LOG)

    assert temporal_leakage_check(
        temporal_split(train, test, inside, validation_cutoff=at(2))
    ).passed
    leaky = temporal_leakage_check(
        temporal_split(train, test, past_cutoff, validation_cutoff=at(2))
    )
    assert not leaky.passed and leaky.detail.startswith("validation (")
    # train must end before the validation cut-off, not only before the test cut-off
    late_train = temporal_leakage_check(
        temporal_split(train, test, inside, validation_cutoff=at(1))
    )
    assert not late_train.passed
    assert late_train.detail.startswith("train has interactions at or after the validation cut-off")


def test_oracle_check_fails_when_the_oracle_scores_are_corrupted(spark):
    truth = spark.createDataFrame(
        [(1, 10, 3.0), (1, 11, 1.0), (2, 20, 2.0), (2, 21, 1.0)],
        "user_id int, item_id int, grade double",
    )
    honest = oracle_candidates(truth)
    corrupted = honest.withColumn("score", -honest["score"])  # worst grade first

    def ndcg_rows(candidates, name):
        ranked = rank_candidates(candidates, k=2, seen=None)
        scores = per_user_accuracy(ranked, truth, ks=[2]).withColumn("model", F.lit(name))
        long = to_long(scores, metrics=["ndcg"], keys=["model", "user_id", "k"])
        return [
            MetricRow(
                model=name, segment="all", metric=r.metric, k=r.k, value=r.value, n_users=r.n_users
            )
            for r in macro_average(long, by=["model", "metric", "k"]).collect()
        ]

    assert oracle_check("oracle", ndcg_rows(honest, "oracle")).passed
    failed = oracle_check("oracle", ndcg_rows(corrupted, "oracle"))
    assert not failed.passed
    assert failed.name == "oracle_ndcg[oracle]" and "NDCG@2 = 0." in failed.detail


PER_USER = "model string, segment string, user_id int, k int, metric string, value double"
EVALUATED = [(1, "all"), (2, "all"), (3, "all"), (1, "warm"), (2, "warm"), (3, "cold")]


def per_user_rows(model, users=((1, "warm"), (2, "warm"), (3, "cold")), *, head=(1, 2)):
    """One model's per-user ndcg@2 rows: all, each user's segment, and items=head."""
    rows = [(model, "all", u, 2, "ndcg", 0.5) for u, _ in users]
    rows += [(model, segment, u, 2, "ndcg", 0.5) for u, segment in users]
    return rows + [(model, "items=head", u, 2, "ndcg", 0.5) for u in head]


def test_same_users_check_compares_each_models_users_with_the_evaluated_users(spark):
    evaluated = spark.createDataFrame(EVALUATED, "user_id int, segment string")

    def check(b_rows):
        per_user = spark.createDataFrame(per_user_rows("a") + b_rows, PER_USER)
        return same_users_check(per_user, evaluated)

    passed = check(per_user_rows("b"))
    assert passed.passed, passed.detail
    assert passed.detail.endswith("(users: all 3, cold 1, warm 2)")
    missing = check(per_user_rows("b", ((1, "warm"), (2, "warm"))))  # user 3 dropped
    assert not missing.passed
    assert missing.detail.startswith("b at all ndcg@2: 2 users, 3 evaluated; b has no rows at cold")
    # as many users as evaluated, but one of them is not: counts alone would pass
    swapped = check(per_user_rows("b", ((1, "warm"), (2, "warm"), (9, "cold"))))
    assert not swapped.passed
    assert swapped.detail == (
        "b at all ndcg@2: 1 users not evaluated there; b at cold ndcg@2: 1 users not evaluated "
        "there"
    )
    repeated = check([*per_user_rows("b"), ("b", "warm", 2, 2, "ndcg", 0.0)])
    assert not repeated.passed and repeated.detail == "b at warm ndcg@2: 1 repeated user rows"
    fewer_head = check(per_user_rows("b", head=(1,)))
    assert (
        not fewer_head.passed
        and fewer_head.detail == "b at items=head ndcg@2: 1 users, 2 evaluated"
    )
    other_k = check([(m, s, u, 5, x, v) for m, s, u, _, x, v in per_user_rows("b")])
    assert not other_k.passed and "a has no rows at all ndcg@5" in other_k.detail


def test_user_fingerprints_are_equal_exactly_for_the_same_users(spark):
    def fingerprint(users, partitions=1):
        rows = [("x", u) for u in users]
        table = spark.createDataFrame(rows, "segment string, user_id long").repartition(partitions)
        (row,) = user_fingerprints(table, keys=["segment"]).collect()
        return row["rows"], row["h_high"], row["h_low"]

    users = [*range(1, 50), 2**62, -(2**62)]
    same = fingerprint(users)
    assert same[0] == 51
    assert fingerprint(users[::-1], partitions=3) == same
    swapped = fingerprint([*users[:-1], 50])  # as many users, one of them another
    assert swapped[0] == same[0] and swapped != same
    assert fingerprint([*users, 7]) != same  # a repeated user


def test_warnings_for_leaky_splits_few_users_and_sampled_metrics(tmp_path):
    raw = crafted_job_config(
        tmp_path, crafted_log(reconsumed=False), [{"name": "popularity", "kind": "popularity"}]
    )
    raw["split"] = {"method": "user_random", "fraction": 0.2}
    raw["evaluation"]["min_users"] = 100
    config = validate_config(raw)
    sampled = MetricRow(
        model="popularity",
        segment="all",
        metric="ndcg",
        k=10,
        value=0.3,
        n_users=5,
        protocol="sampled_100",
    )

    warnings = run_warnings(config, 5, [sampled])

    assert any(w.startswith("leaky split:") for w in warnings)
    assert any("only 5 users evaluated" in w for w in warnings)
    assert any("sampled metrics (sampled_100)" in w for w in warnings)
    assert (
        run_warnings(
            validate_config(
                crafted_job_config(
                    tmp_path,
                    crafted_log(reconsumed=False),
                    [{"name": "popularity", "kind": "popularity"}],
                )
            ),
            5,
            [],
        )
        == []
    )


def test_a_failed_check_commits_the_run_as_failed_checks_and_the_job_exits_1(
    spark, tmp_path, capsys, restore_sql_conf
):
    """An external model keyed by user ids the log does not have fails ``list_coverage``:
    exit 1, the run committed with status failed_checks, the --json document on stdout."""
    rows = [(u + 100_000, 100 + u, 1.0) for u in range(1, 7)]
    pd.DataFrame(rows, columns=["user_id", "item_id", "score"]).to_parquet(
        tmp_path / "recs.parquet", index=False
    )
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "shifted", "kind": "external", "path": str(tmp_path / "recs.parquet")},
    ]
    raw = crafted_job_config(tmp_path, crafted_log(reconsumed=True), models)
    config_path = tmp_path / "job.yaml"
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")

    summary_path = tmp_path / "summary.json"
    status = main(
        ["evaluate", "--config", str(config_path), "--json", "--summary-json", str(summary_path)]
    )

    assert status == 1
    out, err = capsys.readouterr()
    assert "error: check list_coverage failed: external model 'shifted'" in err
    assert " split started" in err and " done in " in err, err  # --json: progress on stderr
    summary = json.loads(summary_path.read_text())
    assert json.loads(out) == summary  # --json: stdout is the document alone
    assert (summary["exit_status"], summary["run_status"], summary["error"]) == (
        1,
        "failed_checks",
        None,
    )
    failed = [c for c in summary["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["list_coverage"]
    assert summary["run_date"] == raw["run"]["date"] and summary["protocol"] == "ranking"
    assert set(summary["stage_seconds"]) >= {"read", "split", "top_k", "write"}
    assert {(m["model"], m["metric"]) for m in summary["metrics"]} >= {("popularity", "ndcg")}
    runs = spark.read.parquet(str(tmp_path / "reports" / "runs")).collect()
    assert [r.status for r in runs] == ["failed_checks"]
    checks = {c.name: c for c in runs[0].checks}
    # user 1's only relevant test item was rated in train: it left Rel(u), a count, not a failure
    assert checks["heldout_not_in_train"].passed
    assert checks["heldout_not_in_train"].detail.startswith(
        "1 of 6 relevant test (user, item) pairs also occur in train and left Rel(u)"
    )
    assert runs[0].n_users_evaluated == 5


def test_a_model_without_rows_for_cold_users_scores_zero_there(spark, tmp_path):
    recs = pd.DataFrame(
        [(u, 100 + u, 1.0) for u in range(1, 5)] + [(u, 200, 0.5) for u in range(1, 5)],
        columns=["user_id", "item_id", "score"],
    )
    recs.to_parquet(tmp_path / "recs.parquet", index=False)
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "warm_only", "kind": "external", "path": str(tmp_path / "recs.parquet")},
    ]

    evaluation = evaluate(
        spark, crafted_job_config(tmp_path, crafted_log(reconsumed=False), models)
    ).outcome

    cold = {
        (r.model, r.metric): (r.value, r.n_users) for r in evaluation.metrics if r.segment == "cold"
    }
    assert cold[("warm_only", "ndcg")] == (0.0, 2)
    assert cold[("warm_only", "recall")] == (0.0, 2)
    warm = {(r.model, r.metric): r.value for r in evaluation.metrics if r.segment == "warm"}
    assert warm[("warm_only", "recall")] == 1.0  # every warm user's test item is its top pick
    assert all(c.passed for c in evaluation.checks), evaluation.checks


def test_peer_definitions_report_their_four_metrics_and_recommenders_drops_users(spark, tmp_path):
    """Cold users 5 and 6 get no ALS list (``fallback: none``): under spark_mllib they count
    (0) as every user does; under recommenders they are dropped from ALS's averages (their
    inner join), so the same-users check is replaced by a warning."""
    models = [
        {"name": "popularity", "kind": "popularity"},
        {"name": "als", "kind": "als", "rank": 2, "max_iter": 1, "blocks": 2, "fallback": "none"},
    ]
    counts = {}
    for definitions in ("spark_mllib", "recommenders"):
        (tmp_path / definitions).mkdir()
        raw = crafted_job_config(tmp_path / definitions, crafted_log(reconsumed=False), models)
        raw["evaluation"] |= {"definitions": definitions, "metrics": ["ndcg", "map", "mrr"]}
        evaluation = evaluate(spark, raw, keep_cached=True).outcome
        rows = [r for r in evaluation.metrics if r.segment == "all"]
        assert {r.metric for r in rows} == {"ndcg", "map"}  # mrr: not defined by the peers
        counts[definitions] = {r.model: r.n_users for r in rows}
        names = {c.name for c in evaluation.checks}
        assert ("same_users_all_models" in names) == (definitions == "spark_mllib")
        assert any(f"evaluation.definitions = {definitions}" in w for w in evaluation.warnings)
    assert counts["spark_mllib"] == {"popularity": 6, "als": 6}
    assert counts["recommenders"] == {"popularity": 6, "als": 4}


def test_external_user_ids_that_are_not_the_logs_fail_list_coverage_or_warn(
    spark, tmp_path, capsys, restore_sql_conf
):
    """As a new user hits it: recommendations keyed by other user ids than the log's (here
    id + 100000) match no evaluated user and score 0 without any error. ``shifted`` has every
    user shifted (no list for anyone: the check fails, exit 1, the run record is written);
    ``partly`` has users 3-6 shifted (lists for 2 of 6 users: a warning)."""

    def recommendations(name, shifted):
        rows = [(u + 100_000 * (u in shifted), 100 + u, 1.0) for u in range(1, 7)]
        path = tmp_path / f"{name}.parquet"
        pd.DataFrame(rows, columns=["uid", "item_id", "score"]).to_parquet(path, index=False)
        return {"name": name, "kind": "external", "path": str(path), "columns": {"user": "uid"}}

    models = [
        {"name": "popularity", "kind": "popularity"},
        recommendations("shifted", shifted=range(1, 7)),
        recommendations("partly", shifted=range(3, 7)),
    ]
    config_path = tmp_path / "job.yaml"
    raw = crafted_job_config(tmp_path, crafted_log(reconsumed=False), models)
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")

    status = main(["evaluate", "--config", str(config_path)])

    err = capsys.readouterr().err
    assert status == 1, err
    failure = (
        "external model 'shifted': none of the 6 evaluated users has a list; its user ids do "
        "not match the log's — compare models[1].columns.user ('uid') with "
        "data.interactions.columns.user ('user_id')"
    )
    assert f"error: check list_coverage failed: {failure}\n" in err
    warning = (
        "external model 'partly' has lists for 33.3% of the 6 evaluated users "
        "(evaluation.min_list_coverage = 0.5); the others score 0 on every accuracy metric; if "
        "its user ids should be the log's, compare models[2].columns.user ('uid') with "
        "data.interactions.columns.user ('user_id')"
    )
    assert f"warning: {warning}\n" in err
    runs = spark.read.parquet(str(tmp_path / "reports" / "runs")).collect()
    assert [r.status for r in runs] == ["failed_checks"]
    checks = {c.name: c for c in runs[0].checks}
    assert not checks["list_coverage"].passed and checks["list_coverage"].detail == failure
    assert warning in runs[0].warnings
    assert json.loads(runs[0].split)["list_coverage"] == {
        "popularity": 1.0,
        "shifted": 0.0,
        "partly": 2 / 6,
    }


def test_list_coverage_warns_below_the_configured_share_and_fails_at_none(tmp_path):
    config = validate_config(
        crafted_job_config(
            tmp_path, crafted_log(reconsumed=False), [{"name": "als", "kind": "als"}]
        )
        | {"evaluation": {"min_list_coverage": 0.9, "min_users": 0, "baseline": None}}
    )

    def warned(share):
        return [w for w in run_warnings(config, 10, [], coverage={"als": share}) if "als" in w]

    assert warned(1.0) == [] and warned(0.9) == [] and warned(0.0) == []  # none: the check
    assert warned(0.8) == [
        "als model 'als' has lists for 80.0% of the 10 evaluated users "
        "(evaluation.min_list_coverage = 0.9); the others score 0 on every accuracy metric"
    ]
    assert list_coverage_check(config, {"als": 0.1}, 10).passed
    failed = list_coverage_check(config, {"als": 0.0}, 10)
    assert not failed.passed
    assert failed.detail == (
        "als model 'als': none of the 10 evaluated users has a list (it scores none of them: "
        "are they all cold?)"
    )
