"""Reading and splitting the log against a plain read (issue 50, target 1's last clause).

One process, one ``local[2]`` session (``common.bench_session``), the generated log of a scale
(``generate.py``: /tmp/receval-bench/SCALE/interactions.parquet). Rounds alternate the sides;
the first round (a cold JVM) is reported, not compared:

* ``plain`` — what a Spark user writes to look at the same log: ``spark.read.parquet`` of the
  log, the train rows' filter (before the test cut), ``count()``.
* ``receval`` — the job's ``read`` and ``split`` stages as ``rv.evaluate`` runs them: the
  log read, mapped and validated (``read_ranking_inputs``), the global temporal split
  (``split_interactions``), and the evaluated population (``evaluated_population``: history,
  seen pairs, Rel(u) under the seen rule, users, segments and the catalogue, each persisted),
  released after each round.

Each call's Spark jobs are counted by the status tracker (the job group of the call).

    .venv/bin/python benchmarks/read_split.py --scale medium --rounds 4
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import alternate_rounds, bench_session  # noqa: E402
from generate import generate_scale  # noqa: E402

from receval_spark.cache import releasing_cache  # noqa: E402
from receval_spark.config import JobConfig  # noqa: E402
from receval_spark.ranking.population import evaluated_population  # noqa: E402
from receval_spark.ranking.split import split_interactions  # noqa: E402
from receval_spark.sources import read_ranking_inputs  # noqa: E402


def job_config(data: Path) -> JobConfig:
    """The benchmark's ranking config: the generated log, the global temporal cut at the
    generator's cutoff share, relevance rating >= 4, the seen filter, user segments."""
    return JobConfig.model_validate(
        {
            "data": {
                "interactions": {
                    "path": str(data / "interactions.parquet"),
                    "columns": {"rating": "rating"},
                }
            },
            "split": {"method": "global_temporal", "quantile": 0.8},
            "relevance": {"kind": "threshold", "threshold": 4.0},
            "models": [{"name": "popularity", "kind": "popularity"}],
            "evaluation": {"k": [10], "filter_seen": True, "segments": ["warm", "cold"]},
        }
    )


def plain(spark: Any, data: Path, cut: int) -> int:
    """A plain read of the log, the train rows' filter and a count."""
    from pyspark.sql import functions as F

    log = spark.read.parquet(str(data / "interactions.parquet"))
    return int(log.filter(F.col("timestamp") < cut).count())


def receval(spark: Any, config: JobConfig) -> int:
    """The job's read and split stages; returns the number of evaluated users."""
    with releasing_cache():
        inputs = read_ranking_inputs(spark, config)
        split = split_interactions(config.split, inputs.interactions, inputs.given_split)
        population = evaluated_population(split, config.relevance, config.evaluation)
        return population.n_users


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--data", type=Path, help="default: /tmp/receval-bench/SCALE")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    data = args.data or Path("/tmp/receval-bench") / args.scale
    sizes = generate_scale(args.scale, data)
    print(json.dumps(sizes), flush=True)
    spark = bench_session()
    config = job_config(data)
    sides: dict[str, Callable[[], object]] = {
        "plain": lambda: plain(spark, data, int(sizes["cutoff"])),
        "receval": lambda: receval(spark, config),
    }
    medians = alternate_rounds(spark, sides, args.rounds)
    print(f"ratio receval / plain: {medians['receval'] / medians['plain']:.1f}")


if __name__ == "__main__":
    main()
