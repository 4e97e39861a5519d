"""Built-in baselines and external recommendations -> candidates (user_id, item_id, score)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from receval_spark.config import (
    ExternalModel,
    ModelConfig,
    OracleModel,
    PopularityModel,
    RandomModel,
)
from receval_spark.models.oracle import oracle_candidates
from receval_spark.models.popularity import popularity_candidates
from receval_spark.models.random import random_candidates
from receval_spark.schema import USER


def model_candidates(
    model: ModelConfig,
    *,
    history: DataFrame,
    users: DataFrame,
    truth: DataFrame,
    k: int,
    seen: DataFrame | None,
    external: DataFrame | None = None,
) -> DataFrame:
    """Candidates of one configured model for the evaluated ``users``.

    ``external`` is the validated table of an ``external`` model; candidates of users outside
    ``users`` are dropped before ranking.
    """
    if isinstance(model, PopularityModel):
        return popularity_candidates(history, users, k=k, seen=seen)
    if isinstance(model, RandomModel):
        return random_candidates(history, users, k=k, seen=seen, seed=model.seed)
    if isinstance(model, OracleModel):
        return oracle_candidates(truth)
    if isinstance(model, ExternalModel) and external is not None:
        return external.join(users.select(USER), on=USER, how="left_semi")
    raise ValueError(f"model {model.name!r}: no candidates for kind {model.kind!r}")
