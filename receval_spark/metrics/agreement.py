r"""Agreement of each model's lists with another model's lists of the same night
(docs/evaluation.md#agreement-with-a-reference-model), per user with a list at k from both:

.. math::

    \mathrm{intersection@k} = \frac{|A \cap B|}{|A|} \qquad
    \mathrm{agreement\_rbo@k} = \mathrm{RBO_{ext}}(A, B) \qquad
    \mathrm{unexpectedness@k} = \frac{|A \setminus B|}{|A|}

A the model's top-k, B the reference model's top-k for intersection and RBO
(``evaluation.agreement_reference``, default the run's baseline) and the baseline model's
(``evaluation.baseline``) for unexpectedness; RBO_ext with persistence
``evaluation.rbo_persistence`` (Webber, Moffat & Zobel, TOIS 2010), the same kernel as the
night-over-night stability metrics (:func:`receval_spark.metrics.stability.list_agreement`).
The reference model's own rows are 1, 1 and 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.aggregate import to_long, union_all
from receval_spark.metrics.stability import RBO, list_agreement

INTERSECTION, AGREEMENT_RBO, UNEXPECTEDNESS = "intersection", "agreement_rbo", "unexpectedness"
AGREEMENT_METRICS = (INTERSECTION, AGREEMENT_RBO, UNEXPECTEDNESS)


def against(
    ranked: DataFrame, reference: str, *, ks: Sequence[int], persistence: float
) -> DataFrame:
    """(model, user_id, k, common, listed, stability_rbo) of every model's lists (``ranked``:
    model, user_id, item_id, rank) against the lists of the model ``reference``."""
    lists = ranked.select("model", USER, ITEM, F.col(RANK).cast("int").alias(RANK))
    models = lists.select("model").distinct()
    theirs = lists.filter(F.col("model") == reference).drop("model").crossJoin(F.broadcast(models))
    return list_agreement(lists, theirs, ks=ks, persistence=persistence)


def agreement(
    ranked: DataFrame,
    *,
    reference: str | None,
    baseline: str | None,
    ks: Sequence[int],
    persistence: float,
    metrics: Sequence[str],
) -> DataFrame | None:
    """(model, user_id, k, metric, value) of the :data:`AGREEMENT_METRICS` among ``metrics``
    whose model (``reference`` / ``baseline``) is given; None when none is computed."""
    # one pass per model compared with, all its metrics as columns of it (a union of one
    # frame per metric planned the pair's joins once per metric)
    compared: dict[str, dict[str, Column]] = {}
    if reference is not None:
        values = {INTERSECTION: F.col("common") / F.col("listed"), AGREEMENT_RBO: F.col(RBO)}
        for m in (INTERSECTION, AGREEMENT_RBO):
            if m in metrics:
                compared.setdefault(reference, {})[m] = values[m]
    if baseline is not None and UNEXPECTEDNESS in metrics:
        share = (F.col("listed") - F.col("common")) / F.col("listed")
        compared.setdefault(baseline, {})[UNEXPECTEDNESS] = share
    frames = [
        _long(against(ranked, name, ks=ks, persistence=persistence), columns)
        for name, columns in compared.items()
    ]
    return union_all(frames)


def _long(pairs: DataFrame, columns: dict[str, Column]) -> DataFrame:
    """(model, user_id, k, metric, value) of the metric ``columns`` of :func:`against`'s rows."""
    keys = ["model", USER, "k"]
    wide = pairs.select(*keys, *[v.cast("double").alias(m) for m, v in columns.items()])
    return to_long(wide, metrics=list(columns), keys=keys)
