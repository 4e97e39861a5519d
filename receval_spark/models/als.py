"""Implicit-feedback ALS (Spark ML) on the train interactions; its item factors serve as
item embeddings where the data has none."""

from __future__ import annotations

from pyspark.ml.recommendation import ALS
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.schema import ITEM, USER

_INT_TYPES = (T.IntegerType, T.ShortType, T.ByteType)


def _item_ids(history: DataFrame) -> DataFrame:
    """(item_id, _item): the id itself when it is a 32-bit integer, else a 0-based number in
    id order (one catalogue-sized window)."""
    items = history.select(ITEM).distinct()
    if isinstance(history.schema[ITEM].dataType, _INT_TYPES):
        return items.withColumn("_item", F.col(ITEM).cast("int"))
    return items.withColumn("_item", (F.row_number().over(Window.orderBy(ITEM)) - 1).cast("int"))


def _user_id(history: DataFrame) -> Column:
    """The user id when it is a 32-bit integer, else a 31-bit hash of it (a rare collision
    merges two users' rows, which barely moves the item factors)."""
    if isinstance(history.schema[USER].dataType, _INT_TYPES):
        return F.col(USER).cast("int")
    return F.pmod(F.xxhash64(USER), F.lit(2**31 - 1)).cast("int")


def als_item_embeddings(
    history: DataFrame,
    *,
    rank: int,
    max_iter: int,
    reg_param: float,
    alpha: float,
    seed: int,
) -> DataFrame:
    """(item_id, embedding array<double>): ALS item factors from implicit train feedback.

    Confidence = 1 + alpha · (number of interactions of the user with the item) (Hu, Koren,
    Volinsky 2008). ALS needs 32-bit integer ids (see _item_ids, _user_id).
    """
    item_ids = _item_ids(history)
    training = (
        history.select(_user_id(history).alias("_user"), ITEM)
        .join(item_ids, on=ITEM)
        .groupBy("_user", "_item")
        .agg(F.count(F.lit(1)).cast("float").alias("_count"))
    )
    als = ALS(
        rank=rank,
        maxIter=max_iter,
        regParam=reg_param,
        alpha=alpha,
        implicitPrefs=True,
        seed=seed,
        userCol="_user",
        itemCol="_item",
        ratingCol="_count",
        coldStartStrategy="drop",
    )
    factors = als.fit(training).itemFactors.withColumnRenamed("id", "_item")
    return factors.join(item_ids, on="_item").select(
        ITEM, F.col("features").cast("array<double>").alias("embedding")
    )
