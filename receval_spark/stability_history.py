"""The night-over-night stability step of a run (docs/nightly.md#list-stability): tonight's
lists against each model's lists of the previous committed run date that wrote ``lists``,
read from the history before anything is written (receval_spark.metrics.stability)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

from receval_spark.commit import RunState
from receval_spark.committed import read_committed
from receval_spark.metrics.stability import NightLists, stability_aggregates
from receval_spark.results import LISTS_SCHEMA, RUNS_SCHEMA, MetricRow, metric_row


def previous_lists_date(committed: Mapping[str, RunState], *, run_date: str) -> str | None:
    """The latest committed run date before ``run_date`` whose run wrote ``lists`` (a re-run
    of a date never compares with that date itself nor with later dates); None: none."""
    earlier = [d for d, state in committed.items() if d < run_date and "lists" in state.datasets]
    return max(earlier, default=None)


def previous_cutoff(
    spark: SparkSession, output: str, date: str, committed: Mapping[str, RunState]
) -> str | None:
    """The split cut-off (ISO-8601) of the committed run of ``date``, from its ``runs`` row's
    split record; None for a split without one (random, leave-last-out ...)."""
    runs = read_committed(
        spark, output, "runs", schema=RUNS_SCHEMA, dates=[date], committed=committed
    )
    row = runs.select("split").first()
    if row is None or row["split"] is None:
        return None
    cutoff = json.loads(row["split"]).get("cutoff")
    return str(cutoff) if cutoff is not None else None


def night_over_night(
    spark: SparkSession,
    output: str,
    night: NightLists,
    *,
    run_date: str,
    ks: Sequence[int],
    persistence: float,
    committed: Mapping[str, RunState],
) -> list[MetricRow]:
    """The stability rows of tonight (metrics stability_jaccard and stability_rbo by segment,
    ``idle`` included; exposure_churn on segment all) against the previous date with lists at
    ``output``; none without such a date. Only the aggregates are collected. ``committed``:
    :func:`committed_runs` of ``output``'s log."""
    date = previous_lists_date(committed, run_date=run_date)
    if date is None:
        return []
    previous = read_committed(
        spark, output, "lists", schema=LISTS_SCHEMA, dates=[date], committed=committed
    )
    cutoff = None
    if night.last_seen is not None:
        cutoff = previous_cutoff(spark, output, date, committed)
    rows = stability_aggregates(
        night,
        previous.drop("run_id", "run_date"),
        previous_cutoff=cutoff,
        ks=ks,
        persistence=persistence,
    ).collect()
    return [metric_row(r) for r in rows]
