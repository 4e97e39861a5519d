"""Input tables onto the canonical columns (receval_spark.columns), and their validation.

The user's names appear only
in the config. Validation runs one aggregation per input and raises ``InputError`` naming
the problem and the fix.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.columns import (
    ITEM,
    ORDER,
    POSITION,
    PREDICTION,
    PROPENSITY,
    RATING,
    REWARD,
    SCORE,
    SESSION,
    TIMESTAMP,
    USER,
)
from receval_spark.config.ranking_data import (
    ImpressionColumns,
    InteractionColumns,
)
from receval_spark.config.ranking_models import RecommendationColumns
from receval_spark.config.session_job import ClickColumns, SessionPredictionColumns
from receval_spark.epochs import EPOCH_UNIT, check_epoch_range, epoch_range, epoch_timestamp
from receval_spark.errors import InputError

_ID_TYPES = (T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.StringType)


def require_columns(df: DataFrame, columns: dict[str, str | None], *, source: str) -> None:
    """Raise InputError when a mapped column is absent from ``df``; when the table's column
    names look like values (a CSV without a header row read with ``header: true`` takes its
    first row for names), the message says how to name the columns instead."""
    present = set(df.columns)
    for role, name in columns.items():
        if name is not None and name not in present:
            values = [c for c in df.columns if _LOOKS_LIKE_DATA.fullmatch(c.strip())]
            if values:
                raise InputError(
                    f"{source}: column {name!r} (mapped as {role}) is missing; the table's "
                    f"column names {df.columns} look like a first row of data ({values[0]!r}), "
                    f"not a header: for a CSV without a header row set {source}.header: false "
                    f"and {source}.column_names: [...] ({len(df.columns)} names, in file "
                    f"order), or fix {source}.columns.{role}."
                )
            raise InputError(
                f"{source}: column {name!r} (mapped as {role}) is missing; the table has "
                f"{sorted(present)}. Fix {source}.columns.{role} in the config."
            )


# a number (1, -2.5, 1e9) or a date or time (1998-03-01, 2020/01/01 10:00:00): a value, not a name
_LOOKS_LIKE_DATA = re.compile(
    r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|\d{4}[-/.]\d{1,2}[-/.]\d{1,2}([ T].*)?"
)


def canonical_interactions(
    raw: DataFrame, *, columns: InteractionColumns, timestamp_unit: str, source: str
) -> DataFrame:
    """Select and rename the mapped columns to user_id, item_id, timestamp, rating.

    Timestamps may be epoch seconds, epoch milliseconds (``timestamp_unit: ms``), a date, a
    timestamp, or an ISO-8601 string; they become a UTC timestamp. An unmapped timestamp or
    rating becomes a typed null column so every later step sees one schema.
    """
    require_columns(raw, columns.model_dump(), source=source)
    types = dict(raw.dtypes)
    for role in ("user", "item"):
        name = getattr(columns, role)
        field_type = raw.schema[name].dataType
        if not isinstance(field_type, _ID_TYPES):
            raise InputError(
                f"{source}: column {name!r} ({role} id) has type {types[name]}; ids must be "
                "integers or strings. Cast it when you write the table."
            )
    timestamp = (
        _to_timestamp(
            F.col(columns.timestamp),
            raw.schema[columns.timestamp].dataType,
            timestamp_unit,
            source=source,
            name=columns.timestamp,
        )
        if columns.timestamp
        else F.lit(None).cast("timestamp").alias(TIMESTAMP)
    )
    rating = (
        F.col(columns.rating).try_cast("double") if columns.rating else F.lit(None).cast("double")
    )
    return raw.select(
        F.col(columns.user).alias(USER),
        F.col(columns.item).alias(ITEM),
        timestamp,
        rating.alias(RATING),
    )


def _to_timestamp(
    col: Column, data_type: T.DataType, unit: str, *, source: str, name: str
) -> Column:
    """The time column as ``timestamp``; read from numbers, it carries their unit as column
    metadata (receval_spark.epochs.EPOCH_UNIT), which validation reads for its range check."""
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType | T.DateType):
        return col.cast("timestamp").alias(TIMESTAMP)
    if isinstance(data_type, T.NumericType):  # NaN and infinity become null (unparseable)
        return epoch_timestamp(col, unit).alias(TIMESTAMP, metadata={EPOCH_UNIT: unit})
    if isinstance(data_type, T.StringType):
        return F.try_to_timestamp(col).alias(TIMESTAMP)
    raise InputError(
        f"{source}: column {name!r} (timestamp) has type {data_type.simpleString()}; use epoch "
        "seconds, epoch milliseconds (timestamp_unit: ms), a date or a timestamp."
    )


def validate_interactions(
    interactions: DataFrame, *, columns: InteractionColumns, source: str
) -> int:
    """Check canonical interactions in one pass and return their row count.

    Errors: no rows; null user or item ids; null or unparseable timestamps (when mapped);
    epoch numbers that are implausible in their unit (receval_spark.epochs); null, non-numeric,
    NaN or infinite ratings (when mapped). Duplicate (user, item) rows are legal.
    """
    checks: dict[str, Column] = {
        f"{columns.user} (user id) has null values": F.col(USER).isNull(),
        f"{columns.item} (item id) has null values": F.col(ITEM).isNull(),
    }
    if columns.timestamp:
        checks[f"{columns.timestamp} (timestamp) has null or unparseable values"] = F.col(
            TIMESTAMP
        ).isNull()
    if columns.rating:
        checks[f"{columns.rating} (rating) has null, non-numeric, NaN or infinite values"] = (
            _not_finite(RATING)
        )
    counts, times = _counts_and_values(interactions, checks, also=epoch_range(interactions))
    if counts["__rows"] == 0:
        raise InputError(f"{source}: the table has no rows; point {source}.path at the real log.")
    raise_on_counts(counts, source=source, fix="clean or drop those rows before evaluating")
    check_epoch_range(
        interactions, times, column=columns.timestamp, role="timestamp", source=source
    )
    return counts["__rows"]


def canonical_clicks(
    raw: DataFrame, *, columns: ClickColumns, timestamp_unit: str, source: str
) -> DataFrame:
    """Select and rename the mapped columns to session_id, item_id, timestamp, order.

    Times as for interactions (epoch s or ms, date, timestamp, ISO string); ``order`` (e.g.
    Diginetica's timeframe) orders clicks of equal time and is null when unmapped.
    """
    require_columns(raw, columns.model_dump(), source=source)
    for role in ("session", "item"):
        name = getattr(columns, role)
        if not isinstance(raw.schema[name].dataType, _ID_TYPES):
            raise InputError(
                f"{source}: column {name!r} ({role} id) has type "
                f"{raw.schema[name].dataType.simpleString()}; ids must be integers or strings."
            )
    timestamp = _to_timestamp(
        F.col(columns.time),
        raw.schema[columns.time].dataType,
        timestamp_unit,
        source=source,
        name=columns.time,
    )
    order = F.col(columns.order).try_cast("double") if columns.order else F.lit(None).cast("double")
    return raw.select(
        F.col(columns.session).alias(SESSION),
        F.col(columns.item).alias(ITEM),
        timestamp,
        order.alias(ORDER),
    )


def validate_clicks(clicks: DataFrame, *, columns: ClickColumns, source: str) -> int:
    """Check canonical clicks in one pass and return their row count: no rows, null session
    or item ids, null or unparseable times, epoch numbers implausible in their unit
    (receval_spark.epochs), non-numeric order values are errors."""
    checks: dict[str, Column] = {
        f"{columns.session} (session id) has null values": F.col(SESSION).isNull(),
        f"{columns.item} (item id) has null values": F.col(ITEM).isNull(),
        f"{columns.time} (time) has null or unparseable values": F.col(TIMESTAMP).isNull(),
    }
    if columns.order:
        checks[f"{columns.order} (order) has null, non-numeric, NaN or infinite values"] = (
            _not_finite(ORDER)
        )
    counts, times = _counts_and_values(clicks, checks, also=epoch_range(clicks))
    if counts["__rows"] == 0:
        raise InputError(f"{source}: the table has no rows; point {source}.path at the click log.")
    raise_on_counts(counts, source=source, fix="clean or drop those rows before evaluating")
    check_epoch_range(clicks, times, column=columns.time, role="time", source=source)
    return counts["__rows"]


def canonical_session_predictions(
    raw: DataFrame,
    *,
    columns: SessionPredictionColumns,
    session_type: T.DataType,
    item_type: T.DataType,
    source: str,
) -> DataFrame:
    """Map and check an external session model's table: (session_id, position, item_id,
    score). Errors: null or mistyped ids or positions, null/NaN/infinite scores, two rows for
    one (session, position, item)."""
    require_columns(raw, columns.model_dump(), source=source)
    mapped = raw.select(
        F.col(columns.session).try_cast(session_type).alias(SESSION),
        F.col(columns.position).try_cast("int").alias(POSITION),
        F.col(columns.item).try_cast(item_type).alias(ITEM),
        F.col(columns.score).try_cast("double").alias(SCORE),
    )
    counts = count_where(
        mapped,
        {
            f"{columns.session} (session id) is null or not of the clicks' id type": F.col(
                SESSION
            ).isNull(),
            f"{columns.position} (prefix length) is null or not an integer": F.col(
                POSITION
            ).isNull(),
            f"{columns.item} (item id) is null or not of the clicks' id type": F.col(ITEM).isNull(),
            f"{columns.score} has null, non-numeric, NaN or infinite values": _not_finite(SCORE),
        },
    )
    raise_on_counts(counts, source=source, fix="fix the model's output before evaluating it")
    keys = [SESSION, POSITION, ITEM]
    if mapped.groupBy(*keys).count().filter(F.col("count") > 1).limit(1).count():
        raise InputError(
            f"{source}: more than one row for the same (session, position, item); keep one."
        )
    return mapped


def canonical_recommendations(
    raw: DataFrame,
    *,
    columns: RecommendationColumns,
    user_type: T.DataType,
    item_type: T.DataType,
    source: str,
) -> DataFrame:
    """Map an external model's table to user_id, item_id, score (higher is better; null where
    the table maps neither a score nor a rank), prediction (the predicted rating, where
    ``columns.prediction`` maps one) and its attribute columns (for custom metrics, kept as
    they are).

    A rank column (1 is best) becomes ``score = -rank`` (exact for ranks below 2^53: a
    positional model's ranks are read back as ``-score``). Ids are cast to the interaction
    log's id types so the two join; values that do not convert become null (see
    ``validate_recommendations``). Id columns must be integers or strings, and strings where the
    log's ids are strings (a number would never equal a string id such as ``u1``).
    """
    roles = columns.model_dump(exclude={"attributes"})
    attributes = {f"attributes[{i}]": name for i, name in enumerate(columns.attributes)}
    require_columns(raw, {**roles, **attributes}, source=source)
    _check_id_types(raw, columns, user_type=user_type, item_type=item_type, source=source)
    if columns.score:
        score = F.col(columns.score).try_cast("double")
    elif columns.rank:
        score = -F.col(columns.rank).try_cast("double")
    else:
        score = F.lit(None).cast("double")
    predicted = (
        [F.col(columns.prediction).try_cast("double").alias(PREDICTION)]
        if columns.prediction
        else []
    )
    return raw.select(
        F.col(columns.user).try_cast(user_type).alias(USER),
        F.col(columns.item).try_cast(item_type).alias(ITEM),
        score.alias(SCORE),
        *predicted,
        *[F.col(f"`{name}`") for name in columns.attributes],
        F.col(columns.user).isNotNull().alias("_user_given"),
        F.col(columns.item).isNotNull().alias("_item_given"),
    )


def validate_recommendations(
    recs: DataFrame, *, columns: RecommendationColumns, source: str
) -> DataFrame:
    """Check an external model's canonical table and return it without the helper columns.

    Errors: null ids; ids that do not convert to the interaction log's id type; null, NaN or
    infinite scores, ranks or predicted ratings (those mapped); ranks below 1 (score = -rank
    above -1); more than one row for one (user, item).
    """
    checks = {
        f"{columns.user} (user id) has null values": ~F.col("_user_given"),
        f"{columns.item} (item id) has null values": ~F.col("_item_given"),
        f"{columns.user} (user id) has values of another type than the log's user ids": (
            F.col("_user_given") & F.col(USER).isNull()
        ),
        f"{columns.item} (item id) has values of another type than the log's item ids": (
            F.col("_item_given") & F.col(ITEM).isNull()
        ),
    }
    value = columns.score or columns.rank
    if value:
        checks[f"{value} has null, non-numeric, NaN or infinite values"] = _not_finite(SCORE)
    if columns.prediction:
        checks[
            f"{columns.prediction} (predicted rating) has null, non-numeric, NaN or infinite values"
        ] = _not_finite(PREDICTION)
    below_one = f"{columns.rank} (rank) has values below 1"
    if columns.rank:
        checks[below_one] = ~_not_finite(SCORE) & (F.col(SCORE) > -1)  # score = -rank
    counts, values = _counts_and_values(recs, checks, also={"best": F.max(SCORE)})
    ranks_below_one = counts.pop(below_one, 0)
    raise_on_counts(counts, source=source, fix="fix the model's output before evaluating it")
    if ranks_below_one:
        raise InputError(
            f"{source}: column {columns.rank!r} (rank) has values below 1 ({ranks_below_one} "
            f"rows, the smallest {-values['best']:g}); ranks count from 1 (the best): add 1 to "
            f"0-based ranks, or map a higher-is-better column as {source}.columns.score."
        )
    duplicated = recs.groupBy(USER, ITEM).count().filter(F.col("count") > 1).limit(3).collect()
    if duplicated:
        examples = ", ".join(f"({r[USER]}, {r[ITEM]})" for r in duplicated)
        raise InputError(
            f"{source}: more than one row for the same (user, item), e.g. {examples}; "
            "keep one row per (user, item), e.g. the best score."
        )
    return recs.drop("_user_given", "_item_given")


def check_positions(recs: DataFrame, *, rank: str, source: str) -> None:
    """Under ``rank_semantics: positions`` each rank is a slot: raise InputError when a rank
    of the canonical ``recs`` (score = -rank) is not a whole number, or when one user has two
    items at one position. One aggregation; at most three examples reach the driver."""
    slots = recs.groupBy(USER, SCORE).agg(F.count(F.lit(1)).alias("_items"))
    row = slots.agg(
        F.count(F.when(F.col(SCORE) != F.floor(SCORE), True)).alias("fractional"),
        F.count(F.when(F.col("_items") > 1, True)).alias("shared"),
        F.min(F.when(F.col(SCORE) != F.floor(SCORE), -F.col(SCORE))).alias("example"),
    ).collect()[0]
    fix = f"fix the ranks, or read them as an order: remove {source}.rank_semantics"
    if row["fractional"]:
        raise InputError(
            f"{source}: column {rank!r} (rank) has ranks that are not whole numbers (e.g. "
            f"{row['example']:g}); rank_semantics: positions reads each rank as a list slot: {fix}."
        )
    if row["shared"]:
        shared = slots.filter(F.col("_items") > 1).limit(3).collect()
        examples = ", ".join(f"user {r[USER]} at rank {-r[SCORE]:g}" for r in shared)
        raise InputError(
            f"{source}: column {rank!r} (rank) puts more than one item at one position "
            f"({row['shared']} positions, e.g. {examples}); rank_semantics: positions holds one "
            f"item per slot: {fix}."
        )


def _not_finite(name: str) -> Column:
    col = F.col(name)
    return col.isNull() | F.isnan(col) | (F.abs(col) == float("inf"))


def count_where(df: DataFrame, checks: dict[str, Column]) -> dict[str, int]:
    return _counts_and_values(df, checks, also={})[0]


def _counts_and_values(
    df: DataFrame, checks: dict[str, Column], *, also: dict[str, Column]
) -> tuple[dict[str, int], dict[str, Any]]:
    """In one aggregation: the rows (``__rows``) and the rows meeting each check, and the
    values of the further aggregates ``also``."""
    aggregates = [F.count(F.lit(1)).alias("__rows")] + [
        F.count(F.when(condition, True)).alias(f"c{i}")
        for i, condition in enumerate(checks.values())
    ]
    aggregates += [aggregate.alias(f"v{i}") for i, aggregate in enumerate(also.values())]
    row = df.agg(*aggregates).collect()[0]  # a global aggregate: exactly one row
    counts = {"__rows": int(row["__rows"])}
    counts.update({name: int(row[f"c{i}"]) for i, name in enumerate(checks)})
    return counts, {name: row[f"v{i}"] for i, name in enumerate(also)}


def raise_on_counts(counts: dict[str, int], *, source: str, fix: str) -> None:
    problems = [f"{name} ({n} rows)" for name, n in counts.items() if name != "__rows" and n]
    if problems:
        raise InputError(f"{source}: " + "; ".join(problems) + f"; {fix}.")


def canonical_impressions(
    raw: DataFrame,
    *,
    columns: ImpressionColumns,
    user_type: T.DataType,
    item_type: T.DataType,
    source: str,
) -> DataFrame:
    """Map logged impressions to (user_id, item_id, position int, reward double, propensity
    double), ids cast to the interaction log's id types so they join the models' lists.

    Id columns must be integers or strings, and strings where the log's ids are strings; values
    that do not convert become null and are reported by ``validate_impressions``.
    """
    require_columns(raw, columns.model_dump(), source=source)
    _check_id_types(raw, columns, user_type=user_type, item_type=item_type, source=source)
    return raw.select(
        F.col(columns.user).try_cast(user_type).alias(USER),
        F.col(columns.item).try_cast(item_type).alias(ITEM),
        F.col(columns.position).try_cast("int").alias(POSITION),
        F.col(columns.reward).try_cast("double").alias(REWARD),
        F.col(columns.propensity).try_cast("double").alias(PROPENSITY),
    )


def validate_impressions(impressions: DataFrame, *, source: str) -> int:
    """Check logged impressions (user_id, item_id, position, reward, propensity) in one pass
    and return their row count. Errors: a missing column; no rows; null ids or positions
    (also ids or positions that did not convert); positions below 1 (1 is the top slot);
    null, NaN or infinite rewards; missing, NaN, infinite, zero or negative propensities (IPS
    divides by them: common support needs p > 0) or propensities above 1."""
    require_columns(
        impressions,
        {c: c for c in (USER, ITEM, POSITION, REWARD, PROPENSITY)},
        source=source,
    )
    p = F.col(PROPENSITY)
    checks = {
        "user_id, item_id or position has null values (or ids not of the log's id types, "
        "positions that are not integers)": F.col(USER).isNull()
        | F.col(ITEM).isNull()
        | F.col(POSITION).isNull(),
        "position is below 1 (positions count from 1, the top slot)": F.col(POSITION) < 1,
        "reward has null, NaN or infinite values": _not_finite("reward"),
        "propensity is missing, NaN or infinite": _not_finite("propensity"),
        "propensity is 0 or negative (no common support: IPS divides by it)": ~_not_finite(
            "propensity"
        )
        & (p <= 0),
        "propensity is above 1": ~_not_finite("propensity") & (p > 1),
    }
    counts = count_where(impressions, checks)
    if counts["__rows"] == 0:
        raise InputError(f"{source}: the table has no rows; point {source}.path at the log.")
    raise_on_counts(
        counts,
        source=source,
        fix="log the serving probability of every impression, or drop those rows",
    )
    return counts["__rows"]


def _check_id_types(
    raw: DataFrame, columns: Any, *, user_type: T.DataType, item_type: T.DataType, source: str
) -> None:
    """User and item id columns must be integers or strings, and strings where the log's ids
    are strings (a number would never equal a string id such as ``u1``)."""
    for role, log_type in (("user", user_type), ("item", item_type)):
        name = getattr(columns, role)
        given = raw.schema[name].dataType
        if not isinstance(given, _ID_TYPES) or (
            isinstance(log_type, T.StringType) and not isinstance(given, T.StringType)
        ):
            raise InputError(
                f"{source}: column {name!r} ({role} id) has type {given.simpleString()} but the "
                f"log's {role} ids are {log_type.simpleString()}; write the ids exactly as they "
                "are in data.interactions."
            )
