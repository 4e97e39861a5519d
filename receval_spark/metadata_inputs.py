"""Item metadata and segment tables onto the canonical columns: an item's categories,
embedding and attributes (docs/configuration.md, data.items), and a user- or item-segment
table's segments (docs/evaluation.md, Relevance and evaluated users)."""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from receval_spark.columns import ITEM, USER
from receval_spark.config import ItemColumns, ItemSegmentColumns, UserSegmentColumns
from receval_spark.errors import InputError
from receval_spark.inputs import count_where, raise_on_counts, require_columns


def canonical_items(
    raw: DataFrame,
    *,
    columns: ItemColumns,
    separator: str | None,
    item_type: T.DataType,
    source: str,
) -> DataFrame:
    """Map item metadata to (item_id, categories array<string>, embedding array<double>,
    *attributes) (attributes: further columns for custom metrics, kept as they are).

    Categories come from a ``separator``-delimited string, an array column, or a list of 0/1
    flag columns (the column name is the category). Several rows for one item are merged (union
    of categories, the first embedding). Missing metadata stays null; it is counted, not fatal.
    """
    flags = columns.category if isinstance(columns.category, list) else []
    single = columns.category if isinstance(columns.category, str) else None
    require_columns(
        raw,
        {
            "item": columns.item,
            "category": single,
            "embedding": columns.embedding,
            **{f"category[{i}]": name for i, name in enumerate(flags)},
            **{f"attributes[{i}]": name for i, name in enumerate(columns.attributes)},
        },
        source=source,
    )
    categories = _categories(raw, flags, single, separator=separator, source=source)
    embedding = _embedding(raw, columns.embedding, source=source)
    mapped = raw.select(
        F.col(columns.item).try_cast(item_type).alias(ITEM),
        categories.alias("categories"),
        embedding.alias("embedding"),
        *[F.col(f"`{name}`") for name in columns.attributes],
    )
    counts = count_where(
        mapped,
        {f"{columns.item} (item id) has null or mistyped values": (F.col(ITEM).isNull())},
    )
    raise_on_counts(
        counts,
        source=source,
        fix="give every metadata row an item id of the log's type",
    )
    return mapped.groupBy(ITEM).agg(
        F.array_distinct(F.flatten(F.collect_list("categories"))).alias("categories"),
        F.first("embedding", ignorenulls=True).alias("embedding"),
        *[F.first(f"`{name}`", ignorenulls=True).alias(name) for name in columns.attributes],
    )


def _categories(
    raw: DataFrame, flags: list[str], single: str | None, *, separator: str | None, source: str
) -> Column:
    """An item's categories as array<string>: the names of its 0/1 ``flags`` columns that are
    1, its ``single`` array column, or its ``single`` string split at ``separator``."""
    if flags:
        categories = F.filter(
            F.array(*[F.when(F.col(f"`{n}`").try_cast("double") == 1, F.lit(n)) for n in flags]),
            lambda c: c.isNotNull(),
        )
    elif single is None:
        categories = F.lit(None).cast("array<string>")
    elif isinstance(raw.schema[single].dataType, T.ArrayType):
        categories = F.col(single).cast("array<string>")
    elif separator:
        categories = F.filter(
            F.transform(
                F.split(F.col(single).cast("string"), re.escape(separator)), lambda c: F.trim(c)
            ),
            lambda c: c != "",
        )
    else:
        raise InputError(_category_message(single, raw.schema[single].dataType, source=source))
    return categories


def _embedding(raw: DataFrame, column: str | None, *, source: str) -> Column:
    """An item's embedding as array<double> (null without an embedding column)."""
    if column is None:
        embedding = F.lit(None).cast("array<double>")
    elif isinstance(raw.schema[column].dataType, T.ArrayType):
        embedding = F.col(column).try_cast("array<double>")
    else:
        raise InputError(f"{source}: column {column!r} (embedding) must be an array of numbers.")
    return embedding


def _category_message(name: str, data_type: T.DataType, *, source: str) -> str:
    """What to do with a single category column that is neither an array nor split."""
    if isinstance(data_type, T.StringType):
        return (
            f"{source}: column {name!r} holds strings; set {source}.category_separator "
            '(e.g. "|") to split it into categories.'
        )
    return (
        f"{source}: column {name!r} (category) holds {data_type.simpleString()} values, not "
        f"strings or arrays; for one category id a row set {source}.category_separator "
        f'(e.g. "|": each value is then one category), for a 0/1 flag column list it: '
        f"{source}.columns.category: [{name}]."
    )


UNASSIGNED = "unassigned"  # the value of users without a segment in a user-segment table


def canonical_segments(
    raw: DataFrame,
    *,
    columns: UserSegmentColumns | ItemSegmentColumns,
    label: str,
    id_type: T.DataType,
    source: str,
) -> DataFrame:
    """Map a user- or item-segment table to distinct (user_id or item_id, segment
    ``<label>=<value>``); a null value is the segment ``<label>=unassigned``. InputError for
    null or mistyped ids."""
    role, name = ("user", USER) if isinstance(columns, UserSegmentColumns) else ("item", ITEM)
    column = getattr(columns, role)
    require_columns(raw, {role: column, "segment": columns.segment}, source=source)
    value = F.coalesce(F.col(f"`{columns.segment}`").cast("string"), F.lit(UNASSIGNED))
    mapped = raw.select(
        F.col(f"`{column}`").try_cast(id_type).alias(name),
        F.concat(F.lit(f"{label}="), value).alias("segment"),
    )
    counts = count_where(
        mapped, {f"{column} ({role} id) has null or mistyped values": F.col(name).isNull()}
    )
    raise_on_counts(counts, source=source, fix=f"give every row a {role} id of the log's type")
    return mapped.distinct()


def canonical_catalogue(
    raw: DataFrame, *, item: str, item_type: T.DataType, source: str
) -> DataFrame:
    """The catalogue's distinct item ids as (item_id), cast to the log's id type; a null or
    mistyped id is an InputError naming the column."""
    require_columns(raw, {"item": item}, source=source)
    ids = raw.select(F.col(item).try_cast(item_type).alias(ITEM))
    null_ids = {f"{item} (item id) has null or mistyped values": F.col(ITEM).isNull()}
    counts = count_where(ids, null_ids)
    raise_on_counts(
        counts,
        source=source,
        fix=f"give every row an item id of the interaction log's type in {source}",
    )
    return ids.distinct()
