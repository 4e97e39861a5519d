"""The accuracy step of a ranking run (docs/evaluation.md, "Accuracy metrics"): every model's
per-user accuracy at every k by user and item segment, and the macro averages with intervals
(docs/statistics.md#intervals-segments-and-paired-comparisons-design-7)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, USER
from receval_spark.config import EvaluationConfig
from receval_spark.metadata_inputs import UNASSIGNED
from receval_spark.metrics.accuracy import (
    ACCURACY_METRICS,
    empty_truth_scores,
    per_user_accuracy,
)
from receval_spark.metrics.aggregate import macro_average, to_long
from receval_spark.metrics.auc import AUC, auc_per_user
from receval_spark.metrics.compat import COMPAT_METRICS, compatible_per_user
from receval_spark.ranking.population import Population
from receval_spark.ranking.relevance import scoped_truth
from receval_spark.results import MetricRow, metric_row


def macro_rows(per_user_long: DataFrame, *, protocol: str = "full") -> list[MetricRow]:
    """Macro averages of (model, segment, user_id, k, metric, value) rows, labelled with
    ``protocol``, with intervals inside the metrics' bounds under it."""
    averages = macro_average(per_user_long, by=["model", "segment", "metric", "k"])
    return [metric_row(r, protocol=protocol) for r in averages.collect()]


@dataclass(frozen=True)
class ProtocolAccuracy:
    """One protocol's accuracy: its macro rows (labelled with it) and the per-user table its
    comparisons pair users on (None: no model or no accuracy metric under it)."""

    rows: list[MetricRow]
    per_user: DataFrame | None


def accuracy_per_user(
    ranked: DataFrame,
    population: Population,
    *,
    models: DataFrame,
    settings: EvaluationConfig,
    item_segments: DataFrame | None = None,
    auc: bool = True,
) -> DataFrame | None:
    """(model, segment, user_id, k, metric, value) for user segments and item segments,
    persisted; None when no accuracy metric is configured. ``auc``: whether the AUC per user
    is computed (over the catalogue: by user segment only, not under the sampled protocols).

    One pass for all models and scopes: Rel(u) is scoped (all, items=head, items=tail, and
    the segments of ``item_segments``: (item_id, segment) of evaluation.item_segments); the
    ``all`` scope is then broken down by user segment. Under a peer's ``definitions``
    (docs/evaluation.md#compatibility-profiles-evaluationdefinitions) only its precision,
    recall, ndcg and map, by user segment. Evaluated users with an empty Rel(u) (``users:
    listed_or_relevant``) score 0 on every metric, in the user segments only: an item
    segment restricts Rel(u), so they have none there.
    """
    truth, segments = population.truth, population.segments
    everyone = population.users if population.empty_truth else None
    keys = ["model", "segment", USER, "k"]
    if settings.definitions != "receval":
        compatible = [m for m in COMPAT_METRICS if m in settings.metrics]
        if not compatible:
            return None
        scores = compatible_per_user(
            ranked,
            truth,
            ks=settings.k,
            definitions=settings.definitions,
            lists=models,
            users=everyone,
        )
        return persist(to_long(scores.join(segments, on=USER), metrics=compatible, keys=keys))
    metrics = [m for m in ACCURACY_METRICS if m in settings.metrics and m != AUC]
    if not metrics and not (auc and AUC in settings.metrics):
        return None
    long = _scoped_rows(
        ranked, population, metrics, models=models, settings=settings, item_segments=item_segments
    )
    if auc and AUC in settings.metrics:  # the user segments only: N_u is catalogue-wide
        values = auc_per_user(
            ranked,
            truth,
            catalogue=population.catalogue.select(ITEM),
            seen=population.seen,
            ks=settings.k,
            lists=models,
        ).join(segments, on=USER)
        pairs = to_long(values, metrics=[AUC], keys=keys).filter(F.col("value").isNotNull())
        long = pairs if long is None else long.unionByName(pairs)
    assert long is not None  # some accuracy metric is wanted
    return persist(long)


def _scoped_rows(
    ranked: DataFrame,
    population: Population,
    metrics: list[str],
    *,
    models: DataFrame,
    settings: EvaluationConfig,
    item_segments: DataFrame | None,
) -> DataFrame | None:
    """(model, segment, user_id, k, metric, value) of the ``metrics`` (no AUC) by user
    segment and, with Rel(u) scoped to them, by item segment; None without ``metrics``."""
    if not metrics:
        return None
    truth, segments = population.truth, population.segments
    everyone = population.users if population.empty_truth else None
    labellings = []
    if "popularity" in settings.segments:
        labellings.append((population.popularity_segments(), "items=tail"))
    if item_segments is not None and settings.item_segments is not None:
        labellings.append((item_segments, f"{settings.item_segments.label}={UNASSIGNED}"))
    scores = per_user_accuracy(
        ranked,
        scoped_truth(truth, *labellings),
        ks=settings.k,
        lists=models,
        truth_keys=["scope"],
        f_beta=settings.f_beta,
        rbp_persistence=settings.rbp_persistence,
    )
    if labellings:  # read twice: for the user segments' rows and the item segments'
        scores = persist(scores)
    by_user = scores.filter(F.col("scope") == "all").drop("scope")
    if everyone is not None:
        by_user = by_user.unionByName(
            empty_truth_scores(everyone, truth, ks=settings.k, lists=models)
        )
    by_user = by_user.join(segments, on=USER)
    if labellings:
        by_item = scores.filter(F.col("scope") != "all").withColumnRenamed("scope", "segment")
        by_user = by_user.unionByName(by_item)
    return to_long(by_user, metrics=metrics, keys=["model", "segment", USER, "k"])
