"""Typed, validated job configuration: YAML loading, ``--set`` overrides, path resolution.

No Spark import here: a configuration is checked completely before a session starts.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import itertools
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args, overload

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from receval_spark import extensions, registry
from receval_spark.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunConfig(_Strict):
    name: str = "receval"
    date: dt.date | None = None  # defaults to today (UTC) when the job starts


class SparkConfig(_Strict):
    master: str = "local[*]"
    remote: str | None = None  # a Spark Connect server, sc://host:15002
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # a driver JVM the job starts maps a class-data archive of an earlier run's classes
    # (receval_spark.class_archive); false: every start loads Spark's classes anew
    class_archive: bool = True

    @field_validator("remote")
    @classmethod
    def _connect_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"sc://[^/\s]+", value):
            raise ValueError(
                f"{value!r} is not a Spark Connect URL; give sc://HOST:PORT (e.g. "
                "sc://127.0.0.1:15002), or leave spark.remote out for local Spark"
            )
        return value


class CatalogConfig(_Strict):
    """Register every report dataset as a partitioned table ``<database>.<prefix><dataset>``
    of the session catalog (the Hive metastore on a cluster), pointed at the committed runs."""

    database: str = "receval"
    prefix: str = ""


class MlflowConfig(_Strict):
    """Log each evaluation run as an MLflow run: the config as params, the headline metrics at
    each k as metrics, the summary, the metrics table and the human report as artifacts.
    ``tracking_uri``: the tracking server or store (default: MLflow's own, MLFLOW_TRACKING_URI)."""

    tracking_uri: str | None = None
    experiment: str = "receval"

    @model_validator(mode="after")
    def _installed(self) -> MlflowConfig:
        if importlib.util.find_spec("mlflow") is None:
            raise ValueError(
                "tracking.mlflow needs MLflow: pip install 'receval_spark[mlflow]' "
                "(or remove tracking.mlflow)"
            )
        return self


class TrackingConfig(_Strict):
    mlflow: MlflowConfig | None = None


class OutputConfig(_Strict):
    path: str = "reports"
    per_user: bool = False
    catalog: CatalogConfig | None = None
    # a writer's lease on output.path; a killed driver's lease lapses after this long
    lease_seconds: float = Field(default=600.0, gt=0)


class _FileSource(_Strict):
    """Where a table lives and how to parse it (CSV options apply to ``format: csv`` only).

    ``path`` may be left out when the table is given to the Python API as a DataFrame
    (``receval_spark.evaluate(..., interactions=df)``); the column names still apply to it."""

    path: str | None = None
    format: Literal["parquet", "csv"] = "parquet"
    header: bool = True
    delimiter: str = ","
    encoding: str = "UTF-8"
    column_names: list[str] | None = None  # names for a CSV without a header row


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


def _cut_offs(ks: list[int]) -> list[int]:
    """The cut-offs k, sorted, each once; at least one."""
    if not ks:
        raise ValueError("evaluation.k needs at least one cut-off")
    return sorted(set(ks))


CutOffs = Annotated[list[Annotated[int, Field(ge=1, le=1000)]], AfterValidator(_cut_offs)]


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


Timepoint = dt.datetime | dt.date | float


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


Segment = Literal["warm", "cold", "activity", "popularity"]

# the allowed values of evaluation.metrics: the registry's accuracy and beyond families
ACCURACY_METRICS: tuple[str, ...] = registry.names("accuracy")
BEYOND_METRICS: tuple[str, ...] = registry.names("beyond")
ALL_METRICS: tuple[str, ...] = ACCURACY_METRICS + BEYOND_METRICS
if TYPE_CHECKING:  # statically a name; pydantic validates it against the registry's names
    AccuracyMetric = str
    BeyondMetric = str
    MetricName = str
else:
    AccuracyMetric = Literal[ACCURACY_METRICS]
    BeyondMetric = Literal[BEYOND_METRICS]
    MetricName = AccuracyMetric | BeyondMetric


# ALS's user and item blocks (Spark ML's numUserBlocks = numItemBlocks; its default 10). The
# fitted factors depend on them (each block's factors start from their own seed) and on nothing
# about the cluster, so a given value gives the same model everywhere; fewer blocks are faster on
# few cores (ml-latest-small on local[2], warm: the job's fit and top-m 24.3 s with 10 blocks,
# 18.8 s with 2; benchmarks/model_fitting.py).
MAX_ALS_BLOCKS = 1024


class EmbeddingsConfig(_Strict):
    """Item vectors for ild_embedding and content serendipity.

    ``items``: the data.items embedding column; ``als``: item factors of Spark ML's implicit
    ALS fitted on train; ``none``: no vectors (ild_embedding is skipped); ``auto``: ``items``
    when data.items maps an embedding column, else ``als``.
    """

    source: Literal["auto", "items", "als", "none"] = "auto"
    rank: int = Field(default=16, ge=2, le=512)
    max_iter: int = Field(default=10, ge=1, le=100)
    reg_param: float = Field(default=0.1, ge=0.0)
    alpha: float = Field(default=10.0, gt=0.0)
    # ``auto``: sized to the train history (:func:`embedding_blocks`), never to the cluster
    blocks: Annotated[int, Field(ge=1, le=MAX_ALS_BLOCKS)] | Literal["auto"] = "auto"
    seed: int = 42


# rows of train history per ALS block when evaluation.embeddings.blocks is auto, and its bounds
ROWS_PER_EMBEDDING_BLOCK = 200_000
EMBEDDING_BLOCKS = (2, 10)


def embedding_blocks(blocks: int | Literal["auto"], history_rows: int) -> int:
    """The ALS blocks of the item embeddings: ``blocks``, or for ``auto`` one block per
    ROWS_PER_EMBEDDING_BLOCK rows of train history, within EMBEDDING_BLOCKS (2 for
    MovieLens 100K, Spark ML's 10 above 1.8M rows). It depends on the data alone, so the factors
    are the same on every deployment; few blocks keep a small fit from running ten-task stages
    (ml-100k's fit on local[2]: 10.9 s with 10 blocks, 5.2 s with 2)."""
    if blocks != "auto":
        return blocks
    low, high = EMBEDDING_BLOCKS
    return min(high, max(low, -(-history_rows // ROWS_PER_EMBEDDING_BLOCK)))


class SerendipityConfig(_Strict):
    """Unexpected = not in the popularity baseline's top-k for the user (``popularity``), or
    cosine to the user's train profile below ``threshold`` (``content``, needs embeddings)."""

    unexpected: Literal["popularity", "content"] = "popularity"
    threshold: float = Field(default=0.5, ge=-1.0, le=1.0)


class AlertRule(_Strict):
    """Flag a regression when ``metric@k`` of a model on ``segment`` is worse than the mean of
    its previous ``window`` run dates by more than ``max_relative_drop`` (relative; for a
    metric where lower is better, registry ``larger_is_better`` false, e.g. gini, a rise
    counts). With ``significance`` (alpha), only when the paired comparison of the model's
    per-user values with its own values ``against`` the previous run date, or each user's mean
    over the last ``window`` dates that committed per_user rows, is also worse and significant
    after Holm (needs output.per_user)."""

    metric: str  # a metric the run computes (custom ones included): checked by the job config
    k: int | None = 10
    segment: str = "all"
    max_relative_drop: float = Field(default=0.05, gt=0.0, lt=1.0)
    window: int = Field(default=7, ge=1)
    significance: float | None = Field(default=None, gt=0.0, lt=1.0)
    against: Literal["previous_date", "window"] = "previous_date"

    def earlier_dates(self, dates: Sequence[str]) -> list[str]:
        """The run dates (of ``dates``, ascending) its paired comparison is against."""
        return list(dates[-self.window :] if self.against == "window" else dates[-1:])


def _alerts_exit_code(code: int) -> int:
    if code in (1, 2):
        raise ValueError(
            f"{code} means {'a failure' if code == 1 else 'bad input'}; use 3 (the default), "
            "another code from 4 to 255, or 0 to succeed when an alert fires"
        )
    return code


# the exit status of a run an alert made regressed: 0 for schedulers that treat any other as
# a failure (the run record and --summary-json still say regressed)
AlertsExitCode = Annotated[int, Field(ge=0, le=255), AfterValidator(_alerts_exit_code)]


class TuningConfig(_Strict):
    """How grids of model hyperparameters are chosen on the validation period: the largest
    macro average of ``metric@k``, ties by grid order."""

    metric: AccuracyMetric = "ndcg"
    k: int = Field(default=10, ge=1, le=1000)


PROTOCOL = re.compile(r"full|sampled_([1-9][0-9]*)")


class OffPolicyConfig(_Strict):
    """Off-policy estimation from data.impressions; ``clip``: M of clipped IPS, min(w, M)."""

    clip: float = Field(default=10.0, gt=0.0, allow_inf_nan=False)


class CustomMetricConfig(_Strict):
    """A user-defined per-user metric (receval_spark.extensions): the function at ``path``
    (``package.module:function``), or without ``path`` the one registered from Python under
    ``name`` (``receval_spark.register_metric``, whose properties then apply)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    path: str | None = None
    bounds: tuple[float, float] = (0.0, 1.0)
    larger_is_better: bool = True
    k: bool = True  # one value per cut-off; false: one value over each user's whole list
    scope: Literal["user", "group"] = "user"  # group: over all lists of a group, like coverage

    def resolved(self) -> extensions.CustomMetric:
        """The checked metric (importing ``path``); ValueError naming the problem."""
        if self.path is None:
            found = extensions.registered(self.name)
            if found is None:
                raise ValueError(
                    f"{self.name!r} is not registered; register it with "
                    "receval_spark.register_metric before evaluating, or give its path "
                    "(package.module:function)"
                )
            return found
        return extensions.custom_metric(
            self.name,
            extensions.import_function(self.path),
            bounds=self.bounds,
            larger_is_better=self.larger_is_better,
            k=self.k,
            scope=self.scope,
        )


class DataQualityConfig(_Strict):
    """Warning thresholds of the run's data-quality facts (docs/evaluation.md#data-quality-facts):
    a fact whose share exceeds its threshold adds a warning to the run record. Shares of the
    fact's own total: interaction rows, user-item pairs, relevant test pairs, evaluated users,
    list slots; the list facts at the largest k, for every model but the oracle."""

    duplicate_rows: float = Field(
        default=0.01, ge=0.0, le=1.0, description="share of interaction rows that repeat another"
    )
    duplicate_pairs: float = Field(
        default=0.1, ge=0.0, le=1.0, description="share of user-item pairs with several rows"
    )
    conflicting_pairs: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="share of user-item pairs with grades on both sides of the threshold",
    )
    reconsumed_pairs: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="share of relevant test pairs the user already had in train",
    )
    cold_users: float = Field(
        default=0.5, ge=0.0, le=1.0, description="share of evaluated users without train rows"
    )
    score_ties_at_k: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="share of evaluated users whose k-th and (k+1)-th candidates tie in score",
    )
    short_lists: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="share of evaluated users with fewer than k candidates",
    )
    outside_catalogue: float = Field(
        default=0.0, ge=0.0, le=1.0, description="share of list slots outside the catalogue"
    )


class EvaluationConfig(_Strict):
    k: CutOffs = Field(default_factory=lambda: [5, 10, 20])
    protocol: list[str] = Field(default_factory=lambda: ["full"])
    definitions: Literal["receval", "spark_mllib", "recommenders"] = "receval"
    tuning: TuningConfig = Field(default_factory=TuningConfig)
    filter_seen: bool = True
    baseline: str | None = "popularity"  # null: no comparisons/
    min_users: int = Field(default=100, ge=0)
    # share of the evaluated users a model should have lists for (below: a warning; none: the
    # list_coverage check fails)
    min_list_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    # default [warm, cold]; [] under leave_last_n, whose test users all have train rows
    # (JobConfig._default_segments)
    segments: list[Segment] = Field(default_factory=lambda: list[Segment](["warm", "cold"]))
    metrics: list[MetricName] = Field(default_factory=lambda: list(ALL_METRICS))
    head_share: float = Field(default=0.5, gt=0.0, lt=1.0)
    personalization_pairs: int = Field(default=1000, ge=1)
    bootstrap_samples: int = Field(default=100, ge=0, le=10_000)  # 0: no bootstrap intervals
    alerts: list[AlertRule] = Field(default_factory=list)
    alerts_exit_code: AlertsExitCode = 3
    seed: int = 42
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    serendipity: SerendipityConfig = Field(default_factory=SerendipityConfig)
    off_policy: OffPolicyConfig | None = None  # defaults apply when data.impressions is given
    custom_metrics: list[CustomMetricConfig] = Field(default_factory=list)
    user_segments: UserSegmentsSource | None = None
    item_segments: ItemSegmentsSource | None = None
    data_quality: DataQualityConfig = Field(default_factory=DataQualityConfig)

    @field_validator("protocol", mode="before")
    @classmethod
    def _protocols(cls, value: Any) -> Any:
        """``full``, ``sampled_<N>`` (N >= 1), or a list of them. ``full`` is always
        evaluated (and comes first): a sampled protocol adds rows labelled with its name."""
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names:
            raise ValueError("give full, sampled_<N> (e.g. sampled_100) or a list of them")
        bad = [n for n in names if not (isinstance(n, str) and PROTOCOL.fullmatch(n))]
        if bad:
            raise ValueError(
                f"unknown protocol {bad[0]!r}; use full or sampled_<N> with N negatives per "
                "user, e.g. [full, sampled_100]"
            )
        return sorted({"full", *names}, key=lambda n: (n != "full", len(n), n))


def sampled_negatives(protocol: str) -> int | None:
    """N of ``sampled_<N>``; None for ``full``."""
    found = PROTOCOL.fullmatch(protocol)
    return int(found.group(1)) if found and found.group(1) else None


class RecommendationColumns(_Strict):
    user: str = "user_id"
    item: str = "item_id"
    score: str | None = "score"
    rank: str | None = None
    # further columns of each (user, item) handed to custom metrics (e.g. a personalised price)
    attributes: AttributeNames = Field(default_factory=list)

    @model_validator(mode="after")
    def _score_or_rank(self) -> RecommendationColumns:
        if (self.score is None) == (self.rank is None):
            raise ValueError(
                "map exactly one of columns.score or columns.rank (set the other to null)"
            )
        return self


class PopularityModel(_Strict):
    """Score = number of distinct train users of the item; ties by item id ascending."""

    name: str
    kind: Literal["popularity"]


class RandomModel(_Strict):
    """Seeded uniform random items from the train catalogue, independent of partitioning."""

    name: str
    kind: Literal["random"]
    seed: int = 42


class OracleModel(_Strict):
    """Each user's relevant test items, best grade first: the sanity upper bound."""

    name: str
    kind: Literal["oracle"]


class ExternalModel(_FileSource):
    """Recommendations made elsewhere: user, item, and score (higher better) or rank (1 best)."""

    name: str
    kind: Literal["external"]
    columns: RecommendationColumns = Field(default_factory=RecommendationColumns)


Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0.0)]
PositiveFloat = Annotated[float, Field(gt=0.0)]
Fallback = Literal["popularity", "none"]  # what a candidate model gives users it cannot score
MAX_ALS_ITER = 12  # deeper ALS lineages overflow the JVM stack without a checkpoint directory


class AlsModel(_Strict):
    """Spark ML ALS fitted inside the job. Implicit: confidence 1 + alpha · (interactions of
    the user with the item) (Hu, Koren, Volinsky 2008); explicit: the train ratings (a model
    that predicts ratings). A list is a grid tuned on the validation period. ``fallback``:
    users without factors get the popularity ranking (``popularity``) or nothing (``none``)."""

    name: str
    kind: Literal["als"]
    fallback: Fallback = "popularity"
    implicit: bool = True
    rank: Positive | list[Positive] = 32
    reg_param: NonNegative | list[NonNegative] = 0.1
    alpha: PositiveFloat | list[PositiveFloat] = 10.0
    max_iter: int = Field(default=10, ge=1, le=MAX_ALS_ITER)
    blocks: int = Field(default=10, ge=1, le=MAX_ALS_BLOCKS)
    seed: int = 42


class ItemKnnModel(_Strict):
    """Item-item cosine on train co-occurrence with each item's top ``neighbours``; a list is
    a grid tuned on the validation period. ``fallback``: users without any neighbour score get
    the popularity ranking (``popularity``) or nothing (``none``)."""

    name: str
    kind: Literal["item_knn"]
    fallback: Fallback = "popularity"
    neighbours: Positive | list[Positive] = 100


class BiasModel(_Strict):
    """Rating baseline mu + b_u + b_i with regularised biases (rating_prediction only)."""

    name: str
    kind: Literal["bias"]
    reg_item: NonNegative = 10.0
    reg_user: NonNegative = 15.0


ModelConfig = Annotated[
    PopularityModel
    | RandomModel
    | OracleModel
    | ExternalModel
    | AlsModel
    | ItemKnnModel
    | BiasModel,
    Field(discriminator="kind"),
]
TUNABLE = {"als": ("rank", "reg_param", "alpha"), "item_knn": ("neighbours",)}
SCORES_ANY_ITEM = ("popularity", "random", "oracle", "als", "item_knn")
PREDICTS_RATINGS = ("bias", "als")


def hyperparameter_grid(model: ModelConfig) -> list[ModelConfig]:
    """Every combination of the model's list-valued hyperparameters, in the order written
    (the last hyperparameter varies fastest); a model without lists is its own grid."""
    names = TUNABLE.get(model.kind, ())
    values = [
        getattr(model, n) if isinstance(getattr(model, n), list) else [getattr(model, n)]
        for n in names
    ]
    return [
        model.model_copy(update=dict(zip(names, point, strict=True)))
        for point in itertools.product(*values)
    ]


def hyperparameters(model: ModelConfig) -> dict[str, Any]:
    """The tunable values of one grid point."""
    return {n: getattr(model, n) for n in TUNABLE.get(model.kind, ())}


LOGGING_POLICY = "logging"  # the model name of the logging policy's own value in off_policy/


class JobConfig(_Strict):
    run: RunConfig = Field(default_factory=RunConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    split: SplitConfig
    relevance: RelevanceConfig = Field(default_factory=RelevanceConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    task: Literal["ranking", "rating_prediction"] = "ranking"
    models: list[ModelConfig]
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    @model_validator(mode="before")
    @classmethod
    def _default_segments(cls, data: Any) -> Any:
        """``evaluation.segments`` left out: [warm, cold] wherever test users can be new (no
        train rows): global_temporal, user_holdout (every test user is), user_random (a user
        with n rows goes wholly to test when round(fraction * n) = n, e.g. n = 1 at fraction
        >= 0.5); [] under leave_last_n, which tests only users with more than n rows, so cold
        is empty and warm repeats all."""
        if not isinstance(data, dict):
            return data
        split = data.get("split")
        method = split.get("method") if isinstance(split, dict) else getattr(split, "method", None)
        if method != "leave_last_n":
            return data
        evaluation = data.get("evaluation", {})
        if isinstance(evaluation, dict) and "segments" not in evaluation:
            return {**data, "evaluation": {**evaluation, "segments": []}}
        explicit: set[str] = getattr(evaluation, "model_fields_set", set())
        if isinstance(evaluation, EvaluationConfig) and "segments" not in explicit:
            return {**data, "evaluation": evaluation.model_copy(update={"segments": []})}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> JobConfig:
        names = [m.name for m in self.models]
        _check_model_names(names)
        self._check_models()
        if self.task == "rating_prediction":
            return self
        if self.evaluation.baseline is not None and self.evaluation.baseline not in names:
            raise ValueError(
                f"evaluation.baseline: {self.evaluation.baseline!r} is not a configured model; "
                f"use one of {names} or null"
            )
        needs_time = isinstance(self.split, GlobalTemporalSplit | LeaveLastNSplit)
        if needs_time and self.data.interactions.columns.timestamp is None:
            raise ValueError(
                f"split.method: {self.split.method} needs data.interactions.columns.timestamp"
            )
        embeddings = self.evaluation.embeddings.source
        has_vectors = self.data.items is not None and self.data.items.columns.embedding is not None
        if embeddings == "items" and not has_vectors:
            raise ValueError(
                "evaluation.embeddings.source: items needs data.items.columns.embedding"
            )
        if self.evaluation.serendipity.unexpected == "content" and embeddings == "none":
            raise ValueError(
                "evaluation.serendipity.unexpected: content needs item embeddings "
                "(evaluation.embeddings.source must not be none)"
            )
        if self.evaluation.off_policy is not None and self.data.impressions is None:
            raise ValueError(
                "evaluation.off_policy needs data.impressions (the logged impressions); "
                "configure them or remove evaluation.off_policy"
            )
        if self.data.impressions is not None and LOGGING_POLICY in names:
            raise ValueError(
                f"models: {LOGGING_POLICY!r} names the logging policy in off_policy/ when "
                "data.impressions is given; rename that model"
            )
        self._define_custom_metrics()
        for i, rule in enumerate(self.evaluation.alerts):
            _check_alert(
                i,
                rule,
                metrics=self._reported_metrics(),
                ks=self.evaluation.k,
                segments=self._reported_segments(rule.metric),
            )
            if rule.significance is not None and not self.output.per_user:
                raise ValueError(
                    f"evaluation.alerts.{i}.significance compares each night's per-user values "
                    "with the previous night's; set output.per_user: true"
                )
        return self

    def _define_custom_metrics(self) -> None:
        """Resolve evaluation.custom_metrics (unique names; each importable, callable with the
        ranked-list table, not named like a built-in) and make their definitions known; item
        and model attribute columns must not share a name (both join the same table)."""
        items = set(self.data.items.columns.attributes) if self.data.items is not None else set()
        for m in self.models:
            clash = (
                sorted(items & set(m.columns.attributes)) if isinstance(m, ExternalModel) else []
            )
            if clash:
                raise ValueError(
                    f"models.{m.name}.columns.attributes: {clash} also name item attributes "
                    "(data.items.columns.attributes); rename one of them"
                )
        names = [m.name for m in self.evaluation.custom_metrics]
        for i, entry in enumerate(self.evaluation.custom_metrics):
            if names.count(entry.name) > 1:
                raise ValueError(f"evaluation.custom_metrics.{i}: {entry.name!r} is repeated")
            try:
                registry.define_custom(entry.resolved().metric)
            except ValueError as exc:
                raise ValueError(f"evaluation.custom_metrics.{i}: {exc}") from None

    def _reported_metrics(self) -> list[str]:
        """The metrics the ranking task reports: evaluation.metrics (under a peer's
        definitions only the accuracy metrics that peer defines) and the custom metrics."""
        settings = self.evaluation
        custom = [m.name for m in settings.custom_metrics]
        if settings.definitions == "receval":
            return [*settings.metrics, *custom]
        ranking = registry.definitions()
        return [
            m
            for m in settings.metrics
            if ranking[m].family != "accuracy" or ranking[m].peer_defined
        ] + custom

    def _reported_segments(self, metric: str) -> list[str]:
        """The segments of ``metric``'s rows: all and the user segments; the item segments
        (popularity: Rel(u) restricted to head or tail items) for accuracy metrics."""
        names = ["all"]
        for segment in self.evaluation.segments:
            if segment in ("warm", "cold"):
                names.append(segment)
            elif segment == "activity":
                names += [f"activity=q{q}" for q in range(1, 5)]
            elif registry.definitions()[metric].family == "accuracy":
                names += ["items=head", "items=tail"]
        settings = self.evaluation
        if settings.user_segments is not None:
            names.append(f"{settings.user_segments.label}=*")  # any value of the table
        if (
            settings.item_segments is not None
            and registry.definitions()[metric].family == "accuracy"
        ):
            names.append(f"{settings.item_segments.label}=*")
        return names

    def _check_models(self) -> None:
        """Grids need a validation period; each task takes the models that answer it."""
        validation = isinstance(self.split, GlobalTemporalSplit) and (
            self.split.validation_cutoff is not None or self.split.validation_quantile is not None
        )
        for m in self.models:
            if len(hyperparameter_grid(m)) > 1 and not validation:
                raise ValueError(
                    f"models.{m.name}: a hyperparameter grid is tuned on the validation period; "
                    "set split.validation_quantile (or validation_cutoff) with method "
                    "global_temporal, or give single values"
                )
            if self.task == "rating_prediction" and len(hyperparameter_grid(m)) > 1:
                raise ValueError(
                    f"models.{m.name}: task rating_prediction takes single hyperparameter "
                    "values (grids are tuned by a ranking metric)"
                )
            explicit_als = m.kind == "als" and not m.implicit
            if self.task == "rating_prediction" and not (m.kind == "bias" or explicit_als):
                raise ValueError(
                    f"models.{m.name}: task rating_prediction needs models that predict ratings "
                    "(kind: bias, or kind: als with implicit: false)"
                )
            if self.task == "ranking" and m.kind == "bias":
                raise ValueError(
                    f"models.{m.name}: kind bias predicts ratings; use it with "
                    "task: rating_prediction"
                )
        log = self.data.interactions
        # a log given as a DataFrame (no path) is checked when it is known: its canonical
        # ``rating`` column needs no mapping (receval_spark.api)
        if self.needs_ratings and log.columns.rating is None and log.path is not None:
            raise ValueError(f"{self.needs_ratings} needs data.interactions.columns.rating")

    @property
    def needs_ratings(self) -> str | None:
        """What needs the log's ratings: task rating_prediction, an explicit ALS model or a
        threshold or graded relevance (None: nothing)."""
        if self.task == "rating_prediction":
            return "task: rating_prediction"
        explicit = [m.name for m in self.models if m.kind == "als" and not m.implicit]
        if explicit:
            return f"models.{explicit[0]} (als with implicit: false)"
        if self.relevance.kind != "implicit":
            return f"relevance.kind: {self.relevance.kind}"
        return None

    @property
    def off_policy_settings(self) -> OffPolicyConfig | None:
        """The off-policy settings when impressions are configured (defaults if not given)."""
        if self.data.impressions is None:
            return None
        return self.evaluation.off_policy or OffPolicyConfig()


# --- the session-based next-item protocol (DESIGN §8) ---------------------------------------


class ClickColumns(_Strict):
    session: str = "session_id"
    item: str = "item_id"
    # epoch seconds (float allowed), epoch ms (timestamp_unit: ms), timestamp or date
    time: str = "time"
    order: str | None = None  # orders clicks of equal time within a session (Diginetica timeframe)


class ClicksSource(_FileSource):
    columns: ClickColumns = Field(default_factory=ClickColumns)
    # the key of data.interactions too; time_unit, its earlier name, is still read
    timestamp_unit: Literal["s", "ms"] = Field(
        default="s", validation_alias=AliasChoices("timestamp_unit", "time_unit")
    )


class SessionData(_Strict):
    """Either one raw click log (``clicks``, preprocessed and split by the job) or an already
    preprocessed and split pair (``train`` and ``test``, evaluated as given)."""

    clicks: ClicksSource | None = None
    train: ClicksSource | None = None
    test: ClicksSource | None = None

    @model_validator(mode="after")
    def _one_layout(self) -> SessionData:
        if (self.clicks is None) == (self.train is None or self.test is None):
            raise ValueError("give data.clicks, or data.train and data.test (not both)")
        if self.clicks is not None and (self.train is not None or self.test is not None):
            raise ValueError("give data.clicks, or data.train and data.test (not both)")
        return self


class SessionPreprocessing(_Strict):
    """Standard preprocessing of a raw click log, each step's counts recorded (DESIGN §8)."""

    min_session_length: int = Field(default=2, ge=1)
    min_item_support: int = Field(default=5, ge=1)
    repeat_until_stable: bool = True  # filter rounds until one removes nothing (no cap)
    # boundary = last click - test_days, or cutoff; end: train = sessions ending before it,
    # test = the rest; start: test = sessions starting after it, train = sessions ending
    # before it, sessions straddling it dropped (counted)
    split_by: Literal["end", "start"] = "end"
    test_days: float | None = Field(default=1.0, gt=0)  # the boundary: last click - N days
    cutoff: Timepoint | None = None  # or: the boundary at this time
    recent_fraction: float | None = Field(default=None, gt=0, le=1)  # Yoochoose 1/64: 0.015625

    @model_validator(mode="after")
    def _one_split(self) -> SessionPreprocessing:
        if self.cutoff is not None and "test_days" in self.model_fields_set:
            raise ValueError("preprocessing: give test_days or cutoff, not both")
        return self


if TYPE_CHECKING:
    SessionMetric = str
else:
    SessionMetric = Literal[registry.names("session")]


class SessionDataQualityConfig(_Strict):
    """Warning thresholds of the session run's data-quality facts
    (docs/evaluation.md#data-quality-facts)."""

    min_test_events: int = Field(
        default=1000, ge=0, description="fewer prediction events than this: a warning"
    )
    events_without_list: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="share of a model's prediction events without a list above which it warns",
    )


class SessionEvaluation(_Strict):
    k: CutOffs = Field(default_factory=lambda: [5, 10, 20])
    metrics: list[SessionMetric] = Field(default_factory=lambda: list(get_args(SessionMetric)))
    alerts: list[AlertRule] = Field(default_factory=list)
    alerts_exit_code: AlertsExitCode = 3
    data_quality: SessionDataQualityConfig = Field(default_factory=SessionDataQualityConfig)


class PopSessionModel(_Strict):
    """POP: items by train clicks, ties by item id; the same list for every prediction."""

    name: str
    kind: Literal["pop"]


class SessionPopModel(_Strict):
    """S-POP: items of the current prefix by their clicks in it, ties by train clicks and item
    id; then POP for the remaining slots."""

    name: str
    kind: Literal["s-pop"]


class ItemKnnSessionModel(_Strict):
    """Item-KNN: items by the shrunk cosine of session co-occurrence with the prefix's last
    item, |S_i ∩ S_j| / (sqrt(|S_i| |S_j|) + shrinkage) over train sessions (shrinkage 0: the
    cosine); ties by item id."""

    name: str
    kind: Literal["item-knn"]
    neighbours: int = Field(default=100, ge=1)
    shrinkage: float = Field(default=0.0, ge=0)  # lambda of GRU4Rec's item-kNN baseline


class SrSessionModel(_Strict):
    """SR (sequential rules, session-rec): rule a -> b weighted 1/d for every train click b
    that follows a click a by d = 1..window positions in a session; items by the summed
    weight of the rules from the prefix's last item; ties by item id."""

    name: str
    kind: Literal["sr"]
    window: int = Field(default=10, ge=1, le=50)  # le 50: exact rational weights (decimal)


class MarkovSessionModel(_Strict):
    """First-order Markov: items by the number of train transitions from the last item to
    them; ties by item id."""

    name: str
    kind: Literal["markov"]


class SessionPredictionColumns(_Strict):
    session: str = "session_id"
    position: str = "position"  # prefix length i: the prediction of click i + 1
    item: str = "item_id"
    score: str = "score"


class ExternalSessionModel(_FileSource):
    """Predictions made elsewhere, one row per (session, prefix length, item) with a score."""

    name: str
    kind: Literal["external"]
    columns: SessionPredictionColumns = Field(default_factory=SessionPredictionColumns)


SessionModelConfig = Annotated[
    PopSessionModel
    | SessionPopModel
    | ItemKnnSessionModel
    | MarkovSessionModel
    | SrSessionModel
    | ExternalSessionModel,
    Field(discriminator="kind"),
]


class SessionJobConfig(_Strict):
    run: RunConfig = Field(default_factory=RunConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    data: SessionData
    preprocessing: SessionPreprocessing = Field(default_factory=SessionPreprocessing)
    evaluation: SessionEvaluation = Field(default_factory=SessionEvaluation)
    models: list[SessionModelConfig]
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    @model_validator(mode="after")
    def _consistent(self) -> SessionJobConfig:
        _check_model_names([m.name for m in self.models])
        for i, rule in enumerate(self.evaluation.alerts):
            _check_alert(
                i, rule, metrics=self.evaluation.metrics, ks=self.evaluation.k, segments=["all"]
            )
            if rule.significance is not None:
                raise ValueError(
                    f"evaluation.alerts.{i}.significance: the session protocol keeps no per-user "
                    "values to compare nights with; remove it"
                )
        return self


def _check_alert(
    i: int, rule: AlertRule, *, metrics: list[str], ks: list[int], segments: list[str]
) -> None:
    """A rule names a metric, k and segment the run computes (else it could never fire), and
    ``against`` only with the significance test it configures."""
    where = f"evaluation.alerts.{i}"
    if rule.against != "previous_date" and rule.significance is None:
        raise ValueError(
            f"{where}.against chooses what the significance test compares with; set "
            "significance (e.g. 0.05) or remove against"
        )
    if rule.metric not in metrics:
        raise ValueError(
            f"{where}: metric {rule.metric!r} is not computed by this run (computed: "
            f"{metrics}); add it to evaluation.metrics or change the rule"
        )
    if rule.k not in ks:
        raise ValueError(
            f"{where}: k {rule.k} is not one of evaluation.k {ks}; add it there or change the rule"
        )
    if rule.segment not in segments and not any(
        s.endswith("=*") and rule.segment.startswith(s[:-1]) for s in segments
    ):
        raise ValueError(
            f"{where}: segment {rule.segment!r} is not computed for {rule.metric} by this run "
            f"(computed: {segments}); add its segment to evaluation.segments or change the rule"
        )


def _check_model_names(names: list[str]) -> None:
    """At least one model, and unique names."""
    if not names:
        raise ValueError("models: configure at least one model")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"models: model names must be unique, repeated: {duplicated}")


@overload
def validate_config(raw: dict[str, Any], *, schema: type[JobConfig] = ...) -> JobConfig: ...
@overload
def validate_config(raw: dict[str, Any], *, schema: type[SessionJobConfig]) -> SessionJobConfig: ...
def validate_config(
    raw: dict[str, Any], *, schema: type[JobConfig] | type[SessionJobConfig] = JobConfig
) -> JobConfig | SessionJobConfig:
    """Validate a raw mapping into a JobConfig (or ``schema``), naming the offending key."""
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    """One line per offending key. A value that fits none of a union's types yields one error
    per type with the type's name appended to the location; those merge into one line."""
    lines: dict[str, str] = {}
    alternatives: dict[str, list[tuple[str, Any]]] = {}
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if not _is_union_tag(p)]
        if len(parts) > 1 and _is_type_name(parts[-1]):
            alternatives.setdefault(".".join(parts[:-1]), []).append((parts[-1], err))
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key (check its spelling: docs/configuration.md lists the keys)"
        elif err["type"] == "missing":
            message = "required key is missing"
        elif err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            parts.append(err["ctx"]["discriminator"].strip("'"))
            message = (
                f"unknown value {err['ctx']['tag']!r}; use one of {err['ctx']['expected_tags']}"
                if err["type"] == "union_tag_invalid"
                else "required key is missing"
            )
        lines[".".join(parts)] = message
    for key, found in alternatives.items():
        if len(found) > 1:
            for name, _ in found:
                lines.pop(f"{key}.{name}", None)
            if all(err["type"] == "literal_error" for _, err in found):
                choices = ", ".join(e["ctx"]["expected"].replace(" or ", ", ") for _, e in found)
                lines[key] = f"unknown value {found[0][1]['input']!r}; use one of {choices}"
            else:
                lines[key] = f"expected a value of type {' or '.join(name for name, _ in found)}"
    return "invalid configuration:\n  " + "\n  ".join(
        f"{k}: {m}" if k else m for k, m in lines.items()
    )


def _is_type_name(part: str) -> bool:
    return "[" in part or part in {"str", "int", "float", "bool", "datetime", "date", "dict"}


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and part in {
        "global_temporal",
        "leave_last_n",
        "user_random",
        "user_holdout",
        "popularity",
        "random",
        "oracle",
        "external",
        "als",
        "item_knn",
        "bias",
        "pop",
        "s-pop",
        "item-knn",
        "markov",
    }
