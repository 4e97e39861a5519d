"""The labelled protocols besides ``full`` (docs/evaluation.md#labelled-protocols): the
popularity-debiased test set ``debiased_iqr`` and each ``sampled_<N>`` with its corrected rows
``sampled_<N>_corrected``. Accuracy metrics only; their rows carry the protocol's label, are
compared with the baseline within it, and never mix with ``full`` rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame

from receval_spark.config import DEBIASED_PROTOCOL, EvaluationConfig
from receval_spark.ranking.accuracy_stage import ProtocolAccuracy
from receval_spark.ranking.debiased import DebiasFacts, debiased_protocol
from receval_spark.ranking.lists import ModelLists
from receval_spark.ranking.models import Scorer
from receval_spark.ranking.population import Population
from receval_spark.ranking.sampled import sampled_protocol
from receval_spark.results import MetricRow


@dataclass(frozen=True)
class LabelledProtocols:
    """The labelled protocols' macro rows, their per-user tables by protocol label (None: no
    model or metric under it), and the down-sampling's facts (None without ``debiased_iqr``)."""

    rows: list[MetricRow]
    per_user: dict[str, DataFrame | None]
    debiased: DebiasFacts | None


def labelled_protocols(
    lists: ModelLists,
    scorers: Mapping[str, Scorer],
    population: Population,
    *,
    interactions: DataFrame,
    settings: EvaluationConfig,
    item_segments: DataFrame | None = None,
) -> LabelledProtocols:
    """Accuracy under every protocol of ``settings.protocol`` after ``full``: ``debiased_iqr``
    from every model's full-catalogue ``lists`` (by user and item segment, as under ``full``),
    ``sampled_<N>`` (and its corrected rows) from the models in ``scorers`` that score any
    item."""
    results: dict[str, ProtocolAccuracy] = {}
    debiased = None
    for protocol in settings.protocol[1:]:  # after full
        if protocol == DEBIASED_PROTOCOL:
            results[protocol], debiased = debiased_protocol(
                lists.ranked,
                population,
                models=lists.models,
                settings=settings,
                item_segments=item_segments,
            )
        else:
            results.update(
                sampled_protocol(
                    protocol,
                    scorers=scorers,
                    interactions=interactions,
                    population=population,
                    settings=settings,
                )
            )
    rows = [row for accuracy in results.values() for row in accuracy.rows]
    per_user = {label: accuracy.per_user for label, accuracy in results.items()}
    return LabelledProtocols(rows, per_user, debiased)
