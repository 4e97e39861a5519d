"""Spark ML ALS on the train interactions (implicit or explicit): a candidate model, a rating
predictor, and (implicit) item factors that serve as item embeddings where the data has none."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.ml.recommendation import ALS, ALSModel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RATING, SCORE, USER
from receval_spark.ranking.models.common import dense_ids

# users (and items) per block of the blocked top-m product: a block's score matrix and its
# per-user top-m queues stay small (Spark's default 4096 ran a 1 GiB driver out of heap with
# m ~ 2,700 on ml-latest-small)
BLOCK_SIZE = 1024


def als_item_embeddings(
    history: DataFrame,
    *,
    rank: int,
    max_iter: int,
    reg_param: float,
    alpha: float,
    blocks: int,
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
        blocks=blocks,
        seed=seed,
    )
    factors = fitted.model.itemFactors.withColumnRenamed("id", "_item")
    return factors.join(fitted.item_ids, on="_item").select(
        ITEM, F.col("features").cast("array<double>").alias("embedding")
    )


@dataclass(frozen=True)
class FittedAls:
    """A fitted Spark ML ALS model and the id maps between the log's ids and ALS's ints: the
    users and items of the training rows, each numbered 0..n-1 (:func:`dense_ids`)."""

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
    blocks: int,
    seed: int,
) -> FittedAls:
    """ALS on ``history``. Implicit: confidence 1 + alpha · (number of interactions of the
    user with the item) (Hu, Koren, Volinsky 2008); explicit: the mean train rating of each
    (user, item) (rows without a rating are left out). Users and items get dense,
    collision-free 32-bit numbers (:func:`dense_ids`), whatever the type of the log's ids, so
    no two users (or items) are ever fitted as one. ``blocks``: Spark ML's numUserBlocks and
    numItemBlocks (the factors depend on it, not on the cluster). Fitting runs Spark jobs."""
    if implicit:  # implicit logs may lack ratings
        rows = history.select(USER, ITEM)
    else:
        rows = history.select(USER, ITEM, RATING).filter(F.col(RATING).isNotNull())
    user_ids = persist(dense_ids(rows, USER, name="_user"))  # read by every later join
    item_ids = persist(dense_ids(rows, ITEM, name="_item"))
    numbered = rows.join(item_ids, on=ITEM).join(user_ids, on=USER)
    if implicit:
        training = numbered.groupBy("_user", "_item").agg(
            F.count(F.lit(1)).cast("float").alias("_r")
        )
    else:
        training = numbered.groupBy("_user", "_item").agg(F.avg(RATING).cast("float").alias("_r"))
    model = ALS(
        rank=rank,
        maxIter=max_iter,
        regParam=reg_param,
        alpha=alpha,
        implicitPrefs=implicit,
        seed=seed,
        numUserBlocks=blocks,
        numItemBlocks=blocks,
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
