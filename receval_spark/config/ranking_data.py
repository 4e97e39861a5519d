"""The ranking job's input tables (``data``) and its test set: the split and relevance
(docs/configuration.md, docs/evaluation.md#splits-no-time-travel,
docs/evaluation.md#relevance-and-evaluated-users)."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from receval_spark.config.common import Timepoint, _FileSource, _Strict


class InteractionColumns(_Strict):
    user: str = Field(default="user_id", description="The user id column.")
    item: str = Field(default="item_id", description="The item id column.")
    timestamp: str | None = Field(
        default="timestamp",
        description="The time column (epoch number, timestamp, date or ISO-8601 string); null "
        "only for the user_random and user_holdout splits.",
    )
    rating: str | None = Field(
        default=None,
        description="The rating column, needed by threshold or graded relevance, task "
        "rating_prediction and explicit ALS; null: no ratings.",
    )


class InteractionsSource(_FileSource):
    columns: InteractionColumns = Field(
        default_factory=InteractionColumns, description="The log's column names."
    )
    timestamp_unit: Literal["s", "ms"] = Field(
        default="s",
        description="Unit of a numeric time column: epoch seconds (`s`) or milliseconds (`ms`) "
        "(docs/configuration.md#timestamp-units).",
    )


# the columns custom metrics see before any item attribute (receval_spark.metrics.custom)
RANKED_LIST_COLUMNS = (
    "model",
    "user_id",
    "k",
    "rank",
    "item_id",
    "score",
    "relevant",
    "grade",
    "n_relevant",
    "categories",
    "embedding",
)


def _attribute_names(names: list[str]) -> list[str]:
    """Attribute columns for custom metrics: unique, and none of the table's own columns."""
    taken = sorted(set(names) & set(RANKED_LIST_COLUMNS))
    if taken or len(set(names)) < len(names):
        raise ValueError(
            f"attribute names must be unique and not one of the ranked-list table's "
            f"columns {list(RANKED_LIST_COLUMNS)} (clash: {taken or 'a repeated name'}); "
            "rename the column in the table"
        )
    return names


AttributeNames = Annotated[list[str], AfterValidator(_attribute_names)]


class ItemColumns(_Strict):
    """``category``: a delimited string or array column, or a list of 0/1 flag columns
    (each column's name is its category)."""

    item: str = Field(default="item_id", description="The item id column.")
    category: str | list[str] | None = Field(
        default=None,
        description="The category column (delimited string or array), or a list of 0/1 flag "
        "columns named after their categories; null: no categories.",
    )
    embedding: str | None = Field(
        default=None, description="An array-of-numbers column of item vectors; null: none."
    )
    attributes: AttributeNames = Field(
        default_factory=list,
        description="Further columns handed to custom metrics under their own names (e.g. "
        "price, provider).",
    )


class ItemsSource(_FileSource):
    columns: ItemColumns = Field(default_factory=ItemColumns, description="Its column names.")
    category_separator: str | None = Field(
        default=None,
        description="Separator of a delimited string category column, e.g. a pipe; null: the "
        "column holds one category (or an array).",
    )
    catalogue: bool = Field(
        default=False,
        description="These items are the catalogue, the item universe of coverage, Gini, "
        "entropy and the popularity metrics (as `data.catalogue`); false: they only describe "
        "items.",
    )


class CatalogueColumns(_Strict):
    item: str = Field(default="item_id", description="The item id column.")


class CatalogueSource(_FileSource):
    """The item universe I of the beyond-accuracy metrics: one row per item id (repeats count
    once). Left out, I is the items with a train interaction (docs/evaluation.md#catalogue)."""

    columns: CatalogueColumns = Field(
        default_factory=CatalogueColumns, description="Its column names."
    )


class UserSegmentColumns(_Strict):
    user: str = Field(default="user_id", description="The user id column.")
    segment: str = Field(default="segment", description="The segment value column.")


class ItemSegmentColumns(_Strict):
    item: str = Field(default="item_id", description="The item id column.")
    segment: str = Field(default="segment", description="The segment value column.")


class _SegmentsSource(_FileSource):
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
        description="The segments' prefix in `<name>=<value>` (a letter, then letters, digits "
        "or _); null: the segment column's name.",
    )
    columns: UserSegmentColumns | ItemSegmentColumns

    @property
    def label(self) -> str:
        """The segments' prefix: ``name``, else the segment column's name."""
        return self.name or self.columns.segment


class UserSegmentsSource(_SegmentsSource):
    """A table mapping users to named segments (e.g. market, tier): every metric gets rows
    ``segment = <name>=<value>`` (``name`` defaults to the segment column's), evaluated users
    without a row ``<name>=unassigned``; a user with several rows is in each of them."""

    columns: UserSegmentColumns = Field(
        default_factory=UserSegmentColumns, description="The table's column names."
    )


class ItemSegmentsSource(_SegmentsSource):
    """A table mapping items to named segments (e.g. provider, content type): the accuracy
    metrics get rows ``segment = <name>=<value>`` with Rel(u) restricted to that segment's
    items (as ``items=head``/``items=tail`` do; users without such relevant items are not
    evaluated there), items without a row in ``<name>=unassigned``."""

    columns: ItemSegmentColumns = Field(
        default_factory=ItemSegmentColumns, description="The table's column names."
    )


class ImpressionColumns(_Strict):
    """Source column names of the logged impressions (position 1 = the top slot)."""

    user: str = Field(default="user_id", description="The user id column.")
    item: str = Field(default="item_id", description="The shown item's id column.")
    position: str = Field(
        default="position", description="The slot the item was shown in (1: the top)."
    )
    reward: str = Field(default="reward", description="The observed reward (e.g. a click: 1).")
    propensity: str = Field(
        default="propensity",
        description="The logging policy's probability of showing that item at that position "
        "to that user.",
    )


class ImpressionsSource(_FileSource):
    """The logging policy's impressions: who was shown which item at which position, the
    reward, and the logged propensity mu(item at position | user)."""

    columns: ImpressionColumns = Field(
        default_factory=ImpressionColumns, description="The impressions' column names."
    )


class DataConfig(_Strict):
    interactions: InteractionsSource = Field(
        default_factory=InteractionsSource,
        description="The interaction log: who interacted with which item when.",
    )
    items: ItemsSource | None = Field(
        default=None,
        description="Item metadata (categories, embeddings, attributes); null: none.",
    )
    impressions: ImpressionsSource | None = Field(
        default=None,
        description="The logging policy's impressions; given, they turn off-policy estimates "
        "on (docs/evaluation.md#off-policy-evaluation).",
    )
    train: InteractionsSource | None = Field(
        default=None,
        description="With `split.method: given`: the train interactions (seen items, models, "
        "popularity); null: no train rows.",
    )
    test: InteractionsSource | None = Field(
        default=None,
        description="With `split.method: given`: the test interactions, Rel(u) by the "
        "relevance rule.",
    )
    catalogue: CatalogueSource | None = Field(
        default=None,
        description="The item universe of the beyond-accuracy metrics; null: `data.items` "
        "where it says `catalogue: true`, else the train items.",
    )

    @model_validator(mode="after")
    def _one_catalogue(self) -> DataConfig:
        if self.catalogue is not None and self.items is not None and self.items.catalogue:
            raise ValueError("give data.catalogue or data.items.catalogue: true, not both")
        return self

    @property
    def catalogue_key(self) -> str | None:
        """The source of the catalogue: ``data.catalogue``, ``data.items``, or None (the
        train items)."""
        if self.catalogue is not None:
            return "data.catalogue"
        if self.items is not None and self.items.catalogue:
            return "data.items"
        return None


class GlobalTemporalSplit(_Strict):
    """train: timestamp < cutoff; test: timestamp >= cutoff (optional earlier validation cut)."""

    method: Literal["global_temporal"] = Field(description="One cut-off time for all users.")
    cutoff: Timepoint | None = Field(
        default=None,
        description="The cut-off: an ISO-8601 time or date, or epoch seconds (give it or "
        "`quantile`).",
    )
    quantile: float | None = Field(
        default=None,
        gt=0.0,
        lt=1.0,
        description="The cut-off as this quantile of the log's timestamps (give it or `cutoff`).",
    )
    validation_cutoff: Timepoint | None = Field(
        default=None,
        description="An earlier cut-off v: train before v, validation [v, cutoff) for tuning "
        "grids; null: no validation part.",
    )
    validation_quantile: float | None = Field(
        default=None,
        gt=0.0,
        lt=1.0,
        description="The validation cut-off as a quantile of the timestamps, below `quantile`.",
    )

    @model_validator(mode="after")
    def _one_cut_each(self) -> GlobalTemporalSplit:
        if (self.cutoff is None) == (self.quantile is None):
            raise ValueError("give exactly one of split.cutoff or split.quantile")
        if self.validation_cutoff is not None and self.validation_quantile is not None:
            raise ValueError(
                "give at most one of split.validation_cutoff or split.validation_quantile"
            )
        if (
            self.quantile is not None
            and self.validation_quantile is not None
            and self.validation_quantile >= self.quantile
        ):
            raise ValueError("split.validation_quantile must be smaller than split.quantile")
        return self


class LeaveLastNSplit(_Strict):
    """Each user's last n interactions (by timestamp, ties by item id) are test."""

    method: Literal["leave_last_n"] = Field(description="Each user's latest interactions.")
    n: int = Field(
        default=1,
        ge=1,
        description="Test interactions per user; users with n or fewer stay in train.",
    )


class UserRandomSplit(_Strict):
    """A seeded random fraction of each user's interactions is test (leaky: ignores time)."""

    method: Literal["user_random"] = Field(description="A random share of each user's rows.")
    fraction: float = Field(
        default=0.2, gt=0.0, lt=1.0, description="Share of each user's interactions in test."
    )
    seed: int = Field(default=42, description="Seed of the hash that picks the test rows.")


class UserHoldoutSplit(_Strict):
    """A seeded fraction of users goes wholly to test (cold-start scenario)."""

    method: Literal["user_holdout"] = Field(description="Whole users held out for test.")
    fraction: float = Field(
        default=0.2, gt=0.0, lt=1.0, description="Expected share of users held out for test."
    )
    seed: int = Field(default=42, description="Seed of the hash that picks the test users.")


class GivenSplit(_Strict):
    """The caller's own train and test (``data.train`` and ``data.test``, or the API's
    ``train=``/``test=`` DataFrames), evaluated as given (docs/evaluation.md#given-split)."""

    method: Literal["given"] = Field(description="Pre-split train and test, as given.")
    cutoff: Timepoint | None = Field(
        default=None,
        description="The cut-off the pair was split at, if any: the leakage check then also "
        "checks train < cutoff <= test; null: train is checked against each user's first test "
        "time and against the test period's start.",
    )


_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(value: object) -> object:
    """``<n><unit>`` (unit s, m, h, d or w; e.g. ``7d``, ``12h``) as a timedelta; other
    values (seconds, ISO 8601 ``P7D``) as pydantic reads a timedelta."""
    if isinstance(value, str) and (match := re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", value)):
        return dt.timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])
    return value


def _positive(value: dt.timedelta) -> dt.timedelta:
    if value <= dt.timedelta(0):
        raise ValueError("a duration must be positive (e.g. 7d, 12h)")
    return value


Duration = Annotated[dt.timedelta, BeforeValidator(_duration), AfterValidator(_positive)]


class RollingSplit(_Strict):
    """A rolling backtest (docs/evaluation.md#rolling-backtests): ``windows`` consecutive test
    windows of ``test_length``, ``step`` apart, the last ending at ``end``; window w's test is
    [start_w, start_w + test_length) and its train everything before start_w (its validation,
    with ``validation_length``, the last stretch of that train), every model refit per window."""

    method: Literal["rolling"] = Field(description="Consecutive global cuts, refit before each.")
    windows: int = Field(ge=2, le=52, description="How many test windows (2-52).")
    test_length: Duration = Field(description="Each test window's length: `7d`, `12h`, `2w`.")
    step: Duration | None = Field(
        default=None,
        description="From one window's start to the next one's; null: `test_length` (windows "
        "side by side).",
    )
    end: Timepoint | None = Field(
        default=None,
        description="Where the last test window ends (exclusive); null: just after the log's "
        "last timestamp.",
    )
    validation_length: Duration | None = Field(
        default=None,
        description="The end of each window's train kept as its validation part for tuning "
        "grids; null: none.",
    )

    @property
    def stride(self) -> dt.timedelta:
        return self.step if self.step is not None else self.test_length


SplitConfig = Annotated[
    GlobalTemporalSplit
    | LeaveLastNSplit
    | UserRandomSplit
    | UserHoldoutSplit
    | GivenSplit
    | RollingSplit,
    Field(discriminator="method"),
]


class RelevanceConfig(_Strict):
    """Which test interactions are relevant, with which grade
    (docs/evaluation.md#relevance-and-evaluated-users).

    ``implicit``: every one, grade 1. ``threshold``: rating >= threshold, grade 1. ``graded``:
    relevant iff rating >= threshold (so every binary metric equals the threshold run's), NDCG
    grade = rating - threshold + 1; or, instead of a threshold, ``grades``: rating -> grade,
    looked up exactly (list half stars on a half-star scale), unlisted ratings not relevant.
    """

    kind: Literal["implicit", "threshold", "graded"] = Field(
        default="implicit",
        description="`implicit`: every test interaction; `threshold`: rating >= threshold; "
        "`graded`: as threshold, with NDCG grades.",
    )
    threshold: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="The smallest relevant rating (threshold and graded); NDCG grade = rating "
        "- threshold + 1.",
    )
    grades: dict[float, float] | None = Field(
        default=None,
        description="Graded, instead of a threshold: rating -> grade, each 0 (not relevant) or "
        ">= 1; unlisted ratings are not relevant.",
    )

    @model_validator(mode="after")
    def _threshold_or_grades(self) -> RelevanceConfig:
        if self.kind == "threshold" and self.threshold is None:
            raise ValueError("relevance.kind=threshold needs relevance.threshold")
        if self.kind == "implicit" and self.threshold is not None:
            raise ValueError(
                "relevance.threshold only applies to relevance.kind=threshold or graded"
            )
        if self.kind != "graded" and self.grades is not None:
            raise ValueError("relevance.grades only applies to relevance.kind=graded")
        if self.kind == "graded" and self.threshold is None and self.grades is None:
            raise ValueError(
                "relevance.kind=graded needs relevance.threshold (relevant iff rating >= "
                "threshold, grade = rating - threshold + 1) or relevance.grades (rating -> grade)"
            )
        if self.threshold is not None and self.grades is not None:
            raise ValueError("give relevance.threshold or relevance.grades, not both")
        if self.grades is not None:
            _check_grades(self.grades)
        return self


def _check_grades(grades: dict[float, float]) -> None:
    """Ratings and grades finite; every grade 0 (not relevant) or >= 1; at least one >= 1."""
    for rating, grade in grades.items():
        if not (math.isfinite(rating) and math.isfinite(grade)) or 0 < grade < 1 or grade < 0:
            raise ValueError(
                f"relevance.grades: {rating} -> {grade} is not allowed; map each rating to 0 "
                "(not relevant) or a grade >= 1 (NDCG gain 2^grade - 1)"
            )
    if not any(grade >= 1 for grade in grades.values()):
        raise ValueError("relevance.grades: map at least one rating to a grade >= 1")
