"""The sampled protocols ``sampled_<N>`` (docs/evaluation.md#sampled-protocol-sampled_n): each
user's relevant test items ranked among N seeded negatives, accuracy as under ``full``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.config import EvaluationConfig, sampled_negatives
from receval_spark.metrics.aggregate import union_all
from receval_spark.ranking.accuracy_stage import accuracy_per_user, macro_rows
from receval_spark.ranking.models import Scorer
from receval_spark.ranking.models.random import random_candidates
from receval_spark.ranking.population import Population
from receval_spark.ranking.topk import rank_candidates, sampled_top_k
from receval_spark.results import MetricRow


def sampled_protocol(
    protocol: str,
    *,
    scorers: Mapping[str, Scorer],
    interactions: DataFrame,
    population: Population,
    settings: EvaluationConfig,
) -> tuple[list[MetricRow], DataFrame | None]:
    """Accuracy under ``sampled_<N>``: each user's relevant test items ranked together with N
    seeded negatives (:func:`sampled_candidates`) by every model that scores any item, users a
    model cannot score left without a list and equal scores ordered by a seeded hash
    (:func:`receval_spark.ranking.topk.sampled_top_k`). Returns the macro rows (labelled with
    the protocol) and the per-user table."""
    history, truth, users = population.history, population.truth, population.users
    n = sampled_negatives(protocol)
    assert n is not None  # settings.protocol[1:]: sampled_<N> only
    pairs = persist(
        sampled_candidates(interactions, history, truth, users, n=n, seed=settings.seed)
    )
    scoring = {name: s.scores for name, s in scorers.items() if s.scores is not None}
    if not scoring:
        return [], None
    scores = union_all(
        [
            score(pairs).select(F.lit(name).alias("model"), USER, ITEM, SCORE)
            for name, score in scoring.items()
        ]
    )
    assert scores is not None  # at least one scoring model
    ranked = sampled_top_k(scores, k=max(settings.k), seed=settings.seed, by=["model"])
    ranked = persist(ranked.select(USER, ITEM, SCORE, RANK, "model"))
    ranked.count()  # one job for every model's sampled lists; later plans start from here
    models = users.sparkSession.createDataFrame([(m,) for m in scoring], "model string")
    accuracy = accuracy_per_user(ranked, population, models=models, settings=settings)
    if accuracy is None:
        return [], None
    rows = [dataclasses.replace(r, protocol=protocol) for r in macro_rows(accuracy)]
    return rows, accuracy


def sampled_candidates(
    interactions: DataFrame,
    history: DataFrame,
    truth: DataFrame,
    users: DataFrame,
    *,
    n: int,
    seed: int,
) -> DataFrame:
    """(user_id, item_id): each user's relevant test items plus n negatives drawn uniformly
    (seeded, partition-independent; the random baseline's draws) from the train catalogue
    items the user never interacted with in any part of the log. The draws are the random
    baseline's 2·(n + |seen(u)|) + 10 hashed picks with repeats dropped, so a user whose pool
    of never-interacted items is not much larger than n may get fewer than n negatives (never
    more, never an interacted item)."""
    interacted = interactions.select(USER, ITEM).distinct()
    negatives = rank_candidates(
        random_candidates(history, users, k=n, seen=interacted, seed=seed), k=n, seen=interacted
    )
    return truth.select(USER, ITEM).unionByName(negatives.select(USER, ITEM))
