"""What the paired randomization test adds to the comparisons step (evaluation.randomization_test).

The job runs once, in this process, on a generated scale (benchmarks/generate.py): popularity
(the baseline), random and the generated external model, segments all, warm and cold, every
per-user metric at k = 5, 10, 20 (not timed). Its per-user table is persisted, then the
comparisons step alone (``compare_run``: every model against popularity per segment, metric
and k) is timed ``--runs`` times each, alternating, without the test and with it at
``--permutations`` (default 10,000), counting the Spark jobs of each call. Also printed: the
comparisons, the (comparison, |d|) rows the randomization kernel reads, and how many of the
comparisons were exact.

    .venv/bin/python benchmarks/randomization_cost.py --scale medium --runs 3
    .venv/bin/python benchmarks/randomization_cost.py --users 400 --runs 1   # a smoke run
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import bench_session
from generate import SCALE_DEFAULTS, generate, generate_scale
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import receval_spark as rv
from receval_spark.config import RandomizationTest
from receval_spark.metrics.compare import COMPARISON_KEYS, compare_run, paired_differences
from receval_spark.metrics.randomization import EXACT_POINTS, enumeration_points

BASELINE = "popularity"


def job_config(data: Path, output: Path) -> dict[str, Any]:
    """Three models on the generated data, compared with popularity on all, warm and cold."""
    meta = json.loads((data / "meta.json").read_text())
    cutoff = dt.datetime.fromtimestamp(meta["cutoff"], dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "run": {"name": "bench-randomization", "date": "2026-12-05"},
        "data": {"interactions": {"path": str(data / "interactions.parquet")}},
        "split": {"method": "global_temporal", "cutoff": cutoff},
        "relevance": {"kind": "implicit"},
        "models": [
            {"name": BASELINE, "kind": "popularity"},
            {"name": "random", "kind": "random", "seed": 7},
            {"name": "model", "kind": "external", "path": str(data / "candidates.parquet")},
        ],
        "evaluation": {
            "k": [5, 10, 20],
            "baseline": BASELINE,
            "segments": ["warm", "cold"],
            "bootstrap_samples": 0,
            "embeddings": {"source": "none"},
        },
        "output": {"path": str(output)},
    }


def per_user_table(spark: SparkSession, data: Path) -> DataFrame:
    """The job's per-user table (model, segment, metric, k, user_id, value), persisted."""
    with tempfile.TemporaryDirectory() as tmp:
        evaluation = rv.evaluate(spark, job_config(data, Path(tmp) / "reports"))
    per_user = evaluation.outcome.per_user
    assert per_user is not None
    per_user = per_user.persist()
    per_user.count()
    return per_user


def kernel_input(per_user: DataFrame, permutations: int) -> dict[str, int]:
    """The comparisons, the (comparison, |d|) rows of the kernel, and the exact ones."""
    keys = ["model", *COMPARISON_KEYS]
    differences = paired_differences(per_user, baseline=BASELINE).filter(F.col("diff") != 0)
    groups = differences.groupBy(*keys, F.abs("diff").alias("magnitude")).count()
    counts = groups.groupBy(*keys).agg(F.collect_list("count").alias("c")).collect()
    limit = max(permutations, EXACT_POINTS)
    return {
        "comparisons with a non-zero difference": len(counts),
        "(comparison, |d|) rows": sum(len(r["c"]) for r in counts),
        "exact": sum(enumeration_points(r["c"], limit=limit) <= limit for r in counts),
    }


def timed(spark: SparkSession, name: str, run: Any) -> tuple[float, int, Any]:
    """(wall seconds, Spark jobs, result) of ``run()`` in its own job group."""
    context = spark.sparkContext
    context.setJobGroup(name, name)
    started = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - started
    jobs = len(context.statusTracker().getJobIdsForGroup(name))
    context.setJobGroup("", "")
    return seconds, jobs, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="medium", help="a named scale of generate.py")
    parser.add_argument("--users", type=int, help="instead of --scale: this many users")
    parser.add_argument("--root", type=Path, default=Path("/tmp/receval-bench"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--permutations", type=int, default=10_000)
    args = parser.parse_args()
    if args.users is not None:
        folder = args.root / f"randomization-{args.users}"
        if not (folder / "meta.json").exists():
            generate(**{**SCALE_DEFAULTS, "users": args.users}, out=folder)
    else:
        folder = args.root / args.scale
        generate_scale(args.scale, folder)
    spark = bench_session()
    per_user = per_user_table(spark, folder)
    print(json.dumps(kernel_input(per_user, args.permutations)), flush=True)
    test = RandomizationTest(permutations=args.permutations, seed=42)
    variants = {"without": None, "with": test}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    jobs: dict[str, int] = {}
    for run in range(args.runs):
        for name, randomization in variants.items():
            took, jobs[name], rows = timed(
                spark,
                f"{name}-{run}",
                lambda r=randomization: compare_run(
                    {"full": per_user}, baseline=BASELINE, randomization=r
                ),
            )
            seconds[name].append(took)
    print(f"{len(rows)} comparisons; permutations {args.permutations}")
    print("| comparisons step | runs (s) | median (s) | Spark jobs |")
    print("|---|---|---:|---:|")
    for name, values in seconds.items():
        runs = ", ".join(f"{s:.1f}" for s in values)
        print(
            f"| {name} randomization test | {runs} | {statistics.median(values):.1f} | "
            f"{jobs[name]} |"
        )
    added = statistics.median(seconds["with"]) - statistics.median(seconds["without"])
    print(f"added by the test: {added:.1f} s")


if __name__ == "__main__":
    main()
