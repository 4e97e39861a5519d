"""The off-policy step of a ranking run (docs/evaluation.md#off-policy-evaluation): every
model's lists for the users of the logged impressions, and IPS, clipped IPS and SNIPS of
them with cluster-robust intervals over users."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, POSITION, RANK, REWARD, USER
from receval_spark.config import LOGGING_POLICY
from receval_spark.metrics.offpolicy import (
    CLUSTER,
    ESTIMATORS,
    PROBABILITY,
    estimates,
    importance_weights,
    off_policy_sums,
)
from receval_spark.ranking.lists import rank_models
from receval_spark.ranking.models import Scorer
from receval_spark.results import OffPolicyRow


def off_policy_of_models(
    impressions: DataFrame,
    scorers: Mapping[str, Scorer],
    *,
    seen: DataFrame | None,
    k: int,
    models: DataFrame,
    clip: float,
) -> list[OffPolicyRow]:
    """:func:`off_policy_estimates` of every model's top-``k`` lists (seen items filtered as
    in the test protocol) for the users of the logged ``impressions``."""
    ranked = rank_models(scorers, impressions.select(USER).distinct(), k=k, seen=seen)
    return off_policy_estimates(impressions, ranked, models=models, clip=clip)


def off_policy_estimates(
    impressions: DataFrame, ranked: DataFrame, *, models: DataFrame, clip: float
) -> list[OffPolicyRow]:
    """IPS, clipped IPS and SNIPS (metrics/offpolicy.py) of every model's ranking on the logged
    impressions, and the logging policy's own mean reward (model ``logging``, estimator
    ``logged_mean``: the mean of w = 1), with cluster-robust intervals over users.

    Item-position model of a deterministic ranking: pi(item at position | user) = 1 where the
    model's top-max(k) list for the user (``ranked``: model, user_id, item_id, rank) has the
    item at exactly that rank, else 0; logged positions beyond max k, and users the model has
    no list for, get pi = 0. Every model in ``models`` gets rows. One aggregation; one small
    row per model reaches the driver.
    """
    target = ranked.select(
        "model", USER, ITEM, F.col(RANK).alias(POSITION), F.lit(1.0).alias(PROBABILITY)
    )
    weighted = importance_weights(impressions, target, by=["model"], policies=models)
    logged = impressions.select(
        F.lit(LOGGING_POLICY).alias("model"),
        F.col(USER).alias(CLUSTER),
        REWARD,
        F.lit(1.0).alias("w"),
    )
    rows = []
    for sums in off_policy_sums(weighted.unionByName(logged), by=["model"], clip=clip).collect():
        for e in estimates(sums, by=["model"]):
            if sums["model"] == LOGGING_POLICY and e.estimator != "ips":
                continue
            rows.append(
                OffPolicyRow(
                    model=sums["model"],
                    estimator="logged_mean" if sums["model"] == LOGGING_POLICY else e.estimator,
                    value=e.value,
                    std_error=e.std_error,
                    ci_low=e.ci_low,
                    ci_high=e.ci_high,
                    n_impressions=e.n_impressions,
                    effective_n=e.effective_n,
                    max_weight=e.max_weight,
                    clip=clip if e.estimator == "clipped_ips" else None,
                )
            )
    order = {name: i for i, name in enumerate(("logged_mean", *ESTIMATORS))}
    return sorted(rows, key=lambda r: (r.model != LOGGING_POLICY, r.model, order[r.estimator]))
