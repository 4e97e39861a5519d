"""Implicit-feedback ALS (Spark ML) on the train interactions; its item factors serve as
item embeddings where the data has none."""

from __future__ import annotations

from pyspark.ml.recommendation import ALS
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.schema import ITEM, RATING, SCORE, USER

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


def als_candidates(
    history: DataFrame,
    users: DataFrame,
    *,
    k: int,
    seen: DataFrame | None,
    rank: int,
    max_iter: int,
    reg_param: float,
    alpha: float,
    implicit: bool,
    seed: int,
) -> DataFrame:
    """(user_id, item_id, score): ALS's top m items per user in ``users``, m = k plus the
    largest number of seen items of any user (so k remain after filtering seen items).

    Implicit: confidence 1 + alpha · count as in :func:`als_item_embeddings`; explicit: the
    train ratings (rows without a rating are left out). Top-m scoring is Spark ML's
    ``recommendForUserSubset``, a blocked product of user and item factor blocks: no
    users x items table is materialised. Users without train rows get no candidates.
    """
    item_ids = _item_ids(history)
    user_ids = history.select(USER).distinct().withColumn("_user", _user_id(history))
    rows = history.select(USER, ITEM, RATING).join(item_ids, on=ITEM).join(user_ids, on=USER)
    if implicit:
        training = rows.groupBy("_user", "_item").agg(F.count(F.lit(1)).cast("float").alias("_r"))
    else:
        training = (
            rows.filter(F.col(RATING).isNotNull())
            .groupBy("_user", "_item")
            .agg(F.avg(RATING).cast("float").alias("_r"))
        )
    model = ALS(
        rank=rank,
        maxIter=max_iter,
        regParam=reg_param,
        alpha=alpha,
        implicitPrefs=implicit,
        seed=seed,
        userCol="_user",
        itemCol="_item",
        ratingCol="_r",
        coldStartStrategy="drop",
    ).fit(training)
    extra = seen.groupBy(USER).count().agg(F.max("count")).first()[0] if seen is not None else 0
    wanted = users.select(USER).join(user_ids, on=USER)
    recommended = model.recommendForUserSubset(wanted.select("_user").distinct(), k + (extra or 0))
    return (
        recommended.select("_user", F.explode("recommendations").alias("_r"))
        .select("_user", F.col("_r._item").alias("_item"), F.col("_r.rating").alias(SCORE))
        .join(wanted, on="_user")
        .join(item_ids, on="_item")
        .select(USER, ITEM, F.col(SCORE).cast("double").alias(SCORE))
    )
