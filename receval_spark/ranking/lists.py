"""Every model's lists for the evaluated users (docs/evaluation.md#top-k): the models fitted on
the train history, their candidates ranked together with seen items filtered and ties broken
by item id, and the lists' data-quality facts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, SCORE, USER
from receval_spark.config import ModelConfig
from receval_spark.metrics.aggregate import union_all
from receval_spark.quality import Fact
from receval_spark.ranking.models import Scorer, fallback_users, fit_model
from receval_spark.ranking.population import Population
from receval_spark.ranking.quality import list_facts
from receval_spark.ranking.topk import rank_candidates


@dataclass(frozen=True)
class ModelLists:
    """Every model's top-k lists of the evaluated users, ``ranked`` (user_id, item_id, score,
    rank, model; rank 1..k, k the largest cut-off); ``models`` (model): one row per model, so
    that a model without any list still gets its rows; the lists' data-quality facts at every
    k; and per model with a fallback the number of evaluated users its fallback served (None:
    no model has one)."""

    ranked: DataFrame
    k: int
    models: DataFrame
    facts: list[Fact]
    fallback_users: dict[str, int] | None


def fit_scorers(
    models: Sequence[ModelConfig],
    population: Population,
    recommendations: Mapping[str, DataFrame],
    *,
    k: int,
) -> dict[str, Scorer]:
    """Every model fitted on the train history (external ones: their given lists)."""
    return {
        model.name: fit_model(
            model,
            history=population.history,
            truth=population.truth,
            k=k,
            seen=population.seen,
            external=recommendations.get(model.name),
        )
        for model in models
    }


def rank_models(
    scorers: Mapping[str, Scorer], users: DataFrame, *, k: int, seen: DataFrame | None
) -> DataFrame:
    """(user_id, item_id, score, rank, model): every model's top-k list for ``users``, seen
    items filtered, ties broken by item id (receval_spark.ranking.topk). The models'
    candidates are filtered and ranked together: one window by model and user, whose shuffle
    does not grow with the number of models. A positional model's ranks (an external model's
    ``rank_semantics: positions``, score = -rank) are kept as given, gaps and all."""
    positions = any(s.positions for s in scorers.values())

    def given_rank(scorer: Scorer) -> list[Column]:
        if not positions:
            return []
        rank = -F.col(SCORE) if scorer.positions else F.lit(None)
        return [rank.cast("int").alias(RANK)]

    candidates = union_all(
        [
            s.candidates_for(users).select(
                F.lit(name).alias("model"), USER, ITEM, SCORE, *given_rank(s)
            )
            for name, s in scorers.items()
        ]
    )
    assert candidates is not None  # a job has at least one model
    ranked = rank_candidates(candidates, k=k, seen=seen, by=["model"], positions=positions)
    return ranked.select(USER, ITEM, SCORE, RANK, "model")


def model_lists(
    scorers: Mapping[str, Scorer],
    population: Population,
    *,
    ks: Sequence[int],
    catalogue: DataFrame | None = None,
) -> ModelLists:
    """Every model's top-k lists (k = max ``ks``) for the evaluated users, materialised (every
    later stage reads them), the lists' data-quality facts at every k (``outside_catalogue``
    against ``catalogue``, the configured item ids, or else the train items), and how many
    users each model's fallback served. The lists are ranked to k + 1 so that a score tie
    across the k-th place can be seen; rows past k are left out of them."""
    k = max(ks)
    deeper = persist(rank_models(scorers, population.users, k=k + 1, seen=population.seen))
    universe = population.catalogue if catalogue is None else catalogue
    facts = list_facts(deeper, universe, models=list(scorers), ks=ks, n_users=population.n_users)
    served = {name: fallback_users(s, population.users) for name, s in scorers.items()}
    counts = {name: f.count() for name, f in served.items() if f is not None}
    spark = deeper.sparkSession
    return ModelLists(
        ranked=deeper.filter(F.col(RANK) <= k),
        k=k,
        models=spark.createDataFrame([(name,) for name in scorers], "model string"),
        facts=facts,
        fallback_users=counts or None,
    )
