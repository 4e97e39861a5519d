"""A run's inputs, for either protocol: each table the config names read through
:mod:`receval_spark.io` (or the DataFrame given in its place), put on the canonical columns
(:mod:`receval_spark.inputs`), validated and persisted. The protocols receive these DataFrames
and read nothing themselves.

A Spark failure while reading or evaluating a table (a local session reads while persisting)
becomes an InputError naming its key (:func:`receval_spark.io.reading`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from receval_spark.cache import persist
from receval_spark.columns import ITEM, USER
from receval_spark.config import (
    CatalogueSource,
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
from receval_spark.errors import InputError
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
from receval_spark.io import read_table, reading, restrict
from receval_spark.metadata_inputs import canonical_catalogue, canonical_items, canonical_segments
from receval_spark.ranking.pipeline import Inputs
from receval_spark.sessions.pipeline import SessionInputs


def read_ranking_inputs(
    spark: SparkSession, config: JobConfig, given: Mapping[str, DataFrame] | None = None
) -> Inputs:
    """Read (or take from ``given``, keyed ``data.interactions`` — or ``data.train`` and
    ``data.test`` under the given split —, ``data.items``, ``data.catalogue``,
    ``data.impressions``, ``models.<name>``, ``evaluation.user_segments``,
    ``evaluation.item_segments``), map and validate every input of a ranking config."""
    given = given or {}

    def table(key: str, source: _FileSource) -> DataFrame:
        return source_table(spark, source, key=key, given=given)

    def segments(
        name: str, source: UserSegmentsSource | ItemSegmentsSource | None, ids: str
    ) -> DataFrame | None:
        if source is None:
            return None
        key = f"evaluation.{name}"
        id_type = interactions.schema[ids].dataType
        return load_segments(table(key, source), source, key=key, id_type=id_type)

    data = config.data
    logs = {
        key: load_interactions(table(key, source), source, key=key)
        for key, source in config.interaction_sources.items()
    }
    interactions = _one_log(logs)
    return Inputs(
        interactions=interactions,
        given_split=(logs.get("data.train"), logs["data.test"]) if "data.test" in logs else None,
        catalogue=load_catalogue(config, table, interactions=interactions),
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
        return source_table(spark, source, key=key, given=given)

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


def _one_log(logs: Mapping[str, DataFrame]) -> DataFrame:
    """The interaction log: data.interactions, or the union of the given split's train and
    test, whose user and item ids must have the same types."""
    if "data.interactions" in logs:
        return logs["data.interactions"]
    test = logs["data.test"]
    train = logs.get("data.train")
    if train is None:
        return test
    for column, role in ((USER, "user"), (ITEM, "item")):
        types = (train.schema[column].dataType, test.schema[column].dataType)
        if types[0] != types[1]:
            raise InputError(
                f"data.test.columns.{role}: the {role} ids have type "
                f"{types[1].simpleString()} in data.test but {types[0].simpleString()} in "
                "data.train; give both tables the same id types"
            )
    return train.unionByName(test)


def source_table(
    spark: SparkSession, source: _FileSource, *, key: str, given: Mapping[str, DataFrame]
) -> DataFrame:
    """The table of ``key``: the DataFrame given for it, else read as configured; the
    source's ``where`` restricts either."""
    if key not in given:
        return read_table(spark, source, key=key)
    return restrict(given[key], source, key=key)


def load_catalogue(
    config: JobConfig, table: Callable[[str, _FileSource], DataFrame], *, interactions: DataFrame
) -> DataFrame | None:
    """The configured catalogue as distinct (item_id), ids cast to the log's type, persisted;
    None when the catalogue is the train items (docs/evaluation.md#catalogue)."""
    data = config.data
    key = data.catalogue_key
    if key is None:
        return None
    source: CatalogueSource | ItemsSource | None = (
        data.catalogue if key == "data.catalogue" else data.items
    )
    assert source is not None
    with reading(key, source):
        return persist(
            canonical_catalogue(
                table(key, source),
                item=source.columns.item,
                item_type=interactions.schema[ITEM].dataType,
                source=key,
            )
        )


def load_interactions(
    raw: DataFrame, source: InteractionsSource, *, key: str = "data.interactions"
) -> DataFrame:
    """Map and validate an interaction table (one validation pass).

    The log is persisted hash-partitioned by user (AQE sizes the partitions), not in its
    file splits: a 128 MB split of a compressed file is a block of several hundred MB in
    memory, which a small executor heap cannot read back (benchmarks/README.md, driver
    memory)."""
    with reading(key, source):
        interactions = persist(
            canonical_interactions(
                raw, columns=source.columns, timestamp_unit=source.timestamp_unit, source=key
            ).repartition(USER)
        )
        validate_interactions(interactions, columns=source.columns, source=key)
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
