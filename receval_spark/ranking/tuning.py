"""Hyperparameter grids chosen on the validation period (DESIGN §2).

Each grid point is fitted on train, ranks the users with relevant validation interactions
(seen train items filtered as in the test protocol) and is scored by the macro average of
the configured metric@k; the best point wins (ties: the earlier point in grid order). The job
then refits the chosen point on train + validation and scores it on test.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from receval_spark.cache import persist
from receval_spark.columns import USER
from receval_spark.config import ModelConfig, TuningConfig, hyperparameter_grid, hyperparameters
from receval_spark.metrics.accuracy import per_user_accuracy
from receval_spark.metrics.aggregate import exact_mean
from receval_spark.ranking.models import fit_model
from receval_spark.ranking.models.item_knn import item_neighbours
from receval_spark.ranking.topk import rank_candidates


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
    scorer = fit_model(model, history=train, truth=truth, k=tuning.k, seen=seen, similar=similar)
    users = truth.select(USER).distinct()
    ranked = rank_candidates(scorer.candidates(users), k=tuning.k, seen=seen)
    scores = per_user_accuracy(ranked, truth, ks=[tuning.k])
    return float(scores.agg(exact_mean(tuning.metric)).first()[0])


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
    scored = [
        (
            point,
            validation_score(
                point, train=train, truth=truth, seen=seen, tuning=tuning, similar=similar
            ),
        )
        for point in grid
    ]
    best, best_score = max(scored, key=lambda p: p[1])  # max keeps the first of equal scores
    record = {
        "metric": f"{tuning.metric}@{tuning.k}",
        "grid": [{**hyperparameters(p), "validation_score": s} for p, s in scored],
        "chosen": hyperparameters(best),
        "validation_score": best_score,
    }
    return best, record
