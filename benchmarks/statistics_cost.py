"""Wall time the statistics add to the evaluation job (issue 4), and how the bootstrap scales.

Part 1 (``--demo``): the embedded demo job (ml-latest-small, conf/demo.yaml) run end to end
with ``receval evaluate`` in a fresh process, ``--runs`` times per variant:
  core        evaluation.bootstrap_samples=0, evaluation.baseline=null
  default     bootstrap_samples=100 (the default) and comparisons against popularity
  B=200       bootstrap_samples=200 and comparisons
Part 2 (``--scaling``): bootstrap spreads of the group statistics alone (coverage, Gini,
entropy, popularity bias, personalization; k = 5, 10, 20) on generated data
(benchmarks/generate.py) at 1x and 2x the users, for B = 0 (point values only) and B = 100.

    python benchmarks/statistics_cost.py --demo --runs 2
    python benchmarks/statistics_cost.py --scaling --base-users 10000
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

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "core": ["evaluation.bootstrap_samples=0", "evaluation.baseline=null"],
    "default": [],
    "B=200": ["evaluation.bootstrap_samples=200"],
}
GROUP_METRICS = ["coverage", "gini", "entropy", "popularity_bias", "personalization"]
KS = [5, 10, 20]


def time_demo(runs: int) -> dict[str, list[float]]:
    """Seconds of each end-to-end demo run per variant (runs interleaved across variants)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(runs):
        for name, overrides in VARIANTS.items():
            with tempfile.TemporaryDirectory() as out:
                argv = [
                    sys.executable,
                    "-m",
                    "receval_spark",
                    "evaluate",
                    "--config",
                    str(REPO / "conf" / "demo.yaml"),
                    "--set",
                    f"output.path={out}",
                ]
                for override in overrides:
                    argv += ["--set", override]
                start = time.perf_counter()
                subprocess.run(argv, check=True, env=env, capture_output=True)
                seconds[name].append(time.perf_counter() - start)
    return seconds


def time_scaling(base_users: int, data: Path) -> dict[str, float]:
    """Seconds of the group statistics with B = 0 and B = 100 at 1x and 2x the users."""
    sys.path.insert(0, str(Path(__file__).parent))
    from common import bench_session
    from generate import generate
    from pyspark.sql import functions as F

    from receval_spark.columns import GRADE, ITEM, RANK, USER
    from receval_spark.metrics.group import group_beyond
    from receval_spark.metrics.lists import (
        BeyondInputs,
        catalogue_totals,
        item_statistics,
        top_k_lists,
    )
    from receval_spark.ranking.topk import top_k

    spark = bench_session()
    results = {}
    for scale in (1, 2):
        folder = data / f"statistics-{base_users}x{scale}"
        if not (folder / "candidates.parquet").exists():
            generate(
                users=base_users * scale,
                items=20_000,
                mean_activity=20.0,
                n_candidates=100,
                seed=7,
                out=folder,
            )
        history = spark.read.parquet(str(folder / "interactions.parquet")).persist()
        candidates = spark.read.parquet(str(folder / "candidates.parquet"))
        ranked = top_k(candidates, k=max(KS)).withColumn("model", F.lit("m")).persist()
        catalogue = item_statistics(history).persist()
        empty = history.limit(0).select(USER, ITEM, F.lit(1.0).alias(GRADE))
        inputs = BeyondInputs(
            catalogue=catalogue,
            totals=catalogue_totals(history, catalogue).persist(),
            truth=empty,
            expected=empty.select(USER, ITEM, F.lit(1).alias(RANK)),
        )
        slots = top_k_lists(ranked, ks=KS).count()
        catalogue.count()
        for samples in (0, 100):
            start = time.perf_counter()
            group_beyond(
                ranked,
                inputs,
                keys=["model"],
                ks=KS,
                metrics=GROUP_METRICS,
                pairs=1,
                seed=1,
                bootstrap_samples=samples,
            ).collect()
            results[f"{scale}x users ({slots:,} list rows), B={samples}"] = round(
                time.perf_counter() - start, 1
            )
        for frame in (history, ranked, catalogue, inputs.totals):
            frame.unpersist()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--base-users", type=int, default=10_000)
    parser.add_argument("--data", type=Path, default=Path("/tmp/receval-bench"))
    args = parser.parse_args()
    if args.demo:
        seconds = time_demo(args.runs)
        medians = {name: statistics.median(v) for name, v in seconds.items()}
        print(
            json.dumps(
                {
                    "runs": seconds,
                    "median": medians,
                    "added_by_default": medians["default"] - medians["core"],
                },
                indent=2,
            )
        )
    if args.scaling:
        print(json.dumps(time_scaling(args.base_users, args.data), indent=2))


if __name__ == "__main__":
    main()
