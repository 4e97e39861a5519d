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
from receval_spark.metrics.aggregate import union_all
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
    frames = []
    pairs: dict[str, DataFrame] = {}  # one join per model compared with

    def with_model(name: str) -> DataFrame:
        if name not in pairs:
            pairs[name] = against(ranked, name, ks=ks, persistence=persistence)
        return pairs[name]

    wanted = [m for m in (INTERSECTION, AGREEMENT_RBO) if m in metrics]
    if reference is not None and wanted:
        values = {INTERSECTION: F.col("common") / F.col("listed"), AGREEMENT_RBO: F.col(RBO)}
        frames += [_long(with_model(reference), m, values[m]) for m in wanted]
    if baseline is not None and UNEXPECTEDNESS in metrics:
        share = (F.col("listed") - F.col("common")) / F.col("listed")
        frames.append(_long(with_model(baseline), UNEXPECTEDNESS, share))
    return union_all(frames)


def _long(pairs: DataFrame, metric: str, value: Column) -> DataFrame:
    return pairs.select(
        "model", USER, "k", F.lit(metric).alias("metric"), value.cast("double").alias("value")
    )
