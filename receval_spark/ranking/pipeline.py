"""The ranking protocol's evaluation as the documented steps (docs/evaluation.md): split ->
Rel(u) and the evaluated users -> models -> top-k -> accuracy -> beyond-accuracy ->
statistics -> checks.

DataFrames in, one :class:`~receval_spark.results.Outcome` out: nothing is read or written
here (the inputs come from :mod:`receval_spark.sources`). Only bounded results reach the
driver: counts, cut-offs and the metric aggregates. Each step returns its facts;
:func:`evaluate` assembles the run record's ``split`` from them once (:class:`RunFacts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame

from receval_spark.columns import USER
from receval_spark.config import (
    EvaluationConfig,
    JobConfig,
    OffPolicyConfig,
    RandomizationTest,
    RollingSplit,
)
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.compare import compare_run
from receval_spark.metrics.stability import NightLists, night_lists
from receval_spark.progress import StageClock
from receval_spark.quality import Fact, quality_warnings
from receval_spark.ranking.accuracy_stage import accuracy_per_user, macro_rows
from receval_spark.ranking.beyond_stage import BeyondAccuracy, beyond_accuracy
from receval_spark.ranking.checks import (
    list_coverage,
    run_checks,
    run_warnings,
)
from receval_spark.ranking.custom_stage import (
    ItemTables,
    custom_metrics_per_user,
    describe_custom_metrics,
    pair_attributes,
)
from receval_spark.ranking.debiased import DebiasFacts
from receval_spark.ranking.leakage import split_leakage
from receval_spark.ranking.lists import ModelLists, fit_scorers, model_lists
from receval_spark.ranking.models import Scorer
from receval_spark.ranking.offpolicy_stage import off_policy_of_models
from receval_spark.ranking.population import ActivityQuartiles, Population, evaluated_population
from receval_spark.ranking.protocols import labelled_protocols
from receval_spark.ranking.quality import log_facts
from receval_spark.ranking.rating_task import (
    RATING_TASK_WARNING,
    RatingCounts,
    predicted_ratings,
    rated_pairs,
    rating_comparisons,
    rating_rows,
    unpredicted_warnings,
)
from receval_spark.ranking.rolling import pooled_outcome
from receval_spark.ranking.split import (
    PartCounts,
    Split,
    describe_split,
    history_row_count,
    rolling_splits,
    split_interactions,
)
from receval_spark.ranking.tuning import choose_models
from receval_spark.results import Check, ComparisonRow, MetricRow, OffPolicyRow, Outcome

JOB_STAGES = ("read", "split", "tune", "top_k", "accuracy", "beyond", "statistics", "checks")


@dataclass(frozen=True)
class Inputs:
    """The ranking protocol's inputs on the canonical columns (receval_spark.columns),
    validated: the interaction log (under the given split the union of train and test, which
    ``given_split`` holds apart: train, None without one, and test), the catalogue's item ids
    when configured, item metadata and logged impressions when configured, and each external
    model's recommendations by model name."""

    interactions: DataFrame
    given_split: tuple[DataFrame | None, DataFrame] | None = None
    catalogue: DataFrame | None = None  # (item_id) of data.catalogue; None: the train items
    items: DataFrame | None = None
    impressions: DataFrame | None = None
    recommendations: dict[str, DataFrame] = dataclasses.field(default_factory=dict)
    user_segments: DataFrame | None = None  # (user_id, segment) of evaluation.user_segments
    item_segments: DataFrame | None = None  # (item_id, segment) of evaluation.item_segments


@dataclass(frozen=True)
class RunFacts:
    """What a ranking run records in ``runs.split`` (docs/datasets.md), as its steps found it:
    the split's parameters (method, resolved cut-offs) and part counts, whether seen items
    are filtered, the custom metrics' descriptions, the evaluated users' rule (the resolved
    ``evaluation.users``; ranking task only); then, where the run has them, the rating task's
    counts, the activity quartiles, the users each model's fallback served, the catalogue
    of the beyond-accuracy metrics (source and size, docs/evaluation.md#catalogue), the item
    metadata counts, the ALS blocks of the item embeddings, where the item vectors came from,
    each model's list coverage, the data-quality facts and what ``debiased_iqr`` down-sampled
    (None: not part of this run)."""

    params: Mapping[str, Any]
    parts: Mapping[str, PartCounts]
    filter_seen: bool
    custom_metrics: list[dict[str, object]]
    evaluated_users: str = "relevant"
    rating_prediction: RatingCounts | None = None
    activity: ActivityQuartiles | None = None
    fallback_users: Mapping[str, int] | None = None
    catalogue: Mapping[str, object] | None = None
    items: Mapping[str, int] | None = None
    embedding_blocks: int | None = None
    embeddings: str | None = None
    list_coverage: Mapping[str, float] | None = None
    data_quality: Sequence[Fact] | None = None
    debiased: DebiasFacts | None = None

    @classmethod
    def of_split(cls, split: Split, settings: EvaluationConfig) -> RunFacts:
        """The split step's facts: raises InputError when train or test is empty
        (:func:`~receval_spark.ranking.split.describe_split`)."""
        custom = describe_custom_metrics(settings.custom_metrics)
        return cls(
            split.params,
            describe_split(split),
            settings.filter_seen,
            custom,
            evaluated_users=settings.user_rule(),
        )

    def with_ranking(
        self,
        population: Population,
        lists: ModelLists,
        beyond: BeyondAccuracy,
        checked: Checked,
        accuracy: Accuracy,
    ) -> RunFacts:
        """These facts and those the ranking task's steps found."""
        return dataclasses.replace(
            self,
            debiased=accuracy.debiased,
            activity=population.activity,
            fallback_users=lists.fallback_users,
            catalogue=beyond.catalogue,
            items=beyond.items,
            embedding_blocks=beyond.embedding_blocks,
            embeddings=beyond.embeddings,
            list_coverage=checked.coverage,
            data_quality=checked.quality,
        )

    def record(self) -> dict[str, Any]:
        """The run record's ``split``: a JSON object, its keys in the order the steps ran."""
        record: dict[str, Any] = {
            **self.params,
            **{name: counts.record() for name, counts in self.parts.items()},
            "filter_seen": self.filter_seen,
        }
        if self.rating_prediction is None:  # the ranking task's users
            record["evaluated_users"] = self.evaluated_users
        if self.custom_metrics:
            record["custom_metrics"] = self.custom_metrics
        if self.rating_prediction is not None:
            record["rating_prediction"] = self.rating_prediction.record()
        if self.activity is not None:
            record["activity_quartiles"] = self.activity.thresholds
        if self.fallback_users is not None:
            record["fallback_users"] = dict(self.fallback_users)
        if self.catalogue is not None:
            record["catalogue"] = dict(self.catalogue)
        if self.items is not None:
            record["items"] = dict(self.items)
        if self.embedding_blocks is not None:
            record["embedding_blocks"] = self.embedding_blocks
        if self.embeddings is not None:
            record["embeddings"] = self.embeddings
        if self.list_coverage is not None:
            record["list_coverage"] = dict(self.list_coverage)
        if self.data_quality is not None:
            record["data_quality"] = [f.record() for f in self.data_quality]
        if self.debiased is not None:
            record["debiased_iqr"] = self.debiased.record()
        return record


def evaluate_ranking(
    config: JobConfig, inputs: Inputs, *, clock: StageClock | None = None
) -> Outcome:
    """Split, score every configured model, and aggregate accuracy and beyond-accuracy metrics
    (DataFrames in, the outcome out; nothing is written): the steps of docs/evaluation.md, one
    call each, every step given the config sections it reads. Its stages: ``JOB_STAGES``, and
    off_policy (before checks) with data.impressions (docs/usage.md)."""
    clock = clock or StageClock()  # running the read stage, when given
    clock.start("split")
    if isinstance(config.split, RollingSplit):
        windows = rolling_splits(config.split, inputs.interactions)
        outcomes = []
        for w, split in enumerate(windows, 1):
            if w > 1:
                clock.start("split")
            clock.note(window=f"{w} of {len(windows)}")
            outcomes.append(evaluate_split(config, inputs, split, clock=clock))
        return pooled_outcome(
            outcomes,
            baseline=config.evaluation.baseline,
            randomization=config.evaluation.randomization(),
        )
    split = split_interactions(config.split, inputs.interactions, inputs.given_split)
    return evaluate_split(config, inputs, split, clock=clock)


def evaluate_split(
    config: JobConfig, inputs: Inputs, split: Split, *, clock: StageClock
) -> Outcome:
    """Everything after the split step, for one split (a rolling backtest's window: one
    call each), the split stage running."""
    settings, ks = config.evaluation, config.evaluation.k
    head = RunFacts.of_split(split, settings)
    if config.task == "rating_prediction":
        return _rating_prediction(config, split, head, clock, inputs.recommendations)
    population = evaluated_population(
        split, config.relevance, settings, named=inputs.user_segments, listed=inputs.recommendations
    )
    clock.note(users=population.n_users)
    clock.start("tune")
    chosen, tuning = choose_models(config.models, split, config.relevance, settings)
    clock.start("top_k")
    # candidates for one place past the largest k: a tie across the k-th place can be seen
    scorers = fit_scorers(chosen, population, inputs.recommendations, k=max(ks) + 1)
    lists = model_lists(scorers, population, ks=ks, catalogue=inputs.catalogue)
    clock.start("accuracy")
    pairs = pair_attributes(config.models, inputs.recommendations)
    items = ItemTables(inputs.items, config.data.items, pairs)
    accuracy = _accuracy_metrics(lists, scorers, population, inputs, settings=settings, items=items)
    clock.start("beyond")
    beyond = _beyond(config, lists, population, inputs, items, head)
    rows = [*accuracy.rows, *beyond.rows]
    per_user = union_all([f for f in (accuracy.per_user, beyond.per_user) if f is not None])
    clock.start("statistics")
    comparisons = _comparisons(
        {"full": per_user, **accuracy.labelled}, settings.baseline, settings.randomization()
    )
    off_policy = _off_policy(
        config.off_policy_settings, inputs.impressions, scorers, lists, population, clock=clock
    )
    clock.start("checks")
    checked = _checks(config, split, rows, population, lists, accuracy, inputs.interactions)
    clock.stop()
    return Outcome(
        metrics=rows,
        comparisons=comparisons,
        per_user=per_user,
        long_tail=beyond.long_tail,
        split=head.with_ranking(population, lists, beyond, checked, accuracy).record(),
        n_users_evaluated=population.n_users,
        checks=checked.checks,
        warnings=checked.warnings + beyond.warnings,
        off_policy=off_policy,
        stage_seconds=clock.seconds,
        tuning=tuning,
        lists=_night(lists, population, split) if config.output.lists else None,
    )


def _night(lists: ModelLists, population: Population, split: Split) -> NightLists:
    """Tonight's lists for the ``lists`` dataset and tomorrow's stability step."""
    cutoff = split.params.get("cutoff")
    return night_lists(lists.ranked, population.segments, population.history, cutoff)


def _beyond(
    config: JobConfig,
    lists: ModelLists,
    population: Population,
    inputs: Inputs,
    items: ItemTables,
    head: RunFacts,
) -> BeyondAccuracy:
    """The beyond-accuracy step over the lists, with the run's catalogue (data.catalogue or
    data.items marked as it, else the train items; docs/evaluation.md#catalogue)."""
    return beyond_accuracy(
        lists.ranked,
        population,
        config.evaluation,
        items,
        models=config.models,
        history_rows=history_row_count(head.parts),
        catalogue=inputs.catalogue,
        catalogue_source=config.data.catalogue_key,
        item_segments=inputs.item_segments,
    )


@dataclass(frozen=True)
class Accuracy:
    """The accuracy step's macro rows (the full protocol's built-in and custom metrics, then
    each labelled protocol's) and per-user tables: the full protocol's (None without accuracy
    metrics) and each labelled protocol's, by label; the facts of ``debiased_iqr``'s
    down-sampling (None without it)."""

    rows: list[MetricRow]
    per_user: DataFrame | None
    labelled: dict[str, DataFrame | None]
    debiased: DebiasFacts | None = None


def _accuracy_metrics(
    lists: ModelLists,
    scorers: Mapping[str, Scorer],
    population: Population,
    inputs: Inputs,
    *,
    settings: EvaluationConfig,
    items: ItemTables,
) -> Accuracy:
    """Per-user accuracy of every model's lists by user and item segment, the per-user custom
    metrics, their macro averages, then each labelled protocol
    (docs/evaluation.md#labelled-protocols)."""
    ranked, models = lists.ranked, lists.models
    full = accuracy_per_user(
        ranked, population, models=models, settings=settings, item_segments=inputs.item_segments
    )
    custom = custom_metrics_per_user(
        ranked, population, models=models, settings=settings, items=items
    )
    per_user = union_all([f for f in (full, custom) if f is not None])
    rows = macro_rows(per_user) if per_user is not None else []
    labelled = labelled_protocols(
        lists,
        scorers,
        population,
        interactions=inputs.interactions,
        settings=settings,
        item_segments=inputs.item_segments,
    )
    return Accuracy(rows + labelled.rows, per_user, labelled.per_user, labelled.debiased)


def _comparisons(
    per_user: Mapping[str, DataFrame | None],
    baseline: str | None,
    randomization: RandomizationTest | None,
) -> list[ComparisonRow]:
    """Every model's paired comparisons with the ``baseline`` model under each protocol
    (docs/statistics.md#intervals-segments-and-paired-comparisons-design-7), with the
    randomization test's p-values when ``randomization`` is given; none without a baseline."""
    if baseline is None:
        return []
    return compare_run(dict(per_user), baseline=baseline, randomization=randomization)


def _off_policy(
    settings: OffPolicyConfig | None,
    impressions: DataFrame | None,
    scorers: Mapping[str, Scorer],
    lists: ModelLists,
    population: Population,
    *,
    clock: StageClock,
) -> list[OffPolicyRow]:
    """The off_policy stage, with data.impressions only (docs/evaluation.md#off-policy-evaluation):
    the estimates of every model's top-k lists (k: the largest cut-off) for the impressions'
    users."""
    if impressions is None or settings is None:
        return []
    clock.start("off_policy")
    return off_policy_of_models(
        impressions,
        scorers,
        seen=population.seen,
        k=lists.k,
        models=lists.models,
        clip=settings.clip,
    )


@dataclass(frozen=True)
class Checked:
    """The checks step's sanity checks and warnings, and for the run record each model's list
    coverage (its share of the evaluated users with a list) and the data-quality facts."""

    checks: list[Check]
    warnings: list[str]
    coverage: dict[str, float]
    quality: list[Fact]


def _checks(
    config: JobConfig,
    split: Split,
    rows: list[MetricRow],
    population: Population,
    lists: ModelLists,
    accuracy: Accuracy,
    interactions: DataFrame,
) -> Checked:
    """The run's sanity checks and warnings (receval_spark.ranking.checks; docs/statistics.md#
    sanity-checks-in-runschecks), list coverage from the lists' ``no_list`` facts, and the
    data-quality facts of the log, Rel(u) and the lists with their warnings
    (docs/evaluation.md#data-quality-facts)."""
    settings, n_users = config.evaluation, population.n_users
    coverage = list_coverage(lists.facts)
    leakage = split_leakage(config.split, split, timestamps=config.has_timestamps)
    checks = leakage.checks + run_checks(
        config,
        split,
        rows,
        facts=population.facts,
        filter_seen=population.seen is not None,
        accuracy=accuracy.per_user,
        evaluated=population.segments,
        coverage=coverage,
        n_users=n_users,
    )
    warnings = leakage.warnings + run_warnings(config, n_users, rows, coverage=coverage)
    quality = [*log_facts(interactions, config.relevance), *population.facts, *lists.facts]
    warnings += quality_warnings(
        quality,
        settings.data_quality.model_dump(),
        checking=[m.name for m in config.models if m.kind != "oracle"],
        filter_seen=settings.filter_seen,
    )
    return Checked(checks, warnings, coverage, quality)


def _rating_prediction(
    config: JobConfig,
    split: Split,
    head: RunFacts,
    clock: StageClock,
    recommendations: Mapping[str, DataFrame],
) -> Outcome:
    """The ``rating_prediction`` task (docs/evaluation.md#rating-prediction-task-rating_prediction):
    MAE, MSE and RMSE of every model's predicted ratings (external ones: their given
    predictions), the paired comparisons of MAE and MSE with the baseline; no ranking metric."""
    pairs = rated_pairs(split, without_train=head.parts["train"].rows == 0)
    clock.note(scored_ratings=pairs.counts.scored_ratings)
    clock.start("tune")
    models, _ = choose_models(config.models, split, config.relevance, config.evaluation)
    clock.start("top_k")
    predictions = predicted_ratings(models, pairs, recommendations)
    clock.start("accuracy")
    rated = rating_rows(predictions, pairs.known)
    clock.start("statistics")
    names = [m.name for m in models]
    baseline = config.evaluation.baseline if config.evaluation.baseline in names else None
    comparisons = rating_comparisons(
        predictions,
        pairs.known,
        baseline=baseline,
        randomization=config.evaluation.randomization(),
    )
    n_users = pairs.known.select(USER).distinct().count()
    leakage = split_leakage(config.split, split, timestamps=config.has_timestamps)
    warnings = [
        RATING_TASK_WARNING,
        *leakage.warnings,
        *unpredicted_warnings(rated),
        *run_warnings(config, n_users, rated.metrics),
    ]
    counts = pairs.counts.with_unpredicted(rated, models)
    clock.stop()
    return Outcome(
        metrics=rated.metrics,
        comparisons=comparisons,
        per_user=None,
        long_tail=None,
        split=dataclasses.replace(head, rating_prediction=counts).record(),
        n_users_evaluated=n_users,
        checks=leakage.checks,
        warnings=warnings,
        stage_seconds=clock.seconds,
    )
