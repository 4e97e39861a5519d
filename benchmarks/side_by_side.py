"""Side by side on identical generated data: this project, Spark ML's RankingEvaluator,
Microsoft Recommenders' Spark evaluators and a single-process numpy floor.

Every tool runs in its own process (its own JVM) on the same inputs of one named scale
(``generate.py``): interactions split at the generator's cutoff (train before, test from
it), Rel(u) = the distinct test (user, item) pairs (implicit relevance), and the candidate
lists of the test users. Inputs are read and cached (and counted) before the clock starts;
each timed run then computes the tool's metrics from the cached inputs and brings the numbers
to the driver. Tools (``--tools``):

* ``receval``: precision, recall, NDCG, MAP at k = 10 with this project's functions
  (seen-item filter, one ranking window, one per-user pass, exact macro averages).
* ``receval_unfiltered`` (only when named in ``--tools``): the same without the seen-item
  filter, which the other Spark tools do not run (the generated candidates hold no train item,
  so the values are the same): what the filter costs.
* ``spark_ml``: ``pyspark.ml.evaluation.RankingEvaluator``, one ``evaluate`` per metric, on
  the (prediction array, label array) table built as its users do (window top-k,
  ``collect_list``).
* ``spark_ml_lean``: the same evaluator on the table a lean Spark user builds without a
  window: per user ``slice(sort_array(collect_list(struct(score, item)), desc), 1, k)``, the
  labels by ``collect_set``, an inner join, cached, then one ``evaluate`` per metric. The
  ratios to Spark ML take the faster of the two.
* ``recommenders``: ``SparkRankingEvaluation`` (relevancy ``top_k``), its four metrics.
* ``numpy``: the same four numbers in one process with numpy (sort, isin, bincount).
* ``receval_full``: the whole job (``rv.evaluate`` + ``rv.write_reports``) on one external
  model: every accuracy metric at k = 5, 10, 20, every beyond-accuracy metric (category
  diversity, no embeddings), t-intervals and bootstrap intervals (B = 100); its per-stage
  seconds are recorded and the compared time is the stages after split and before write
  (top_k .. checks), the phases the other tools are timed on.
* ``recommenders_full``: the four ranking metrics plus ``SparkDiversityEvaluation``'s catalogue
  coverage, novelty, diversity and serendipity (item co-occurrence similarity).

Values are checked against the numpy numbers (1e-9) before any time is compared.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/side_by_side.py --scale medium
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
K = 10
FOUR = ("precision", "recall", "ndcg", "map")
DEFAULT_TOOLS = (
    "numpy",
    "receval",
    "spark_ml",
    "spark_ml_lean",
    "recommenders",
    "receval_full",
    "recommenders_full",
)
TOOLS = (*DEFAULT_TOOLS, "receval_unfiltered")
TOLERANCE = 1e-9
SPARK_ML_NAMES = {
    "precision": "precisionAtK",
    "recall": "recallAtK",
    "ndcg": "ndcgAtK",
    "map": "meanAveragePrecisionAtK",
}
# the stages of receval_full that correspond to the other tools' timed phase
COMPARED_STAGES = ("top_k", "accuracy", "beyond", "statistics", "checks")


# --- numpy floor ---------------------------------------------------------------------------


def numpy_inputs(data: Path) -> dict[str, np.ndarray]:
    """Train pairs, test pairs and candidates as int64/float64 arrays (read, not timed)."""
    import pyarrow.parquet as pq

    meta = json.loads((data / "meta.json").read_text())
    log = pq.read_table(data / "interactions.parquet")
    users = log["user_id"].to_numpy()
    items = log["item_id"].to_numpy()
    test = log["timestamp"].to_numpy() >= meta["cutoff"]
    candidates = pq.read_table(data / "candidates.parquet")
    return {
        "n_items": np.int64(meta["items"]),
        "train_user": users[~test],
        "train_item": items[~test],
        "test_user": users[test],
        "test_item": items[test],
        "cand_user": candidates["user_id"].to_numpy(),
        "cand_item": candidates["item_id"].to_numpy(),
        "cand_score": candidates["score"].to_numpy(),
    }


def numpy_four(a: dict[str, np.ndarray]) -> dict[str, float]:
    """P, R, NDCG, MAP at K over the users with a relevant test item (DESIGN §5)."""
    n = a["n_items"]
    seen = np.unique(a["train_user"] * n + a["train_item"])
    keep = ~members(a["cand_user"] * n + a["cand_item"], seen)
    user, item, score = a["cand_user"][keep], a["cand_item"][keep], a["cand_score"][keep]
    order = np.argsort(item, kind="stable")  # ties: item ascending
    order = order[np.argsort(-score[order], kind="stable")]
    order = order[np.argsort(user[order], kind="stable")]
    user, item = user[order], item[order]
    starts = np.flatnonzero(np.r_[True, user[1:] != user[:-1]])
    rank = np.arange(len(user)) - np.repeat(starts, np.diff(np.r_[starts, len(user)])) + 1
    top = rank <= K
    user, item, rank = user[top], item[top], rank[top]
    truth = np.unique(a["test_user"] * n + a["test_item"])
    truth_users, n_relevant = np.unique(truth // n, return_counts=True)
    hit = members(user * n + item, truth)
    # position of each list's user among the evaluated users (lists of other users drop out)
    at = np.minimum(np.searchsorted(truth_users, user), len(truth_users) - 1)
    evaluated = truth_users[at] == user
    at, hit, rank = at[evaluated], hit[evaluated], rank[evaluated]
    # hits at ranks <= i within each user's list (rows are sorted by user, then rank)
    running = np.cumsum(hit)
    starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    hits_so_far = running - np.repeat(
        running[starts] - hit[starts], np.diff(np.r_[starts, len(at)])
    )
    size = len(truth_users)
    hits = np.bincount(at, weights=hit, minlength=size)
    dcg = np.bincount(at, weights=hit / np.log2(rank + 1.0), minlength=size)
    ap_sum = np.bincount(at, weights=hit * hits_so_far / rank, minlength=size)
    discounts = np.cumsum(1.0 / np.log2(np.arange(1, K + 1) + 1.0))
    idcg = discounts[np.minimum(n_relevant, K) - 1]
    return {
        "precision": float(np.mean(hits / K)),
        "recall": float(np.mean(hits / n_relevant)),
        "ndcg": float(np.mean(dcg / idcg)),
        "map": float(np.mean(ap_sum / np.minimum(n_relevant, K))),
    }


def members(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """values[i] in sorted_unique, by binary search (no sort of ``values``)."""
    at = np.minimum(np.searchsorted(sorted_unique, values), len(sorted_unique) - 1)
    return sorted_unique[at] == values


# --- Spark tools ---------------------------------------------------------------------------


def spark_inputs(spark: Any, data: Path) -> dict[str, Any]:
    """Train pairs, Rel(u) with grade 1, candidates: read, persisted and counted (not timed)."""
    from pyspark.sql import functions as F

    meta = json.loads((data / "meta.json").read_text())
    log = spark.read.parquet(str(data / "interactions.parquet"))
    cutoff = F.col("timestamp") >= meta["cutoff"]
    inputs = {
        "train": log.filter(~cutoff).select("user_id", "item_id").distinct(),
        "truth": log.filter(cutoff)
        .select("user_id", "item_id")
        .distinct()
        .withColumn("grade", F.lit(1.0)),
        "candidates": spark.read.parquet(str(data / "candidates.parquet")),
    }
    for name, df in inputs.items():
        inputs[name] = df.persist()
        inputs[name].count()
    return inputs


def receval_four(inputs: dict[str, Any], *, filter_seen: bool = True) -> dict[str, float]:
    """This project's functions: seen filter (unless ``filter_seen`` is false) + top-k window,
    per-user pass, exact averages."""
    from receval_spark.metrics.accuracy import per_user_accuracy
    from receval_spark.metrics.aggregate import macro_average, to_long
    from receval_spark.ranking.topk import rank_candidates

    seen = inputs["train"] if filter_seen else None
    ranked = rank_candidates(inputs["candidates"], k=K, seen=seen)
    scores = per_user_accuracy(ranked, inputs["truth"], ks=[K])
    long = to_long(scores, metrics=FOUR, keys=["user_id", "k"])
    return {r["metric"]: r["value"] for r in macro_average(long, by=["metric"]).collect()}


def top_lists(candidates: Any) -> Any:
    """(user_id, item_id, rank <= K): the window top-k every Spark tool's users write."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("user_id").orderBy(F.col("score").desc(), F.col("item_id"))
    ranked = candidates.withColumn("rank", F.row_number().over(order))
    return ranked.filter(F.col("rank") <= K)


def spark_ml_four(inputs: dict[str, Any]) -> dict[str, float]:
    """RankingEvaluator on (prediction, label) double arrays, one evaluate per metric."""
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import functions as F

    predictions = (
        top_lists(inputs["candidates"])
        .groupBy("user_id")
        .agg(F.sort_array(F.collect_list(F.struct("rank", "item_id"))).alias("ranked"))
        .select("user_id", F.col("ranked.item_id").cast("array<double>").alias("prediction"))
    )
    labels = (
        inputs["truth"]
        .groupBy("user_id")
        .agg(F.collect_list(F.col("item_id").cast("double")).alias("label"))
    )
    table = labels.join(predictions, "user_id", "left").select(
        F.coalesce("prediction", F.array().cast("array<double>")).alias("prediction"), "label"
    )
    return {
        metric: RankingEvaluator(metricName=name, k=K).evaluate(table)
        for metric, name in SPARK_ML_NAMES.items()
    }


def spark_ml_lean_four(inputs: dict[str, Any]) -> dict[str, float]:
    """RankingEvaluator on the window-free table: top k of a sorted ``collect_list`` per user,
    labels by ``collect_set``, inner join, cached while the four metrics are evaluated."""
    from pyspark.ml.evaluation import RankingEvaluator
    from pyspark.sql import functions as F

    ranked = F.sort_array(F.collect_list(F.struct("score", "item_id")), asc=False)
    predictions = (
        inputs["candidates"]
        .groupBy("user_id")
        .agg(F.slice(ranked.getField("item_id"), 1, K).alias("top"))
        .select("user_id", F.col("top").cast("array<double>").alias("prediction"))
    )
    labels = (
        inputs["truth"]
        .groupBy("user_id")
        .agg(F.collect_set(F.col("item_id").cast("double")).alias("label"))
    )
    table = predictions.join(labels, "user_id").select("prediction", "label").cache()
    try:
        return {
            metric: RankingEvaluator(metricName=name, k=K).evaluate(table)
            for metric, name in SPARK_ML_NAMES.items()
        }
    finally:
        table.unpersist()


def recommenders_ranking(inputs: dict[str, Any]) -> dict[str, float]:
    """recommenders' SparkRankingEvaluation with relevancy_method='top_k'."""
    from pyspark.sql import functions as F
    from recommenders.evaluation.spark_evaluation import SparkRankingEvaluation

    evaluation = SparkRankingEvaluation(
        inputs["truth"].select("user_id", "item_id", F.lit(1.0).alias("rating")),
        inputs["candidates"],
        k=K,
        relevancy_method="top_k",
        col_user="user_id",
        col_item="item_id",
        col_rating="rating",
        col_prediction="score",
    )
    return {
        "precision": evaluation.precision_at_k(),
        "recall": evaluation.recall_at_k(),
        "ndcg": evaluation.ndcg_at_k(),
        "map": evaluation.map_at_k(),
    }


def recommenders_full(inputs: dict[str, Any]) -> dict[str, float]:
    """The four ranking metrics plus SparkDiversityEvaluation's four at K."""
    from recommenders.evaluation.spark_evaluation import SparkDiversityEvaluation

    values = recommenders_ranking(inputs)
    diversity = SparkDiversityEvaluation(
        train_df=inputs["train"],
        reco_df=top_lists(inputs["candidates"]).select("user_id", "item_id"),
        col_user="user_id",
        col_item="item_id",
    )
    return values | {
        "coverage": diversity.catalog_coverage(),
        "novelty (recommenders)": diversity.novelty(),
        "diversity (recommenders)": diversity.diversity(),
        "serendipity (recommenders)": diversity.serendipity(),
    }


def full_job_config(data: Path, output: Path) -> dict[str, Any]:
    """The whole job on the generated data: one external model, every metric at 5, 10, 20."""
    meta = json.loads((data / "meta.json").read_text())
    cutoff = dt.datetime.fromtimestamp(meta["cutoff"], dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "run": {"name": "bench-side-by-side", "date": "2026-11-30"},
        "data": {
            "interactions": {
                "path": str(data / "interactions.parquet"),
                "columns": {"rating": "rating"},
            },
            "items": {"path": str(data / "items.parquet"), "columns": {"category": "categories"}},
        },
        "split": {"method": "global_temporal", "cutoff": cutoff},
        "relevance": {"kind": "implicit"},
        "models": [{"name": "model", "kind": "external", "path": str(data / "candidates.parquet")}],
        "evaluation": {
            "k": [5, 10, 20],
            "baseline": None,
            "segments": [],
            "embeddings": {"source": "none"},
        },
        "output": {"path": str(output)},
    }


def receval_full_run(spark: Any, data: Path) -> tuple[dict[str, float], dict[str, float]]:
    """One run of the whole job in this process: (metric values at K, stage seconds)."""
    import receval_spark as rv

    with tempfile.TemporaryDirectory() as tmp:
        config = full_job_config(data, Path(tmp) / "reports")
        with rv.evaluate(spark, config, keep_cached=True) as evaluation:
            commit = rv.write_reports(evaluation)
    values = {
        r.metric: r.value
        for r in evaluation.outcome.metrics
        if r.segment == "all" and r.k == K and r.metric in (*FOUR, "coverage")
    }
    return values, {**evaluation.stage_seconds, "write": commit.seconds}


# --- one tool in this process ----------------------------------------------------------------


Run = Callable[[], tuple[dict[str, float], dict[str, float] | None]]


def load(tool: str, data: Path) -> Run:
    """Load ``tool``'s inputs once (not timed); return one run of it: (values, the job's stage
    seconds for ``receval_full``, which reads its own inputs, else None)."""
    if tool == "numpy":
        arrays = numpy_inputs(data)
        return lambda: (numpy_four(arrays), None)
    sys.path.insert(0, str(HERE))
    from common import bench_session

    spark = bench_session()
    if tool == "receval_full":
        return lambda: receval_full_run(spark, data)
    inputs = spark_inputs(spark, data)
    compute = {
        "receval": receval_four,
        "receval_unfiltered": functools.partial(receval_four, filter_seen=False),
        "spark_ml": spark_ml_four,
        "spark_ml_lean": spark_ml_lean_four,
        "recommenders": recommenders_ranking,
        "recommenders_full": recommenders_full,
    }[tool]
    return lambda: (compute(inputs), None)


def worker(tool: str, data: Path, runs: int) -> dict[str, Any]:
    """Load the inputs once, then time ``runs`` runs of ``tool``: seconds and values. A whole
    job's time is the sum of its stages in the other tools' timed phase (COMPARED_STAGES)."""
    started = time.monotonic()
    run = load(tool, data)
    loaded = time.monotonic() - started
    seconds, stages, values = [], [], {}
    for _ in range(runs):
        began = time.monotonic()
        values, stage_seconds = run()
        if stage_seconds is None:
            seconds.append(time.monotonic() - began)
        else:
            stages.append(stage_seconds)
            seconds.append(sum(stage_seconds[s] for s in COMPARED_STAGES))
        print(f"{tool}: run {len(seconds)} {seconds[-1]:.2f} s", file=sys.stderr, flush=True)
    return {
        "tool": tool,
        "load_seconds": loaded,
        "runs": seconds,
        "median": statistics.median(seconds),
        "values": values,
        "stages": stages,
    }


# --- the comparison ------------------------------------------------------------------------


def run_tool(tool: str, data: Path, runs: int, timeout: float) -> dict[str, Any]:
    """``worker`` in a fresh Python process; a failure or timeout is recorded, not raised."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        command = [sys.executable, __file__, "--worker", tool, "--data", str(data)]
        command += ["--runs", str(runs), "--result", str(result)]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        started = time.monotonic()
        try:
            done = subprocess.run(command, env=env, timeout=timeout, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return {"tool": tool, "error": f"no result within {timeout:.0f} s"}
        if done.returncode != 0 or not result.exists():
            return {"tool": tool, "error": done.stderr.strip().splitlines()[-1:]}
        outcome = json.loads(result.read_text())
        outcome["process_seconds"] = time.monotonic() - started
        return outcome


def agreement(results: list[dict[str, Any]]) -> dict[str, float]:
    """Largest absolute difference of each tool's four values from the numpy floor's."""
    floor = next(r for r in results if r["tool"] == "numpy")["values"]
    return {
        r["tool"]: max(abs(r["values"][m] - floor[m]) for m in FOUR)
        for r in results
        if "values" in r
    }


def table(results: list[dict[str, Any]], differences: dict[str, float]) -> str:
    """Markdown: median, runs and ratios to Spark ML and to recommenders (same metric set)."""
    medians = {r["tool"]: r["median"] for r in results if "median" in r}
    spark_ml = min(
        (medians[tool] for tool in ("spark_ml", "spark_ml_lean") if tool in medians), default=None
    )
    lines = [
        "| tool | metrics | runs (s) | median (s) | / Spark ML | / recommenders | max diff |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['tool']} | | {r['error']} | | | | |")
            continue
        tool, median = r["tool"], r["median"]
        full = tool.endswith("_full")
        reference = "recommenders_full" if full else "recommenders"
        ratio_ml = _ratio(median, spark_ml)
        lines.append(
            f"| {tool} | {'full' if full else '4 @ 10'} | "
            f"{', '.join(f'{s:.2f}' for s in r['runs'])} | {median:.2f} | {ratio_ml} | "
            f"{_ratio(median, medians.get(reference))} | {differences.get(tool, 0):.1e} |"
        )
    return "\n".join(lines)


def _ratio(value: float, reference: float | None) -> str:
    return "" if reference is None else f"{value / reference:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("small", "medium", "large"), default="small")
    parser.add_argument("--data", type=Path, help="default: /tmp/receval-bench/SCALE")
    parser.add_argument("--tools", default=",".join(DEFAULT_TOOLS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per tool")
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    data = args.data or Path("/tmp/receval-bench") / args.scale
    if args.worker:
        args.result.write_text(json.dumps(worker(args.worker, data, args.runs)))
        return

    sys.path.insert(0, str(HERE))
    from generate import generate_scale

    sizes = generate_scale(args.scale, data)
    print(json.dumps(sizes), flush=True)
    results = []
    for tool in args.tools.split(","):
        results.append(run_tool(tool, data, args.runs, args.timeout))
        print(json.dumps(results[-1]), flush=True)
    differences = agreement(results) if any(r["tool"] == "numpy" for r in results) else {}
    wrong = {tool: d for tool, d in differences.items() if d > TOLERANCE}
    print(table(results, differences))
    (data / "side_by_side.json").write_text(json.dumps({"sizes": sizes, "results": results}))
    if wrong:
        sys.exit(f"values differ from the numpy floor by more than {TOLERANCE}: {wrong}")


if __name__ == "__main__":
    main()
