"""The evaluation job as a readable sequence of steps.

config -> inputs -> split -> relevance -> candidates -> top-k -> per-user metrics ->
macro averages with intervals -> checks -> report datasets (written together per run date).
Only bounded results reach the driver: counts, cut-offs and the metric aggregates.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, POSITION, RANK, RATING, REWARD, SCORE, TIMESTAMP, USER
from receval_spark.config import (
    LOGGING_POLICY,
    EvaluationConfig,
    ExternalModel,
    JobConfig,
    ModelConfig,
    PopularityModel,
    hyperparameter_grid,
    sampled_negatives,
)
from receval_spark.errors import InputError
from receval_spark.expressions import iso_micros
from receval_spark.inputs import UNASSIGNED
from receval_spark.metrics.accuracy import ACCURACY_METRICS, per_user_accuracy
from receval_spark.metrics.aggregate import macro_average, to_long, union_all
from receval_spark.metrics.beyond import (
    BeyondInputs,
    catalogue_totals,
    content_expected,
    group_beyond,
    item_statistics,
    long_tail,
    per_user_beyond,
    ranking_exposure,
    top_k_lists,
    unit_vectors,
)
from receval_spark.metrics.compare import compare_run
from receval_spark.metrics.compat import COMPAT_METRICS, compatible_per_user
from receval_spark.metrics.custom import custom_per_user, group_values, ranked_list_table
from receval_spark.metrics.offpolicy import (
    CLUSTER,
    ESTIMATORS,
    PROBABILITY,
    estimates,
    importance_weights,
    off_policy_sums,
)
from receval_spark.metrics.rating import rating_errors, rating_metrics
from receval_spark.progress import StageClock
from receval_spark.quality import Fact, quality_warnings
from receval_spark.ranking.checks import (
    run_checks,
    run_warnings,
    temporal_leakage_check,
)
from receval_spark.ranking.models import Scorer, fallback_users, fit_model
from receval_spark.ranking.models.als import als_item_embeddings
from receval_spark.ranking.models.popularity import popularity_ranks
from receval_spark.ranking.models.random import random_candidates
from receval_spark.ranking.quality import Reconsumption, list_facts, log_facts, reconsumption
from receval_spark.ranking.relevance import (
    activity_counts,
    activity_thresholds,
    item_popularity_segments,
    relevant_items,
    scoped_truth,
    user_segments,
)
from receval_spark.ranking.split import Split, split_interactions
from receval_spark.ranking.topk import rank_candidates, sampled_top_k
from receval_spark.ranking.tuning import tune
from receval_spark.results import (
    Check,
    MetricRow,
    OffPolicyRow,
    Outcome,
    metric_row,
)

JOB_STAGES = ("read", "split", "tune", "top_k", "accuracy", "beyond", "statistics", "checks")


@dataclass(frozen=True)
class Inputs:
    """The ranking protocol's inputs on the canonical columns (receval_spark.columns),
    validated: the interaction log, item metadata and logged impressions when configured, and
    each external model's recommendations by model name."""

    interactions: DataFrame
    items: DataFrame | None = None
    impressions: DataFrame | None = None
    recommendations: dict[str, DataFrame] = dataclasses.field(default_factory=dict)
    user_segments: DataFrame | None = None  # (user_id, segment) of evaluation.user_segments
    item_segments: DataFrame | None = None  # (item_id, segment) of evaluation.item_segments


def describe_items(items: DataFrame, catalogue: DataFrame, *, embeddings: bool) -> dict[str, int]:
    """Counts of item metadata, of catalogue items that lack categories, and (``embeddings``:
    data.items maps an embedding column) of those data.items gives no embedding; whether the
    run's vectors come from data.items or ALS is ``split.embeddings`` (docs/datasets.md)."""
    known = catalogue.select(ITEM).join(items, on=ITEM, how="left")
    no_categories = F.col("categories").isNull() | (F.size("categories") == 0)
    no_embedding = F.count(F.when(F.col("embedding").isNull(), True))
    row = known.agg(
        F.count(F.lit(1)).alias("catalogue_items"),
        F.count(F.when(no_categories, True)).alias("catalogue_items_without_categories"),
        *([no_embedding.alias("catalogue_items_without_items_embedding")] if embeddings else []),
    ).collect()[0]
    return {"metadata_rows": items.count(), **row.asDict()}


def describe_parts(parts: Mapping[str, DataFrame]) -> dict[str, dict[str, Any]]:
    """Rows, distinct users and items, and the time range of each split part, from one
    aggregation over all of them (an empty part: zero counts, no time range)."""
    micros = F.unix_micros(TIMESTAMP)
    labelled = union_all(
        [df.select(F.lit(name).alias("_part"), USER, ITEM, TIMESTAMP) for name, df in parts.items()]
    )
    assert labelled is not None  # train and test at least
    found = {
        row["_part"]: row
        for row in labelled.groupBy("_part")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct(USER).alias("users"),
            F.countDistinct(ITEM).alias("items"),
            F.min(micros).alias("first"),
            F.max(micros).alias("last"),
        )
        .collect()
    }
    empty = {"rows": 0, "users": 0, "items": 0, "first": None, "last": None}
    rows = {name: found.get(name, empty) for name in parts}
    return {
        name: {
            "rows": int(row["rows"]),
            "users": int(row["users"]),
            "items": int(row["items"]),
            "first_timestamp": iso_micros(row["first"]),
            "last_timestamp": iso_micros(row["last"]),
        }
        for name, row in rows.items()
    }


def describe_split(split: Split) -> dict[str, Any]:
    """The run record's ``split``: method, parameters, resolved cut-offs and per-part counts.

    Raises InputError when train or test is empty.
    """
    parts = {"train": split.train, "test": split.test}
    if split.validation is not None:
        parts["validation"] = split.validation
    described = {
        **split.params,
        **describe_parts(parts),
    }
    for name in ("train", "test"):
        if described[name]["rows"] == 0:
            raise InputError(
                f"split: the {name} part is empty ({split.params}); change split.cutoff, "
                "split.quantile, split.fraction or split.n so that both train and test hold rows."
            )
    if split.validation is not None and described["validation"]["rows"] == 0:
        raise InputError("split.validation_cutoff: the validation part is empty; move it earlier.")
    return described


def evaluate(config: JobConfig, inputs: Inputs, *, clock: StageClock | None = None) -> Outcome:
    """Split, score every configured model, and aggregate accuracy and beyond-accuracy metrics
    (DataFrames in, the outcome out; nothing is written). DESIGN's steps, one call each.

    ``stage_seconds`` of the result: read (reading and validating the inputs), split (the
    split, Rel(u) and the evaluated users), tune, top_k (every model's lists), accuracy
    (per-user accuracy and its macro averages, sampled protocols), beyond (beyond-accuracy
    metrics with their bootstrap), statistics (paired comparisons), off_policy (only with
    data.impressions), checks.
    """
    settings = config.evaluation
    clock = clock or StageClock()  # running the read stage, when given
    clock.start("split")
    split = split_interactions(config.split, inputs.interactions)
    summary = {**describe_split(split), "filter_seen": settings.filter_seen}
    if settings.custom_metrics:
        summary["custom_metrics"] = describe_custom_metrics(settings)
    if config.task == "rating_prediction":
        return evaluate_ratings(config, split, summary, clock)
    population = evaluated_population(config, split, summary, named=inputs.user_segments)
    clock.note(users=population.n_users)
    clock.start("tune")
    chosen, tuning = choose_models(config, split)
    clock.start("top_k")
    # candidates for one place past the largest k: a tie across the k-th place can be seen
    scorers = fit_scorers(chosen, population, inputs.recommendations, k=max(settings.k) + 1)
    ranked, list_quality = top_k(scorers, population, summary, ks=settings.k)
    clock.start("accuracy")
    models = ranked.sparkSession.createDataFrame([(m.name,) for m in config.models], "model string")
    accuracy = accuracy_per_user(
        ranked, population, models=models, settings=settings, item_segments=inputs.item_segments
    )
    custom = custom_metrics_per_user(config, inputs, ranked, population, models=models)
    accuracy = union_all([f for f in (accuracy, custom) if f is not None])
    rows = _macro_rows(accuracy) if accuracy is not None else []
    sampled = {
        protocol: sampled_protocol(
            protocol,
            scorers=scorers,
            interactions=inputs.interactions,
            population=population,
            settings=settings,
        )
        for protocol in settings.protocol[1:]  # sampled_<N>, after full
    }
    rows += [row for protocol_rows, _ in sampled.values() for row in protocol_rows]
    clock.start("beyond")
    beyond = beyond_accuracy(config, inputs, ranked, population, summary)
    rows += beyond.rows
    per_user = union_all([f for f in (accuracy, beyond.per_user) if f is not None])
    clock.start("statistics")
    comparisons = (
        compare_run(
            {"full": per_user, **{p: per_user for p, (_, per_user) in sampled.items()}},
            baseline=settings.baseline,
        )
        if settings.baseline is not None
        else []
    )
    off_policy = []
    if inputs.impressions is not None:
        clock.start("off_policy")
        off_policy = off_policy_estimates(
            inputs.impressions,
            rank_models(
                scorers,
                inputs.impressions.select(USER).distinct(),
                k=max(settings.k),
                seen=population.seen,
            ),
            models=models,
            clip=config.off_policy_settings.clip,
        )
    clock.start("checks")
    checks, warnings = checks_and_warnings(
        config,
        split,
        rows,
        population,
        list_quality=list_quality,
        accuracy=accuracy,
        summary=summary,
    )
    facts = [*log_facts(inputs.interactions, config.relevance), *population.facts, *list_quality]
    summary["data_quality"] = [f.record() for f in facts]
    checking = [m.name for m in config.models if m.kind != "oracle"]
    warnings += quality_warnings(
        facts,
        settings.data_quality.model_dump(),
        checking=checking,
        filter_seen=settings.filter_seen,
    )
    clock.stop()
    return Outcome(
        metrics=rows,
        comparisons=comparisons,
        per_user=per_user,
        long_tail=beyond.long_tail,
        split=summary,
        n_users_evaluated=population.n_users,
        checks=checks,
        warnings=warnings + beyond.warnings,
        off_policy=off_policy,
        stage_seconds=clock.seconds,
        tuning=tuning,
    )


@dataclass(frozen=True)
class Population:
    """Who is evaluated, and against what: the train history (train + validation), Rel(u)
    (``truth``: under filter_seen without the pairs seen in train), the evaluated users
    (non-empty Rel(u)) with their segments, the seen pairs to filter (None without
    filter_seen), the catalogue (train items with counts) and the data-quality facts of Rel(u)
    (receval_spark.ranking.quality.reconsumption)."""

    history: DataFrame
    truth: DataFrame
    users: DataFrame
    n_users: int
    segments: DataFrame
    seen: DataFrame | None
    catalogue: DataFrame
    facts: list[Fact]


def evaluated_population(
    config: JobConfig,
    split: Split,
    summary: dict[str, Any],
    *,
    named: DataFrame | None = None,
) -> Population:
    """The evaluated users of the split (DESIGN §3); raises InputError when there are none.
    Records the activity quartiles in ``summary`` when the activity segment is on. ``named``:
    (user_id, segment) of a user-segment table; an evaluated user without a row there is in
    ``<name>=unassigned``."""
    settings = config.evaluation
    history = persist(split.history)
    relevant = relevant_items(split.test, config.relevance)
    rel = reconsumption(relevant, history, filter_seen=settings.filter_seen)
    if rel.n_users == 0:
        raise InputError(_no_users_message(rel))
    truth = persist(rel.truth)
    users = persist(truth.select(USER).distinct())
    n_users = rel.n_users
    if "activity" in settings.segments:
        thresholds = activity_thresholds(activity_counts(users, history)).collect()[0][0]
        summary["activity_quartiles"] = thresholds
    return Population(
        history=history,
        truth=truth,
        users=users,
        n_users=n_users,
        segments=persist(
            _with_named(
                user_segments(users, history, segments=settings.segments), users, named, config
            )
        ),
        seen=persist(history.select(USER, ITEM).distinct()) if settings.filter_seen else None,
        catalogue=persist(item_statistics(history)),
        facts=rel.facts,
    )


def _no_users_message(rel: Reconsumption) -> str:
    """Why no user can be evaluated: no relevant test item, or (under the seen filter) every
    relevant test item already seen in train."""
    reconsumed = next(f for f in rel.facts if f.fact == "reconsumed_pairs")
    if reconsumed.total and reconsumed.count == reconsumed.total:
        return (
            f"evaluation.filter_seen: all {reconsumed.total} relevant test pairs were already "
            "consumed in train, so they leave Rel(u) and no user can be evaluated; set "
            "evaluation.filter_seen=false to evaluate re-consumption."
        )
    return (
        "relevance: no test interaction is relevant, so no user can be evaluated; "
        "lower relevance.threshold or move split.cutoff earlier."
    )


def fit_scorers(
    models: list[ModelConfig],
    population: Population,
    recommendations: Mapping[str, DataFrame],
    *,
    k: int,
) -> dict[str, Scorer]:
    """Every model fitted on the train history (external ones: their given lists)."""
    return {
        model.name: fit_model(
            model,
            history=population.history,
            truth=population.truth,
            k=k,
            seen=population.seen,
            external=recommendations.get(model.name),
        )
        for model in models
    }


def rank_models(
    scorers: Mapping[str, Scorer], users: DataFrame, *, k: int, seen: DataFrame | None
) -> DataFrame:
    """(user_id, item_id, score, rank, model): every model's top-k list for ``users``, seen
    items filtered, ties broken by item id (receval_spark.ranking.topk). The models'
    candidates are filtered and ranked together: one window by model and user, whose shuffle
    does not grow with the number of models."""
    candidates = union_all(
        [
            s.candidates(users).select(F.lit(name).alias("model"), USER, ITEM, SCORE)
            for name, s in scorers.items()
        ]
    )
    assert candidates is not None  # a job has at least one model
    ranked = rank_candidates(candidates, k=k, seen=seen, by=["model"])
    return ranked.select(USER, ITEM, SCORE, RANK, "model")


def _with_named(
    segments: DataFrame, users: DataFrame, named: DataFrame | None, config: JobConfig
) -> DataFrame:
    """``segments`` and, for each evaluated user, their segments of the user-segment table."""
    source = config.evaluation.user_segments
    if named is None or source is None:
        return segments
    unassigned = F.lit(f"{source.label}={UNASSIGNED}")
    joined = users.join(named, on=USER, how="left")
    return segments.unionByName(
        joined.select(USER, F.coalesce(F.col("segment"), unassigned).alias("segment"))
    )


def top_k(
    scorers: Mapping[str, Scorer],
    population: Population,
    summary: dict[str, Any],
    *,
    ks: list[int],
) -> tuple[DataFrame, list[Fact]]:
    """Every model's top-k lists (k = max ``ks``) for the evaluated users, materialised (every
    later stage reads them), and the lists' data-quality facts at every k; records in
    ``summary`` how many users each model's fallback served. The lists are ranked to k + 1 so
    that a score tie across the k-th place can be seen; rows past k are left out of them."""
    k = max(ks)
    deeper = persist(rank_models(scorers, population.users, k=k + 1, seen=population.seen))
    facts = list_facts(
        deeper, population.catalogue, models=list(scorers), ks=ks, n_users=population.n_users
    )
    ranked = deeper.filter(F.col(RANK) <= k)
    served = {name: fallback_users(s, population.users) for name, s in scorers.items()}
    if any(f is not None for f in served.values()):
        summary["fallback_users"] = {name: f.count() for name, f in served.items() if f is not None}
    return ranked, facts


@dataclass(frozen=True)
class BeyondAccuracy:
    """The beyond-accuracy step's macro and group rows, per-user rows, long-tail table and
    warnings for metrics it had to skip."""

    rows: list[MetricRow]
    per_user: DataFrame | None
    long_tail: DataFrame
    warnings: list[str]


def beyond_accuracy(
    config: JobConfig,
    inputs: Inputs,
    ranked: DataFrame,
    population: Population,
    summary: dict[str, Any],
) -> BeyondAccuracy:
    """Beyond-accuracy metrics of the top-k lists at every k (DESIGN §6): per-user ones
    macro-averaged, group ones with bootstrap intervals, and the long-tail table."""
    settings = config.evaluation
    beyond_inputs, warnings = _beyond_inputs(
        ranked.sparkSession,
        config,
        items=inputs.items,
        history=population.history,
        truth=population.truth,
        seen=population.seen,
        catalogue=population.catalogue,
        ranked=ranked,
        interactions=inputs.interactions,
        summary=summary,
    )
    rows = []
    per_user = per_user_beyond(
        ranked, beyond_inputs, ks=settings.k, by=["model"], metrics=settings.metrics
    )
    if per_user is not None:
        per_user = persist(per_user.join(population.segments, on=USER))
        rows += _macro_rows(per_user)
    segmented = ranked.join(population.segments, on=USER)
    keys = ["model", "segment"]
    # one item exposure for the group statistics and the long-tail table (segment all)
    exposure = persist(ranking_exposure(segmented, population.catalogue, keys=keys, ks=settings.k))
    groups = group_beyond(
        segmented,
        beyond_inputs,
        keys=keys,
        ks=settings.k,
        metrics=settings.metrics,
        pairs=settings.personalization_pairs,
        seed=settings.seed,
        bootstrap_samples=settings.bootstrap_samples,
        exposure=exposure,
    )
    if groups is not None:
        rows += [metric_row(r) for r in groups.collect()]
    custom = [m.resolved() for m in settings.custom_metrics if m.scope == "group"]
    if custom:
        values = group_values(
            top_k_lists(segmented, ks=settings.k).drop(RANK),
            population.catalogue,
            metrics=custom,
            ks=settings.k,
            items=inputs.items,
            attributes=item_attributes(config),
            bootstrap_samples=settings.bootstrap_samples,
            seed=settings.seed,
        )
        assert values is not None  # at least one group metric
        rows += [metric_row(r) for r in values.collect()]
    everyone = exposure.filter(F.col("segment") == "all").drop("segment")
    return BeyondAccuracy(
        rows=rows,
        per_user=per_user,
        long_tail=long_tail(everyone, population.catalogue, by=["model", "k"]),
        warnings=warnings,
    )


def checks_and_warnings(
    config: JobConfig,
    split: Split,
    rows: list[MetricRow],
    population: Population,
    *,
    list_quality: list[Fact],
    accuracy: DataFrame | None,
    summary: dict[str, Any],
) -> tuple[list[Check], list[str]]:
    """The run's sanity checks and warnings (receval_spark.ranking.checks); records each
    model's list coverage (its share of the evaluated users with a list, from the
    ``no_list`` facts of the lists) in ``summary``."""
    n_users = population.n_users
    coverage = {
        f.model: (f.total - f.count) / f.total
        for f in list_quality
        if f.fact == "no_list" and f.model is not None
    }
    summary["list_coverage"] = coverage
    checks = run_checks(
        config,
        split,
        rows,
        facts=population.facts,
        filter_seen=population.seen is not None,
        accuracy=accuracy,
        evaluated=population.segments,
        coverage=coverage,
        n_users=n_users,
    )
    return checks, run_warnings(config, n_users, rows, coverage=coverage)


def evaluate_ratings(
    config: JobConfig, split: Split, summary: dict[str, Any], clock: StageClock
) -> Outcome:
    """The ``rating_prediction`` task: MAE, MSE and RMSE of every model's predicted ratings
    over the test ratings whose user and item have train ratings (the pairs every model can
    predict; the others are counted in the run record's split). No ranking metric."""
    history = persist(split.history)
    rated = history.filter(F.col(RATING).isNotNull())
    test = split.test.filter(F.col(RATING).isNotNull())
    known = persist(
        test.join(rated.select(USER).distinct(), on=USER, how="left_semi").join(
            rated.select(ITEM).distinct(), on=ITEM, how="left_semi"
        )
    )
    n_known = known.count()
    summary["rating_prediction"] = {"test_ratings": test.count(), "scored_ratings": n_known}
    if n_known == 0:
        raise InputError(
            "task rating_prediction: no test rating has a user and an item with train ratings; "
            "move split.cutoff later or check data.interactions.columns.rating."
        )
    clock.note(scored_ratings=n_known)
    clock.start("tune")
    models, _ = choose_models(config, split)
    clock.start("top_k")
    predictions = union_all(
        [
            fit_model(model, history=history, truth=known, k=1, seen=None)
            .ratings(known)
            .withColumn("model", F.lit(model.name))
            for model in models
        ]
    )
    clock.start("accuracy")
    rows = [
        MetricRow(
            model=e.group[0],
            segment="all",
            metric=e.metric,
            k=None,
            value=e.value,
            n_users=e.n_ratings,
            std=e.std,
            ci_low=e.ci_low,
            ci_high=e.ci_high,
        )
        for row in rating_errors(predictions, known, by=["model"]).collect()
        for e in rating_metrics(row, by=["model"])
    ]
    n_users = known.select(USER).distinct().count()
    checks = [temporal_leakage_check(split)] if config.split.method == "global_temporal" else []
    warnings = [
        "task rating_prediction: mae, mse and rmse measure how close predicted ratings are to "
        "the test ratings, not how well a model ranks items; use task: ranking for that",
        *run_warnings(config, n_users, rows),
    ]
    clock.stop()
    return Outcome(
        metrics=rows,
        comparisons=[],
        per_user=None,
        long_tail=None,
        split=summary,
        n_users_evaluated=n_users,
        checks=checks,
        warnings=warnings,
        stage_seconds=clock.seconds,
    )


def choose_models(config: JobConfig, split: Split) -> tuple[list[ModelConfig], dict[str, Any]]:
    """Every configured model with single hyperparameter values: a grid is tuned on the
    validation period (receval_spark.ranking.tuning), a one-point grid is taken as written. Returns
    the models and the tuning record per tuned model."""
    grids = {m.name for m in config.models if len(hyperparameter_grid(m)) > 1}
    if not grids:
        return [hyperparameter_grid(m)[0] for m in config.models], {}
    train = persist(split.train)
    truth = persist(relevant_items(split.validation, config.relevance))
    if truth.isEmpty():
        raise InputError(
            "split.validation_cutoff: no validation interaction is relevant, so no grid can be "
            "tuned; move split.validation_cutoff (or validation_quantile) earlier or lower "
            "relevance.threshold."
        )
    seen = persist(train.select(USER, ITEM).distinct()) if config.evaluation.filter_seen else None
    chosen, records = [], {}
    for model in config.models:
        if model.name in grids:
            model, records[model.name] = tune(
                model, train=train, truth=truth, seen=seen, tuning=config.evaluation.tuning
            )
        chosen.append(hyperparameter_grid(model)[0])
    return chosen, records


def sampled_protocol(
    protocol: str,
    *,
    scorers: Mapping[str, Scorer],
    interactions: DataFrame,
    population: Population,
    settings: EvaluationConfig,
) -> tuple[list[MetricRow], DataFrame | None]:
    """Accuracy under ``sampled_<N>``: each user's relevant test items ranked together with N
    seeded negatives (:func:`sampled_candidates`) by every model that scores any item, users a
    model cannot score left without a list and equal scores ordered by a seeded hash
    (:func:`receval_spark.ranking.topk.sampled_top_k`). Returns the macro rows (labelled with
    the protocol) and the per-user table."""
    history, truth, users = population.history, population.truth, population.users
    n = sampled_negatives(protocol)
    pairs = persist(
        sampled_candidates(interactions, history, truth, users, n=n, seed=settings.seed)
    )
    scoring = {name: s for name, s in scorers.items() if s.scores is not None}
    if not scoring:
        return [], None
    scores = union_all(
        [
            s.scores(pairs).select(F.lit(name).alias("model"), USER, ITEM, SCORE)
            for name, s in scoring.items()
        ]
    )
    assert scores is not None  # at least one scoring model
    ranked = sampled_top_k(scores, k=max(settings.k), seed=settings.seed, by=["model"])
    ranked = persist(ranked.select(USER, ITEM, SCORE, RANK, "model"))
    ranked.count()  # one job for every model's sampled lists; later plans start from here
    models = users.sparkSession.createDataFrame([(m,) for m in scoring], "model string")
    accuracy = accuracy_per_user(ranked, population, models=models, settings=settings)
    if accuracy is None:
        return [], None
    rows = [dataclasses.replace(r, protocol=protocol) for r in _macro_rows(accuracy)]
    return rows, accuracy


def sampled_candidates(
    interactions: DataFrame,
    history: DataFrame,
    truth: DataFrame,
    users: DataFrame,
    *,
    n: int,
    seed: int,
) -> DataFrame:
    """(user_id, item_id): each user's relevant test items plus n negatives drawn uniformly
    (seeded, partition-independent; the random baseline's draws) from the train catalogue
    items the user never interacted with in any part of the log. The draws are the random
    baseline's 2·(n + |seen(u)|) + 10 hashed picks with repeats dropped, so a user whose pool
    of never-interacted items is not much larger than n may get fewer than n negatives (never
    more, never an interacted item)."""
    interacted = interactions.select(USER, ITEM).distinct()
    negatives = rank_candidates(
        random_candidates(history, users, k=n, seen=interacted, seed=seed), k=n, seen=interacted
    )
    return truth.select(USER, ITEM).unionByName(negatives.select(USER, ITEM))


def off_policy_estimates(
    impressions: DataFrame, ranked: DataFrame, *, models: DataFrame, clip: float
) -> list[OffPolicyRow]:
    """IPS, clipped IPS and SNIPS (metrics/offpolicy.py) of every model's ranking on the logged
    impressions, and the logging policy's own mean reward (model ``logging``, estimator
    ``logged_mean``: the mean of w = 1), with cluster-robust intervals over users.

    Item-position model of a deterministic ranking: pi(item at position | user) = 1 where the
    model's top-max(k) list for the user (``ranked``: model, user_id, item_id, rank) has the
    item at exactly that rank, else 0; logged positions beyond max k, and users the model has
    no list for, get pi = 0. Every model in ``models`` gets rows. One aggregation; one small
    row per model reaches the driver.
    """
    target = ranked.select(
        "model", USER, ITEM, F.col(RANK).alias(POSITION), F.lit(1.0).alias(PROBABILITY)
    )
    weighted = importance_weights(impressions, target, by=["model"], policies=models)
    logged = impressions.select(
        F.lit(LOGGING_POLICY).alias("model"),
        F.col(USER).alias(CLUSTER),
        REWARD,
        F.lit(1.0).alias("w"),
    )
    rows = []
    for sums in off_policy_sums(weighted.unionByName(logged), by=["model"], clip=clip).collect():
        for e in estimates(sums, by=["model"]):
            if sums["model"] == LOGGING_POLICY and e.estimator != "ips":
                continue
            rows.append(
                OffPolicyRow(
                    model=sums["model"],
                    estimator="logged_mean" if sums["model"] == LOGGING_POLICY else e.estimator,
                    value=e.value,
                    std_error=e.std_error,
                    ci_low=e.ci_low,
                    ci_high=e.ci_high,
                    n_impressions=e.n_impressions,
                    effective_n=e.effective_n,
                    max_weight=e.max_weight,
                    clip=clip if e.estimator == "clipped_ips" else None,
                )
            )
    order = {name: i for i, name in enumerate(("logged_mean", *ESTIMATORS))}
    return sorted(rows, key=lambda r: (r.model != LOGGING_POLICY, r.model, order[r.estimator]))


def _macro_rows(per_user_long: DataFrame) -> list[MetricRow]:
    """Macro averages with intervals of (model, segment, user_id, k, metric, value) rows."""
    averages = macro_average(per_user_long, by=["model", "segment", "metric", "k"])
    return [metric_row(r) for r in averages.collect()]


def accuracy_per_user(
    ranked: DataFrame,
    population: Population,
    *,
    models: DataFrame,
    settings: EvaluationConfig,
    item_segments: DataFrame | None = None,
) -> DataFrame | None:
    """(model, segment, user_id, k, metric, value) for user segments and item segments,
    persisted; None when no accuracy metric is configured.

    One pass for all models and scopes: Rel(u) is scoped (all, items=head, items=tail, and
    the segments of ``item_segments``: (item_id, segment) of evaluation.item_segments); the
    ``all`` scope is then broken down by user segment. Under a peer's ``definitions``
    (metrics/compat.py) only its precision, recall, ndcg and map, by user segment.
    """
    truth, segments = population.truth, population.segments
    if settings.definitions != "receval":
        metrics = [m for m in COMPAT_METRICS if m in settings.metrics]
        if not metrics:
            return None
        scores = compatible_per_user(
            ranked, truth, ks=settings.k, definitions=settings.definitions, lists=models
        )
        return persist(
            to_long(
                scores.join(segments, on=USER),
                metrics=metrics,
                keys=["model", "segment", USER, "k"],
            )
        )
    metrics = [m for m in ACCURACY_METRICS if m in settings.metrics]
    if not metrics:
        return None
    labellings = []
    if "popularity" in settings.segments:
        popularity = item_popularity_segments(population.catalogue, head_share=settings.head_share)
        labellings.append((popularity, "items=tail"))
    if item_segments is not None and settings.item_segments is not None:
        labellings.append((item_segments, f"{settings.item_segments.label}={UNASSIGNED}"))
    scores = per_user_accuracy(
        ranked, scoped_truth(truth, *labellings), ks=settings.k, lists=models, truth_keys=["scope"]
    )
    by_user = scores.filter(F.col("scope") == "all").drop("scope").join(segments, on=USER)
    by_item = scores.filter(F.col("scope") != "all").withColumnRenamed("scope", "segment")
    return persist(
        to_long(by_user.unionByName(by_item), metrics=metrics, keys=["model", "segment", USER, "k"])
    )


def item_attributes(config: JobConfig) -> list[str]:
    """The item columns custom metrics read (data.items.columns.attributes)."""
    return config.data.items.columns.attributes if config.data.items is not None else []


def describe_custom_metrics(settings: EvaluationConfig) -> list[dict[str, Any]]:
    """What the run record says of each custom metric: its formula (the first line of its
    function's docstring), scope, bounds, direction and where it came from."""
    described = []
    for entry in settings.custom_metrics:
        custom = entry.resolved()
        metric, function = custom.metric, custom.function
        described.append(
            {
                "name": metric.name,
                "formula": metric.formula,
                "scope": metric.scope,
                "bounds": list(metric.bounds),
                "larger_is_better": metric.larger_is_better,
                "per_k": metric.has_k,
                "source": entry.path or f"{function.__module__}:{function.__qualname__}",
            }
        )
    return described


def custom_metrics_per_user(
    config: JobConfig,
    inputs: Inputs,
    ranked: DataFrame,
    population: Population,
    *,
    models: DataFrame,
) -> DataFrame | None:
    """(model, segment, user_id, k, metric, value) of the configured custom metrics by user
    segment, persisted; None without custom metrics (receval_spark.metrics.custom)."""
    settings = config.evaluation
    custom = [m.resolved() for m in settings.custom_metrics if m.scope == "user"]
    if not custom:
        return None
    given = [
        inputs.recommendations[m.name].select(
            F.lit(m.name).alias("model"), USER, ITEM, *m.columns.attributes
        )
        for m in config.models
        if isinstance(m, ExternalModel) and m.columns.attributes
    ]
    table = ranked_list_table(
        ranked,
        population.truth,
        ks=settings.k,
        items=inputs.items,
        attributes=item_attributes(config),
        pair_attributes=(
            functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), given)
            if given
            else None
        ),
    )
    scores = custom_per_user(
        table,
        users=population.users,
        models=models,
        metrics=custom,
        ks=settings.k,
    )
    assert scores is not None  # at least one custom metric
    return persist(scores.join(population.segments, on=USER))


def _beyond_inputs(
    spark: SparkSession,
    config: JobConfig,
    *,
    items: DataFrame | None,
    history: DataFrame,
    truth: DataFrame,
    seen: DataFrame | None,
    catalogue: DataFrame,
    ranked: DataFrame,
    interactions: DataFrame,
    summary: dict[str, Any],
) -> tuple[BeyondInputs, list[str]]:
    """Item metadata, embeddings and the serendipity baseline; warnings for skipped metrics."""
    settings = config.evaluation
    wanted = set(settings.metrics)
    warnings = []
    if items is not None and config.data.items is not None:
        mapped = config.data.items.columns.embedding is not None
        summary["items"] = describe_items(items, catalogue, embeddings=mapped)
        missing = summary["items"]["catalogue_items_without_categories"]
        if missing and config.data.items.columns.category is not None:
            warnings.append(
                f"{missing} of {summary['items']['catalogue_items']} catalogue items have no "
                "categories; ild_category and category_coverage leave them out"
            )
    categories = None
    if items is not None and config.data.items.columns.category is not None:
        categories = items.select(ITEM, "categories")
    else:
        warnings += [
            f"{name} skipped: data.items with a category column is not configured"
            for name in ("ild_category", "category_coverage")
            if name in wanted
        ]
    units = None
    needs_vectors = "ild_embedding" in wanted or settings.serendipity.unexpected == "content"
    source = _embedding_source(config)
    if needs_vectors and source == "items":
        units = persist(unit_vectors(items.select(ITEM, "embedding")))
    elif needs_vectors and source == "als":
        rows = summary["train"]["rows"] + summary.get("validation", {}).get("rows", 0)
        params = settings.embeddings.als_params(rows)
        summary["embedding_blocks"] = params.blocks
        vectors = als_item_embeddings(history, params=params)
        units = persist(unit_vectors(vectors))
    elif "ild_embedding" in wanted:
        warnings.append("ild_embedding skipped: evaluation.embeddings.source is none")
    summary["embeddings"] = source
    if settings.serendipity.unexpected == "content":  # expected at every k
        expected = content_expected(
            ranked.select(USER, ITEM),
            history,
            units,
            threshold=settings.serendipity.threshold,
        ).withColumn(RANK, F.lit(0))
    else:
        name = next((m.name for m in config.models if isinstance(m, PopularityModel)), None)
        if name is not None:  # the run's own popularity lists
            expected = ranked.filter(F.col("model") == name)
        else:  # only relevant recommended items can be serendipitous: rank just those
            hits = ranked.select(USER, ITEM).join(truth.select(USER, ITEM), on=[USER, ITEM])
            popularity = catalogue.select(ITEM, F.col("n_users").cast("double").alias(SCORE))
            expected = popularity_ranks(popularity, hits, seen=seen)
        expected = expected.select(USER, ITEM, RANK)
    inputs = BeyondInputs(
        catalogue=catalogue,
        totals=persist(catalogue_totals(history, catalogue)),
        truth=truth,
        expected=expected,
        categories=categories,
        units=units,
    )
    return inputs, warnings


def _embedding_source(config: JobConfig) -> str:
    source = config.evaluation.embeddings.source
    if source != "auto":
        return source
    items = config.data.items
    return "items" if items is not None and items.columns.embedding is not None else "als"
