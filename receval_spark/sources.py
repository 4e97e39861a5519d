"""A run's inputs, for either protocol: each table the config names read through
:mod:`receval_spark.io` (or the DataFrame given in its place), put on the canonical columns
(:mod:`receval_spark.inputs`), validated and persisted. The protocols receive these DataFrames
and read nothing themselves.

A Spark failure while reading or evaluating a table (a local session reads while persisting)
becomes an InputError naming its key (:func:`receval_spark.io.reading`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from receval_spark.cache import persist
from receval_spark.columns import ITEM, USER
from receval_spark.config import (
    ClicksSource,
    ExternalModel,
    ExternalSessionModel,
    ImpressionsSource,
    InteractionsSource,
    ItemSegmentsSource,
    ItemsSource,
    JobConfig,
    SessionJobConfig,
    UserSegmentsSource,
    _FileSource,
)
from receval_spark.inputs import (
    canonical_clicks,
    canonical_impressions,
    canonical_interactions,
    canonical_recommendations,
    validate_clicks,
    validate_impressions,
    validate_interactions,
    validate_recommendations,
)
from receval_spark.io import read_table, reading
from receval_spark.metadata_inputs import canonical_items, canonical_segments
from receval_spark.ranking.pipeline import Inputs
from receval_spark.sessions.pipeline import SessionInputs


def read_ranking_inputs(
    spark: SparkSession, config: JobConfig, given: Mapping[str, DataFrame] | None = None
) -> Inputs:
    """Read (or take from ``given``, keyed ``data.interactions``, ``data.items``,
    ``data.impressions``, ``models.<name>``, ``evaluation.user_segments``,
    ``evaluation.item_segments``), map and validate every input of a ranking config."""
    given = given or {}

    def table(key: str, source: _FileSource) -> DataFrame:
        return given[key] if key in given else read_table(spark, source, key=key)

    def segments(
        name: str, source: UserSegmentsSource | ItemSegmentsSource | None, ids: str
    ) -> DataFrame | None:
        if source is None:
            return None
        key = f"evaluation.{name}"
        id_type = interactions.schema[ids].dataType
        return load_segments(table(key, source), source, key=key, id_type=id_type)

    data = config.data
    interactions = load_interactions(
        table("data.interactions", data.interactions), data.interactions
    )
    return Inputs(
        interactions=interactions,
        items=(
            load_items(table("data.items", data.items), data.items, interactions=interactions)
            if data.items is not None
            else None
        ),
        impressions=(
            load_impressions(
                table("data.impressions", data.impressions),
                data.impressions,
                interactions=interactions,
            )
            if data.impressions is not None
            else None
        ),
        recommendations={
            m.name: load_external(table(f"models.{m.name}", m), m, interactions=interactions)
            for m in config.models
            if isinstance(m, ExternalModel)
        },
        user_segments=segments("user_segments", config.evaluation.user_segments, USER),
        item_segments=segments("item_segments", config.evaluation.item_segments, ITEM),
    )


def read_session_inputs(
    spark: SparkSession, config: SessionJobConfig, given: Mapping[str, DataFrame] | None = None
) -> SessionInputs:
    """Read (or take from ``given``, keyed ``data.clicks``, ``data.train``, ``data.test``,
    ``models.<name>``), map and validate every input of a session config (an external model's
    predictions are mapped by the protocol, against the test sessions' id types)."""
    given = given or {}

    def table(key: str, source: _FileSource) -> DataFrame:
        return given[key] if key in given else read_table(spark, source, key=key)

    clicks = {
        name: load_clicks(table(f"data.{name}", source), source, key=f"data.{name}")
        for name in ("clicks", "train", "test")
        if (source := getattr(config.data, name)) is not None
    }
    return SessionInputs(
        **clicks,
        predictions={
            m.name: table(f"models.{m.name}", m)
            for m in config.models
            if isinstance(m, ExternalSessionModel)
        },
    )


def load_interactions(raw: DataFrame, source: InteractionsSource) -> DataFrame:
    """Map and validate the interaction log (one validation pass).

    The log is persisted hash-partitioned by user (AQE sizes the partitions), not in its
    file splits: a 128 MB split of a compressed file is a block of several hundred MB in
    memory, which a small executor heap cannot read back (benchmarks/README.md, driver
    memory)."""
    with reading("data.interactions", source):
        interactions = persist(
            canonical_interactions(
                raw,
                columns=source.columns,
                timestamp_unit=source.timestamp_unit,
                source="data.interactions",
            ).repartition(USER)
        )
        validate_interactions(interactions, columns=source.columns, source="data.interactions")
    return interactions


def load_items(raw: DataFrame, source: ItemsSource, *, interactions: DataFrame) -> DataFrame:
    """Item metadata as (item_id, categories, embedding), ids cast to the log's type,
    persisted."""
    with reading("data.items", source):
        return persist(
            canonical_items(
                raw,
                columns=source.columns,
                separator=source.category_separator,
                item_type=interactions.schema[ITEM].dataType,
                source="data.items",
            )
        )


def load_impressions(
    raw: DataFrame, source: ImpressionsSource, *, interactions: DataFrame
) -> DataFrame:
    """Map and validate the logged impressions as (user_id, item_id, position, reward,
    propensity), ids cast to the interaction log's id types (one validation pass)."""
    with reading("data.impressions", source):
        impressions = persist(
            canonical_impressions(
                raw,
                columns=source.columns,
                user_type=interactions.schema[USER].dataType,
                item_type=interactions.schema[ITEM].dataType,
                source="data.impressions",
            )
        )
        validate_impressions(impressions, source="data.impressions")
    return impressions


def load_external(raw: DataFrame, model: ExternalModel, *, interactions: DataFrame) -> DataFrame:
    """Map and validate an external model's recommendations as (user_id, item_id, score)."""
    key = f"models.{model.name}"
    recs = canonical_recommendations(
        raw,
        columns=model.columns,
        user_type=interactions.schema[USER].dataType,
        item_type=interactions.schema[ITEM].dataType,
        source=key,
    )
    with reading(key, model):
        return validate_recommendations(recs, columns=model.columns, source=key)


def load_segments(
    raw: DataFrame,
    source: UserSegmentsSource | ItemSegmentsSource,
    *,
    key: str,
    id_type: T.DataType,
) -> DataFrame:
    """Map and validate a user- or item-segment table as (user_id or item_id, segment
    ``<name>=<value>``), persisted."""
    with reading(key, source):
        return persist(
            canonical_segments(
                raw, columns=source.columns, label=source.label, id_type=id_type, source=key
            )
        )


def load_clicks(raw: DataFrame, source: ClicksSource, *, key: str) -> DataFrame:
    """Map and validate a click table (one validation pass)."""
    with reading(key, source):
        clicks = persist(
            canonical_clicks(
                raw, columns=source.columns, timestamp_unit=source.timestamp_unit, source=key
            )
        )
        validate_clicks(clicks, columns=source.columns, source=key)
    return clicks
