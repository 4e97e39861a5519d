"""The per-user beyond-accuracy metrics of the rankings, every k in one pass: novelty,
ILD (categories, embeddings), category coverage, serendipity and the long-tail share and count
(aplt, aclt), as (*by, user_id, k, metric,
value) rows for macro averaging with the accuracy metrics. The formulas are in their family
modules (:mod:`~receval_spark.metrics.novelty`, :mod:`~receval_spark.metrics.diversity`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.aggregate import exact_mean, to_long
from receval_spark.metrics.agreement import AGREEMENT_METRICS
from receval_spark.metrics.calibration import MISCALIBRATION
from receval_spark.metrics.diversity import (
    CATEGORY_COVERAGE,
    ILD_CATEGORY,
    ILD_EMBEDDING,
    catalogue_categories,
    category_entries,
    category_sums,
    item_categories,
    list_diversity,
    vector_sum,
)
from receval_spark.metrics.fairness import AWRF
from receval_spark.metrics.lists import BeyondInputs
from receval_spark.metrics.novelty import (
    NOVELTY,
    SERENDIPITY,
    self_information,
    surprising_counts,
    with_train_users,
)
from receval_spark.registry import family

# the per-user metrics of other passes: calibration, awrf and agreement with another model's
# lists (receval_spark.ranking.fairness_stage)
ELSEWHERE = (MISCALIBRATION, AWRF, *AGREEMENT_METRICS)
PER_USER_METRICS = tuple(
    m.name for m in family("beyond") if m.scope == "user" and m.name not in ELSEWHERE
)
APLT, ACLT = "aplt", "aclt"  # the long-tail share and count of a list (Abdollahpouri 2019)
LIST_SUMS = (NOVELTY, ILD_EMBEDDING, APLT, ACLT)  # one aggregate per ranking and k each


def per_user_beyond(
    ranked: DataFrame,
    inputs: BeyondInputs,
    *,
    ks: Sequence[int],
    by: Sequence[str] = (),
    metrics: Sequence[str],
) -> DataFrame | None:
    """(*by, user_id, k, metric, value) for the :data:`PER_USER_METRICS` among ``metrics`` at
    every k, from ``ranked`` = (*by, user_id, item_id, rank) rankings: R_k(u) = the rows of
    rank <= k.

    One pass over the rankings, shuffled by user once: each row gets its item's train users
    (novelty: -log2 p(i), averaged over the list), unit vector (ild_embedding) and categories;
    then one aggregation per ranking holds every k (sums over the rows of rank <= k) and
    ``category_sums`` the category metrics. Serendipity (relevant items not expected at k,
    / k) reads only the relevant rows (``surprising_counts``): 0 for a ranking without one.
    ild_category and category_coverage (no ``categories``) and ild_embedding (no ``units``) are
    left out when their metadata is None.
    ILD counts only items with a vector or categories and has no value below 2 such items;
    category_coverage is 0 for a list without catalogue categories and has no value when the
    catalogue has none.
    """
    by, ks = list(by), sorted({int(k) for k in ks})
    keys = [*by, USER]
    wanted = _computable(metrics, inputs)
    if not wanted:
        return None
    lists = ranked.select(*keys, ITEM, RANK).filter(F.col(RANK) <= max(ks))
    rows, known = _with_item_attributes(lists, inputs, wanted=wanted)
    rows = rows.repartition(USER)  # the one shuffle of the rows: every step below is per user
    # _slots: every ranking gets a row, whatever is wanted
    aggregates = _list_aggregates(ks=ks, wanted=wanted)
    per_list = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("_slots"), *aggregates)
    values: dict[tuple[str, int], Column] = {
        (m, k): F.col(f"{m}_{k}") for m in LIST_SUMS if m in wanted for k in ks
    }
    if SERENDIPITY in wanted:
        per_list = per_list.join(
            surprising_counts(lists, inputs, keys=keys, ks=ks), on=keys, how="left"
        )
        for k in ks:
            values[(SERENDIPITY, k)] = F.coalesce(F.col(f"_surprising_{k}"), F.lit(0)) / k
    if known is not None:
        per_list = _with_category_sums(per_list, rows, known, keys=keys, ks=ks)
        values.update(_category_values(ks))
    return _long(per_list, values, keys=keys, ks=ks, wanted=wanted)


def _computable(metrics: Sequence[str], inputs: BeyondInputs) -> list[str]:
    """The :data:`PER_USER_METRICS` among ``metrics`` whose item metadata is given."""
    described = {
        ILD_CATEGORY: inputs.categories,
        CATEGORY_COVERAGE: inputs.categories,
        ILD_EMBEDDING: inputs.units,
        APLT: inputs.head,
        ACLT: inputs.head,
    }
    return [m for m in PER_USER_METRICS if m in metrics and described.get(m, True) is not None]


def _with_item_attributes(
    lists: DataFrame, inputs: BeyondInputs, *, wanted: Sequence[str]
) -> tuple[DataFrame, DataFrame | None]:
    """The list rows with what the ``wanted`` metrics read of each item: its categories
    (``item_categories``), train users (``with_train_users``) and unit vector; and the
    catalogue's categories (``catalogue_categories``), None when no category metric is
    computed. Joins on the item (broadcast when small)."""
    rows, known = lists, None
    if inputs.categories is not None and {ILD_CATEGORY, CATEGORY_COVERAGE} & set(wanted):
        entries = category_entries(inputs.categories)
        known = catalogue_categories(entries, inputs.catalogue)
        rows = rows.join(item_categories(entries, known), on=ITEM, how="left")
    if NOVELTY in wanted:
        rows = with_train_users(rows, inputs.catalogue, inputs.totals)
    if ILD_EMBEDDING in wanted and inputs.units is not None:
        rows = rows.join(inputs.units, on=ITEM, how="left")
    if {APLT, ACLT} & set(wanted) and inputs.head is not None:
        head = inputs.head.select(ITEM, F.lit(True).alias("_head"))
        rows = rows.join(head, on=ITEM, how="left")
    return rows, known


def _list_aggregates(*, ks: Sequence[int], wanted: Sequence[str]) -> list[Column]:
    """``novelty_<k>``, ``ild_embedding_<k>``, ``aplt_<k>`` and ``aclt_<k>`` of one ranking's
    rows, for every k (an item without a head row is in the long tail)."""
    aggregates: list[Column] = []
    tail = F.col("_head").isNull()
    for k in ks:
        cut = F.col(RANK) <= k
        if APLT in wanted:
            share = F.when(cut, F.when(tail, F.lit(1.0)).otherwise(F.lit(0.0)))
            aggregates.append(exact_mean(share).alias(f"{APLT}_{k}"))
        if ACLT in wanted:
            aggregates.append(F.count(F.when(cut & tail, F.lit(1))).alias(f"{ACLT}_{k}"))
        if NOVELTY in wanted:
            aggregates.append(exact_mean(F.when(cut, self_information())).alias(f"{NOVELTY}_{k}"))
        if ILD_EMBEDDING in wanted:
            unit = F.when(cut, F.col("unit"))
            total = vector_sum(F.collect_list(unit))
            squared = F.aggregate(total, F.lit(0.0), lambda acc, x: acc + x * x)
            ild = list_diversity(squared, F.count(unit))
            aggregates.append(ild.alias(f"{ILD_EMBEDDING}_{k}"))
    return aggregates


def _with_category_sums(
    per_list: DataFrame,
    rows: DataFrame,
    known: DataFrame,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
) -> DataFrame:
    """``per_list`` with the rankings' ``category_sums`` and ``_total``, the number of
    catalogue categories (null when the catalogue has none)."""
    sums = category_sums(rows, ks=ks, keys=keys)
    per_list = per_list.join(sums, on=list(keys), how="left")
    categories = known.agg(F.count(F.lit(1)).alias("_total")).filter(F.col("_total") > 0)
    return per_list.join(F.broadcast(categories), on=F.lit(True), how="left")


def _category_values(ks: Sequence[int]) -> dict[tuple[str, int], Column]:
    """ild_category (clipped to [0, 1] against rounding) and category_coverage at every k,
    from the columns of :func:`_with_category_sums`."""
    values: dict[tuple[str, int], Column] = {}
    for k in ks:
        ild = list_diversity(F.col(f"_squared_{k}"), F.col(f"_described_{k}"))
        clipped = F.least(F.greatest(ild, F.lit(0.0)), F.lit(1.0))
        values[(ILD_CATEGORY, k)] = F.when(ild.isNotNull(), clipped)
        shown = F.coalesce(F.col(f"_shown_{k}"), F.lit(0))
        values[(CATEGORY_COVERAGE, k)] = shown / F.col("_total")
    return values


def _long(
    per_list: DataFrame,
    values: dict[tuple[str, int], Column],
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    wanted: Sequence[str],
) -> DataFrame:
    """(*keys, k, metric, value): the ``values`` of each ranking, one row per (k, metric),
    no row for a null value."""
    at_k = F.array(
        *[
            F.struct(F.lit(k).alias("k"), *[values[(m, k)].cast("double").alias(m) for m in wanted])
            for k in ks
        ]
    )
    wide = per_list.select(*keys, F.explode(at_k).alias("_at")).select(*keys, "_at.*")
    return to_long(wide, metrics=wanted, keys=[*keys, "k"]).filter(F.col("value").isNotNull())
