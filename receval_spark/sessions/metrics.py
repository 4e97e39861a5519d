r"""Next-item metrics over prediction events (docs/sessions.md).

For event e with target t_e and the model's list, rank_e = the position of t_e in the list
(none when absent):

.. math::

    Recall@k = \frac{1}{|E|} \sum_e [rank_e \le k] \qquad
    MRR@k = \frac{1}{|E|} \sum_e \frac{[rank_e \le k]}{rank_e}

as proportions, n = |E| the number of prediction events (an event without a list scores 0).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, POSITION, RANK, SESSION, TARGET
from receval_spark.metrics.aggregate import summary
from receval_spark.registry import family

SESSION_ACCURACY = tuple(m.name for m in family("session") if m.scope == "user")
SESSION_EXPOSURE = tuple(m.name for m in family("session") if m.scope == "group")


def target_ranks(events: DataFrame, lists: DataFrame, models: DataFrame) -> DataFrame:
    """(model, session_id, position, rank): the target's rank in each model's list of each
    event, null when absent; every event appears once per model."""
    hits = lists.select("model", *[SESSION, POSITION], F.col(ITEM).alias(TARGET), RANK)
    return (
        events.select(SESSION, POSITION, TARGET)
        .crossJoin(F.broadcast(models))
        .join(hits, on=["model", SESSION, POSITION, TARGET], how="left")
        .select("model", SESSION, POSITION, RANK)
    )


def session_accuracy(ranks: DataFrame, *, ks: Sequence[int]) -> DataFrame:
    """(model, k, metric, value, n_users, std): Recall@k and MRR@k over the events; n_users
    holds the number of events and std the sample deviation of the per-event values."""
    hit = F.col(RANK).isNotNull() & (F.col(RANK) <= F.col("k"))
    per_event = ranks.select(
        "model",
        F.explode(F.array(*[F.lit(int(k)) for k in ks])).alias("k"),
        F.when(hit, 1.0).otherwise(0.0).alias("recall"),
        F.when(hit, 1.0 / F.col(RANK)).otherwise(0.0).alias("mrr"),
    )
    long = per_event.unpivot(["model", "k"], list(SESSION_ACCURACY), "metric", "value")
    return long.groupBy("model", "k", "metric").agg(*summary("value"))
