"""Sanity checks and warnings written into every run record
(docs/statistics.md#sanity-checks-in-runschecks).

A check states something that must hold for the numbers to mean anything; a failed check
makes the job exit non-zero after writing the run record. A warning flags a protocol choice
that weakens the numbers without making them wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from receval_spark import registry
from receval_spark.columns import TIMESTAMP, USER
from receval_spark.config.ranking_job import JobConfig
from receval_spark.config.ranking_models import ExternalModel
from receval_spark.expressions import iso_micros, to_micros
from receval_spark.metrics.aggregate import union_all
from receval_spark.quality import Fact
from receval_spark.ranking.split import LEAKY_METHODS, Split
from receval_spark.results import Check, MetricRow

ORACLE_TOLERANCE = 1e-9
PEERS = {
    "spark_mllib": "Spark MLlib's RankingMetrics",
    "recommenders": "Microsoft Recommenders' SparkRankingEvaluation",
}


def temporal_leakage_check(split: Split) -> Check:
    """``no_temporal_leakage``: max train timestamp < cut-off <= min test timestamp, and with a
    validation part validation cut-off <= its timestamps < cut-off (train then ends before the
    validation cut-off), computed from the split's parts themselves (one aggregation over the
    rows models learn from and are scored on) against the resolved cut-offs of ``split.params``.
    """
    cutoff = to_micros(split.params["cutoff"])
    validation_cutoff = split.params.get("validation_cutoff")
    train_end = cutoff if validation_cutoff is None else to_micros(validation_cutoff)
    parts = {"train": split.train, "test": split.test}
    if split.validation is not None:
        parts["validation"] = split.validation
    micros = F.unix_micros(TIMESTAMP)
    rows = union_all(
        [df.select(F.lit(name).alias("part"), micros.alias("t")) for name, df in parts.items()]
    )
    assert rows is not None  # train and test at least
    in_part = {name: F.when(F.col("part") == name, F.col("t")) for name in parts}
    bounds = rows.agg(
        *[F.min(c).alias(f"{name}_first") for name, c in in_part.items()],
        *[F.max(c).alias(f"{name}_last") for name, c in in_part.items()],
    ).collect()[0]
    problems = []
    if bounds["train_last"] is not None and bounds["train_last"] >= train_end:
        which = "cut-off" if validation_cutoff is None else "validation cut-off"
        problems.append(
            f"train has interactions at or after the {which} "
            f"(up to {iso_micros(bounds['train_last'])})"
        )
    if split.validation is not None:
        first, last = bounds["validation_first"], bounds["validation_last"]
        if first is not None and (first < train_end or last >= cutoff):
            problems.append(
                f"validation ({iso_micros(first)} to {iso_micros(last)}) leaves "
                f"[{iso_micros(train_end)}, {iso_micros(cutoff)})"
            )
    if bounds["test_first"] is not None and bounds["test_first"] < cutoff:
        problems.append(
            f"test has interactions before the cut-off (from {iso_micros(bounds['test_first'])})"
        )
    return Check(
        "no_temporal_leakage",
        not problems,
        "; ".join(problems)
        or f"train ends {iso_micros(bounds['train_last'])}, "
        f"test starts {iso_micros(bounds['test_first'])}, cut-off {iso_micros(cutoff)}",
    )


def oracle_check(
    name: str,
    rows: Sequence[MetricRow],
    *,
    coverage: float | None = None,
    empty_truth: int = 0,
) -> Check:
    """``oracle_ndcg[name]``: the oracle's NDCG@k under ``full`` is 1 (within 1e-9) at every k
    over the users with a relevant test item (a labelled protocol's rows are not read: under
    ``debiased_iqr`` the oracle's lists keep the removed items). ``empty_truth`` of the
    evaluated users have an empty Rel(u) (``evaluation.users: listed_or_relevant``): they
    score 0 for every model, the oracle included, so a row's mean over its n users is read as
    the mean over the others, value · n / (n - empty_truth) (a 0 adds nothing to the sum). A
    failure names the cause it can see: the oracle without lists for some of those users
    (``coverage``, its share of the evaluated users with a list)."""
    ndcg = [
        r
        for r in rows
        if r.model == name and r.segment == "all" and r.metric == "ndcg" and r.protocol == "full"
    ]
    if not ndcg:
        detail = "no NDCG rows for the oracle (add ndcg to evaluation.metrics)"
        return Check(f"oracle_ndcg[{name}]", False, detail)
    n_users = max(r.n_users for r in ndcg)
    relevant = max(n_users - empty_truth, 1)
    values = [(r.k, (r.value or 0.0) * r.n_users / relevant) for r in ndcg]
    bad = [(k, v) for k, v in values if abs(v - 1.0) > ORACLE_TOLERANCE]
    detail = "; ".join(f"NDCG@{k} = {v:.6f}" for k, v in bad) or "NDCG@k = 1 at every k"
    if empty_truth:
        detail += (
            f" over the {relevant} users with Rel(u) ({empty_truth} evaluated users have none)"
        )
    share = None if coverage is None else coverage * n_users / relevant  # of the users with Rel(u)
    if bad and share is not None and share < 1.0 - ORACLE_TOLERANCE:
        detail += (
            f": the oracle has lists for {share:.2%} of the evaluated users with Rel(u) only "
            "(the others score 0)"
        )
    elif bad:
        detail += (
            ": its lists are each user's relevant items, so some step between Rel(u) and the "
            "lists lost or reordered items (please report it with the run record)"
        )
    return Check(f"oracle_ndcg[{name}]", not bad, detail)


def custom_bounds_check(config: JobConfig, rows: Sequence[MetricRow]) -> Check:
    """``custom_metric_bounds``: every mean of a custom metric lies within its declared
    bounds (a mean outside them means the function or the bounds are wrong)."""
    definitions = registry.definitions()
    bad, metrics = [], set()
    for r in sorted(rows, key=lambda r: (r.metric, r.model, r.segment, r.k or 0)):
        custom = definitions.get(r.metric)
        if custom is None or custom.family != "custom" or r.value is None:
            continue
        low, high = custom.bounds
        if not low <= r.value <= high:
            at = f"@{r.k}" if r.k is not None else ""
            bad.append(f"{r.metric}{at} of {r.model} on {r.segment} = {r.value:.6g}")
            metrics.add(f"{r.metric} {list(custom.bounds)}")
    names = [m.name for m in config.evaluation.custom_metrics]
    detail = (
        f"outside the declared bounds of {', '.join(sorted(metrics))} ({len(bad)} rows): "
        + "; ".join(bad[:5])
        + (" ..." if len(bad) > 5 else "")
        if bad
        else f"{', '.join(names)} within their bounds"
    )
    return Check("custom_metric_bounds", not bad, detail)


def heldout_check(facts: Sequence[Fact]) -> Check:
    """``heldout_not_in_train``: under the seen filter a relevant test (user, item) pair that
    occurs in train leaves Rel(u) (docs/evaluation.md#seen-items), so no held-out positive is
    a train pair by construction; the check records how many were removed and how many users
    lost all of theirs (a count, never a failure): they are not evaluated, unless
    ``evaluation.users: listed_or_relevant`` (an ``empty_truth_users`` fact) evaluates those
    with an external model's list, with an empty Rel(u)."""
    removed = next(f for f in facts if f.fact == "reconsumed_pairs")
    lost = next(f for f in facts if f.fact == "users_all_relevant_seen")
    listing = any(f.fact == "empty_truth_users" for f in facts)
    fate = (
        "are evaluated only where an external model lists them (empty Rel(u), scoring 0)"
        if listing
        else "are not evaluated"
    )
    return Check(
        "heldout_not_in_train",
        True,
        f"{removed.count} of {removed.total} relevant test (user, item) pairs also occur in "
        f"train and left Rel(u) (seen items are filtered); {lost.count} users lost all their "
        f"relevant items and {fate}"
        if removed.count
        else "no relevant test pair occurs in train",
    )


def user_fingerprints(table: DataFrame, *, keys: Sequence[str]) -> DataFrame:
    """(*keys, rows, h_high, h_low): per key, the number of rows and the sum of the
    xxhash64 of their user over the rows, as exact sums of its high and low 32 bits. Two
    tables of distinct users with equal fingerprints hold the same users unless two different
    sets of users have the same 64-bit hash sum (odds of about 2^-64)."""
    h = F.xxhash64(F.col(USER))
    return table.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.shiftright(h, 32)).alias("h_high"),
        F.sum(h.bitwiseAND(F.lit(0xFFFFFFFF))).alias("h_low"),
    )


def user_counts(per_user: DataFrame, evaluated: DataFrame, *, keys: Sequence[str]) -> DataFrame:
    """(*keys, rows, users, unevaluated) of the per-user table: rows, distinct users, and users
    not among ``evaluated`` at the row's segment (at an item segment: not evaluated at all).
    One join and two plain aggregations (per user, then per key), no distinct counts."""
    scope = F.when(F.col("segment").startswith("items="), F.lit("all")).otherwise(F.col("segment"))
    marked = per_user.select(*keys, USER, scope.alias("_scope")).join(
        evaluated.select(USER, F.col("segment").alias("_scope"), F.lit(True).alias("_evaluated")),
        on=[USER, "_scope"],
        how="left",
    )
    per_key_user = marked.groupBy(*keys, USER).agg(
        F.count(F.lit(1)).alias("_rows"), F.max("_evaluated").alias("_evaluated")
    )
    return per_key_user.groupBy(*keys).agg(
        F.sum("_rows").alias("rows"),
        F.count(F.lit(1)).alias("users"),
        F.count(F.when(F.col("_evaluated").isNull(), True)).alias("unevaluated"),
    )


def same_users_check(per_user: DataFrame, evaluated: DataFrame) -> Check:
    """``same_users_all_models``: in the per-user accuracy table (model, segment, user_id, k,
    metric, value) every model has every (segment, metric, k) of the others, each over exactly
    the evaluated users, one row per user: at a user segment the users ``evaluated`` (user_id,
    segment) puts there, at an item segment (``items=...``) evaluated users only, and the same
    number for every model.

    One aggregation first (:func:`user_fingerprints`): a user segment's (model, metric, k)
    whose rows and user hash sums equal its evaluated users' holds exactly them, one row each.
    Only item segments and keys that differ are counted user by user (:func:`user_counts`,
    a join with ``evaluated``), which also names what is wrong; one row per key and one per
    segment reach the driver."""
    keys = ["model", "segment", "metric", "k"]
    fingerprints = {
        tuple(r[c] for c in keys): r for r in user_fingerprints(per_user, keys=keys).collect()
    }
    segments = {r["segment"]: r for r in user_fingerprints(evaluated, keys=["segment"]).collect()}
    expected = {segment: r["rows"] for segment, r in segments.items()}

    def same(r: Row) -> bool:
        wanted = segments.get(r["segment"])
        return wanted is not None and all(r[c] == wanted[c] for c in ("rows", "h_high", "h_low"))

    observed = {
        key: {"rows": r["rows"], "users": r["rows"], "unevaluated": 0}
        for key, r in fingerprints.items()
        if same(r)
    }
    unsettled = sorted({key[1] for key in fingerprints if key not in observed})
    if unsettled:
        recounted = user_counts(
            per_user.filter(F.col("segment").isin(unsettled)), evaluated, keys=keys
        )
        observed |= {tuple(r[c] for c in keys): r.asDict() for r in recounted.collect()}
    models = sorted({key[0] for key in observed})
    problems = []
    for segment, metric, k in sorted({key[1:] for key in observed}, key=str):
        where = f"{segment} {metric}@{k}"
        counted = {m: observed.get((m, segment, metric, k)) for m in models}
        if segment.startswith("items="):
            wanted = max(r["users"] for r in counted.values() if r is not None)
        else:
            wanted = expected.get(segment, 0)
        for model, r in counted.items():
            if r is None:
                problems.append(f"{model} has no rows at {where}")
            elif r["users"] != wanted:
                problems.append(f"{model} at {where}: {r['users']} users, {wanted} evaluated")
            elif r["unevaluated"]:
                problems.append(f"{model} at {where}: {r['unevaluated']} users not evaluated there")
            elif r["rows"] != r["users"]:
                problems.append(f"{model} at {where}: {r['rows'] - r['users']} repeated user rows")
    counts_text = ", ".join(f"{segment} {n}" for segment, n in sorted(expected.items()))
    return Check(
        "same_users_all_models",
        not problems,
        "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
        or f"every model is evaluated on the same users at every segment, metric and k "
        f"(users: {counts_text})",
    )


def list_coverage(facts: Sequence[Fact]) -> dict[str, float]:
    """Per model, the share of the evaluated users it has a list for, from the ``no_list``
    facts of its lists (receval_spark.ranking.quality.list_facts): (total - count) / total."""
    return {
        f.model: (f.total - f.count) / f.total
        for f in facts
        if f.fact == "no_list" and f.model is not None
    }


def list_coverage_check(config: JobConfig, coverage: dict[str, float], n_users: int) -> Check:
    """``list_coverage``: every model has a list for at least one evaluated user. A model with
    none scores 0 everywhere; for an external model that nearly always means its user ids are
    not the log's (an offset, another encoding), so the detail names the two id columns."""
    empty = [m for m in config.models if coverage.get(m.name, 0.0) == 0.0]
    lowest = min(coverage.items(), key=lambda item: (item[1], item[0]), default=None)
    return Check(
        "list_coverage",
        not empty,
        "; ".join(_no_lists(config, m.name, n_users) for m in empty)
        or (
            f"every model has lists for evaluated users (lowest share: {lowest[0]} "
            f"{lowest[1]:.1%} of {n_users})"
            if lowest
            else "no model"
        ),
    )


def _no_lists(config: JobConfig, name: str, n_users: int) -> str:
    return f"{_model_label(config, name)}: none of the {n_users} evaluated users has a list" + (
        _id_columns_hint(config, name)
    )


def _model_label(config: JobConfig, name: str) -> str:
    model = next(m for m in config.models if m.name == name)
    return f"{model.kind} model {name!r}"


def _id_columns_hint(config: JobConfig, name: str, *, partial: bool = False) -> str:
    """For an external model: which two user id columns to compare."""
    index, model = next((i, m) for i, m in enumerate(config.models) if m.name == name)
    if not isinstance(model, ExternalModel):
        return "" if partial else " (it scores none of them: are they all cold?)"
    key, log = list(config.interaction_sources.items())[-1]  # data.interactions or data.test
    columns = (
        f"compare models[{index}].columns.user ({model.columns.user!r}) with "
        f"{key}.columns.user ({log.columns.user!r})"
    )
    if partial:
        return f"; if its user ids should be the log's, {columns}"
    return f"; its user ids do not match the log's — {columns}"


def run_checks(
    config: JobConfig,
    split: Split,
    rows: Sequence[MetricRow],
    *,
    facts: Sequence[Fact],
    filter_seen: bool,
    accuracy: DataFrame | None,
    evaluated: DataFrame,
    coverage: dict[str, float],
    n_users: int,
) -> list[Check]:
    """Every check that applies to this configuration. ``accuracy``: the per-user accuracy
    table (None without accuracy metrics); ``evaluated``: (user_id, segment) of the evaluated
    users; ``coverage``: :func:`list_coverage`."""
    # users: listed_or_relevant evaluates users with an empty Rel(u) too (the oracle: 0)
    empty = next((f.count for f in facts if f.fact == "empty_truth_users"), 0)
    checks = [
        oracle_check(m.name, rows, coverage=coverage.get(m.name), empty_truth=empty)
        for m in config.models
        if m.kind == "oracle"
    ]
    if filter_seen:
        checks.append(heldout_check(facts))
    # recommenders' definitions drop users without lists (a warning says so)
    if accuracy is not None and config.evaluation.definitions != "recommenders":
        checks.append(same_users_check(accuracy, evaluated))
    checks.append(list_coverage_check(config, coverage, n_users))
    if config.evaluation.custom_metrics:
        checks.append(custom_bounds_check(config, rows))
    return checks


def run_warnings(
    config: JobConfig,
    n_users: int,
    rows: Sequence[MetricRow],
    *,
    coverage: dict[str, float] | None = None,
) -> list[str]:
    """Leaky split, fewer than ``evaluation.min_users`` users, a model with lists for fewer
    than ``evaluation.min_list_coverage`` of them (but some: none fails ``list_coverage``),
    seen items not filtered, sampled metrics."""
    warnings = []
    if config.split.method in LEAKY_METHODS:
        warnings.append(f"leaky split: {LEAKY_METHODS[config.split.method]}")
    if n_users < config.evaluation.min_users:
        warnings.append(
            f"only {n_users} users evaluated "
            f"(evaluation.min_users = {config.evaluation.min_users}): "
            "averages over so few users are unreliable"
        )
    floor = config.evaluation.min_list_coverage
    for name, share in sorted((coverage or {}).items()):
        if 0.0 < share < floor:
            warnings.append(
                f"{_model_label(config, name)} has lists for {share:.1%} of the {n_users} "
                f"evaluated users (evaluation.min_list_coverage = {floor}); the others score 0 "
                "on every accuracy metric" + _id_columns_hint(config, name, partial=True)
            )
    if not config.evaluation.filter_seen:
        warnings.append(
            "filter_seen is off: items users already interacted with may be recommended"
        )
    definitions = config.evaluation.definitions
    if definitions != "receval":
        warnings.append(
            f"evaluation.definitions = {definitions}: precision, recall, ndcg and map follow "
            f"{PEERS[definitions]} (binary relevance; docs/evaluation.md, Compatibility "
            "profiles); other accuracy metrics are not reported"
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
