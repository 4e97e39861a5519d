"""The sampled protocols ``sampled_<N>`` (docs/evaluation.md#sampled-protocol-sampled_n): each
user's relevant test items ranked among N seeded negatives, accuracy as under ``full``; and
their corrected rows ``sampled_<N>_corrected``
(docs/evaluation.md#corrected-sampled-metrics-sampled_n_corrected)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.config import CORRECTED_SUFFIX, EvaluationConfig, sampled_negatives
from receval_spark.metrics.aggregate import union_all
from receval_spark.ranking.accuracy_stage import ProtocolAccuracy, accuracy_per_user, macro_rows
from receval_spark.ranking.models import Scorer
from receval_spark.ranking.models.random import random_candidates
from receval_spark.ranking.population import Population
from receval_spark.ranking.sampled_correction import estimated_positions, negative_pools
from receval_spark.ranking.topk import rank_candidates, sampled_top_k


def sampled_protocol(
    protocol: str,
    *,
    scorers: Mapping[str, Scorer],
    interactions: DataFrame,
    population: Population,
    settings: EvaluationConfig,
) -> dict[str, ProtocolAccuracy]:
    """Accuracy under ``sampled_<N>``: each user's relevant test items ranked together with N
    seeded negatives (:func:`sampled_candidates`) by every model that scores any item, users a
    model cannot score left without a list and equal scores ordered by a seeded hash
    (:func:`receval_spark.ranking.topk.sampled_top_k`). Returns, by protocol label, the
    accuracy of ``sampled_<N>`` and, with ``evaluation.sampled_correction`` (under the
    receval definitions: a peer's formulas read list positions), of ``sampled_<N>_corrected``
    (:mod:`receval_spark.ranking.sampled_correction`, from the same lists); nothing when no
    model scores arbitrary items."""
    history, truth, users = population.history, population.truth, population.users
    n = sampled_negatives(protocol)
    assert n is not None  # a sampled_<N> protocol
    pairs = persist(
        sampled_candidates(interactions, history, truth, users, n=n, seed=settings.seed)
    )
    scoring = {name: s.scores for name, s in scorers.items() if s.scores is not None}
    if not scoring:
        return {}
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
    by_label = {protocol: ranked}
    if settings.sampled_correction and settings.definitions == "receval":
        pools = negative_pools(interactions, population.catalogue, pairs, truth)
        corrected = estimated_positions(ranked, truth, pools, by=["model"])
        by_label[protocol + CORRECTED_SUFFIX] = corrected
    return {
        label: _accuracy(label, lists, population, models=models, settings=settings)
        for label, lists in by_label.items()
    }


def _accuracy(
    label: str,
    ranked: DataFrame,
    population: Population,
    *,
    models: DataFrame,
    settings: EvaluationConfig,
) -> ProtocolAccuracy:
    """The per-user accuracy of ``ranked`` and its macro rows labelled ``label``; no AUC (it
    reads the whole catalogue, which a sampled list is not)."""
    per_user = accuracy_per_user(ranked, population, models=models, settings=settings, auc=False)
    rows = [] if per_user is None else macro_rows(per_user, protocol=label)
    return ProtocolAccuracy(rows, per_user)


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
