"""The session job's configuration (``receval sessions``): click sources, preprocessing,
evaluation and the session models (docs/sessions.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import AliasChoices, Field, model_validator

from receval_spark import registry
from receval_spark.config.alert_rules import AlertRule, AlertsExitCode, _check_alert
from receval_spark.config.common import (
    CutOffs,
    ModelName,
    Timepoint,
    TrackingConfig,
    _check_model_names,
    _FileSource,
    _Job,
    _Strict,
)


class ClickColumns(_Strict):
    session: str = Field(default="session_id", description="The session id column.")
    item: str = Field(default="item_id", description="The clicked item's id column.")
    time: str = Field(
        default="time",
        description="The click time: epoch seconds (fractions allowed) or milliseconds, a "
        "timestamp or a date.",
    )
    order: str | None = Field(
        default=None,
        description="A column ordering clicks of equal time within a session (e.g. "
        "DIGINETICA's timeframe); null: none.",
    )


class ClicksSource(_FileSource):
    columns: ClickColumns = Field(default_factory=ClickColumns, description="Its column names.")
    timestamp_unit: Literal["s", "ms"] = Field(
        default="s",
        validation_alias=AliasChoices("timestamp_unit", "time_unit"),
        description="Unit of a numeric time column, `s` or `ms` (its earlier name `time_unit` "
        "is still read).",
    )


class SessionData(_Strict):
    """Either one raw click log (``clicks``, preprocessed and split by the job) or an already
    preprocessed and split pair (``train`` and ``test``, evaluated as given)."""

    clicks: ClicksSource | None = Field(
        default=None, description="A raw click log, preprocessed and split by the job."
    )
    train: ClicksSource | None = Field(
        default=None, description="Preprocessed train clicks, with `test` instead of `clicks`."
    )
    test: ClicksSource | None = Field(
        default=None, description="Preprocessed test clicks, with `train`, evaluated as given."
    )

    @model_validator(mode="after")
    def _one_layout(self) -> SessionData:
        if (self.clicks is None) == (self.train is None or self.test is None):
            raise ValueError("give data.clicks, or data.train and data.test (not both)")
        if self.clicks is not None and (self.train is not None or self.test is not None):
            raise ValueError("give data.clicks, or data.train and data.test (not both)")
        return self


class SessionPreprocessing(_Strict):
    """Standard preprocessing of a raw click log, each step's counts recorded (docs/sessions.md).

    The boundary is the last click - ``test_days``, or ``cutoff``. ``split_by: end``: train =
    the sessions ending before it, test = the rest; ``start``: test = the sessions starting
    after it, train = the sessions ending before it, sessions straddling it dropped (counted).
    """

    min_session_length: int = Field(
        default=2, ge=1, description="Drop sessions with fewer clicks than this."
    )
    min_item_support: int = Field(
        default=5, ge=1, description="Drop items with fewer clicks than this."
    )
    repeat_until_stable: bool = Field(
        default=True,
        description="Repeat both filters until a round removes nothing (no cap); false: once, "
        "then the session filter again.",
    )
    split_by: Literal["end", "start"] = Field(
        default="end",
        description="Which end of a session the boundary splits by: `end` or `start`.",
    )
    test_days: float | None = Field(
        default=1.0, gt=0, description="The boundary: the last click minus this many days."
    )
    cutoff: Timepoint | None = Field(
        default=None,
        description="Instead of test_days, the boundary at this time (ISO-8601 or epoch seconds).",
    )
    recent_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Keep only the most recent share of train sessions (Yoochoose 1/64: "
        "0.015625); null: all.",
    )

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
        default=1000, ge=0, description="Warn below this number of prediction events."
    )
    events_without_list: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Warn above this share of a model's prediction events without a list.",
    )


class SessionEvaluation(_Strict):
    k: CutOffs = Field(
        default_factory=lambda: [5, 10, 20],
        description="The cut-offs k the lists are evaluated at (1 to 1000).",
    )
    metrics: list[SessionMetric] = Field(
        default_factory=lambda: list(get_args(SessionMetric)),
        description="The session metrics computed (docs/reference/metrics.md); default: all.",
    )
    alerts: list[AlertRule] = Field(
        default_factory=list,
        description="Regression alert rules (docs/nightly.md), on segment `all`, without "
        "`significance`.",
    )
    alerts_exit_code: AlertsExitCode = Field(
        default=3,
        description="Exit status of a run an alert made regressed: 0 or 3 to 255 (1 and 2 "
        "mean failure and bad input).",
    )
    data_quality: SessionDataQualityConfig = Field(
        default_factory=SessionDataQualityConfig,
        description="When a data-quality fact adds a warning.",
    )


class PopSessionModel(_Strict):
    """POP: items by train clicks, ties by item id; the same list for every prediction."""

    name: ModelName
    kind: Literal["pop"] = Field(description="The most clicked items.")


class SessionPopModel(_Strict):
    """S-POP: items of the current prefix by their clicks in it, ties by train clicks and item
    id; then POP for the remaining slots."""

    name: ModelName
    kind: Literal["s-pop"] = Field(description="The session's own most clicked items.")


class ItemKnnSessionModel(_Strict):
    """Item-KNN: items by the shrunk cosine of session co-occurrence with the prefix's last
    item, |S_i ∩ S_j| / (sqrt(|S_i| |S_j|) + shrinkage) over train sessions (shrinkage 0: the
    cosine); ties by item id."""

    name: ModelName
    kind: Literal["item-knn"] = Field(description="The last item's nearest items.")
    neighbours: int = Field(
        default=100, ge=1, description="Neighbours of the last item in each list."
    )
    shrinkage: float = Field(
        default=0.0,
        ge=0,
        description="lambda in the cosine's denominator (GRU4Rec's item-kNN baseline uses 20); "
        "0: the cosine.",
    )


class SrSessionModel(_Strict):
    """SR (sequential rules, session-rec): rule a -> b weighted 1/d for every train click b
    that follows a click a by d = 1..window positions in a session; items by the summed
    weight of the rules from the prefix's last item; ties by item id."""

    name: ModelName
    kind: Literal["sr"] = Field(description="Sequential rules from the last item.")
    window: int = Field(
        default=10,
        ge=1,
        le=50,
        description="Largest distance d of a rule a -> b (weight 1/d); at most 50, so the "
        "weights sum exactly.",
    )


class MarkovSessionModel(_Strict):
    """First-order Markov: items by the number of train transitions from the last item to
    them; ties by item id."""

    name: ModelName
    kind: Literal["markov"] = Field(description="The last item's train successors.")


class SessionPredictionColumns(_Strict):
    session: str = Field(default="session_id", description="The session id column.")
    position: str = Field(
        default="position",
        description="The prefix length i: the row predicts click i + 1 of the session.",
    )
    item: str = Field(default="item_id", description="The predicted item's id column.")
    score: str = Field(default="score", description="The score column (higher is better).")


class ExternalSessionModel(_FileSource):
    """Predictions made elsewhere, one row per (session, prefix length, item) with a score."""

    name: ModelName
    kind: Literal["external"] = Field(description="Your model's predictions, from a table.")
    columns: SessionPredictionColumns = Field(
        default_factory=SessionPredictionColumns, description="The table's column names."
    )


SessionModelConfig = Annotated[
    PopSessionModel
    | SessionPopModel
    | ItemKnnSessionModel
    | MarkovSessionModel
    | SrSessionModel
    | ExternalSessionModel,
    Field(discriminator="kind"),
]


class SessionJobConfig(_Job):
    """The session job (``receval sessions``, ``receval_spark.evaluate_sessions``)."""

    data: SessionData = Field(description="The click log, raw or already split.")
    preprocessing: SessionPreprocessing = Field(
        default_factory=SessionPreprocessing,
        description="Filtering and time split of a raw click log.",
    )
    evaluation: SessionEvaluation = Field(
        default_factory=SessionEvaluation,
        description="What is computed per prediction event (docs/sessions.md).",
    )
    models: list[SessionModelConfig] = Field(
        description="The models evaluated, each by its `kind`."
    )
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig,
        description="Experiment tracking of the run (docs/nightly.md#experiment-tracking).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SessionJobConfig:
        _check_model_names([m.name for m in self.models])
        if self.output.lists:
            raise ValueError(
                "output.lists: the session protocol keeps no per-user lists (its lists are per "
                "prediction event); remove it or set it to false"
            )
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
