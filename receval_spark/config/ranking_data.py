"""The ranking job's input tables (``data``) and its test set: the split and relevance
(docs/configuration.md, docs/evaluation.md#splits-no-time-travel)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from receval_spark.config.common import Timepoint, _FileSource, _Strict


class InteractionColumns(_Strict):
    user: str = "user_id"
    item: str = "item_id"
    timestamp: str | None = "timestamp"
    rating: str | None = None


class InteractionsSource(_FileSource):
    columns: InteractionColumns = Field(default_factory=InteractionColumns)
    timestamp_unit: Literal["s", "ms"] = "s"


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

    item: str = "item_id"
    category: str | list[str] | None = None
    embedding: str | None = None
    # further columns handed to custom metrics under their own names (e.g. price, provider)
    attributes: AttributeNames = Field(default_factory=list)


class ItemsSource(_FileSource):
    columns: ItemColumns = Field(default_factory=ItemColumns)
    category_separator: str | None = None


class UserSegmentColumns(_Strict):
    user: str = "user_id"
    segment: str = "segment"


class ItemSegmentColumns(_Strict):
    item: str = "item_id"
    segment: str = "segment"


class _SegmentsSource(_FileSource):
    name: str | None = Field(default=None, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    columns: UserSegmentColumns | ItemSegmentColumns

    @property
    def label(self) -> str:
        """The segments' prefix: ``name``, else the segment column's name."""
        return self.name or self.columns.segment


class UserSegmentsSource(_SegmentsSource):
    """A table mapping users to named segments (e.g. market, tier): every metric gets rows
    ``segment = <name>=<value>`` (``name`` defaults to the segment column's), evaluated users
    without a row ``<name>=unassigned``; a user with several rows is in each of them."""

    columns: UserSegmentColumns = Field(default_factory=UserSegmentColumns)


class ItemSegmentsSource(_SegmentsSource):
    """A table mapping items to named segments (e.g. provider, content type): the accuracy
    metrics get rows ``segment = <name>=<value>`` with Rel(u) restricted to that segment's
    items (as ``items=head``/``items=tail`` do; users without such relevant items are not
    evaluated there), items without a row in ``<name>=unassigned``."""

    columns: ItemSegmentColumns = Field(default_factory=ItemSegmentColumns)


class ImpressionColumns(_Strict):
    """Source column names of the logged impressions (position 1 = the top slot)."""

    user: str = "user_id"
    item: str = "item_id"
    position: str = "position"
    reward: str = "reward"
    propensity: str = "propensity"


class ImpressionsSource(_FileSource):
    """The logging policy's impressions: who was shown which item at which position, the
    reward, and the logged propensity mu(item at position | user)."""

    columns: ImpressionColumns = Field(default_factory=ImpressionColumns)


class DataConfig(_Strict):
    interactions: InteractionsSource = Field(default_factory=InteractionsSource)
    items: ItemsSource | None = None
    impressions: ImpressionsSource | None = None  # enables off-policy estimates


class GlobalTemporalSplit(_Strict):
    """train: timestamp < cutoff; test: timestamp >= cutoff (optional earlier validation cut)."""

    method: Literal["global_temporal"]
    cutoff: Timepoint | None = None
    quantile: float | None = Field(default=None, gt=0.0, lt=1.0)
    validation_cutoff: Timepoint | None = None
    validation_quantile: float | None = Field(default=None, gt=0.0, lt=1.0)

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

    method: Literal["leave_last_n"]
    n: int = Field(default=1, ge=1)


class UserRandomSplit(_Strict):
    """A seeded random fraction of each user's interactions is test (leaky: ignores time)."""

    method: Literal["user_random"]
    fraction: float = Field(default=0.2, gt=0.0, lt=1.0)
    seed: int = 42


class UserHoldoutSplit(_Strict):
    """A seeded fraction of users goes wholly to test (cold-start scenario)."""

    method: Literal["user_holdout"]
    fraction: float = Field(default=0.2, gt=0.0, lt=1.0)
    seed: int = 42


SplitConfig = Annotated[
    GlobalTemporalSplit | LeaveLastNSplit | UserRandomSplit | UserHoldoutSplit,
    Field(discriminator="method"),
]


class RelevanceConfig(_Strict):
    """Which test interactions are relevant, with which grade (DESIGN §3).

    ``implicit``: every one, grade 1. ``threshold``: rating >= threshold, grade 1. ``graded``:
    relevant iff rating >= threshold (so every binary metric equals the threshold run's), NDCG
    grade = rating - threshold + 1; or, instead of a threshold, ``grades``: rating -> grade,
    looked up exactly (list half stars on a half-star scale), unlisted ratings not relevant.
    """

    kind: Literal["implicit", "threshold", "graded"] = "implicit"
    threshold: float | None = Field(default=None, allow_inf_nan=False)
    grades: dict[float, float] | None = None  # graded: rating -> grade (0, or >= 1: relevant)

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
