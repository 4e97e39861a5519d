"""What order-independent sums cost: ``exact_sum``/``exact_std`` (fixed-point limbs summed as
longs) against Spark's ``avg``/``stddev_samp`` of doubles and a DECIMAL(38,18) sum, on a
cached table of random doubles grouped by a few hundred keys (the shape of the per-user metric
table: one group per model, metric, k and segment)."""

from __future__ import annotations

import argparse
import statistics
import time

from common import bench_session
from pyspark.sql import functions as F

from receval_spark.metrics.aggregate import exact_mean, exact_std, exact_sum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = bench_session()
    table = (
        spark.range(args.rows)
        .select((F.col("id") % args.groups).alias("g"), F.rand(1).alias("x"))
        .cache()
    )
    table.count()
    variants = {
        "avg + stddev_samp (doubles)": [F.avg("x"), F.stddev_samp("x")],
        "exact_sum": [exact_sum("x")],
        "exact_mean + exact_std": [exact_mean("x"), exact_std("x")],
        "sum of DECIMAL(38,18)": [F.sum(F.col("x").cast("decimal(38,18)"))],
    }
    print(f"{args.rows:,} rows, {args.groups} groups, median of {args.runs} runs")
    for name, aggregates in variants.items():
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            table.groupBy("g").agg(*aggregates).write.format("noop").mode("overwrite").save()
            times.append(time.perf_counter() - started)
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"| {name} | {runs} | {statistics.median(times):.2f} |")


if __name__ == "__main__":
    main()
