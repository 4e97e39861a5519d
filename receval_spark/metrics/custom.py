"""User-defined per-user metrics (receval_spark.extensions) over the ranked-list table.

The table a metric function receives, one row per (model, user, k, list item) with rank <= k:

- ``model``, ``user_id``, ``k``, ``rank`` (1 = top), ``item_id``, ``score``
- ``relevant`` (the item is in Rel(u)), ``grade`` (its relevance grade; 0.0 when not relevant),
  ``n_relevant`` (|Rel(u)|)
- the item attributes of ``data.items.columns.attributes`` under their own names (null for an
  item without metadata)

An aggregate Column is evaluated once per (model, user_id, k); a DataFrame result must hold
(model, user_id, k, value). An evaluated user without a list at k scores 0 (as for the built-in
accuracy metrics); a null value leaves the user out of that mean. Without per-k values
(``k: false``) the function sees each user's whole list (k = the largest cut-off) and the rows
have k null.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import GRADE, ITEM, RANK, USER
from receval_spark.errors import InputError, first_line
from receval_spark.extensions import CustomMetric
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.beyond import top_k_lists

KEYS = ("model", USER, "k")


def ranked_list_table(
    ranked: DataFrame,
    truth: DataFrame,
    *,
    ks: Sequence[int],
    items: DataFrame | None = None,
    attributes: Sequence[str] = (),
) -> DataFrame:
    """The table custom metrics read (module docstring): the top-k lists at every k with
    relevance and the items' attributes joined."""
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


def _values(custom: CustomMetric, table: DataFrame) -> DataFrame:
    """(model, user_id, k, value, _listed) from the metric's function, analysed here so that a
    wrong column or type is the user's one-line error rather than a failure deep in the job."""
    name = custom.metric.name
    where = f"evaluation.custom_metrics {name!r}"
    try:
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
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"{where}: its function failed on the ranked-list table ({first_line(exc)}); the "
            f"table has columns {table.columns}"
        ) from exc
    return values.withColumn("_listed", F.lit(True))
