"""The beyond-accuracy step of a ranking run (docs/evaluation.md, "Beyond-accuracy metrics"):
per-user metrics macro-averaged, group statistics with bootstrap intervals, the long-tail table,
and what they read besides the lists: the catalogue (docs/evaluation.md#catalogue), item
metadata, item vectors and the serendipity baseline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.config import (
    EmbeddingsConfig,
    EvaluationConfig,
    ItemsSource,
    ModelConfig,
    PopularityModel,
)
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.diversity import unit_vectors
from receval_spark.metrics.exposure import long_tail, ranking_exposure
from receval_spark.metrics.group import group_beyond
from receval_spark.metrics.lists import (
    BeyondInputs,
    catalogue_members,
    catalogue_totals,
    with_catalogue,
)
from receval_spark.metrics.novelty import content_expected
from receval_spark.metrics.per_user import ACLT, APLT, per_user_beyond
from receval_spark.ranking.accuracy_stage import macro_rows
from receval_spark.ranking.custom_stage import ItemTables, custom_group_rows
from receval_spark.ranking.fairness_stage import list_metrics
from receval_spark.ranking.models.als import memoized_item_embeddings
from receval_spark.ranking.models.popularity import popularity_ranks
from receval_spark.ranking.population import Population
from receval_spark.results import MetricRow, metric_row


@dataclass(frozen=True)
class ItemVectors:
    """The item unit vectors of ild_embedding and content serendipity (None: not needed or
    not available), where they come from (``items``, ``als`` or ``none``: the run record's
    ``embeddings``) and the ALS blocks of fitted ones (else None)."""

    units: DataFrame | None
    source: str
    blocks: int | None


TRAIN_ITEMS = "train items"  # the run record's catalogue source when none is configured


@dataclass(frozen=True)
class Catalogue:
    """The catalogue I of the beyond-accuracy metrics (docs/evaluation.md#catalogue): the
    item table (item_id, n_users, n_interactions, in_catalogue: every item of I and every
    train item, persisted), its totals (``catalogue_totals``, persisted), whether it was
    configured, the run record's ``catalogue`` (:func:`describe_catalogue`) and its
    warnings."""

    items: DataFrame
    totals: DataFrame
    configured: bool
    record: dict[str, object]
    warnings: list[str]


@dataclass(frozen=True)
class BeyondAccuracy:
    """The beyond-accuracy step's macro and group rows, per-user rows, long-tail table and
    warnings (metrics it had to skip, the catalogue's); for the run record, the item metadata
    counts (:func:`describe_items`, None without data.items), the source of the item vectors,
    the ALS blocks of fitted ones and the catalogue (:func:`describe_catalogue`)."""

    rows: list[MetricRow]
    per_user: DataFrame | None
    long_tail: DataFrame
    warnings: list[str]
    items: dict[str, int] | None
    embeddings: str
    embedding_blocks: int | None
    catalogue: dict[str, object]


def beyond_accuracy(
    ranked: DataFrame,
    population: Population,
    settings: EvaluationConfig,
    items: ItemTables,
    *,
    models: Sequence[ModelConfig],
    history_rows: int,
    catalogue: DataFrame | None = None,
    catalogue_source: str | None = None,
    item_segments: DataFrame | None = None,
) -> BeyondAccuracy:
    """Beyond-accuracy metrics of the top-k lists at every k: per-user ones macro-averaged,
    group ones with bootstrap intervals, the custom group metrics, and the long-tail table.
    The serendipity baseline is the lists of the popularity model among ``models`` (the
    configured ones), else the popularity ranks of the relevant recommended items;
    ``history_rows``: train (+ validation) rows, which size the ALS item embeddings;
    ``catalogue``: (item_id) of ``catalogue_source`` (data.catalogue or data.items), or None;
    ``item_segments``: (item_id, segment) of evaluation.item_segments, the exposure groups."""
    settings, untrained = _without_train(settings, history_rows)
    universe = catalogue_of(population, catalogue, source=catalogue_source)
    described = _described(items, universe.items)
    categories, warnings = category_table(items, described, wanted=settings.metrics)
    warnings = untrained + warnings
    vectors = item_vectors(
        settings.embeddings,
        needed=needs_vectors(settings),
        items=items,
        history=population.history,
        history_rows=history_rows,
    )
    if vectors.units is None and "ild_embedding" in settings.metrics:
        why = "there are no train rows to fit" if vectors.source == "als" else "is none"
        warnings.append(f"ild_embedding skipped: evaluation.embeddings.source {why}")
    popularity = next((m.name for m in models if isinstance(m, PopularityModel)), None)
    expected = serendipity_expected(
        ranked, population, settings=settings, units=vectors.units, model=popularity
    )
    inputs = BeyondInputs(
        catalogue=universe.items,
        totals=universe.totals,
        truth=population.truth,
        expected=expected,
        categories=categories,
        units=vectors.units,
        head=head_items(population, settings),
    )
    # the lists with their users' segments: read by the exposure, the group metrics and the
    # custom group metrics (joined once, not once per reader)
    segmented = persist(ranked.join(population.segments, on=USER))
    more = list_metrics(
        ranked,
        population,
        settings,
        catalogue=universe.items,
        categories=categories,
        item_segments=item_segments,
        models=[m.name for m in models],
    )
    rows, per_user, exposure = _beyond_rows(
        ranked, segmented, population, inputs, settings, more.per_user
    )
    rows += more.rows
    warnings += more.warnings
    members = catalogue_members(universe.items)  # the group custom metrics' catalogue: I
    rows += custom_group_rows(segmented, members, settings=settings, items=items)
    everyone = exposure.filter(F.col("segment") == "all").drop("segment")
    return BeyondAccuracy(
        rows=rows,
        per_user=per_user,
        long_tail=long_tail(everyone, universe.items, by=["model", "k"]),
        warnings=universe.warnings + warnings,
        items=described,
        embeddings=vectors.source,
        embedding_blocks=vectors.blocks,
        catalogue=universe.record,
    )


def head_items(population: Population, settings: EvaluationConfig) -> DataFrame | None:
    """(item_id) of the head items (items=head over the train items, evaluation.head_share)
    when aplt or aclt is computed; None otherwise."""
    if not {APLT, ACLT} & set(settings.metrics):
        return None
    return population.head_items()


# defined by train popularity (awrf and exposure_gap: by the head items and the train catalogue)
TRAIN_POPULARITY = ("novelty", "popularity_bias", "aplt", "aclt", "awrf", "exposure_gap")


def _without_train(
    settings: EvaluationConfig, history_rows: int
) -> tuple[EvaluationConfig, list[str]]:
    """The settings without the metrics defined by train popularity when there are no train
    rows (a given test set alone), with a warning for each one skipped."""
    dropped = [m for m in settings.metrics if m in TRAIN_POPULARITY] if not history_rows else []
    if not dropped:
        return settings, []
    kept = [m for m in settings.metrics if m not in dropped]
    warnings = [
        f"{m} skipped: there are no train rows, whose popularity defines it" for m in dropped
    ]
    return settings.model_copy(update={"metrics": kept}), warnings


def _described(items: ItemTables, table: DataFrame) -> dict[str, int] | None:
    """:func:`describe_items` of data.items over the catalogue I of the item table ``table``
    (None without data.items)."""
    if items.items is None or items.source is None:
        return None
    mapped = items.source.columns.embedding is not None
    return describe_items(items.items, catalogue_members(table), embeddings=mapped)


def catalogue_of(
    population: Population, catalogue: DataFrame | None, *, source: str | None
) -> Catalogue:
    """The catalogue I (docs/evaluation.md#catalogue): the configured item ids ``catalogue``
    (read from ``source``) with the train counts of ``population.catalogue`` (every train
    item too, outside I), or without one the train items themselves."""
    table = population.catalogue
    if catalogue is not None:
        table = persist(with_catalogue(population.catalogue, catalogue))
    totals = persist(catalogue_totals(population.history, table))
    record, warnings = describe_catalogue(table, source=source)
    return Catalogue(table, totals, catalogue is not None, record, warnings)


def describe_catalogue(
    items: DataFrame, *, source: str | None
) -> tuple[dict[str, object], list[str]]:
    """The run record's ``catalogue``: its ``source`` (``train items``, ``data.catalogue`` or
    ``data.items``) and ``items`` = |I|, for a configured catalogue also its items without a
    train interaction and the train items outside it; a warning when a configured catalogue
    is empty or shares no item with train (ids that do not match the log's). One aggregation
    over the item table ``items``."""
    member = F.col("in_catalogue")
    row = items.agg(
        F.count(F.when(member, True)).alias("items"),
        F.count(F.when(member & (F.col("n_interactions") == 0), True)).alias("never"),
        F.count(F.when(~member, True)).alias("outside"),
    ).first()
    assert row is not None  # a global aggregate has one row
    if source is None:
        return {"source": TRAIN_ITEMS, "items": row["items"]}, []
    record: dict[str, object] = {
        "source": source,
        "items": row["items"],
        "items_without_train_interactions": row["never"],
        "train_items_outside": row["outside"],
    }
    warnings = []
    if row["items"] == 0:
        warnings.append(
            f"{source}: the catalogue is empty; coverage, Gini, entropy and popularity_bias "
            "have no value"
        )
    elif row["items"] == row["never"]:
        warnings.append(
            f"{source}: none of its {row['items']} catalogue items has a train interaction "
            "(are its item ids the log's?); popularity_bias has no value"
        )
    return record, warnings


def _beyond_rows(
    ranked: DataFrame,
    segmented: DataFrame,
    population: Population,
    inputs: BeyondInputs,
    settings: EvaluationConfig,
    more: DataFrame | None,
) -> tuple[list[MetricRow], DataFrame | None, DataFrame]:
    """The macro rows of the per-user beyond-accuracy metrics (with ``more``: the per-user
    rows of receval_spark.ranking.fairness_stage) and the rows of the group ones
    (``segmented``: the lists joined with the user segments), the per-user table (persisted;
    None without per-user metrics) and the item exposure by (model, segment, k), persisted."""
    rows = []
    per_user = per_user_beyond(
        ranked, inputs, ks=settings.k, by=["model"], metrics=settings.metrics
    )
    per_user = union_all([f for f in (per_user, more) if f is not None])
    if per_user is not None:
        per_user = persist(per_user.join(population.segments, on=USER))
        rows += macro_rows(per_user)
    keys = ["model", "segment"]
    # one item exposure for the group statistics and the long-tail table (segment all)
    exposure = persist(ranking_exposure(segmented, inputs.catalogue, keys=keys, ks=settings.k))
    groups = group_beyond(
        segmented,
        inputs,
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
    return rows, per_user, exposure


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


def category_table(
    items: ItemTables, described: dict[str, int] | None, *, wanted: Sequence[str]
) -> tuple[DataFrame | None, list[str]]:
    """(item_id, categories) of the item metadata when data.items maps a category column
    (else None), and the warnings: catalogue items without categories (``described``:
    :func:`describe_items`), or ild_category and category_coverage skipped."""
    mapped = items.source is not None and items.source.columns.category is not None
    warnings = []
    missing = described["catalogue_items_without_categories"] if described is not None else 0
    if missing and mapped and described is not None:
        warnings.append(
            f"{missing} of {described['catalogue_items']} catalogue items have no "
            "categories; ild_category and category_coverage leave them out"
        )
    if items.items is not None and mapped:
        return items.items.select(ITEM, "categories"), warnings
    warnings += [
        f"{name} skipped: data.items with a category column is not configured"
        for name in ("ild_category", "category_coverage")
        if name in wanted
    ]
    return None, warnings


def needs_vectors(settings: EvaluationConfig) -> bool:
    """Whether the run needs item vectors: for ild_embedding or content serendipity."""
    return "ild_embedding" in settings.metrics or settings.serendipity.unexpected == "content"


def embedding_source(embeddings: EmbeddingsConfig, items_source: ItemsSource | None) -> str:
    """Where the item vectors come from: evaluation.embeddings.source, and for ``auto``
    data.items' embedding column when it maps one, else ALS item factors."""
    if embeddings.source != "auto":
        return embeddings.source
    mapped = items_source is not None and items_source.columns.embedding is not None
    return "items" if mapped else "als"


def item_vectors(
    embeddings: EmbeddingsConfig,
    *,
    needed: bool,
    items: ItemTables,
    history: DataFrame,
    history_rows: int,
) -> ItemVectors:
    """The item unit vectors (persisted) when ``needed``: data.items' embeddings, or ALS item
    factors fitted on the train ``history`` with :func:`embedding_blocks` of its
    ``history_rows`` (docs/evaluation.md, "Beyond-accuracy metrics")."""
    source = embedding_source(embeddings, items.source)
    if needed and source == "items":
        assert items.items is not None  # config: source items needs data.items.columns.embedding
        vectors = items.items.select(ITEM, "embedding")
        return ItemVectors(persist(unit_vectors(vectors)), source, None)
    if needed and source == "als" and history_rows > 0:  # a given split may have no train
        params = embeddings.als_params(history_rows)
        factors = memoized_item_embeddings(history, params=params)  # kept: small
        return ItemVectors(persist(unit_vectors(factors)), source, params.blocks)
    return ItemVectors(None, source, None)


def serendipity_expected(
    ranked: DataFrame,
    population: Population,
    *,
    settings: EvaluationConfig,
    units: DataFrame | None,
    model: str | None,
) -> DataFrame:
    """(user_id, item_id, rank): the items serendipity counts as expected (docs/evaluation.md,
    "Beyond-accuracy metrics"): under ``content`` those close to the user's train profile
    (rank 0: at every k); else the run's popularity ``model``'s lists, or without one the
    popularity ranks of the relevant recommended items (only those can be serendipitous)."""
    if settings.serendipity.unexpected == "content":  # expected at every k
        assert units is not None  # config: content serendipity needs item embeddings
        return content_expected(
            ranked.select(USER, ITEM),
            population.history,
            units,
            threshold=settings.serendipity.threshold,
        ).withColumn(RANK, F.lit(0))
    if model is not None:  # the run's own popularity lists
        expected = ranked.filter(F.col("model") == model)
    else:
        hits = ranked.select(USER, ITEM).join(population.truth.select(USER, ITEM), on=[USER, ITEM])
        popularity = population.catalogue.select(ITEM, F.col("n_users").cast("double").alias(SCORE))
        expected = popularity_ranks(popularity, hits, seen=population.seen)
    return expected.select(USER, ITEM, RANK)
