"""The ``rating_prediction`` task (docs/evaluation.md#rating-prediction-task-rating_prediction):
MAE, MSE and RMSE of every model's predicted ratings (built-in models fitted on train, external
models' ``columns.prediction``) over the test ratings whose user and item have train ratings
(the pairs every built-in model can predict), and paired comparisons of MAE and MSE with the
baseline over the ratings both predict. No ranking metric."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, PREDICTION, RATING, TIMESTAMP, USER
from receval_spark.config import ModelConfig, RandomizationTest
from receval_spark.config.ranking_models import ExternalModel
from receval_spark.errors import InputError
from receval_spark.metrics.aggregate import union_all
from receval_spark.metrics.compare import compare_run
from receval_spark.metrics.rating import rating_errors, rating_metrics
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.split import Split
from receval_spark.results import ComparisonRow, MetricRow

RATING_TASK_WARNING = (
    "task rating_prediction: mae, mse and rmse measure how close predicted ratings are to "
    "the test ratings, not how well a model ranks items; use task: ranking for that"
)
COMPARED_ERRORS = ("mae", "mse")  # means of per-rating terms; RMSE has no per-rating term


@dataclass(frozen=True)
class RatingCounts:
    """The run record's ``rating_prediction``: the test ratings, those scored (their user and
    item have train ratings) and, where the run has external models, each one's scored
    ratings without a prediction (``unpredicted``; None: no external model)."""

    test_ratings: int
    scored_ratings: int
    unpredicted: Mapping[str, int] | None = None

    def record(self) -> dict[str, object]:
        """The run record's form."""
        record: dict[str, object] = {
            "test_ratings": self.test_ratings,
            "scored_ratings": self.scored_ratings,
        }
        if self.unpredicted is not None:
            record["unpredicted"] = dict(self.unpredicted)
        return record

    def with_unpredicted(self, rows: RatingRows, models: Sequence[ModelConfig]) -> RatingCounts:
        """These counts and each external model's ratings without a prediction (none without
        an external model)."""
        external = [m.name for m in models if isinstance(m, ExternalModel)]
        unpredicted = {name: rows.unpredicted.get(name, 0) for name in external}
        return dataclasses.replace(self, unpredicted=unpredicted or None)


@dataclass(frozen=True)
class RatedPairs:
    """The train history (persisted), the test ratings every model can predict (``known``:
    user and item with train ratings; persisted) and their counts."""

    history: DataFrame
    known: DataFrame
    counts: RatingCounts


def rated_pairs(split: Split, *, without_train: bool = False) -> RatedPairs:
    """The test ratings whose user and item have train ratings — or, ``without_train`` (a
    given test set without train rows: only external models predict), every test rating;
    raises InputError when there are none."""
    history = persist(split.history)
    rated = history.filter(F.col(RATING).isNotNull())
    test = split.test.filter(F.col(RATING).isNotNull())
    known = persist(
        test
        if without_train
        else test.join(rated.select(USER).distinct(), on=USER, how="left_semi").join(
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


def predicted_ratings(
    models: Sequence[ModelConfig], pairs: RatedPairs, recommendations: Mapping[str, DataFrame]
) -> DataFrame:
    """(user_id, item_id, prediction, model), persisted: every built-in model fitted on the
    train history and its predicted rating of each known test pair; every external model's
    given predictions of the known test pairs (``recommendations[name]``, validated: one row
    per (user, item); its other rows are not read)."""
    predictions = []
    known_pairs = pairs.known.select(USER, ITEM).distinct()
    for model in models:
        if isinstance(model, ExternalModel):
            given = recommendations[model.name].select(USER, ITEM, PREDICTION)
            given = given.join(known_pairs, on=[USER, ITEM], how="left_semi")
            predictions.append(given.withColumn("model", F.lit(model.name)))
            continue
        scorer = fit_model(model, history=pairs.history, truth=pairs.known, k=1, seen=None)
        if scorer.ratings is None:
            raise ValueError(f"model {model.name!r} ({model.kind}) does not predict ratings")
        predictions.append(scorer.ratings(pairs.known).withColumn("model", F.lit(model.name)))
    predicted = union_all(predictions)
    assert predicted is not None  # a job has at least one model
    return persist(predicted)


@dataclass(frozen=True)
class RatingRows:
    """MAE, MSE and RMSE of every model (``metrics``) and per model the known test ratings it
    gave no prediction for (``unpredicted``: counted, never scored as anything)."""

    metrics: list[MetricRow]
    unpredicted: dict[str, int]


def rating_rows(predictions: DataFrame, known: DataFrame) -> RatingRows:
    """MAE, MSE and RMSE with intervals of every model over the ``known`` test ratings it
    predicts (receval_spark.metrics.rating), in segment ``all``; ``n_users`` holds the number
    of ratings scored."""
    rows = rating_errors(predictions, known, by=["model"]).collect()
    metrics = [
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
        for row in rows
        for e in rating_metrics(row, by=["model"])
    ]
    return RatingRows(metrics, {row["model"]: int(row["n_unpredicted"]) for row in rows})


def per_rating_errors(predictions: DataFrame, known: DataFrame) -> DataFrame:
    """(model, segment = all, metric, k = null, user_id, value): each model's absolute
    (``mae``) and squared (``mse``) error on each known test rating it predicts, in the
    per-user long form the paired comparisons read, with ``user_id`` naming the rating (its
    user, item and place among the pair's equal-keyed ratings, ordered by time and rating:
    ratings repeated exactly are interchangeable)."""
    same_pair = Window.partitionBy(USER, ITEM).orderBy(TIMESTAMP, RATING)
    ratings = known.filter(F.col(RATING).isNotNull()).select(
        USER,
        ITEM,
        RATING,
        F.to_json(F.struct(USER, ITEM, F.row_number().over(same_pair).alias("n"))).alias("_key"),
    )
    error = F.col(PREDICTION) - F.col(RATING)
    scored = ratings.join(predictions.select("model", USER, ITEM, PREDICTION), on=[USER, ITEM])
    return scored.select(
        "model",
        F.lit("all").alias("segment"),
        F.lit(None).cast("int").alias("k"),
        F.col("_key").alias(USER),
        F.abs(error).alias("mae"),
        (error * error).alias("mse"),
    ).unpivot(
        ids=["model", "segment", "k", USER],
        values=list(COMPARED_ERRORS),
        variableColumnName="metric",
        valueColumnName="value",
    )


def rating_comparisons(
    predictions: DataFrame,
    known: DataFrame,
    *,
    baseline: str | None,
    randomization: RandomizationTest | None = None,
) -> list[ComparisonRow]:
    """Every model against ``baseline`` on MAE and MSE, paired over the known test ratings
    both predict (receval_spark.metrics.compare: mean difference with its interval, paired t
    and Wilcoxon p-values, the randomization test's with ``randomization``, not yet
    Holm-adjusted); none without a baseline. The unit is the rating, as in the metrics'
    intervals: a user's ratings count as independent."""
    if baseline is None:
        return []
    return compare_run(
        {"full": per_rating_errors(predictions, known)},
        baseline=baseline,
        randomization=randomization,
    )


def unpredicted_warnings(rows: RatingRows) -> list[str]:
    """A warning per model that left known test ratings without a prediction."""
    scored = {r.model: r.n_users for r in rows.metrics if r.metric == "mae"}
    return [
        f"models.{model}: no predicted rating for {n} of {n + scored.get(model, 0)} scored test "
        f"ratings; its mae, mse and rmse are over the other {scored.get(model, 0)}, its paired "
        "comparisons over the ratings both it and the baseline predict (runs.split."
        "rating_prediction.unpredicted)"
        for model, n in sorted(rows.unpredicted.items())
        if n
    ]
