"""User-defined metrics (receval_spark.extensions): per-user ones over the ranked-list table,
group ones over the item-exposure table.

The ranked-list table a per-user metric receives, one row per (model, user, k, list item) with
rank <= k:

- ``model``, ``user_id``, ``k``, ``rank`` (1 = top), ``item_id``, ``score``
- ``relevant`` (the item is in Rel(u)), ``grade`` (its relevance grade; 0.0 when not relevant),
  ``n_relevant`` (|Rel(u)|)
- the item attributes of ``data.items.columns.attributes`` under their own names (null for an
  item without metadata), and the attributes of each external model's (user, item) rows of
  ``models[].columns.attributes`` (null for the other models)

An aggregate Column is evaluated once per (model, user_id, k); a DataFrame result must hold
(model, user_id, k, value). An evaluated user without a list at k scores 0 (as for the built-in
accuracy metrics); a null value leaves the user out of that mean. Without per-k values
(``k: false``) the function sees each user's whole list (k = the largest cut-off) and the rows
have k null.

The item-exposure table a group metric receives, one row per (model, segment, k, recommended
item): ``f`` (the number of the group's lists holding it), ``n_lists`` (the group's lists),
``n_interactions`` (its train interactions, 0 outside the catalogue), ``in_catalogue``,
``n_catalogue`` (items with a train interaction) and the item attributes. Its aggregate Column
is evaluated once per (model, segment, k). The interval is a Poisson bootstrap over users, as
for the built-in group statistics: in replicate b every user's lists count W(u, b) ~ Poisson(1)
times (f and n_lists are then sums of those weights), and std is the replicates' deviation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import GRADE, ITEM, RANK, USER
from receval_spark.errors import InputError, first_line
from receval_spark.extensions import CustomMetric
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.bootstrap import replicate_weight
from receval_spark.metrics.lists import top_k_lists

KEYS = ("model", USER, "k")


def ranked_list_table(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    items: DataFrame | None = None,
    attributes: Sequence[str] = (),
    pair_attributes: DataFrame | None = None,
) -> DataFrame:
    """The table custom metrics read (module docstring): the top-k lists at every k with
    relevance, the items' attributes and ``pair_attributes`` (model, user_id, item_id, ...:
    the external models' attribute columns) joined."""
    relevant = truth.select(USER, ITEM, F.col(GRADE).cast("double").alias("_grade"))
    n_relevant = truth.groupBy(USER).agg(F.count(F.lit(1)).alias("n_relevant"))
    lists = (
        top_k_lists(ranked.select("model", USER, ITEM, "score", RANK), ks=ks)
        .join(relevant, on=[USER, ITEM], how="left")
        .join(n_relevant, on=USER)
        .select(
            "model",
            USER,
            "k",
            RANK,
            ITEM,
            "score",
            F.col("_grade").isNotNull().alias("relevant"),
            F.coalesce(F.col("_grade"), F.lit(0.0)).alias(GRADE),
            "n_relevant",
        )
    )
    if attributes and items is not None:
        lists = lists.join(items.select(ITEM, *attributes), on=ITEM, how="left")
    if pair_attributes is not None:
        lists = lists.join(pair_attributes, on=["model", USER, ITEM], how="left")
    return lists


def custom_per_user(
    table: DataFrame,
    *,
    users: DataFrame,
    models: DataFrame,
    metrics: Sequence[CustomMetric],
    ks: Sequence[int],
) -> DataFrame | None:
    """(model, user_id, k, metric, value) of every custom metric for every evaluated user
    (``users``) and model (``models``); None without custom metrics. InputError naming the
    metric when its function fails or returns something else than the contract says."""
    spark = table.sparkSession
    frames = []
    for custom in metrics:
        per_k = custom.metric.has_k
        cutoffs = list(ks) if per_k else [max(ks)]
        seen = table if per_k else table.filter(F.col("k") == max(ks))
        values = _values(custom, seen)
        grid = users.crossJoin(F.broadcast(models)).crossJoin(
            F.broadcast(spark.createDataFrame([(k,) for k in cutoffs], "k int"))
        )
        scored = grid.join(values, on=list(KEYS), how="left").select(
            "model",
            USER,
            (F.col("k") if per_k else F.lit(None)).cast("int").alias("k"),
            F.lit(custom.metric.name).alias("metric"),
            # no list at k: 0; a row whose value is null stays null (left out of the mean)
            F.when(F.col("_listed").isNull(), F.lit(0.0)).otherwise(F.col("value")).alias("value"),
        )
        frames.append(scored)
    return union_all(frames)


@contextlib.contextmanager
def _calling(custom: CustomMetric, table: DataFrame, *, kind: str) -> Iterator[str]:
    """Run the block that calls the metric's function on ``table`` (the ``kind`` table) and
    analyses its result: any failure but an InputError becomes one InputError naming the metric
    and the table's columns, so that a wrong column or type is the user's one-line error rather
    than a failure deep in the job. Yields the metric's label for the block's own errors."""
    where = f"evaluation.custom_metrics {custom.metric.name!r}"
    try:
        yield where
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"{where}: its function failed on the {kind} table ({first_line(exc)}); the "
            f"table has columns {table.columns}"
        ) from exc


def _values(custom: CustomMetric, table: DataFrame) -> DataFrame:
    """(model, user_id, k, value, _listed) from the metric's function (analysed here)."""
    with _calling(custom, table, kind="ranked-list") as where:
        result = custom.function(table)
        if isinstance(result, Column):
            values = table.groupBy(*KEYS).agg(result.cast("double").alias("value"))
        elif isinstance(result, DataFrame):
            missing = [c for c in (*KEYS, "value") if c not in result.columns]
            if missing:
                raise InputError(
                    f"{where}: the DataFrame it returns lacks {missing}; return (model, "
                    f"user_id, k, value) or an aggregate Column"
                )
            values = result.select(*KEYS, F.col("value").cast("double").alias("value"))
        else:
            raise InputError(
                f"{where}: it returned {type(result).__name__}; return an aggregate Column "
                "(evaluated per model, user and k) or a DataFrame (model, user_id, k, value)"
            )
        values.schema  # noqa: B018 -- analyse now (also over Spark Connect)
    return values.withColumn("_listed", F.lit(True))


def group_values(
    lists: DataFrame,
    catalogue: DataFrame,
    *,
    metrics: Sequence[CustomMetric],
    ks: Sequence[int],
    items: DataFrame | None = None,
    attributes: Sequence[str] = (),
    bootstrap_samples: int = 0,
    seed: int = 0,
) -> DataFrame | None:
    """(model, segment, k, metric, value, std, n_samples, interval, n_users) of the custom
    group metrics over ``lists`` (model, segment, k, user_id, item_id); n_users = lists, std
    and interval ``bootstrap`` from ``bootstrap_samples`` replicates (else null)."""
    by = ["model", "segment", "k"]
    frames = []
    for custom in metrics:
        chosen = lists if custom.metric.has_k else lists.filter(F.col("k") == max(ks))
        weighted = chosen.withColumn("_w", F.lit(1))
        table = exposure_table(weighted, catalogue, by=by, items=items, attributes=attributes)
        values = _group_values(custom, table, by=by)
        if bootstrap_samples > 0:
            replicates = chosen.sparkSession.range(bootstrap_samples).select(
                F.col("id").cast("int").alias("_replicate")
            )
            resampled = chosen.crossJoin(F.broadcast(replicates)).withColumn(
                "_w", replicate_weight(seed, F.col(USER), F.col("_replicate"))
            )
            spread = (
                _group_values(
                    custom,
                    exposure_table(
                        resampled.filter(F.col("_w") > 0),
                        catalogue,
                        by=[*by, "_replicate"],
                        items=items,
                        attributes=attributes,
                    ),
                    by=[*by, "_replicate"],
                )
                .groupBy(*by)
                .agg(F.stddev_samp("value").alias("std"))
            )
            values = values.join(spread, on=by, how="left")
        else:
            values = values.withColumn("std", F.lit(None).cast("double"))
        frames.append(
            values.select(
                "model",
                "segment",
                (F.col("k") if custom.metric.has_k else F.lit(None)).cast("int").alias("k"),
                F.lit(custom.metric.name).alias("metric"),
                "value",
                "std",
                F.lit(None).cast("long").alias("n_samples"),
                F.when(F.col("std").isNotNull(), F.lit("bootstrap")).alias("interval"),
                F.col("n_lists").cast("long").alias("n_users"),
            )
        )
    return union_all(frames)


def exposure_table(
    weighted: DataFrame,
    catalogue: DataFrame,
    *,
    by: Sequence[str],
    items: DataFrame | None = None,
    attributes: Sequence[str] = (),
) -> DataFrame:
    """The item-exposure table (module docstring) of list rows weighted by ``_w`` (a user's
    multiplicity: 1, or W(u, b) in a bootstrap replicate)."""
    lists = (
        weighted.groupBy(*by, USER)
        .agg(F.first("_w").alias("_w"))
        .groupBy(*by)
        .agg(F.sum("_w").alias("n_lists"))
    )
    n_catalogue = catalogue.agg(F.count(F.lit(1)).alias("n_catalogue"))
    exposure = (
        weighted.groupBy(*by, ITEM)
        .agg(F.sum("_w").alias("f"))
        .join(lists, on=list(by))
        .join(catalogue.select(ITEM, "n_interactions"), on=ITEM, how="left")
        .select(
            *by,
            ITEM,
            F.col("f").cast("double").alias("f"),
            F.col("n_lists").cast("double").alias("n_lists"),
            F.coalesce(F.col("n_interactions"), F.lit(0)).alias("n_interactions"),
            F.col("n_interactions").isNotNull().alias("in_catalogue"),
        )
        .crossJoin(F.broadcast(n_catalogue))
    )
    if attributes and items is not None:
        exposure = exposure.join(items.select(ITEM, *attributes), on=ITEM, how="left")
    return exposure


def _group_values(custom: CustomMetric, table: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, value, n_lists) of one group metric's aggregate Column over the exposure table
    (analysed here)."""
    with _calling(custom, table, kind="item-exposure") as where:
        result = custom.function(table)
        if not isinstance(result, Column):
            raise InputError(
                f"{where}: it returned {type(result).__name__}; a group metric returns an "
                "aggregate Column (evaluated per model, segment and k)"
            )
        values = table.groupBy(*by).agg(
            result.cast("double").alias("value"), F.first("n_lists").alias("n_lists")
        )
        values.schema  # noqa: B018 -- analyse now (also over Spark Connect)
    return values
