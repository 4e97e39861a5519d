"""The small-data target: the whole job on ml-100k against a plain Spark ML process.

Both sides are whole processes (their own JVM), run one after the other, alternating:

* ``receval`` — ``receval evaluate`` on ``conf/movielens-100k.yaml`` (global temporal split at
  1998-03-01, threshold relevance, segments warm, cold, activity, popularity, every metric at
  k = 5, 10, 20, B = 100, comparisons against popularity) with popularity, random, oracle and
  one external model: the top-100 of a seeded random scoring of the catalogue per user
  (written here, once, as Parquet; not timed);
* ``spark_ml`` — what a Spark ML user writes for the same question: read u.data, the same
  split and relevance, the popularity top-10 of the train period for every test user,
  ``RankingEvaluator`` precision, recall, NDCG and MAP @ 10.

    .venv/bin/python benchmarks/small_job.py --data ../shared/data/ml-100k/u.data --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
CUTOFF = "1998-03-01 00:00:00"


def spark_ml(data: str) -> None:
    """The plain Spark ML process (``--side spark_ml``): prints its four values."""
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import SparkSession, Window
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[*]")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    log = spark.read.csv(data, sep="\t", schema="user int, item int, rating double, ts long")
    log = log.withColumn("time", F.timestamp_seconds("ts"))
    train = log.filter(F.col("time") < F.lit(CUTOFF))
    test = log.filter((F.col("time") >= F.lit(CUTOFF)) & (F.col("rating") >= 4))
    top = (
        train.groupBy("item")
        .count()
        .withColumn("rank", F.row_number().over(Window.orderBy(F.desc("count"), "item")))
        .filter("rank <= 10")
        .agg(F.sort_array(F.collect_list(F.struct("rank", "item"))).alias("top"))
        .select(F.col("top.item").cast("array<double>").alias("prediction"))
    )
    labels = test.groupBy("user").agg(F.collect_set(F.col("item").cast("double")).alias("label"))
    table = labels.crossJoin(top)
    names = ("precisionAtK", "recallAtK", "ndcgAtK", "meanAveragePrecisionAtK")
    values = {n: RankingEvaluator(metricName=n, k=10).evaluate(table) for n in names}
    print(json.dumps(values))
    spark.stop()


def external_lists(data: str, out: Path) -> Path:
    """Top-100 of a seeded random score over the catalogue for every user (the external
    model), as Parquet."""
    log = pd.read_csv(data, sep="\t", names=["user", "item", "rating", "ts"])
    rng = np.random.default_rng(21)
    items = np.sort(log["item"].unique())
    rows = [
        (user, int(item), float(score))
        for user in np.sort(log["user"].unique())
        for item, score in zip(rng.choice(items, 100, replace=False), rng.random(100), strict=True)
    ]
    path = out / "external.parquet"
    pd.DataFrame(rows, columns=["user_id", "item_id", "score"]).to_parquet(path, index=False)
    return path


def receval_config(data: str, external: Path, out: Path) -> Path:
    """conf/movielens-100k.yaml with the data path, a scratch output and the external model."""
    config = yaml.safe_load((REPO / "conf" / "movielens-100k.yaml").read_text())
    config["data"]["interactions"]["path"] = str(Path(data).resolve())
    config["output"] = {"path": str(out / "reports"), "per_user": False}
    config["models"].append({"name": "external", "kind": "external", "path": str(external)})
    path = out / "ml100k.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def timed(command: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{command[:3]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared/data/ml-100k/u.data"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--side", choices=("spark_ml",), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "spark_ml":
        spark_ml(args.data)
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    scratch = Path(tempfile.mkdtemp(prefix="receval-small-job-"))
    config = receval_config(args.data, external_lists(args.data, scratch), scratch)
    receval = [str(Path(sys.executable).with_name("receval")), "evaluate", "--config", str(config)]
    plain = [sys.executable, __file__, "--side", "spark_ml", "--data", args.data]
    times: dict[str, list[float]] = {"receval": [], "spark_ml": []}
    for _ in range(args.runs):
        for side, command in (("spark_ml", plain), ("receval", receval)):
            seconds, _ = timed(command)
            times[side].append(seconds)
    medians = {side: statistics.median(t) for side, t in times.items()}
    print("| process | runs (s) | median (s) |")
    print("|---|---|---:|")
    for side, t in times.items():
        print(f"| {side} | {', '.join(f'{x:.1f}' for x in t)} | {medians[side]:.1f} |")
    print(f"ratio receval / spark_ml: {medians['receval'] / medians['spark_ml']:.2f}")


if __name__ == "__main__":
    main()
