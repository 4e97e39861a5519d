"""Spark ML ALS on the train interactions (implicit or explicit): a candidate model, a rating
predictor, and (implicit) item factors that serve as item embeddings where the data has none."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.ml.recommendation import ALS, ALSModel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.schema import ITEM, RATING, SCORE, USER

_INT_TYPES = (T.IntegerType, T.ShortType, T.ByteType)
# users (and items) per block of the blocked top-m product: a block's score matrix and its
# per-user top-m queues stay small (Spark's default 4096 ran a 1 GiB driver out of heap with
# m ~ 2,700 on ml-latest-small)
BLOCK_SIZE = 1024


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
    """(item_id, embedding array<double>): the item factors of implicit ALS on train
    (:func:`fit_als`)."""
    fitted = fit_als(
        history,
        rank=rank,
        max_iter=max_iter,
        reg_param=reg_param,
        alpha=alpha,
        implicit=True,
        seed=seed,
    )
    factors = fitted.model.itemFactors.withColumnRenamed("id", "_item")
    return factors.join(fitted.item_ids, on="_item").select(
        ITEM, F.col("features").cast("array<double>").alias("embedding")
    )


@dataclass(frozen=True)
class FittedAls:
    """A fitted Spark ML ALS model and the id maps between the log's ids and ALS's ints."""

    model: ALSModel
    user_ids: DataFrame  # (user_id, _user)
    item_ids: DataFrame  # (item_id, _item)


def fit_als(
    history: DataFrame,
    *,
    rank: int,
    max_iter: int,
    reg_param: float,
    alpha: float,
    implicit: bool,
    seed: int,
) -> FittedAls:
    """ALS on ``history``. Implicit: confidence 1 + alpha · (number of interactions of the
    user with the item) (Hu, Koren, Volinsky 2008); explicit: the mean train rating of each
    (user, item) (rows without a rating are left out). Fitting runs Spark jobs."""
    item_ids = _item_ids(history)
    user_ids = history.select(USER).distinct().withColumn("_user", _user_id(history))
    columns = [USER, ITEM] if implicit else [USER, ITEM, RATING]  # implicit logs may lack ratings
    rows = history.select(*columns).join(item_ids, on=ITEM).join(user_ids, on=USER)
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
        blockSize=BLOCK_SIZE,
    ).fit(training)
    return FittedAls(model, user_ids, item_ids)


def als_candidates(fitted: FittedAls, users: DataFrame, *, m: int) -> DataFrame:
    """(user_id, item_id, score): ALS's top m items per user in ``users`` (m = k plus the
    largest number of seen items of any user leaves k after filtering seen items).

    Top-m scoring is Spark ML's ``recommendForUserSubset``, a blocked product of user and item
    factor blocks keeping m items per user: no users x items table is materialised. Users
    without train rows get no candidates.
    """
    wanted = users.select(USER).join(fitted.user_ids, on=USER)
    recommended = fitted.model.recommendForUserSubset(wanted.select("_user").distinct(), m)
    return (
        recommended.select("_user", F.explode("recommendations").alias("_r"))
        .select("_user", F.col("_r._item").alias("_item"), F.col("_r.rating").alias(SCORE))
        .join(wanted, on="_user")
        .join(fitted.item_ids, on="_item")
        .select(USER, ITEM, F.col(SCORE).cast("double").alias(SCORE))
    )


def als_scores(fitted: FittedAls, pairs: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for the distinct (user, item) ``pairs``: the factor dot
    product (explicit ALS: the predicted rating); null where the user or the item has no
    train rows."""
    pairs = pairs.select(USER, ITEM).distinct()
    known = pairs.join(fitted.user_ids, on=USER).join(fitted.item_ids, on=ITEM)
    predicted = fitted.model.transform(known).select(
        USER, ITEM, F.col("prediction").cast("double").alias(SCORE)
    )
    return pairs.join(predicted, on=[USER, ITEM], how="left")
