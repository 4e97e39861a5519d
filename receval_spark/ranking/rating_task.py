"""The ``rating_prediction`` task (docs/evaluation.md#rating-prediction-task-rating_prediction):
MAE, MSE and RMSE of every model's predicted ratings over the test ratings whose user and item
have train ratings (the pairs every model can predict). No ranking metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RATING, USER
from receval_spark.config import ModelConfig
from receval_spark.errors import InputError
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.rating import rating_errors, rating_metrics
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.split import Split
from receval_spark.results import MetricRow

RATING_TASK_WARNING = (
    "task rating_prediction: mae, mse and rmse measure how close predicted ratings are to "
    "the test ratings, not how well a model ranks items; use task: ranking for that"
)


@dataclass(frozen=True)
class RatingCounts:
    """The run record's ``rating_prediction``: the test ratings, and those scored (their user
    and item have train ratings)."""

    test_ratings: int
    scored_ratings: int

    def record(self) -> dict[str, int]:
        """The run record's form."""
        return {"test_ratings": self.test_ratings, "scored_ratings": self.scored_ratings}


@dataclass(frozen=True)
class RatedPairs:
    """The train history (persisted), the test ratings every model can predict (``known``:
    user and item with train ratings; persisted) and their counts."""

    history: DataFrame
    known: DataFrame
    counts: RatingCounts


def rated_pairs(split: Split) -> RatedPairs:
    """The test ratings whose user and item have train ratings; raises InputError when there
    are none."""
    history = persist(split.history)
    rated = history.filter(F.col(RATING).isNotNull())
    test = split.test.filter(F.col(RATING).isNotNull())
    known = persist(
        test.join(rated.select(USER).distinct(), on=USER, how="left_semi").join(
            rated.select(ITEM).distinct(), on=ITEM, how="left_semi"
        )
    )
    n_known = known.count()
    pairs = RatedPairs(history, known, RatingCounts(test.count(), scored_ratings=n_known))
    if n_known == 0:
        raise InputError(
            "task rating_prediction: no test rating has a user and an item with train ratings; "
            "move split.cutoff later or check data.interactions.columns.rating."
        )
    return pairs


def predicted_ratings(models: Sequence[ModelConfig], pairs: RatedPairs) -> DataFrame:
    """(user_id, item_id, prediction, model): every model fitted on the train history and its
    predicted rating of each known test pair."""
    predictions = []
    for model in models:
        scorer = fit_model(model, history=pairs.history, truth=pairs.known, k=1, seen=None)
        if scorer.ratings is None:
            raise ValueError(f"model {model.name!r} ({model.kind}) does not predict ratings")
        predictions.append(scorer.ratings(pairs.known).withColumn("model", F.lit(model.name)))
    predicted = union_all(predictions)
    assert predicted is not None  # a job has at least one model
    return predicted


def rating_rows(predictions: DataFrame, known: DataFrame) -> list[MetricRow]:
    """MAE, MSE and RMSE with intervals of every model over the ``known`` test ratings
    (receval_spark.metrics.rating), in segment ``all``."""
    return [
        MetricRow(
            model=e.group[0],
            segment="all",
            metric=e.metric,
            k=None,
            value=e.value,
            n_users=e.n_ratings,
            std=e.std,
            ci_low=e.ci_low,
            ci_high=e.ci_high,
        )
        for row in rating_errors(predictions, known, by=["model"]).collect()
        for e in rating_metrics(row, by=["model"])
    ]
