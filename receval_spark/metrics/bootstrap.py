r"""The spread of the group statistics: a seeded Poisson bootstrap over users.

In replicate b every list of user u counts W(u, b) ~ Poisson(1) times, W drawn from
hash(seed, u, b) (the same in every list group and on every partitioning); the group
statistics of the :data:`BOOTSTRAPPED_METRICS` are computed per replicate from the
replicated exposure blocks and their spread is

.. math::

    std = \sqrt{\frac{1}{B - 1} \sum_{b=1}^{B} (\theta_b - \bar\theta)^2}

over the B replicates, the interval value ± z·std. The Poisson bootstrap of Hanley and
MacGibbon, "Creating non-parametric bootstrap samples using Poisson frequencies" (Computer
Methods and Programs in Biomedicine, 2006); why the spread and not percentiles:
docs/statistics.md, "Group statistics that are not means".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from pyspark import cloudpickle
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from receval_spark.cache import persist
from receval_spark.columns import ITEM, RANK, USER
from receval_spark.expressions import uniform
from receval_spark.metrics import bootstrap_kernel
from receval_spark.metrics.aggregate import exact_std, limb_sum
from receval_spark.metrics.bootstrap_kernel import (
    POISSON_MAX,
    poisson_thresholds,
    replicate_blocks_kernel,
)
from receval_spark.metrics.exposure import group_statistics
from receval_spark.metrics.lists import BeyondInputs, with_item_popularity, with_ranking_length
from receval_spark.registry import family

# executors run the kernel without importing this package: cloudpickle ships the kernel
# module's functions by value (they use numpy, pandas and constants only); pyspark's vendored
# cloudpickle has no type hints
cloudpickle.register_pickle_by_value(bootstrap_kernel)  # type: ignore[no-untyped-call]

BOOTSTRAPPED_METRICS = tuple(m.name for m in family("beyond") if m.bootstrapped)


def poisson_weight(u: Column) -> Column:
    """A Poisson(1) draw from u ~ U[0, 1): the smallest w with P(W <= w) > u (capped at 16)."""
    weight = F.lit(POISSON_MAX)
    for w, threshold in reversed(list(enumerate(poisson_thresholds()))):
        weight = F.when(u < F.lit(threshold), F.lit(w)).otherwise(weight)
    return weight


def replicate_weight(seed: int, user: Column, replicate: Column) -> Column:
    """W(user, replicate) ~ Poisson(1) from hash(seed, user, replicate): the multiplicity of a
    user in a bootstrap replicate, the same in every list group and on every partitioning."""
    return poisson_weight(uniform(F.xxhash64(F.lit(seed), user, replicate)))


def bootstrap_blocks(
    ranked: DataFrame,
    catalogue: DataFrame,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    samples: int,
    seed: int,
) -> DataFrame:
    """(*keys, k, replicate, f, in_catalogue, c, interactions, pair_sum, lists):
    ``exposure_blocks`` of the lists R_k(u) of the rankings ``ranked`` (*keys, user_id,
    item_id, rank; ranks 1..n per ranking) for every k in ``ks``, in each of ``samples``
    Poisson bootstrap replicates of the users, where a list counts W(user, replicate) times
    (items with f = 0 in a replicate are left out), and ``lists``, the blocks' sum of q (their
    group's replicate size: :func:`bootstrap_list_counts`).

    The ranking rows (not one row per list and k) are grouped by the hash bucket of the item
    alone, one bucket per shuffle partition, with each ranking's length n; a row of rank r
    belongs to the lists of every k >= r, of size min(k, n). ``replicate_blocks_kernel``
    sums the B weights of every row of every group in the bucket in numpy (a pandas UDF over
    Arrow) and returns the bucket's blocks at every k; one aggregation adds the buckets'
    blocks. The replicated rows never exist as Spark rows, the kernel runs once per bucket (not
    once per group and bucket: the per-call cost dominated small runs with many models,
    segments and k), and only blocks cross back to the JVM. Measured against fanning each row
    out to its replicates and hash-aggregating in Spark in ``benchmarks/README.md`` (bootstrap
    kernel).
    """
    keys, ks = list(keys), sorted({int(k) for k in ks})
    ranking = with_ranking_length(ranked, keys=keys, ks=ks)
    rows = with_item_popularity(ranking, catalogue).select(
        *keys,
        ITEM,
        "n_interactions",
        "in_catalogue",
        F.col(RANK).cast("int").alias(RANK),
        F.col("n_ranked").cast("int").alias("n_ranked"),
        F.xxhash64(F.lit(seed), F.col(USER)).alias("_h"),
    )
    # a setting with a built-in default: never None
    partitions = cast(str, rows.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    bucket = F.pmod(F.xxhash64(F.col(ITEM)), F.lit(int(partitions)))
    kernel = replicate_blocks_kernel(samples, keys=keys, ks=ks)
    parts = rows.groupBy(bucket).applyInPandas(kernel, _kernel_schema(rows, keys=keys))
    return parts.groupBy(*keys, "k", "replicate", "f", "in_catalogue").agg(
        F.sum("c").alias("c"),
        F.sum("interactions").alias("interactions"),
        limb_sum("pair_h", "pair_m", "pair_l").alias("pair_sum"),
        F.sum("lists").alias("lists"),
    )


def _kernel_schema(rows: DataFrame, *, keys: Sequence[str]) -> StructType:
    """The schema of ``replicate_blocks_kernel``'s output: the key columns as in ``rows``."""
    fields = {field.name: field for field in rows.schema.fields}
    return StructType(
        [
            *[fields[c] for c in keys],
            StructField("k", IntegerType(), False),
            StructField("replicate", IntegerType(), False),
            StructField("f", LongType(), False),
            StructField("in_catalogue", BooleanType(), False),
            *[StructField(c, LongType(), False) for c in ("c", "interactions")],
            *[StructField(c, LongType(), False) for c in ("pair_h", "pair_m", "pair_l")],
            StructField("lists", DoubleType(), False),
        ]
    )


def bootstrap_list_counts(blocks: DataFrame, *, by: Sequence[str]) -> DataFrame:
    """(*by, replicate, n_lists): the number of lists in each replicate, sum of W(user, b),
    read off :func:`bootstrap_blocks` (their ``lists``, rounded to the integer it estimates)."""
    n_lists = F.round(F.sum("lists")).cast("long").alias("n_lists")
    return blocks.groupBy(*by, "replicate").agg(n_lists)


def bootstrap_std(
    ranked: DataFrame,
    inputs: BeyondInputs,
    *,
    keys: Sequence[str],
    ks: Sequence[int],
    metrics: Sequence[str],
    samples: int,
    seed: int,
) -> DataFrame | None:
    """(*keys, k, metric, std): the standard deviation of each group statistic of the lists
    R_k(u) of the rankings ``ranked`` (as :func:`bootstrap_blocks`) over ``samples`` Poisson
    bootstrap replicates of the users; None when no such metric is wanted or samples is 0.

    Only the spread is used: a replicate holds ~63% distinct users, so statistics that grow
    with the number of distinct lists (coverage, entropy) are biased low in every replicate
    and percentile intervals would miss the estimate; the interval is value ± z·std.
    """
    wanted = [m for m in BOOTSTRAPPED_METRICS if m in metrics]
    if not wanted or samples == 0:
        return None
    by = [*keys, "k"]
    blocks = persist(
        bootstrap_blocks(ranked, inputs.catalogue, keys=keys, ks=ks, samples=samples, seed=seed)
    )
    values = group_statistics(
        blocks,
        bootstrap_list_counts(blocks, by=by),
        inputs.totals,
        by=[*by, "replicate"],
        metrics=wanted,
    )
    if values is None:  # no bootstrapped metric is an exposure statistic
        return None
    return values.groupBy(*by, "metric").agg(exact_std("value").alias("std"))
