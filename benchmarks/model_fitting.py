"""What the built-in candidate models cost on the shipped ml-latest-small, in one warm session:
ALS (implicit, the demo's rank 32) fitted and asked for every user's candidates as the job asks
(k = 20, the demo's largest, plus the user's seen items) at each number of blocks, and item-kNN's
neighbour table (the demo's 100 neighbours).

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/model_fitting.py --blocks 10 2
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from receval_spark.columns import ITEM, USER  # noqa: E402
from receval_spark.config.als import AlsParams  # noqa: E402
from receval_spark.ranking.models.als import fit_als, seen_tiers, tiered_als_candidates  # noqa: E402
from receval_spark.ranking.models.item_knn import item_neighbours  # noqa: E402

RATINGS = REPO / "receval_spark" / "data" / "ml-latest-small" / "ratings.csv"
K = 20
# the demo's (blocks: each of --blocks)
ALS = AlsParams(rank=32, max_iter=10, reg_param=0.1, alpha=10.0, implicit=True, blocks=10, seed=42)


def seconds(function, *args, **kwargs) -> tuple[float, Any]:
    """Wall seconds of ``function(*args, **kwargs)`` and its result."""
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - started, result


def top_m_rows(fitted, users, *, history) -> int:
    """Rows of ALS's candidate lists of ``users``, ``history`` as their seen items, as the job
    asks for them (computing them)."""
    tiers = seen_tiers(history, k=K)
    return tiered_als_candidates(fitted, users, k=K, tiers=tiers).count()


def neighbour_rows(history, *, neighbours: int) -> int:
    """Rows of item-kNN's neighbour table (computing it)."""
    return item_neighbours(history, neighbours=neighbours).localCheckpoint().count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[10, 4, 2])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--neighbours", type=int, default=100)
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", 4)
        .config("spark.ui.enabled", False)
        .config("spark.ui.showConsoleProgress", False)
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ratings = spark.read.csv(str(RATINGS), header=True, inferSchema=True)
    history = (
        ratings.select(F.col("userId").alias(USER), F.col("movieId").alias(ITEM))
        .distinct()
        .localCheckpoint()
    )
    users = history.select(USER).distinct().localCheckpoint()
    print("| model | run | fit / table (s) | top-m (s) | rows |")
    print("|---|---:|---:|---:|---:|")
    for run in range(1, args.runs + 1):
        for blocks in args.blocks:
            params = dataclasses.replace(ALS, blocks=blocks)
            fit, fitted = seconds(fit_als, history, params=params)
            top, rows = seconds(top_m_rows, fitted, users, history=history)
            print(f"| ALS, {blocks} blocks | {run} | {fit:.1f} | {top:.1f} | {rows} |")
        table, rows = seconds(neighbour_rows, history, neighbours=args.neighbours)
        print(f"| item-kNN, {args.neighbours} neighbours | {run} | {table:.1f} | — | {rows} |")
    spark.stop()


if __name__ == "__main__":
    main()
