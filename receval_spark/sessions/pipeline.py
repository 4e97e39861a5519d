"""The session-based next-item job (docs/sessions.md) as a readable sequence of steps.

config -> clicks -> preprocessing and time split (counts recorded) -> prediction events ->
each model's top-k lists -> Recall@k / MRR@k over events, coverage and popularity bias of the
lists -> report datasets (metrics with protocol ``session``, runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, POSITION, SESSION, USER
from receval_spark.config import (
    ExternalSessionModel,
    ItemKnnSessionModel,
    MarkovSessionModel,
    PopSessionModel,
    SessionDataQualityConfig,
    SessionJobConfig,
    SessionModelConfig,
    SessionPopModel,
    SrSessionModel,
)
from receval_spark.errors import InputError
from receval_spark.inputs import canonical_session_predictions
from receval_spark.io import reading
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.exposure import exposure_blocks, group_statistics, item_exposure
from receval_spark.metrics.lists import (
    catalogue_totals,
    item_statistics,
    list_counts,
    top_k_lists,
)
from receval_spark.progress import StageClock
from receval_spark.quality import Fact, quality_warnings
from receval_spark.registry import SESSION_PROTOCOL
from receval_spark.results import Check, Outcome, metric_row
from receval_spark.sessions.metrics import (
    SESSION_ACCURACY,
    SESSION_EXPOSURE,
    session_accuracy,
    target_ranks,
)
from receval_spark.sessions.models import (
    external_lists,
    item_knn_lists,
    markov_lists,
    pop_lists,
    s_pop_lists,
    sr_lists,
)
from receval_spark.sessions.preprocessing import (
    SessionSplit,
    as_given,
    prediction_events,
    preprocess_sessions,
)


@dataclass(frozen=True)
class SessionInputs:
    """The session protocol's inputs on the canonical columns, validated: one raw click log
    (``clicks``) or a given train/test pair, and each external model's predictions by name."""

    clicks: DataFrame | None = None
    train: DataFrame | None = None
    test: DataFrame | None = None
    predictions: dict[str, DataFrame] = field(default_factory=dict)


def split_sessions(config: SessionJobConfig, inputs: SessionInputs) -> SessionSplit:
    """Preprocess and split a raw log, or take a given train/test pair as it is."""
    if inputs.clicks is not None:
        return preprocess_sessions(inputs.clicks, config.preprocessing)
    assert inputs.train is not None and inputs.test is not None  # SessionData: one layout
    return as_given(inputs.train, inputs.test)


def session_lists(
    model: SessionModelConfig,
    *,
    predictions: Mapping[str, DataFrame],
    events: DataFrame,
    train: DataFrame,
    test: DataFrame,
    k: int,
) -> DataFrame:
    """One model's top-k lists (session_id, position, item_id, rank)."""
    if isinstance(model, PopSessionModel):
        return pop_lists(events, train, k=k)
    if isinstance(model, SessionPopModel):
        return s_pop_lists(events, test, train, k=k)
    if isinstance(model, ItemKnnSessionModel):
        return item_knn_lists(
            events, train, k=k, neighbours=model.neighbours, shrinkage=model.shrinkage
        )
    if isinstance(model, MarkovSessionModel):
        return markov_lists(events, train, k=k)
    if isinstance(model, SrSessionModel):
        return sr_lists(events, train, k=k, window=model.window)
    if isinstance(model, ExternalSessionModel):
        key = f"models.{model.name}"
        with reading(key, model):
            canonical = canonical_session_predictions(
                predictions[model.name],
                columns=model.columns,
                session_type=test.schema[SESSION].dataType,
                item_type=test.schema[ITEM].dataType,
                source=key,
            )
        return external_lists(events, canonical, k=k)
    raise ValueError(f"model {model.name!r}: unknown kind {model.kind!r}")


def evaluate_session_protocol(
    config: SessionJobConfig, inputs: SessionInputs, *, clock: StageClock | None = None
) -> Outcome:
    """Split, expand test sessions into prediction events, rank with every model, aggregate
    (DataFrames in, the outcome out; nothing is written). Stages: split (preprocessing, the
    split and the prediction events), top_k, accuracy, beyond."""
    ks = config.evaluation.k
    wanted = config.evaluation.metrics
    clock = clock or StageClock()  # running the read stage, when given
    clock.start("split")
    split = split_sessions(config, inputs)
    train, test = persist(split.train), persist(split.test)
    events = persist(prediction_events(test))
    n_events = events.count()
    if n_events == 0:
        raise InputError("the test sessions yield no prediction event (every one has 1 click).")
    clock.note(prediction_events=n_events)
    clock.start("top_k")
    lists = all_session_lists(
        config.models,
        predictions=inputs.predictions,
        events=events,
        train=train,
        test=test,
        k=max(ks),
    )
    names = [m.name for m in config.models]
    models = events.sparkSession.createDataFrame([(name,) for name in names], "model string")
    rows = []
    clock.start("accuracy")
    if any(m in wanted for m in SESSION_ACCURACY):
        accuracy = session_accuracy(target_ranks(events, lists, models), ks=ks)
        rows += [
            metric_row(r, protocol=SESSION_PROTOCOL)
            for r in accuracy.collect()
            if r["metric"] in wanted
        ]
    exposure_metrics = [m for m in SESSION_EXPOSURE if m in wanted]
    clock.start("beyond")
    if exposure_metrics:
        exposure = _exposure(lists, train, models, ks, exposure_metrics)
        rows += [metric_row(r, protocol=SESSION_PROTOCOL) for r in exposure.collect()]
    test_counts = split.steps[-1]
    facts = event_facts(lists, names, n_events, test_counts)
    checks = [prefix_expansion_check(n_events, test_counts)]
    clock.stop()
    return Outcome(
        metrics=rows,
        split={
            **split.params,
            "steps": split.steps,
            "prediction_events": n_events,
            "data_quality": [f.record() for f in facts],
        },
        n_users_evaluated=n_events,
        checks=checks,
        warnings=session_warnings(facts, config.evaluation.data_quality, n_events),
        stage_seconds=clock.seconds,
    )


def all_session_lists(
    models: Sequence[SessionModelConfig],
    *,
    predictions: Mapping[str, DataFrame],
    events: DataFrame,
    train: DataFrame,
    test: DataFrame,
    k: int,
) -> DataFrame:
    """Every model's top-k lists (session_id, position, item_id, rank, model) of the
    prediction ``events``, persisted: one table that every later stage reads."""
    lists = union_all(
        [
            session_lists(
                m, predictions=predictions, events=events, train=train, test=test, k=k
            ).withColumn("model", F.lit(m.name))
            for m in models
        ]
    )
    assert lists is not None  # a job has at least one model
    return persist(lists)


def prefix_expansion_check(n_events: int, test_counts: Mapping[str, int]) -> Check:
    """``prefix_expansion``: a test session of n clicks yields n - 1 prediction events
    (docs/sessions.md), so the events number the test clicks less the test sessions."""
    expected_events = test_counts["clicks"] - test_counts["sessions"]
    return Check(
        "prefix_expansion",
        n_events == expected_events,
        f"{n_events} prediction events from {test_counts['clicks']} test clicks in "
        f"{test_counts['sessions']} sessions (n - 1 per session: {expected_events})",
    )


def event_facts(
    lists: DataFrame, models: list[str], n_events: int, test_counts: Mapping[str, int]
) -> list[Fact]:
    """The session run's data-quality facts: its prediction events (of the test clicks), and
    per model the events without any list (``lists``: session_id, position, item_id, rank,
    model). One Spark job; one row per model reaches the driver."""
    with_lists = {
        r["model"]: r["events"]
        for r in lists.groupBy("model")
        .agg(F.countDistinct(SESSION, POSITION).alias("events"))
        .collect()
    }
    events = "prediction events"
    return [
        Fact("test_events", n_events, test_counts["clicks"], "test clicks"),
        *[
            Fact("events_without_list", n_events - with_lists.get(m, 0), n_events, events, m)
            for m in models
        ],
    ]


def session_warnings(
    facts: list[Fact], settings: SessionDataQualityConfig, n_events: int
) -> list[str]:
    """A test set smaller than ``min_test_events`` prediction events; models whose share of
    events without a list exceeds ``events_without_list``."""
    warnings = []
    if n_events < settings.min_test_events:
        warnings.append(
            f"only {n_events} prediction events "
            f"(evaluation.data_quality.min_test_events = {settings.min_test_events}): Recall "
            "and MRR over so few events are unreliable"
        )
    models = [f.model for f in facts if f.model is not None]
    thresholds = {"events_without_list": settings.events_without_list}
    return warnings + quality_warnings(facts, thresholds, checking=models)


def _exposure(
    lists: DataFrame, train: DataFrame, models: DataFrame, ks: list[int], metrics: list[str]
) -> DataFrame:
    """(model, k, metric, value, n_users, std): coverage and popularity bias of the event
    lists, each event's list counting as one list; catalogue = items clicked in train.

    Every model of ``models`` gets its rows: one without any non-empty list has coverage 0
    and a null popularity bias (the mean over no list slot), with n_users = 0 lists."""
    by = ["model", "k"]
    keyed = top_k_lists(lists, ks=ks).select(
        *by, F.concat_ws("#", F.col(SESSION), F.col(POSITION)).alias(USER), ITEM
    )
    history = train.select(F.col(SESSION).alias(USER), ITEM)
    catalogue = item_statistics(history)
    blocks = exposure_blocks(item_exposure(keyed, catalogue, by=by), by=by)
    values = group_statistics(
        blocks,
        list_counts(keyed, by=by),
        catalogue_totals(history, catalogue),
        by=by,
        metrics=metrics,
    )
    assert values is not None  # metrics: at least one of SESSION_EXPOSURE
    spark = lists.sparkSession
    grid = models.crossJoin(spark.createDataFrame([(k,) for k in ks], "k int")).crossJoin(
        spark.createDataFrame([(m,) for m in metrics], "metric string")
    )
    value = F.col("value")
    return grid.join(values, on=[*by, "metric"], how="left").select(
        *by,
        "metric",
        F.when(value.isNull() & (F.col("metric") == "coverage"), F.lit(0.0))
        .otherwise(value)
        .alias("value"),
        F.coalesce(F.col("n_lists"), F.lit(0)).alias("n_users"),
        F.lit(None).cast("double").alias("std"),
    )
