"""The bootstrap's replicated exposure blocks: numpy kernel (pandas UDF) vs Spark fan-out.

``metrics.bootstrap.bootstrap_blocks`` needs, for every (list group, replicate), the exposure
blocks of ``exposure_blocks`` (items grouped by f, with their count, train interactions and
pair sum) of the weighted exposure f, s, q with Poisson weights W(user, replicate). Two ways,
same weights:

* ``spark``  — every list row exploded into its B replicates, the weights drawn with Spark
  expressions (``replicate_weight``), rows with W = 0 dropped, then a hash aggregation
  (``weighted_exposure``) and the blocks (``exposure_blocks``). Spark-native; the replicated
  rows exist as Spark rows.
* ``kernel`` — what the job uses: rows grouped by item bucket and handed to
  ``replicate_blocks_kernel`` over Arrow, which draws the same weights in numpy, sums them per
  item with ``np.add.reduceat`` and returns the bucket's blocks; one aggregation adds them.

Both outputs are compared (same blocks; c and interactions equal, pair sums within 1e-9
relative) before the times count. Input: the top-20 candidates of every test user of a
generated scale, lists for k = 5, 10, 20.

    python benchmarks/bootstrap_kernel.py --scale medium --runs 3 --samples 100
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from common import bench_session
from generate import generate_scale
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from receval_spark.columns import ITEM, RANK, USER
from receval_spark.metrics.bootstrap import bootstrap_blocks, replicate_weight
from receval_spark.metrics.exposure import exposure_blocks, weighted_exposure
from receval_spark.metrics.lists import (
    item_statistics,
    top_k_lists,
    with_item_popularity,
    with_list_size,
)
from receval_spark.ranking.topk import top_k

KS = [5, 10, 20]
KEYS = ["k", "replicate", "f", "in_catalogue"]


def spark_fan_out(lists: DataFrame, catalogue: DataFrame, *, samples: int, seed: int) -> DataFrame:
    """The Spark-native alternative: explode to replicates, weight, hash-aggregate, block."""
    replicate = F.explode(F.sequence(F.lit(0), F.lit(samples - 1))).alias("replicate")
    rows = with_item_popularity(with_list_size(lists, by=["k"]), catalogue).select(
        "k", USER, ITEM, "n_interactions", "in_catalogue", "list_size", replicate
    )
    weighted = rows.withColumn("_w", replicate_weight(seed, F.col(USER), F.col("replicate")))
    exposure = weighted_exposure(
        weighted.filter(F.col("_w") > 0),
        keys=["k", "replicate", ITEM, "n_interactions", "in_catalogue"],
        weight=F.col("_w"),
    )
    return exposure_blocks(exposure, by=["k", "replicate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--root", type=Path, default=Path("/tmp/receval-bench"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    folder = args.root / args.scale
    meta = generate_scale(args.scale, folder)
    spark = bench_session()
    history = spark.read.parquet(str(folder / "interactions.parquet"))
    train = history.filter(F.col("timestamp") < meta["cutoff"])
    catalogue = item_statistics(train).persist()
    candidates = spark.read.parquet(str(folder / "candidates.parquet"))
    ranked = top_k(candidates, k=max(KS)).persist()
    lists = top_k_lists(ranked, ks=KS).drop(RANK).persist()
    print(f"{args.scale}: {lists.count():,} list rows, {catalogue.count():,} catalogue items")

    tools = {
        "spark": lambda: spark_fan_out(lists, catalogue, samples=args.samples, seed=7),
        "kernel": lambda: bootstrap_blocks(
            ranked, catalogue, keys=[], ks=KS, samples=args.samples, seed=7
        ),
    }
    a, b = (tools[t]().alias(t) for t in ("spark", "kernel"))
    joined = a.join(b, on=KEYS, how="full_outer")
    pair = F.col("spark.pair_sum"), F.col("kernel.pair_sum")
    bad = joined.filter(
        F.col("spark.c").isNull()
        | F.col("kernel.c").isNull()
        | (F.col("spark.c") != F.col("kernel.c"))
        | (F.col("spark.interactions") != F.col("kernel.interactions"))
        | (F.abs(pair[0] - pair[1]) > 1e-9 * F.greatest(F.abs(pair[0]), F.lit(1.0)))
    ).count()
    if bad:
        raise SystemExit(f"the two implementations disagree on {bad} exposure blocks")
    print(f"outputs agree ({b.count():,} (k, replicate, f, in_catalogue) blocks)")

    for name, build in tools.items():
        seconds = []
        for _ in range(args.runs):
            started = time.perf_counter()
            build().write.format("noop").mode("overwrite").save()
            seconds.append(time.perf_counter() - started)
        runs = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"{name}: runs {runs} s; median {statistics.median(seconds):.2f} s", flush=True)


if __name__ == "__main__":
    main()
