"""A notebook's second call: ``rv.evaluate`` on ml-100k settings in a running session, against
the lean Spark ML four numbers of the popularity lists computed in the same session.

One process, one ``local[2]`` session (``common.bench_session``). Rounds alternate the two
sides; the first round (a cold JVM, classes loading) is reported, not compared:

* ``receval`` — ``rv.evaluate`` on ``conf/movielens-100k.yaml`` with the external model of
  ``small_job.py`` (popularity, random, oracle, external; every metric at k = 5, 10, 20;
  segments; bootstrap and comparisons), the metrics collected to the driver
  (``evaluation.outcome``); nothing written.
* ``spark_ml`` — the same split and relevance from u.data, the popularity top-10 of the train
  period for every test user without a window (a sorted ``collect_list``), labels by
  ``collect_set``, a cross join, cached, one ``RankingEvaluator`` per metric (P, R, NDCG,
  MAP @ 10).

Each call's Spark jobs are counted by the status tracker (the job group of the call).

    .venv/bin/python benchmarks/warm_call.py --rounds 4
    .venv/bin/python benchmarks/warm_call.py --set evaluation.bootstrap.samples=0
    .venv/bin/python benchmarks/warm_call.py \
        --conf spark.python.sql.dataFrameDebugging.enabled=false
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import alternate_rounds, bench_session  # noqa: E402
from small_job import CUTOFF, external_lists, receval_config  # noqa: E402

from receval_spark.config_files import read_config_file  # noqa: E402


def spark_ml_four(spark: Any, data: str) -> dict[str, float]:
    """The lean Spark ML user's four numbers of the popularity top-10 (no window)."""
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import functions as F

    log = spark.read.csv(data, sep="\t", schema="user int, item int, rating double, ts long")
    log = log.withColumn("time", F.timestamp_seconds("ts"))
    train = log.filter(F.col("time") < F.lit(CUTOFF))
    test = log.filter((F.col("time") >= F.lit(CUTOFF)) & (F.col("rating") >= 4))
    counts = train.groupBy("item").agg(F.count(F.lit(1)).alias("n"))
    top = counts.agg(
        F.slice(F.sort_array(F.collect_list(F.struct("n", "item")), asc=False).item, 1, 10)
        .cast("array<double>")
        .alias("prediction")
    )
    labels = test.groupBy("user").agg(F.collect_set(F.col("item").cast("double")).alias("label"))
    table = labels.crossJoin(top).cache()
    names = ("precisionAtK", "recallAtK", "ndcgAtK", "meanAveragePrecisionAtK")
    try:
        return {n: RankingEvaluator(metricName=n, k=10).evaluate(table) for n in names}
    finally:
        table.unpersist()


def receval_call(spark: Any, config: dict[str, Any]) -> int:
    """One ``rv.evaluate``, its metrics collected; returns the number of metric rows."""
    import receval_spark as rv

    with rv.evaluate(spark, config) as evaluation:
        return len(evaluation.outcome.metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(HERE.parents[1] / "shared/data/ml-100k/u.data"))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--set", action="append", default=[], help="config override key=value")
    parser.add_argument(
        "--conf", action="append", default=[], help="a Spark setting of the session, key=value"
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="receval-warm-call-"))
    path = receval_config(args.data, external_lists(args.data, scratch), scratch)
    config = read_config_file(path, args.set)
    spark = bench_session(conf=dict(item.split("=", 1) for item in args.conf))
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    sides = {
        "spark_ml": lambda: spark_ml_four(spark, args.data),
        "receval": lambda: receval_call(spark, config),
    }
    medians = alternate_rounds(spark, sides, args.rounds)
    print(f"warm ratio receval / spark_ml: {medians['receval'] / medians['spark_ml']:.1f}")


if __name__ == "__main__":
    main()
