"""Configured models fitted on a history -> candidates (user_id, item_id, score), scores of
any (user, item) pair, and rating predictions, as each model kind supports them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import DataFrame

from receval_spark.cache import persist
from receval_spark.columns import ITEM, PREDICTION, SCORE, USER
from receval_spark.config.ranking_models import AlsModel, ItemKnnModel, ModelConfig
from receval_spark.inputs import check_positions
from receval_spark.ranking.models.als import als_scores, fit_als, seen_tiers, tiered_als_candidates
from receval_spark.ranking.models.bias import bias_predictions
from receval_spark.ranking.models.item_knn import (
    item_knn_candidates,
    item_knn_scores,
    item_knn_users,
    item_neighbours,
    nearest,
)
from receval_spark.ranking.models.oracle import oracle_candidates, oracle_scores
from receval_spark.ranking.models.popularity import popularity_candidates, popularity_scores
from receval_spark.ranking.models.random import random_candidates, random_scores

Transform = Callable[[DataFrame], DataFrame]
Value = TypeVar("Value")


@dataclass(frozen=True)
class Scorer:
    """One model fitted on one history. ``candidates(users)``: enough best items per user to
    leave k after seen-item filtering; ``scores(pairs)``: a score for any (user, item) pair,
    null for every pair of a user the model cannot score (None: the model only has its own
    lists); ``ratings(pairs)``: (user_id, item_id, prediction) for models that predict ratings;
    ``scorable(users)``: the users of ``users`` the model itself can score (None: all);
    ``fallback``: the model that serves the other users (None: nobody serves them);
    ``positions``: the candidates' scores are minus their list positions, kept as given (an
    external model's ``rank_semantics: positions``: a gap is an empty slot)."""

    candidates: Transform | None
    scores: Transform | None = None
    ratings: Transform | None = None
    scorable: Transform | None = None
    fallback: str | None = None
    positions: bool = False

    def candidates_for(self, users: DataFrame) -> DataFrame:
        """``candidates(users)``; ValueError for a model that only predicts ratings (the
        config allows those in the rating_prediction task alone)."""
        if self.candidates is None:
            raise ValueError("a model that only predicts ratings has no candidates to rank")
        return self.candidates(users)


def unscorable(users: DataFrame, scorable: Transform) -> DataFrame:
    """(user_id): the users of ``users`` outside ``scorable(users)``."""
    return users.select(USER).join(scorable(users), on=USER, how="left_anti")


def fallback_users(scorer: Scorer, users: DataFrame) -> DataFrame | None:
    """(user_id): the users of ``users`` the scorer's fallback serves (None without one)."""
    if scorer.fallback is None or scorer.scorable is None:
        return None
    return unscorable(users, scorer.scorable)


def candidate_model(
    candidates: Transform,
    scores: Transform,
    scorable: Transform,
    *,
    fallback: str,
    history: DataFrame,
    k: int,
    seen: DataFrame | None,
    ratings: Transform | None = None,
) -> Scorer:
    """A candidate model (ALS, item-kNN) whose users outside ``scorable`` get nothing
    (``fallback: none``) or are served by the popularity baseline on the same history
    (``fallback: popularity``, docs/evaluation.md#candidate-models-and-tuning): its
    candidates, so the same seen-item filtering and ties as the ``popularity`` model, and its
    scores of sampled pairs."""
    if fallback == "none":
        return Scorer(candidates, scores, ratings, scorable=scorable)

    def served(users: DataFrame) -> DataFrame:
        others = unscorable(users, scorable)
        return candidates(users).unionByName(popularity_candidates(history, others, k=k, seen=seen))

    def scored(pairs: DataFrame) -> DataFrame:
        able = scorable(pairs.select(USER).distinct())
        own = scores(pairs.join(able, on=USER, how="left_semi"))
        filled = popularity_scores(history, pairs.join(able, on=USER, how="left_anti"))
        return own.unionByName(filled)

    return Scorer(served, scored, ratings, scorable=scorable, fallback=fallback)


def fit_model(
    model: ModelConfig,
    *,
    history: DataFrame,
    truth: DataFrame,
    k: int,
    seen: DataFrame | None,
    external: DataFrame | None = None,
    similar: DataFrame | None = None,
) -> Scorer:
    """Fit one configured model (single hyperparameter values) on ``history``.

    ``external`` is the validated table of an ``external`` model; its candidates are its
    rows for the requested users. ``similar``: for ``item_knn``, a persisted
    :func:`item_neighbours` table of ``history`` with at least ``model.neighbours`` per item
    (tuning computes the grid's widest once); without it the model computes its own. ALS and
    item-kNN's neighbour table fit here (Spark jobs); the other kinds stay lazy.
    """
    if model.kind == "popularity":
        return Scorer(
            lambda users: popularity_candidates(history, users, k=k, seen=seen),
            lambda pairs: popularity_scores(history, pairs),
        )
    if model.kind == "random":
        seed = model.seed
        return Scorer(
            lambda users: random_candidates(history, users, k=k, seen=seen, seed=seed),
            lambda pairs: random_scores(pairs, seed=seed),
        )
    if model.kind == "oracle":
        return Scorer(
            lambda users: oracle_candidates(truth.join(users, on=USER, how="left_semi")),
            lambda pairs: oracle_scores(truth, pairs),
        )
    if model.kind == "item_knn":
        return _item_knn(model, history=history, k=k, seen=seen, similar=similar)
    if model.kind == "als":
        return _als(model, history=history, k=k, seen=seen)
    if model.kind == "bias":
        reg_item, reg_user = model.reg_item, model.reg_user
        return Scorer(
            None,
            ratings=lambda pairs: bias_predictions(
                history, pairs, reg_item=reg_item, reg_user=reg_user
            ),
        )
    if model.kind == "external" and external is not None:
        lists = external.select(USER, ITEM, SCORE)  # without the attributes of custom metrics
        positions = model.rank_semantics == "positions"
        if positions:
            assert model.columns.rank is not None  # ExternalModel: positions read the ranks
            check_positions(lists, rank=model.columns.rank, source=f"models.{model.name}")
        return Scorer(
            lambda users: lists.join(users.select(USER), on=USER, how="left_semi"),
            positions=positions,
        )
    raise ValueError(f"model {model.name!r}: cannot fit kind {model.kind!r}")


def _item_knn(
    model: ItemKnnModel,
    *,
    history: DataFrame,
    k: int,
    seen: DataFrame | None,
    similar: DataFrame | None,
) -> Scorer:
    """Item-kNN with its neighbour table (fitted here unless ``similar`` is given)."""
    neighbours = single(model.neighbours)
    if similar is None:
        table = persist(item_neighbours(history, neighbours=neighbours))
    else:
        table = nearest(similar, neighbours)
    return candidate_model(
        lambda users: item_knn_candidates(history, users, table),
        lambda pairs: item_knn_scores(history, pairs, table),
        lambda users: item_knn_users(history, users, table),
        fallback=model.fallback,
        history=history,
        k=k,
        seen=seen,
    )


def _als(model: AlsModel, *, history: DataFrame, k: int, seen: DataFrame | None) -> Scorer:
    """Spark ML ALS fitted on ``history``: its candidates, pair scores and (explicit ALS)
    rating predictions."""
    fitted = fit_als(history, params=model.als_params())
    tiers = None if seen is None else seen_tiers(seen, k=k)

    def scores(pairs: DataFrame) -> DataFrame:
        return als_scores(fitted, pairs)

    def ratings(pairs: DataFrame) -> DataFrame:
        return scores(pairs).withColumnRenamed(SCORE, PREDICTION)

    return candidate_model(
        lambda users: tiered_als_candidates(fitted, users, k=k, tiers=tiers),
        scores,
        lambda users: users.select(USER).join(fitted.user_ids, on=USER, how="left_semi"),
        fallback=model.fallback,
        history=history,
        k=k,
        seen=seen,
        ratings=None if model.implicit else ratings,
    )


def single(value: Value | list[Value]) -> Value:
    """One hyperparameter value; ValueError for a grid (a list), which
    :func:`receval_spark.ranking.tuning.choose_models` resolves before a model is fitted."""
    if isinstance(value, list):
        raise ValueError(f"a grid {value} cannot be fitted; choose one point first")
    return value
