r"""Rating-prediction errors over the known test ratings (docs/evaluation.md, Rating
prediction; the ``rating_prediction`` task only: they measure how close predicted ratings
are, not how well a model ranks).

Over the N test ratings r_j with a prediction \hat r_j:

.. math::

    MAE = \frac{1}{N} \sum_j |\hat r_j - r_j| \qquad
    MSE = \frac{1}{N} \sum_j (\hat r_j - r_j)^2 \qquad
    RMSE = \sqrt{MSE}

MAE and MSE are means of per-rating terms (t-intervals); RMSE's interval is the square root
of MSE's (a monotone transform). Test ratings without a prediction (a model that cannot score
the pair) are counted, not scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RATING, USER
from receval_spark.metrics.aggregate import exact_mean, exact_std
from receval_spark.stats import metric_bounds, t_interval


def rating_errors(predictions: DataFrame, test: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, n_ratings, n_unpredicted, mae, mae_std, mse, mse_std) per model (``by``) from
    ``predictions`` (*by, user_id, item_id, prediction) and the rated ``test`` rows; every
    test rating counts once (a repeated (user, item) rating is scored each time)."""
    by = list(by)
    ratings = test.filter(F.col(RATING).isNotNull()).select(USER, ITEM, RATING)
    models = predictions.select(*by).distinct()
    error = F.col("prediction") - F.col(RATING)
    scored = ratings.crossJoin(models).join(
        predictions.select(*by, USER, ITEM, "prediction"), on=[*by, USER, ITEM], how="left"
    )
    absolute = F.when(F.col("prediction").isNotNull(), F.abs(error))
    squared = F.when(F.col("prediction").isNotNull(), error * error)
    return scored.groupBy(*by).agg(
        F.count(absolute).alias("n_ratings"),
        F.count(F.when(F.col("prediction").isNull(), True)).alias("n_unpredicted"),
        exact_mean(absolute).alias("mae"),
        exact_std(absolute).alias("mae_std"),
        exact_mean(squared).alias("mse"),
        exact_std(squared).alias("mse_std"),
    )


@dataclass(frozen=True)
class RatingError:
    """One error metric of one model with its 95% interval over ``n_ratings`` test ratings
    (``group``: the values of ``by``, the model's name)."""

    group: tuple[str, ...]
    metric: str
    value: float | None
    std: float | None
    ci_low: float | None
    ci_high: float | None
    n_ratings: int
    n_unpredicted: int


def rating_metrics(row: Row, *, by: Sequence[str]) -> list[RatingError]:
    """MAE, MSE and RMSE with intervals from one row of :func:`rating_errors`."""
    common = {
        "group": tuple(row[c] for c in by),
        "n_ratings": row["n_ratings"],
        "n_unpredicted": row["n_unpredicted"],
    }
    n = row["n_ratings"]
    out = []
    for metric in ("mae", "mse"):
        std = row[f"{metric}_std"]
        bounds = metric_bounds(metric)
        low, high = t_interval(row[metric], std, n, bounds=bounds) if n else (None, None)
        out.append(
            RatingError(
                metric=metric,
                value=row[metric],
                std=row[f"{metric}_std"],
                ci_low=low,
                ci_high=high,
                **common,
            )
        )
    mse = out[1]
    out.append(
        RatingError(
            metric="rmse",
            value=math.sqrt(mse.value) if mse.value is not None else None,
            std=None,
            ci_low=math.sqrt(mse.ci_low) if mse.ci_low is not None else None,
            ci_high=math.sqrt(mse.ci_high) if mse.ci_high is not None else None,
            **common,
        )
    )
    return out
