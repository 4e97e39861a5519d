r"""Rating baseline with regularized user and item biases (Koren, "Factor in the neighbors",
TKDD 2010, §2.1), fitted on the train ratings:

.. math::

    \hat r_{ui} = \mu + b_u + b_i \qquad
    b_i = \frac{\sum_{u \in R(i)} (r_{ui} - \mu)}{\lambda_i + |R(i)|} \qquad
    b_u = \frac{\sum_{i \in R(u)} (r_{ui} - \mu - b_i)}{\lambda_u + |R(u)|}

A user or item without train ratings gets bias 0, so every pair has a prediction.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, PREDICTION, RATING, USER
from receval_spark.metrics.aggregate import exact_mean, exact_sum


def bias_predictions(
    train: DataFrame, pairs: DataFrame, *, reg_item: float, reg_user: float
) -> DataFrame:
    """(user_id, item_id, prediction) for the distinct (user, item) ``pairs``, from the rated
    train rows (null ratings ignored)."""
    rated = train.filter(F.col(RATING).isNotNull()).select(USER, ITEM, RATING)
    mu = rated.agg(exact_mean(RATING).alias("_mu"))
    items = (
        rated.crossJoin(F.broadcast(mu))
        .groupBy(ITEM)
        .agg(
            (
                exact_sum(F.col(RATING) - F.col("_mu"))
                / (F.lit(float(reg_item)) + F.count(F.lit(1)))
            ).alias("_b_item")
        )
    )
    users = (
        rated.crossJoin(F.broadcast(mu))
        .join(items, on=ITEM)
        .groupBy(USER)
        .agg(
            (
                exact_sum(F.col(RATING) - F.col("_mu") - F.col("_b_item"))
                / (F.lit(float(reg_user)) + F.count(F.lit(1)))
            ).alias("_b_user")
        )
    )
    return (
        pairs.select(USER, ITEM)
        .distinct()
        .crossJoin(F.broadcast(mu))
        .join(users, on=USER, how="left")
        .join(items, on=ITEM, how="left")
        .select(
            USER,
            ITEM,
            (
                F.col("_mu")
                + F.coalesce(F.col("_b_user"), F.lit(0.0))
                + F.coalesce(F.col("_b_item"), F.lit(0.0))
            ).alias(PREDICTION),
        )
    )
