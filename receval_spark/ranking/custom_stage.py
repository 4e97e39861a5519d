"""Custom metrics in a ranking run (docs/extending.md): per-user ones beside the accuracy
metrics (docs/extending.md#per-user-metrics-scope-user), group ones beside the
beyond-accuracy statistics (docs/extending.md#group-metrics-scope-group), and what the run
record says of each."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, USER
from receval_spark.config import (
    CustomMetricConfig,
    EvaluationConfig,
    ExternalModel,
    ItemsSource,
    ModelConfig,
)
from receval_spark.metrics.custom import custom_per_user, group_values, ranked_list_table
from receval_spark.metrics.lists import top_k_lists
from receval_spark.ranking.population import Population
from receval_spark.results import MetricRow, metric_row


@dataclass(frozen=True)
class ItemTables:
    """What custom and beyond-accuracy metrics read about items: the item metadata
    (item_id, categories, embedding, attributes; None without data.items), its ``source``
    (data.items) and the external models' per-pair attributes (:func:`pair_attributes`)."""

    items: DataFrame | None
    source: ItemsSource | None
    pairs: DataFrame | None = None

    @property
    def attributes(self) -> list[str]:
        """The item columns custom metrics read (data.items.columns.attributes)."""
        return self.source.columns.attributes if self.source is not None else []


def describe_custom_metrics(
    custom_metrics: Sequence[CustomMetricConfig],
) -> list[dict[str, object]]:
    """What the run record says of each custom metric: its formula (the first line of its
    function's docstring), scope, bounds, direction and where it came from."""
    described: list[dict[str, object]] = []
    for entry in custom_metrics:
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


def pair_attributes(
    models: Sequence[ModelConfig], recommendations: Mapping[str, DataFrame]
) -> DataFrame | None:
    """(model, user_id, item_id, *attributes): the attribute columns the external models give
    per recommended pair (models.<name>.columns.attributes), missing ones null; None when no
    model gives any."""
    given = [
        recommendations[m.name].select(
            F.lit(m.name).alias("model"), USER, ITEM, *m.columns.attributes
        )
        for m in models
        if isinstance(m, ExternalModel) and m.columns.attributes
    ]
    if not given:
        return None
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), given)


def custom_metrics_per_user(
    ranked: DataFrame,
    population: Population,
    *,
    models: DataFrame,
    settings: EvaluationConfig,
    items: ItemTables,
) -> DataFrame | None:
    """(model, segment, user_id, k, metric, value) of the configured per-user custom metrics
    by user segment, persisted; None without them (receval_spark.metrics.custom). ``models``:
    one row per model, so that a model without lists gets rows too."""
    custom = [m.resolved() for m in settings.custom_metrics if m.scope == "user"]
    if not custom:
        return None
    table = ranked_list_table(
        ranked,
        population.truth,
        ks=settings.k,
        items=items.items,
        attributes=items.attributes,
        pair_attributes=items.pairs,
    )
    scores = custom_per_user(
        table, users=population.users, models=models, metrics=custom, ks=settings.k
    )
    assert scores is not None  # at least one custom metric
    return persist(scores.join(population.segments, on=USER))


def custom_group_rows(
    segmented: DataFrame,
    catalogue: DataFrame,
    *,
    settings: EvaluationConfig,
    items: ItemTables,
) -> list[MetricRow]:
    """The rows of the configured group custom metrics over every (model, segment, k) list
    group of ``segmented`` (the ranked lists joined with the user segments), with bootstrap
    intervals (docs/extending.md#group-metrics-scope-group); none without them."""
    custom = [m.resolved() for m in settings.custom_metrics if m.scope == "group"]
    if not custom:
        return []
    values = group_values(
        top_k_lists(segmented, ks=settings.k).drop(RANK),
        catalogue,
        metrics=custom,
        ks=settings.k,
        items=items.items,
        attributes=items.attributes,
        bootstrap_samples=settings.bootstrap_samples,
        seed=settings.seed,
    )
    assert values is not None  # at least one group metric
    return [metric_row(r) for r in values.collect()]
