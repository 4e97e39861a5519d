"""The ranking job's ``evaluation`` section: cut-offs, protocols, metrics, segments,
embeddings, serendipity, tuning, off-policy, custom metrics, data-quality thresholds
(docs/evaluation.md)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator

from receval_spark import extensions, registry
from receval_spark.config.alert_rules import AlertRule, AlertsExitCode
from receval_spark.config.als import MAX_ALS_BLOCKS, AlsParams, embedding_blocks
from receval_spark.config.common import CutOffs, _Strict
from receval_spark.config.ranking_data import ItemSegmentsSource, UserSegmentsSource

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

    def als_params(self, history_rows: int) -> AlsParams:
        """The implicit ALS fit of the item vectors on a train history of ``history_rows``
        rows (``blocks: auto`` sized by :func:`embedding_blocks`)."""
        return AlsParams(
            rank=self.rank,
            max_iter=self.max_iter,
            reg_param=self.reg_param,
            alpha=self.alpha,
            implicit=True,
            blocks=embedding_blocks(self.blocks, history_rows),
            seed=self.seed,
        )


class SerendipityConfig(_Strict):
    """Unexpected = not in the popularity baseline's top-k for the user (``popularity``), or
    cosine to the user's train profile below ``threshold`` (``content``, needs embeddings)."""

    unexpected: Literal["popularity", "content"] = "popularity"
    threshold: float = Field(default=0.5, ge=-1.0, le=1.0)


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
