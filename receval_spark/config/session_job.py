"""The session job's configuration (``receval sessions``): click sources, preprocessing,
evaluation and the session models (docs/sessions.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import AliasChoices, Field, model_validator

from receval_spark import registry
from receval_spark.config.alert_rules import AlertRule, AlertsExitCode, _check_alert
from receval_spark.config.common import (
    CutOffs,
    OutputConfig,
    RunConfig,
    SparkConfig,
    Timepoint,
    TrackingConfig,
    _check_model_names,
    _FileSource,
    _Strict,
)


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
