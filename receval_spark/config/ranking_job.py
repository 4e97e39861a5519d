"""The ranking job's configuration (``receval evaluate``): its sections and the rules that
span them (docs/configuration.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from receval_spark import registry
from receval_spark.config.alert_rules import _check_alert
from receval_spark.config.common import TrackingConfig, _check_model_names, _Job
from receval_spark.config.ranking_data import (
    DataConfig,
    GivenSplit,
    GlobalTemporalSplit,
    InteractionsSource,
    LeaveLastNSplit,
    RelevanceConfig,
    RollingSplit,
    SplitConfig,
)
from receval_spark.config.ranking_evaluation import EvaluationConfig, OffPolicyConfig
from receval_spark.config.ranking_models import (
    ExternalModel,
    ModelConfig,
    hyperparameter_grid,
    predicts_ratings,
    ranks_items,
)

LOGGING_POLICY = "logging"  # the model name of the logging policy's own value in off_policy/


class JobConfig(_Job):
    """The ranking job (``receval evaluate``, ``receval_spark.evaluate``)."""

    data: DataConfig = Field(default_factory=DataConfig, description="The input tables.")
    split: SplitConfig = Field(
        description="How the log is split into train (and validation) and test, by `method`."
    )
    relevance: RelevanceConfig = Field(
        default_factory=RelevanceConfig,
        description="The relevance rule: its `kind`, threshold or grades.",
    )
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig,
        description="What is computed on the test period (docs/evaluation.md).",
    )
    task: Literal["ranking", "rating_prediction"] = Field(
        default="ranking",
        description="`ranking`: top-k lists and their metrics; `rating_prediction`: MAE, MSE "
        "and RMSE of predicted ratings.",
    )
    models: list[ModelConfig] = Field(description="The models evaluated, each by its `kind`.")
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig,
        description="Experiment tracking of the run (docs/nightly.md#experiment-tracking).",
    )

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
        self._check_given_split()
        self._check_rolling()
        self._check_models()
        if self.task == "rating_prediction":
            return self
        if self.evaluation.baseline is not None and self.evaluation.baseline not in names:
            raise ValueError(
                f"evaluation.baseline: {self.evaluation.baseline!r} is not a configured model; "
                f"use one of {names} or null"
            )
        needs_time = isinstance(self.split, GlobalTemporalSplit | LeaveLastNSplit | RollingSplit)
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
            if rule.significance is not None and rule.metric in registry.names("stability"):
                raise ValueError(
                    f"evaluation.alerts.{i}.significance: {rule.metric} has no per-user rows to "
                    "test night over night; remove significance (the rule then watches its mean)"
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
        custom += registry.names("stability") if self.output.lists else []
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
        (popularity: Rel(u) restricted to head or tail items) for accuracy metrics; ``idle``
        for the per-user stability metrics (the exposure churn: all only)."""
        kind = registry.definitions().get(metric)
        if kind is None:  # not a metric of this run: the rule's check names it
            return ["all"]
        if kind.family == "stability" and kind.scope == "group":
            return ["all"]
        names = ["all", "idle"] if kind.family == "stability" else ["all"]
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

    def _check_rolling(self) -> None:
        """A rolling backtest reports every window and the pooled values of the ranking
        task; what compares one night's single split with another's is not defined there."""
        if not isinstance(self.split, RollingSplit):
            return
        refused = {
            "task: rating_prediction": self.task == "rating_prediction",
            "output.lists": self.output.lists,
            "data.impressions": self.data.impressions is not None,
            "evaluation.alerts with a significance test": any(
                rule.significance is not None for rule in self.evaluation.alerts
            ),
        }
        for what, present in refused.items():
            if present:
                raise ValueError(
                    f"split.method: rolling does not support {what}; remove it, or evaluate "
                    "one split (global_temporal) for it"
                )

    def _check_given_split(self) -> None:
        """``split.method: given`` reads data.train (optional) and data.test instead of
        data.interactions; every other method reads data.interactions only."""
        data = self.data
        if isinstance(self.split, GivenSplit):
            if data.test is None:
                raise ValueError(
                    "split.method: given needs data.test (and data.train where there is one); "
                    "from Python pass test=df (and train=df)"
                )
            if data.interactions.location is not None:
                raise ValueError(
                    "split.method: given reads data.train and data.test; remove "
                    "data.interactions (or choose another split.method to split it)"
                )
        elif data.train is not None or data.test is not None:
            raise ValueError(
                f"data.train and data.test are read by split.method: given only; remove them, "
                f"or set split.method: given (split.method is {self.split.method})"
            )

    @property
    def interaction_sources(self) -> dict[str, InteractionsSource]:
        """The interaction tables read, by config key: ``data.interactions``, or under the
        given split ``data.train`` (when configured) and ``data.test``."""
        data = self.data
        if not isinstance(self.split, GivenSplit):
            return {"data.interactions": data.interactions}
        parts = {"data.train": data.train, "data.test": data.test}
        return {key: source for key, source in parts.items() if source is not None}

    @property
    def has_timestamps(self) -> bool:
        """Whether every interaction table read maps a timestamp column."""
        return all(s.columns.timestamp is not None for s in self.interaction_sources.values())

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
            if self.task == "rating_prediction" and not predicts_ratings(m):
                external = isinstance(m, ExternalModel)
                raise ValueError(
                    f"models.{m.name}: task rating_prediction reads an external model's "
                    "predicted ratings from columns.prediction; map it (columns: {prediction: "
                    "<column>})"
                    if external
                    else f"models.{m.name}: task rating_prediction needs models that predict "
                    "ratings (kind: bias, kind: als with implicit: false, or kind: external with "
                    "columns.prediction)"
                )
            if self.task == "ranking" and not ranks_items(m):
                raise ValueError(
                    f"models.{m.name}: task ranking orders an external model's items by "
                    "columns.score or columns.rank; map one of them (columns.prediction is read "
                    "by task rating_prediction)"
                    if isinstance(m, ExternalModel)
                    else f"models.{m.name}: kind {m.kind} predicts ratings; use it with "
                    "task: rating_prediction"
                )
        baseline = self.evaluation.baseline
        named = "baseline" in self.evaluation.model_fields_set and baseline is not None
        unknown = baseline not in [m.name for m in self.models]
        if self.task == "rating_prediction" and named and unknown:
            raise ValueError(
                f"evaluation.baseline: {baseline!r} is not a configured model; name one of "
                "the rating models (their paired comparisons are against it) or null"
            )
        # a log given as a DataFrame (no path) is checked when it is known: its canonical
        # ``rating`` column needs no mapping (receval_spark.api)
        for key, log in self.interaction_sources.items():
            if self.needs_ratings and log.columns.rating is None and log.location is not None:
                raise ValueError(f"{self.needs_ratings} needs {key}.columns.rating")

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
