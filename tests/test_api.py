"""The public Python API on DataFrames held in memory: nothing written unless asked, named
errors (never SystemExit), caches released, committed reports read back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from chispa import assert_df_equality

import receval_spark as rv
import receval_spark.cache
from receval_spark.results import COMPARISONS_SCHEMA, METRICS_SCHEMA, RUNS_SCHEMA

DAY = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
INTERACTIONS = "user_id long, item_id long, timestamp timestamp"
RECOMMENDATIONS = "user_id long, item_id long, score double"

# users 1-4 interact with items 10-14 before the cut (day 10) and with one item after it
LOG = [
    (1, 10, 1), (1, 11, 2), (1, 12, 11),
    (2, 10, 1), (2, 13, 3), (2, 11, 12),
    (3, 11, 2), (3, 12, 4), (3, 10, 13),
    (4, 13, 5), (4, 14, 6), (4, 12, 14),
]  # fmt: skip
# "mine" ranks each user's test item first (users 1-3) or second (user 4)
MINE = [(1, 12, 0.9), (1, 13, 0.5), (2, 11, 0.9), (3, 10, 0.8), (4, 10, 0.9), (4, 12, 0.7)]


def config(**evaluation) -> dict:
    return {
        "run": {"name": "api-test", "date": dt.date(2026, 2, 1)},
        "split": {"method": "global_temporal", "cutoff": "2026-01-10T00:00:00Z"},
        "evaluation": {
            "k": [1, 2],
            "segments": [],
            "metrics": ["precision", "recall", "ndcg", "hit_rate", "coverage"],
            "min_users": 1,
            "bootstrap_samples": 0,
            **evaluation,
        },
        "models": [{"name": "popularity", "kind": "popularity"}],
    }


@pytest.fixture(scope="module")
def frames(spark):
    log = spark.createDataFrame(
        [(u, i, DAY + dt.timedelta(days=d)) for u, i, d in LOG], INTERACTIONS
    )
    return log, spark.createDataFrame(MINE, RECOMMENDATIONS)


def cached_rdds(spark) -> set[int]:
    """Ids of the DataFrames cached in the session (the JVM's view: the RDDs of SQL cache
    entries, which carry their plan as name; localCheckpoint blocks, unnamed, are matched by no
    later plan and go with their DataFrame). Compared as sets: earlier tests' leftovers may be
    garbage-collected meanwhile."""
    rdds = spark.sparkContext._jsc.getPersistentRDDs()
    return {key for key in rdds.keySet().toArray() if rdds.get(key).name() is not None}


@pytest.fixture(scope="module")
def result(spark, frames, tmp_path_factory):
    """One evaluation of two models given as DataFrames, its cache held for the module
    (persisted as on a cluster: a local session would checkpoint instead, receval_spark.cache)."""
    log, mine = frames
    before = cached_rdds(spark)
    cwd = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(receval_spark.cache, "cuts_lineage", lambda df: False)
        patch.chdir(cwd)  # the default output.path "reports" would be created here
        evaluation = rv.evaluate(
            spark, config(), interactions=log, recommendations={"mine": mine}, keep_cached=True
        )
    assert list(cwd.iterdir()) == []  # nothing written
    kept = cached_rdds(spark) - before
    assert kept  # held for the module
    with evaluation:
        yield evaluation
    assert not kept & cached_rdds(spark)  # the with block released what it kept


def hit_rate_at_1(result: rv.Evaluation) -> float:
    return result.metrics.filter(
        "model = 'mine' AND metric = 'hit_rate' AND k = 1 AND segment = 'all'"
    ).first()["value"]


def test_evaluate_dataframes_without_a_file_or_yaml(result):
    assert result.metrics.schema == METRICS_SCHEMA
    assert result.comparisons.schema == COMPARISONS_SCHEMA
    assert result.runs.schema == RUNS_SCHEMA
    assert result.passed and result.protocol == "ranking"
    assert result.run_date == dt.date(2026, 2, 1)
    values = {
        (r.model, r.metric, r.k): r.value
        for r in result.metrics.filter("segment = 'all'").collect()
    }
    # mine: every user's test item at rank 1 except user 4's (rank 2)
    assert values[("mine", "hit_rate", 1)] == pytest.approx(3 / 4)
    assert values[("mine", "hit_rate", 2)] == pytest.approx(1.0)
    assert values[("mine", "precision", 2)] == pytest.approx(1 / 2)
    assert {m for m, _, _ in values} == {"popularity", "mine"}
    (diff,) = result.comparisons.filter("metric = 'hit_rate' AND k = 1").collect()
    assert (diff.model, diff.baseline, diff.n_users) == ("mine", "popularity", 4)
    assert result.per_user is not None and result.per_user.count() > 0
    (record,) = result.runs.collect()
    assert (record.run_id, record.status) == (result.run_id, "succeeded")


def test_a_second_evaluation_sees_its_own_data_and_leaves_nothing_cached(spark, frames, result):
    """With the first evaluation still cached, a second one on other recommendations in the
    same session gets its own numbers, and caches nothing once it has returned."""
    log, _ = frames
    before = cached_rdds(spark)
    other = spark.createDataFrame([(u, 10, 0.9) for u in (1, 2, 3, 4)], RECOMMENDATIONS)
    typed = rv.JobConfig.model_validate(config())  # the typed config object, the same schema
    second = rv.evaluate(spark, typed, interactions=log, recommendations={"mine": other})
    assert cached_rdds(spark) <= before  # nothing new is left cached
    assert hit_rate_at_1(second) == pytest.approx(1 / 4)  # item 10 is user 3's test item only
    assert hit_rate_at_1(result) == pytest.approx(3 / 4)
    assert_df_equality(
        second.metrics.filter("model = 'popularity'").drop("run_id"),
        result.metrics.filter("model = 'popularity'").drop("run_id"),
        ignore_row_order=True,
    )


def test_configuration_problems_raise_config_error_never_system_exit(spark, frames):
    log, mine = frames
    with pytest.raises(rv.ConfigError, match=r"evaluation\.kk: unknown key"):
        rv.evaluate(spark, {**config(), "evaluation": {"kk": [5]}}, interactions=log)
    with pytest.raises(rv.ConfigError, match=r"data\.interactions\.path: .*interactions=df"):
        rv.evaluate(spark, config())
    with pytest.raises(rv.ConfigError, match=r"models\.popularity: .*kind 'popularity'"):
        rv.evaluate(spark, config(), interactions=log, recommendations={"popularity": mine})
    with pytest.raises(rv.ConfigError, match="expected a Spark DataFrame, got DataFrame"):
        rv.evaluate(spark, config(), interactions=log.toPandas())
    with pytest.raises(rv.ConfigError, match="is not the configuration of evaluate"):
        rv.evaluate(spark, rv.SessionJobConfig.model_validate(SESSION_CONFIG))


def test_input_problems_raise_input_error_naming_the_dataframe(spark, frames):
    log, mine = frames
    with pytest.raises(rv.InputError, match=r"models\.mine.*score"):
        rv.evaluate(spark, config(), interactions=log, recommendations={"mine": mine.drop("score")})
    with pytest.raises(rv.InputError, match=r"data\.interactions.*timestamp"):
        rv.evaluate(spark, config(), interactions=log.drop("timestamp"))


def test_a_dataframe_with_the_canonical_rating_column_needs_no_mapping(spark):
    """A frame with user_id, item_id, timestamp and rating evaluates threshold (and graded)
    relevance without data.interactions.columns; a frame without rating is an InputError
    naming the column; a file source without the mapping stays a ConfigError."""
    # test rows (day 11-14): users 1 and 2 rate 5 (relevant at 4), users 3 and 4 rate 3
    rated = spark.createDataFrame(
        [(u, i, DAY + dt.timedelta(days=d), 5.0 if u <= 2 or d < 10 else 3.0) for u, i, d in LOG],
        "user_id long, item_id long, timestamp timestamp, rating double",
    )
    threshold = {**config(), "relevance": {"kind": "threshold", "threshold": 4}}
    result = rv.evaluate(spark, threshold, interactions=rated)
    assert result.outcome.n_users_evaluated == 2
    assert result.config.data.interactions.columns.rating == "rating"
    graded = {**config(), "relevance": {"kind": "graded", "threshold": 4}}
    with pytest.raises(
        rv.InputError,
        match=r"^data\.interactions: relevance\.kind: graded needs ratings, but the DataFrame "
        r"given has no column 'rating' \(it has \['user_id', 'item_id', 'timestamp'\]\); add "
        r"one, or map yours with data\.interactions\.columns\.rating\.$",
    ):
        rv.evaluate(spark, graded, interactions=rated.drop("rating"))
    from_file = {**threshold, "data": {"interactions": {"path": "ratings.parquet"}}}
    with pytest.raises(
        rv.ConfigError,
        match=r"relevance\.kind: threshold needs data\.interactions\.columns\.rating",
    ):
        rv.evaluate(spark, from_file)


def test_epoch_milliseconds_read_as_seconds_raise_input_error_naming_column_and_key(spark):
    """Millisecond epochs without ``timestamp_unit: ms`` would be times after the year 50000:
    an InputError at validation naming the source column, its values and the key to set
    (never Python's "year is out of range" from collecting a cut-off)."""
    millis = [(u, i, int((DAY + dt.timedelta(days=d)).timestamp()) * 1000) for u, i, d in LOG]
    log = spark.createDataFrame(millis, "u long, i long, ts long")
    mapped = {"data": {"interactions": {"columns": {"user": "u", "item": "i", "timestamp": "ts"}}}}
    first, last = millis[0][2], max(row[2] for row in millis)
    with pytest.raises(
        rv.InputError,
        match=rf"^data\.interactions: column 'ts' \(timestamp\) holds values from {first} to "
        rf"{last}; .* set data\.interactions\.timestamp_unit: ms\.$",
    ):
        rv.evaluate(spark, {**config(), **mapped}, interactions=log)
    sessions = ((1, 0, (1, 2, 3)), (2, 10, (1, 2)), (3, 20, (2, 3, 1)), (4, 2 * 86_400, (1, 2)))
    clicks = spark.createDataFrame(
        [
            (s, item, first + 1000 * (start + offset))
            for s, start, items in sessions
            for offset, item in enumerate(items)
        ],
        "session_id long, item_id long, time long",
    )
    with pytest.raises(
        rv.InputError, match=r"^data\.clicks: column 'time' .* set data\.clicks\.timestamp_unit: ms"
    ):
        rv.evaluate_sessions(spark, SESSION_CONFIG, clicks=clicks)


def test_write_read_and_render_the_committed_reports(spark, result, tmp_path):
    output = str(tmp_path / "lake")
    verdict = rv.judge(result, output)  # tonight's verdict, before anything is written
    assert callable(rv.judge) and isinstance(verdict, rv.Judgement)
    assert (verdict.status, verdict.alerts, verdict.earlier_dates) == ("succeeded", [], [])
    with pytest.raises(rv.ConfigError, match="judgement: it was made against"):
        rv.write_reports(result, str(tmp_path / "elsewhere"), judgement=verdict)
    commit = rv.write_reports(result, output, per_user=True, judgement=verdict)
    assert commit.judgement is verdict
    assert commit.comparisons == result.judgement.comparisons  # no earlier date: its own family
    assert commit.status == "succeeded" and commit.alerts == []
    assert set(commit.datasets) == {"metrics", "comparisons", "long_tail", "per_user", "runs"}
    assert commit.comparisons  # held, but left out of the one line a notebook prints
    assert repr(commit).startswith("Commit(output=") and "ComparisonRow" not in repr(commit)

    metrics = rv.read_reports(spark, output, dataset="metrics", dates=[dt.date(2026, 2, 1)])
    assert_df_equality(
        metrics.drop("run_date"), result.metrics, ignore_row_order=True, ignore_nullable=True
    )
    assert rv.read_reports(spark, output, dataset="metrics", dates="2026-01-31").count() == 0
    (record,) = rv.read_reports(spark, output, dataset="runs").collect()
    assert (record.run_id, record.status, record.run_date) == (
        result.run_id,
        "succeeded",
        "2026-02-01",
    )
    assert rv.read_reports(spark, output, dataset="off_policy").count() == 0  # none written
    with pytest.raises(rv.InputError, match="no committed reports under"):
        rv.read_reports(spark, str(tmp_path / "elsewhere"), dataset="metrics")
    with pytest.raises(rv.InputError, match=r"no committed run under .*; run receval first"):
        rv.render_report(spark, str(tmp_path / "elsewhere"))
    with pytest.raises(rv.ConfigError, match="'metric' is not a report dataset"):
        rv.read_reports(spark, output, dataset="metric")

    page = rv.render_report(spark, output)
    assert page == Path(output) / "report" / "2026-02-01" / "report.html"
    assert "mine" in page.read_text() and page.with_suffix(".md").exists()


SESSION_CONFIG = {
    "data": {"clicks": {}},
    "preprocessing": {"min_session_length": 2, "min_item_support": 1, "test_days": 1},
    "evaluation": {"k": [1, 2]},
    "models": [{"name": "pop", "kind": "pop"}],
}


def test_evaluate_sessions_on_a_clicks_dataframe(spark):
    day = 86_400.0
    clicks = spark.createDataFrame(
        [
            (s, item, start + offset)
            for s, start, items in (
                (1, 0.0, (1, 2, 3)),
                (2, 10.0, (1, 2)),
                (3, 20.0, (2, 3, 1)),
                (4, 2 * day, (1, 2, 3)),  # test day
            )
            for offset, item in enumerate(items)
        ],
        "session_id long, item_id long, time double",
    )
    result = rv.evaluate_sessions(spark, SESSION_CONFIG, clicks=clicks)
    assert result.protocol == "session" and result.comparisons is None
    assert result.outcome.n_users_evaluated == 2  # clicks 2 and 3 of the test session
    recall = {r.k: r.value for r in result.metrics.filter("metric = 'recall'").collect()}
    # POP lists items 1, 2 (3 train clicks each, ties by id): the next click 2 is at rank 2,
    # the next click 3 is not in the list
    assert recall == {1: pytest.approx(0.0), 2: pytest.approx(0.5)}
