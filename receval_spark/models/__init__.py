"""Configured models fitted on a history -> candidates (user_id, item_id, score), scores of
any (user, item) pair, and rating predictions, as each model kind supports them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.config import ModelConfig
from receval_spark.models.als import als_candidates, als_scores, fit_als
from receval_spark.models.bias import PREDICTION, bias_predictions
from receval_spark.models.item_knn import item_knn_candidates, item_knn_scores, item_neighbours
from receval_spark.models.oracle import oracle_candidates, oracle_scores
from receval_spark.models.popularity import popularity_candidates, popularity_scores
from receval_spark.models.random import random_candidates, random_scores
from receval_spark.schema import SCORE, USER

Transform = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class Scorer:
    """One model fitted on one history. ``candidates(users)``: enough best items per user to
    leave k after seen-item filtering; ``scores(pairs)``: a score for any (user, item) pair
    (None: the model only has its own lists); ``ratings(pairs)``: (user_id, item_id,
    prediction) for models that predict ratings."""

    candidates: Transform | None
    scores: Transform | None = None
    ratings: Transform | None = None


def most_seen(seen: DataFrame | None) -> int:
    """The largest number of seen items of any user (0 without seen-item filtering)."""
    if seen is None:
        return 0
    return seen.groupBy(USER).count().agg(F.max("count")).first()[0] or 0


def fit_model(
    model: ModelConfig,
    *,
    history: DataFrame,
    truth: DataFrame,
    k: int,
    seen: DataFrame | None,
    external: DataFrame | None = None,
) -> Scorer:
    """Fit one configured model (single hyperparameter values) on ``history``.

    ``external`` is the validated table of an ``external`` model; its candidates are its
    rows for the requested users. ALS fits here (Spark jobs); the other kinds stay lazy.
    """
    kind = model.kind
    if kind == "popularity":
        return Scorer(
            lambda users: popularity_candidates(history, users, k=k, seen=seen),
            lambda pairs: popularity_scores(history, pairs),
        )
    if kind == "random":
        return Scorer(
            lambda users: random_candidates(history, users, k=k, seen=seen, seed=model.seed),
            lambda pairs: random_scores(pairs, seed=model.seed),
        )
    if kind == "oracle":
        return Scorer(
            lambda users: oracle_candidates(truth.join(users, on=USER, how="left_semi")),
            lambda pairs: oracle_scores(truth, pairs),
        )
    if kind == "item_knn":
        similar = persist(item_neighbours(history, neighbours=model.neighbours))
        return Scorer(
            lambda users: item_knn_candidates(history, users, similar),
            lambda pairs: item_knn_scores(history, pairs, similar),
        )
    if kind == "als":
        fitted = fit_als(
            history,
            rank=model.rank,
            max_iter=model.max_iter,
            reg_param=model.reg_param,
            alpha=model.alpha,
            implicit=model.implicit,
            seed=model.seed,
        )
        m = k + most_seen(seen)

        def scores(pairs: DataFrame) -> DataFrame:
            return als_scores(fitted, pairs)

        def ratings(pairs: DataFrame) -> DataFrame:
            return scores(pairs).withColumnRenamed(SCORE, PREDICTION)

        return Scorer(
            lambda users: als_candidates(fitted, users, m=m),
            scores,
            None if model.implicit else ratings,
        )
    if kind == "bias":
        return Scorer(
            None,
            ratings=lambda pairs: bias_predictions(
                history, pairs, reg_item=model.reg_item, reg_user=model.reg_user
            ),
        )
    if kind == "external" and external is not None:
        return Scorer(lambda users: external.join(users.select(USER), on=USER, how="left_semi"))
    raise ValueError(f"model {model.name!r}: cannot fit kind {kind!r}")
