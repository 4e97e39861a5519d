"""Hyperparameter grids chosen on the validation period
(docs/evaluation.md#candidate-models-and-tuning).

Each grid point is fitted on train, ranks the users with relevant validation interactions
(seen train items filtered as in the test protocol) and is scored by the macro average of
the configured metric@k; the best point wins (ties: the earlier point in grid order). The job
then refits the chosen point on train + validation and scores it on test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, SCORE, USER
from receval_spark.config.ranking_data import RelevanceConfig
from receval_spark.config.ranking_evaluation import EvaluationConfig, TuningConfig
from receval_spark.config.ranking_models import ModelConfig, hyperparameter_grid, hyperparameters
from receval_spark.errors import InputError
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.aggregate import exact_mean, union_all
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.models.item_knn import item_neighbours
from receval_spark.ranking.relevance import relevant_items
from receval_spark.ranking.split import Split
from receval_spark.ranking.topk import filter_seen_items, rank_candidates


def validation_score(
    model: ModelConfig,
    *,
    train: DataFrame,
    truth: DataFrame,
    seen: DataFrame | None,
    tuning: TuningConfig,
    similar: DataFrame | None = None,
) -> float:
    """Macro average of ``tuning.metric@tuning.k`` of ``model`` fitted on ``train`` over the
    users of the validation ``truth`` (user_id, item_id, grade); ``similar`` as in
    :func:`~receval_spark.ranking.models.fit_model`."""
    (score,) = validation_scores(
        [model], train=train, truth=truth, seen=seen, tuning=tuning, similar=similar
    )
    return score


POINT = "_point"  # the grid point of a candidate row (its place in the grid)


def validation_scores(
    points: Sequence[ModelConfig],
    *,
    train: DataFrame,
    truth: DataFrame,
    seen: DataFrame | None,
    tuning: TuningConfig,
    similar: DataFrame | None = None,
) -> list[float]:
    """:func:`validation_score` of every grid point, in grid order: each point is fitted on
    its own, and their lists are ranked and scored together (one window and one aggregation
    for the grid, as for a run's models, instead of one per point). A user's score and the
    exact mean do not depend on the other points, so each equals its point's score alone."""
    users = truth.select(USER).distinct()
    candidates = union_all(
        [
            fit_model(point, history=train, truth=truth, k=tuning.k, seen=seen, similar=similar)
            .candidates_for(users)
            .select(F.lit(i).alias(POINT), USER, ITEM, SCORE)
            for i, point in enumerate(points)
        ]
    )
    assert candidates is not None  # a grid has at least one point
    ranked = rank_candidates(candidates, k=tuning.k, seen=seen, by=[POINT])
    lists = truth.sparkSession.createDataFrame([(i,) for i in range(len(points))], f"{POINT} int")
    scores = per_user_accuracy(ranked, truth, ks=[tuning.k], lists=lists)
    means = scores.groupBy(POINT).agg(exact_mean(tuning.metric).alias("_score")).collect()
    by_point = {row[POINT]: float(row["_score"]) for row in means}
    return [by_point[i] for i in range(len(points))]


def tune(
    model: ModelConfig,
    *,
    train: DataFrame,
    truth: DataFrame,
    seen: DataFrame | None,
    tuning: TuningConfig,
) -> tuple[ModelConfig, dict[str, Any]]:
    """The grid point of ``model`` with the best validation score, and the record of the
    search: metric, every point with its score, the chosen values. An item-kNN grid computes
    one neighbour table, of its widest point: the others are its first rows per item."""
    grid = hyperparameter_grid(model)
    similar = None
    if model.kind == "item_knn":
        n = model.neighbours
        similar = persist(item_neighbours(train, neighbours=max(n) if isinstance(n, list) else n))
    scores = validation_scores(
        grid, train=train, truth=truth, seen=seen, tuning=tuning, similar=similar
    )
    scored = list(zip(grid, scores, strict=True))
    best, best_score = max(scored, key=lambda p: p[1])  # max keeps the first of equal scores
    record = {
        "metric": f"{tuning.metric}@{tuning.k}",
        "grid": [{**hyperparameters(p), "validation_score": s} for p, s in scored],
        "chosen": hyperparameters(best),
        "validation_score": best_score,
    }
    return best, record


def choose_models(
    models: Sequence[ModelConfig],
    split: Split,
    relevance: RelevanceConfig,
    settings: EvaluationConfig,
) -> tuple[list[ModelConfig], dict[str, Any]]:
    """Every configured model with single hyperparameter values: a grid is tuned on the
    validation period (:func:`tune`, ``settings.tuning``; under ``settings.filter_seen`` seen
    items are filtered from the lists and leave the validation Rel(u), as on the test period:
    docs/evaluation.md#seen-items), a one-point grid is taken as written. Returns the models and the
    tuning record per tuned model."""
    grids = {m.name for m in models if len(hyperparameter_grid(m)) > 1}
    if not grids:
        return [hyperparameter_grid(m)[0] for m in models], {}
    assert split.validation is not None  # config: a grid needs split.validation_cutoff
    train = persist(split.train)
    seen = persist(train.select(USER, ITEM).distinct()) if settings.filter_seen else None
    relevant = relevant_items(split.validation, relevance)
    # as on the test period: under the seen filter, seen items leave Rel(u)
    truth = persist(relevant if seen is None else filter_seen_items(relevant, seen))
    if truth.isEmpty():
        raise InputError(
            "split.validation_cutoff: no validation interaction is relevant, so no grid can be "
            "tuned; move split.validation_cutoff (or validation_quantile) earlier or lower "
            "relevance.threshold."
        )
    chosen, records = [], {}
    for model in models:
        if model.name in grids:
            model, records[model.name] = tune(
                model, train=train, truth=truth, seen=seen, tuning=settings.tuning
            )
        chosen.append(hyperparameter_grid(model)[0])
    return chosen, records
