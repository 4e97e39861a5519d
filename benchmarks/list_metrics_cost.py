"""What each list metric family of the beyond stage costs (issue 50: where the stage goes).

One process, one ``local[2]`` session (``common.bench_session``), the generated data of a scale
(``generate.py``): the job's read, split and evaluated population of ``read_split.py``'s
config, and the generated model's top-20 lists of the evaluated users, each persisted once.
Then each family of ``fairness_stage.list_metrics`` (miscalibration; awrf with exposure_gap;
the agreement metrics against a popularity list) at k = 5, 10, 20 is computed alone and its
per-user rows macro-averaged and collected, in alternating rounds (``common.alternate_rounds``:
seconds and Spark jobs per call; the first round is reported, not compared).

    .venv/bin/python benchmarks/list_metrics_cost.py --scale medium --rounds 3
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
from pyspark.sql import functions as F  # noqa: E402
from read_split import job_config  # noqa: E402

from receval_spark.cache import persist  # noqa: E402
from receval_spark.columns import ITEM, USER  # noqa: E402
from receval_spark.metrics.aggregate import macro_average  # noqa: E402
from receval_spark.ranking.fairness_stage import list_metrics  # noqa: E402
from receval_spark.ranking.models.popularity import popularity_candidates  # noqa: E402
from receval_spark.ranking.population import evaluated_population  # noqa: E402
from receval_spark.ranking.split import split_interactions  # noqa: E402
from receval_spark.ranking.topk import top_k  # noqa: E402
from receval_spark.sources import read_ranking_inputs  # noqa: E402

KS = [5, 10, 20]
FAMILIES = {
    "miscalibration": ["miscalibration"],
    "exposure": ["awrf", "exposure_gap"],
    "agreement": ["intersection", "agreement_rbo", "unexpectedness"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--data", type=Path, help="default: /tmp/receval-bench/SCALE")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    args = parser.parse_args()
    data = args.data or Path("/tmp/receval-bench") / args.scale
    print(json.dumps(generate_scale(args.scale, data)), flush=True)
    spark = bench_session()
    config = job_config(data)
    inputs = read_ranking_inputs(spark, config)
    split = split_interactions(config.split, inputs.interactions, inputs.given_split)
    population = evaluated_population(split, config.relevance, config.evaluation)
    lists = persist(_lists(spark, data, population))
    print(f"{lists.count()} list rows of {population.n_users} users", flush=True)
    categories = spark.read.parquet(str(data / "items.parquet"))
    sides: dict[str, Callable[[], object]] = {
        family: _family(lists, population, config, categories, metrics)
        for family, metrics in FAMILIES.items()
        if family in args.families
    }
    alternate_rounds(spark, sides, args.rounds)


def _lists(spark: Any, data: Path, population: Any) -> Any:
    """(model, user_id, item_id, rank): the generated model's and popularity's top-20 of the
    evaluated users, the seen items removed."""
    users = population.users.select(USER)
    scored = spark.read.parquet(str(data / "candidates.parquet")).select(USER, ITEM, "score")
    generated = scored.join(users, on=USER).withColumn("model", F.lit("generated"))
    popular = popularity_candidates(population.history, users, k=max(KS), seen=population.seen)
    candidates = generated.unionByName(popular.withColumn("model", F.lit("popularity")))
    unseen = candidates.join(population.seen, on=[USER, ITEM], how="left_anti")
    return top_k(unseen, k=max(KS), by=["model"]).select("model", USER, ITEM, "rank")


def _family(
    lists: Any, population: Any, config: Any, categories: Any, metrics: list[str]
) -> Callable[[], object]:
    settings = config.evaluation.model_copy(
        update={"k": KS, "metrics": metrics, "baseline": "popularity"}
    )

    def call() -> object:
        out = list_metrics(
            lists,
            population,
            settings,
            catalogue=population.catalogue,
            categories=categories,
            item_segments=None,
            models=["generated", "popularity"],
        )
        assert out.per_user is not None, out.warnings
        return macro_average(out.per_user, by=["model", "metric", "k"]).collect(), out.rows

    return call


if __name__ == "__main__":
    main()
