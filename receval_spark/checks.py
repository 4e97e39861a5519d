"""Sanity checks and warnings written into every run record (DESIGN §7).

A check states something that must hold for the numbers to mean anything; a failed check
makes the job exit non-zero after writing the run record. A warning flags a protocol choice
that weakens the numbers without making them wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame

from receval_spark.config import ACCURACY_METRICS, JobConfig
from receval_spark.report.tables import Check, MetricRow
from receval_spark.schema import ITEM, USER
from receval_spark.split import LEAKY_METHODS

ORACLE_TOLERANCE = 1e-9
PEERS = {
    "spark_mllib": "Spark MLlib's RankingMetrics",
    "recommenders": "Microsoft Recommenders' SparkRankingEvaluation",
}


def temporal_leakage_check(split_summary: dict[str, Any]) -> Check:
    """``no_temporal_leakage``: no train (or validation) timestamp at or after its cut-off and
    no test timestamp before the test cut-off, read off the split's per-part time ranges."""
    cutoff = split_summary["cutoff"]
    problems = []
    if split_summary["train"]["last_timestamp"] >= split_summary.get("validation_cutoff", cutoff):
        problems.append("train has interactions at or after the cut-off")
    if "validation" in split_summary and split_summary["validation"]["last_timestamp"] >= cutoff:
        problems.append("validation has interactions at or after the test cut-off")
    if split_summary["test"]["first_timestamp"] < cutoff:
        problems.append("test has interactions before the cut-off")
    return Check(
        "no_temporal_leakage",
        not problems,
        "; ".join(problems)
        or f"train ends {split_summary['train']['last_timestamp']}, test "
        f"starts {split_summary['test']['first_timestamp']}, cut-off {cutoff}",
    )


def oracle_check(name: str, rows: Sequence[MetricRow]) -> Check:
    """``oracle_ndcg[name]``: the oracle's NDCG@k is 1 (within 1e-9) at every k over all users."""
    ndcg = [r for r in rows if r.model == name and r.segment == "all" and r.metric == "ndcg"]
    bad = [r for r in ndcg if abs((r.value or 0.0) - 1.0) > ORACLE_TOLERANCE]
    detail = "; ".join(f"NDCG@{r.k} = {r.value:.6f}" for r in bad) or "NDCG@k = 1 at every k"
    if not ndcg:
        bad, detail = [name], "no NDCG rows for the oracle (add ndcg to evaluation.metrics)"
    return Check(f"oracle_ndcg[{name}]", not bad, detail)


def heldout_check(truth: DataFrame, seen: DataFrame) -> Check:
    """``heldout_not_in_train``: with seen items filtered, no relevant test (user, item) pair
    occurs in train (it could never be recommended, capping every model's recall)."""
    overlap = truth.join(seen, on=[USER, ITEM], how="left_semi").count()
    return Check(
        "heldout_not_in_train",
        overlap == 0,
        f"{overlap} relevant test (user, item) pairs also occur in train; with filter_seen "
        "they can never be recommended (re-consumption: set evaluation.filter_seen=false or "
        "drop repeat interactions from test)"
        if overlap
        else "no relevant test pair occurs in train",
    )


def same_users_check(rows: Sequence[MetricRow], models: Sequence[str]) -> Check:
    """``same_users_all_models``: every model has the same accuracy (segment, metric, k) rows,
    each over the same number of users."""
    accuracy = [r for r in rows if r.metric in ACCURACY_METRICS]
    by_model: dict[str, dict[tuple[str, str, int | None], int]] = {m: {} for m in models}
    for r in accuracy:
        by_model.setdefault(r.model, {})[(r.segment, r.metric, r.k)] = r.n_users
    problems = []
    reference_model, reference = next(iter(by_model.items()), ("", {}))
    for model, counts in by_model.items():
        missing = sorted(set(reference) ^ set(counts), key=str)
        if missing:
            problems.append(f"{model} and {reference_model} differ in rows {missing[:3]}")
        uneven = sorted(
            (key for key in set(reference) & set(counts) if counts[key] != reference[key]),
            key=str,
        )
        if uneven:
            problems.append(
                f"{model} is evaluated on other users than {reference_model} at {uneven[:3]}"
            )
    return Check(
        "same_users_all_models",
        not problems,
        "; ".join(problems) or "every model is evaluated on the same users, split and k",
    )


def run_checks(
    config: JobConfig,
    split_summary: dict[str, Any],
    rows: Sequence[MetricRow],
    *,
    truth: DataFrame,
    seen: DataFrame | None,
) -> list[Check]:
    """Every check that applies to this configuration."""
    checks = []
    if config.split.method == "global_temporal":
        checks.append(temporal_leakage_check(split_summary))
    checks += [oracle_check(m.name, rows) for m in config.models if m.kind == "oracle"]
    if seen is not None:
        checks.append(heldout_check(truth, seen))
    if config.evaluation.definitions != "recommenders":  # it drops users without lists
        checks.append(same_users_check(rows, [m.name for m in config.models]))
    return checks


def run_warnings(config: JobConfig, n_users: int, rows: Sequence[MetricRow]) -> list[str]:
    """Leaky split, fewer than ``evaluation.min_users`` users, seen items not filtered,
    sampled metrics."""
    warnings = []
    if config.split.method in LEAKY_METHODS:
        warnings.append(f"leaky split: {LEAKY_METHODS[config.split.method]}")
    if n_users < config.evaluation.min_users:
        warnings.append(
            f"only {n_users} users evaluated "
            f"(evaluation.min_users = {config.evaluation.min_users}): "
            "averages over so few users are unreliable"
        )
    if not config.evaluation.filter_seen:
        warnings.append(
            "filter_seen is off: items users already interacted with may be recommended"
        )
    definitions = config.evaluation.definitions
    if definitions != "receval":
        warnings.append(
            f"evaluation.definitions = {definitions}: precision, recall, ndcg and map follow "
            f"{PEERS[definitions]} (binary relevance; README, Compatibility profiles); other "
            "accuracy metrics are not reported"
            + (
                "; users without recommendations are dropped, so models may be averaged over "
                "different users"
                if definitions == "recommenders"
                else ""
            )
        )
    sampled = sorted({r.protocol for r in rows if r.protocol.startswith("sampled_")})
    if sampled:
        warnings.append(
            f"sampled metrics ({', '.join(sampled)}): each positive is ranked among sampled "
            "negatives only; such numbers can reorder models and are not comparable with "
            "protocol=full"
        )
    return warnings
