"""Session data (docs/sessions.md): standard preprocessing with recorded counts, the time
split, and the expansion of test sessions into prediction events.

The iterative filters checkpoint each round's clicks (:func:`receval_spark.cache.checkpoint`):
without it every round would nest the previous rounds' plans and the query plan grows until the
driver fails.

Clicks are canonical ``(session_id, item_id, timestamp, order)``; within a session they are
ordered by (timestamp, order, item_id), the item id only breaking exact ties.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from receval_spark.cache import checkpoint
from receval_spark.columns import ITEM, ORDER, POSITION, SESSION, TARGET, TIMESTAMP
from receval_spark.config.session_job import SessionPreprocessing
from receval_spark.errors import ConfigError, InputError
from receval_spark.expressions import iso
from receval_spark.ordering import global_row_number


@dataclass(frozen=True)
class SessionSplit:
    """Train and test clicks with 1-based ``position`` per session, and the recorded steps:
    one dict per step with its clicks, sessions and items after the step."""

    train: DataFrame
    test: DataFrame
    steps: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


def sequence_clicks(clicks: DataFrame) -> DataFrame:
    """The clicks with ``position`` 1..n in session order (timestamp, order, item id)."""
    order = Window.partitionBy(SESSION).orderBy(
        F.col(TIMESTAMP).asc(), F.col(ORDER).asc_nulls_first(), F.col(ITEM).asc()
    )
    return clicks.withColumn(POSITION, F.row_number().over(order))


def click_counts(clicks: DataFrame) -> dict[str, int]:
    """{clicks, sessions, items} of a click table (one small aggregate)."""
    row = clicks.agg(
        F.count(F.lit(1)).alias("clicks"),
        F.countDistinct(SESSION).alias("sessions"),
        F.countDistinct(ITEM).alias("items"),
    ).collect()[0]
    return {name: int(row[name]) for name in ("clicks", "sessions", "items")}


def drop_short_sessions(clicks: DataFrame, *, min_length: int) -> DataFrame:
    """Clicks of sessions with at least ``min_length`` clicks."""
    length = F.count(F.lit(1)).over(Window.partitionBy(SESSION))
    return clicks.withColumn("_n", length).filter(F.col("_n") >= min_length).drop("_n")


def drop_rare_items(clicks: DataFrame, *, min_support: int) -> DataFrame:
    """Clicks on items with at least ``min_support`` clicks."""
    support = F.count(F.lit(1)).over(Window.partitionBy(ITEM))
    return clicks.withColumn("_n", support).filter(F.col("_n") >= min_support).drop("_n")


def session_starts(clicks: DataFrame) -> DataFrame:
    """(session_id, start): the time of each session's first click."""
    return clicks.groupBy(SESSION).agg(F.min(TIMESTAMP).alias("start"))


def filter_until_stable(
    clicks: DataFrame, config: SessionPreprocessing, *, n_clicks: int
) -> tuple[DataFrame, list[dict[str, Any]]]:
    """Drop sessions shorter than ``min_session_length``, then items with fewer than
    ``min_item_support`` clicks, in rounds until a round removes nothing
    (``repeat_until_stable``; no round cap: a round that removes something shrinks the log, so
    there are at most ``n_clicks`` rounds), else one round and the session filter again
    (GRU4Rec). Returns the filtered clicks and one counted step per filter.

    Every filter's result is checkpointed (:func:`receval_spark.cache.checkpoint`, eager:
    materialised, lineage cut), so a round's plan is two windows over the previous round's
    stored rows however many rounds came before.
    """
    steps: list[dict[str, Any]] = []
    current = clicks
    round_ = 0
    while True:
        round_ += 1
        before = n_clicks
        current = checkpoint(drop_short_sessions(current, min_length=config.min_session_length))
        steps.append(
            {
                "step": f"drop sessions shorter than {config.min_session_length}",
                "round": round_,
                **click_counts(current),
            }
        )
        current = checkpoint(drop_rare_items(current, min_support=config.min_item_support))
        steps.append(
            {
                "step": f"drop items with fewer than {config.min_item_support} clicks",
                "round": round_,
                **click_counts(current),
            }
        )
        n_clicks = steps[-1]["clicks"]
        if not config.repeat_until_stable or n_clicks == before:
            break
    if not config.repeat_until_stable:
        current = checkpoint(drop_short_sessions(current, min_length=config.min_session_length))
        steps.append(
            {"step": "drop sessions left shorter than the minimum", **click_counts(current)}
        )
    return current, steps


def split_labels(clicks: DataFrame, cut: dt.datetime, config: SessionPreprocessing) -> DataFrame:
    """The clicks with ``_part`` = train, test or straddling, one label per whole session.

    The boundary is ``cut``: a ``cutoff`` starts the test period (a click at it is after it);
    under ``test_days`` it is the last moment of the train period.
    ``split_by: end`` (GRU4Rec, session-rec): train = sessions whose last click is before the
    boundary, test = the rest; nothing is dropped and no train click is after the boundary.
    ``split_by: start``: test = sessions whose first click is after the boundary, train =
    sessions whose last click is not after it; a session straddling the boundary is neither
    split nor leaked into train: it is dropped (its counts are recorded).
    """
    cut_at = F.lit(cut)

    def after(t: Column) -> Column:
        return t >= cut_at if config.cutoff is not None else t > cut_at

    bounds = clicks.groupBy(SESSION).agg(
        F.min(TIMESTAMP).alias("_start"), F.max(TIMESTAMP).alias("_end")
    )
    if config.split_by == "end":
        part = F.when(F.col("_end") < cut_at, "train").otherwise("test")
    else:
        part = (
            F.when(after(F.col("_start")), "test")
            .when(~after(F.col("_end")), "train")
            .otherwise("straddling")
        )
    return clicks.join(bounds.select(SESSION, part.alias("_part")), on=SESSION)


def preprocess_sessions(clicks: DataFrame, config: SessionPreprocessing) -> SessionSplit:
    """The standard protocol on a raw click log, counting clicks/sessions/items after each step.

    1. the session and item filters (``filter_until_stable``);
    2. the time split at the boundary (last click - ``test_days``, or ``cutoff``) by session
       end or start (``split_by``, see ``split_labels``);
    3. optionally keep only the most recent ``recent_fraction`` of train sessions (by start);
    4. drop test clicks on items absent from train, then test sessions left shorter than 2.
    Raises InputError when train or test ends up empty.
    """
    steps: list[dict[str, Any]] = [{"step": "input", **click_counts(clicks)}]
    current, filtered = filter_until_stable(clicks, config, n_clicks=steps[0]["clicks"])
    steps += filtered

    cut = _cut(current, config)
    labelled = checkpoint(split_labels(current, cut, config))
    train = labelled.filter(F.col("_part") == "train").drop("_part")
    test = labelled.filter(F.col("_part") == "test").drop("_part")
    if config.recent_fraction is not None:
        train = most_recent_sessions(train, fraction=config.recent_fraction)
        steps.append(
            {
                "step": f"keep the most recent {config.recent_fraction:g} of train sessions",
                "part": "train",
                **click_counts(train),
            }
        )
    train = checkpoint(train)
    steps.append({"step": "time split", "part": "train", **click_counts(train)})
    steps.append({"step": "time split", "part": "test", **click_counts(test)})
    if config.split_by == "start":
        straddling = labelled.filter(F.col("_part") == "straddling")
        steps.append(
            {
                "step": "time split: drop sessions straddling the boundary",
                "part": "straddling",
                **click_counts(straddling),
            }
        )
    test = test.join(train.select(ITEM).distinct(), on=ITEM, how="left_semi")
    steps.append(
        {"step": "drop test clicks on items not in train", "part": "test", **click_counts(test)}
    )
    test = checkpoint(drop_short_sessions(test, min_length=2))
    steps.append(
        {"step": "drop test sessions shorter than 2", "part": "test", **click_counts(test)}
    )
    train_counts = next(s for s in reversed(steps) if s.get("part") == "train")
    for part, counts in (("train", train_counts), ("test", steps[-1])):
        if counts["clicks"] == 0:
            raise InputError(
                f"preprocessing: the {part} part is empty after the time split at {iso(cut)}; "
                "change preprocessing.test_days or preprocessing.cutoff."
            )
    return SessionSplit(
        train=sequence_clicks(train),
        test=sequence_clicks(test),
        steps=steps,
        params={"cut": iso(cut), **config.model_dump(mode="json")},
    )


def as_given(train: DataFrame, test: DataFrame) -> SessionSplit:
    """An already preprocessed and split pair, evaluated without re-filtering."""
    steps = [
        {"step": "as given", "part": "train", **click_counts(train)},
        {"step": "as given", "part": "test", **click_counts(test)},
    ]
    for part, counts in zip(("train", "test"), steps, strict=True):
        if counts["clicks"] == 0:
            raise InputError(f"data.{part}: the table has no rows.")
    return SessionSplit(
        train=sequence_clicks(train),
        test=sequence_clicks(test),
        steps=steps,
        params={"preprocessing": "none (data.train and data.test as given)"},
    )


def most_recent_sessions(train: DataFrame, *, fraction: float) -> DataFrame:
    """Clicks of the ceil(fraction · N) train sessions with the latest start (ties by id)."""
    starts = session_starts(train)
    ranked = global_row_number(starts, [F.col("start").desc(), F.col(SESSION).desc()], name="_rank")
    total = starts.agg(F.count(F.lit(1)).alias("_total"))
    keep = ranked.crossJoin(total).filter(
        F.col("_rank") <= F.ceil(F.col("_total") * F.lit(fraction))
    )
    return train.join(keep.select(SESSION), on=SESSION, how="left_semi")


def prediction_events(test: DataFrame) -> DataFrame:
    """(session_id, position i, item_id = s_i, target_id = s_{i+1}) for i = 1..n-1.

    Only the prefix's last item is materialised, so n clicks give n - 1 rows (no prefix
    copies); models needing the whole prefix join the session's clicks with position <= i.
    """
    order = Window.partitionBy(SESSION).orderBy(POSITION)
    return test.select(SESSION, POSITION, ITEM, F.lead(ITEM).over(order).alias(TARGET)).filter(
        F.col(TARGET).isNotNull()
    )


def _cut(clicks: DataFrame, config: SessionPreprocessing) -> dt.datetime:
    if config.cutoff is not None:
        cutoff = config.cutoff
        if isinstance(cutoff, float | int):
            return dt.datetime.fromtimestamp(cutoff, dt.UTC)
        if isinstance(cutoff, dt.datetime):
            return cutoff if cutoff.tzinfo else cutoff.replace(tzinfo=dt.UTC)
        return dt.datetime.combine(cutoff, dt.time(), dt.UTC)
    last = clicks.agg(F.max(F.unix_micros(TIMESTAMP)).alias("m")).collect()[0]["m"]
    if last is None:
        raise InputError(
            "preprocessing: no clicks are left after filtering; lower "
            "preprocessing.min_item_support or min_session_length."
        )
    if config.test_days is None:
        raise ConfigError("preprocessing: give test_days or cutoff (the test period's start)")
    seconds = math.floor(last / 1_000_000)
    end: dt.datetime = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return end - dt.timedelta(days=config.test_days)
