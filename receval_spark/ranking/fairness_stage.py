"""Calibration, exposure of item groups and agreement with another model's lists: the
beyond-accuracy metrics that read more than one list at a time or the users' histories
(docs/evaluation.md#calibration, #exposure-by-item-group, #agreement-with-a-reference-model),
as per-user rows for the macro averages and exposure_gap's group rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, USER
from receval_spark.config import EvaluationConfig
from receval_spark.metadata_inputs import UNASSIGNED
from receval_spark.metrics.aggregate import to_long, union_all
from receval_spark.metrics.agreement import AGREEMENT_METRICS, UNEXPECTEDNESS, agreement
from receval_spark.metrics.calibration import (
    MISCALIBRATION,
    category_shares,
    miscalibration,
    user_profiles,
)
from receval_spark.metrics.fairness import (
    AWRF,
    EXPOSURE_GAP,
    TAIL,
    awrf,
    catalogue_targets,
    exposure_gap,
    group_attention,
    item_groups,
)
from receval_spark.ranking.population import Population
from receval_spark.results import MetricRow, metric_row

# computed here, not in receval_spark.metrics.per_user's one pass over each list
SEPARATE_METRICS = (MISCALIBRATION, AWRF, EXPOSURE_GAP, *AGREEMENT_METRICS)
KEYS = ["model", USER]


@dataclass(frozen=True)
class ListMetrics:
    """The per-user rows (model, user_id, k, metric, value; None: none computed), the group
    rows of exposure_gap and the warnings of the metrics skipped."""

    per_user: DataFrame | None
    rows: list[MetricRow]
    warnings: list[str]


def list_metrics(
    ranked: DataFrame,
    population: Population,
    settings: EvaluationConfig,
    *,
    catalogue: DataFrame,
    categories: DataFrame | None,
    item_segments: DataFrame | None,
    models: Sequence[str],
) -> ListMetrics:
    """The :data:`SEPARATE_METRICS` among ``settings.metrics`` of the lists ``ranked``
    (model, user_id, item_id, rank) of the configured ``models``: the catalogue item table
    ``catalogue`` gives the groups' targets, ``categories`` (item_id, categories) the
    calibration, ``item_segments`` (item_id, segment) the exposure groups (else head/tail)."""
    wanted = [m for m in SEPARATE_METRICS if m in settings.metrics]
    lists = ranked.select(*KEYS, ITEM, RANK).filter(F.col(RANK) <= max(settings.k))
    frames: list[DataFrame] = []
    rows: list[MetricRow] = []
    warnings: list[str] = []
    if MISCALIBRATION in wanted:
        if categories is None:
            warnings.append(
                "miscalibration skipped: data.items with a category column is not configured"
            )
        else:
            shares = category_shares(categories)
            profiles = user_profiles(population.history, shares)
            values = miscalibration(lists, profiles, shares, keys=KEYS, ks=settings.k)
            frames.append(to_long(values, metrics=[MISCALIBRATION], keys=[*KEYS, "k"]))
    if {AWRF, EXPOSURE_GAP} & set(wanted):
        per_user, rows = _exposure(lists, population, settings, catalogue, item_segments)
        frames += [per_user] if per_user is not None else []
    agreed, skipped = _agreement(lists, settings, models=models, wanted=wanted)
    frames += [agreed] if agreed is not None else []
    return ListMetrics(union_all(frames), rows, warnings + skipped)


def _exposure(
    lists: DataFrame,
    population: Population,
    settings: EvaluationConfig,
    catalogue: DataFrame,
    item_segments: DataFrame | None,
) -> tuple[DataFrame | None, list[MetricRow]]:
    """awrf's per-user rows and exposure_gap's rows by (model, user segment, k)."""
    if item_segments is not None and settings.item_segments is not None:
        default = f"{settings.item_segments.label}={UNASSIGNED}"
        groups = item_groups(segments=item_segments)
    else:
        default, groups = TAIL, item_groups(head=population.head_items())
    targets = catalogue_targets(catalogue, groups, default=default)
    attended = group_attention(lists, groups, keys=KEYS, ks=settings.k, default=default)
    if AWRF in settings.metrics and EXPOSURE_GAP in settings.metrics:  # each read by both
        targets, attended = persist(targets), persist(attended)
    per_user = None
    if AWRF in settings.metrics:
        values = awrf(attended, targets, keys=KEYS)
        per_user = to_long(values, metrics=[AWRF], keys=[*KEYS, "k"])
    rows = []
    if EXPOSURE_GAP in settings.metrics:
        segmented = persist(attended.join(population.segments, on=USER))  # read three times
        gaps = exposure_gap(segmented, targets, by=["model", "segment"])
        rows = [
            metric_row(r)
            for r in gaps.withColumn("metric", F.lit(EXPOSURE_GAP))
            .withColumnRenamed(EXPOSURE_GAP, "value")
            .collect()
        ]
    return per_user, rows


def _agreement(
    lists: DataFrame, settings: EvaluationConfig, *, models: Sequence[str], wanted: Sequence[str]
) -> tuple[DataFrame | None, list[str]]:
    """The agreement metrics' per-user rows, and the warnings of those without their model."""
    reference = settings.agreement_reference or settings.baseline
    warnings = []
    if reference not in models:
        reference = None
        warnings += [
            f"{m} skipped: evaluation.agreement_reference (default: the baseline) names no "
            "model of the run"
            for m in wanted
            if m in AGREEMENT_METRICS and m != UNEXPECTEDNESS
        ]
    baseline = settings.baseline if settings.baseline in models else None
    if baseline is None and UNEXPECTEDNESS in wanted:
        warnings.append("unexpectedness skipped: evaluation.baseline names no model of the run")
    values = agreement(
        lists,
        reference=reference,
        baseline=baseline,
        ks=settings.k,
        persistence=settings.rbo_persistence,
        metrics=wanted,
    )
    return values, warnings
