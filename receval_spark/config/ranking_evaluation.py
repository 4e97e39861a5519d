"""The ranking job's ``evaluation`` section: cut-offs, protocols, metrics, segments,
embeddings, serendipity, tuning, off-policy, custom metrics, data-quality thresholds
(docs/evaluation.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from receval_spark import extensions, registry
from receval_spark.config.alert_rules import AlertRule, AlertsExitCode
from receval_spark.config.als import MAX_ALS_BLOCKS, AlsParams, embedding_blocks
from receval_spark.config.common import CutOffs, _Strict
from receval_spark.config.ranking_data import ItemSegmentsSource, UserSegmentsSource

Segment = Literal["warm", "cold", "activity", "popularity"]
# which users the accuracy means average over (docs/evaluation.md#relevance-and-evaluated-users)
UserRule = Literal["relevant", "listed_or_relevant"]

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


@dataclass(frozen=True)
class RandomizationTest:
    """Fisher's paired randomization (sign-flip) test of the comparisons
    (receval_spark.metrics.randomization): ``permutations`` random sign assignments per
    comparison (fewer points are enumerated exactly), drawn from a generator seeded with
    xxhash64(``seed``, the comparison's key)."""

    permutations: int
    seed: int


class EmbeddingsConfig(_Strict):
    """Item vectors for ild_embedding and content serendipity.

    ``items``: the data.items embedding column; ``als``: item factors of Spark ML's implicit
    ALS fitted on train; ``none``: no vectors (ild_embedding is skipped); ``auto``: ``items``
    when data.items maps an embedding column, else ``als``.
    """

    source: Literal["auto", "items", "als", "none"] = Field(
        default="auto",
        description="Where the item vectors come from: `items`, `als`, `none`, or `auto` "
        "(`items` when mapped, else `als`).",
    )
    rank: int = Field(default=16, ge=2, le=512, description="ALS: latent factors per item.")
    max_iter: int = Field(default=10, ge=1, le=100, description="ALS: alternating sweeps.")
    reg_param: float = Field(default=0.1, ge=0.0, description="ALS: the L2 regularisation.")
    alpha: float = Field(
        default=10.0, gt=0.0, description="ALS: confidence 1 + alpha · interactions."
    )
    blocks: Annotated[int, Field(ge=1, le=MAX_ALS_BLOCKS)] | Literal["auto"] = Field(
        default="auto",
        description="ALS: user and item blocks; `auto`: one per 200,000 train rows, 2 to 10, "
        "never sized to the cluster.",
    )
    seed: int = Field(default=42, description="ALS: seed of the factors' initialisation.")

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

    unexpected: Literal["popularity", "content"] = Field(
        default="popularity",
        description="What makes an item unexpected: outside the popularity baseline's top-k "
        "(`popularity`), or dissimilar to the user's history (`content`).",
    )
    threshold: float = Field(
        default=0.5,
        ge=-1.0,
        le=1.0,
        description="`content`: the cosine to the user's train profile below which an item is "
        "unexpected.",
    )


class TuningConfig(_Strict):
    """How grids of model hyperparameters are chosen on the validation period: the largest
    macro average of ``metric@k``, ties by grid order."""

    metric: AccuracyMetric = Field(
        default="ndcg", description="The accuracy metric a grid point is chosen by."
    )
    k: int = Field(default=10, ge=1, le=1000, description="The metric's cut-off.")


PROTOCOL = re.compile(r"full|debiased_iqr|sampled_([1-9][0-9]*)")
DEBIASED_PROTOCOL = "debiased_iqr"
CORRECTED_SUFFIX = "_corrected"  # sampled_<N>_corrected: the rows of evaluation.sampled_correction


class OffPolicyConfig(_Strict):
    """Off-policy estimation from data.impressions; ``clip``: M of clipped IPS, min(w, M)."""

    clip: float = Field(
        default=10.0,
        gt=0.0,
        allow_inf_nan=False,
        description="M of clipped IPS: each importance weight w counts as min(w, M).",
    )


class CustomMetricConfig(_Strict):
    """A user-defined per-user metric (receval_spark.extensions): the function at ``path``
    (``package.module:function``), or without ``path`` the one registered from Python under
    ``name`` (``receval_spark.register_metric``, whose properties then apply)."""

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_]*$",
        description="The `metric` value of its rows (lower case, digits, _); not a built-in "
        "metric's name.",
    )
    path: str | None = Field(
        default=None,
        description="The function, `package.module:function`; null: the one registered from "
        "Python under `name`.",
    )
    bounds: tuple[float, float] = Field(
        default=(0.0, 1.0),
        description="The range of one value: intervals are clipped to it, a mean outside it "
        "fails a check.",
    )
    larger_is_better: bool = Field(
        default=True, description="The direction comparisons and regression alerts read."
    )
    k: bool = Field(
        default=True,
        description="One value per cut-off; false: one value over each user's whole list "
        "(rows with k null).",
    )
    scope: Literal["user", "group"] = Field(
        default="user",
        description="`user`: a mean over users; `group`: one statistic over a group's lists, "
        "like coverage.",
    )

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
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Warn above this share of interaction rows that repeat another.",
    )
    duplicate_pairs: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Warn above this share of user-item pairs with several rows.",
    )
    conflicting_pairs: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Warn above this share of user-item pairs with grades on both sides of "
        "the threshold.",
    )
    reconsumed_pairs: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Warn above this share of relevant test pairs the user already had in train.",
    )
    cold_users: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Warn above this share of evaluated users without train rows.",
    )
    score_ties_at_k: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Warn above this share of evaluated users whose k-th and (k+1)-th "
        "candidates tie in score.",
    )
    short_lists: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Warn above this share of evaluated users with fewer than k candidates.",
    )
    outside_catalogue: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Warn above this share of list slots outside the catalogue.",
    )


class EvaluationConfig(_Strict):
    k: CutOffs = Field(
        default_factory=lambda: [5, 10, 20],
        description="The cut-offs k the lists are evaluated at (1 to 1000).",
    )
    protocol: list[str] = Field(
        default_factory=lambda: ["full"],
        description="`full` (always evaluated), `debiased_iqr` (the full lists against a "
        "test set whose bestsellers are down-sampled) and/or `sampled_<N>` (the relevant items "
        "ranked among N sampled negatives).",
    )
    sampled_correction: bool = Field(
        default=True,
        description="Beside every `sampled_<N>`'s rows, report `sampled_<N>_corrected`: each "
        "positive's rank among the negatives scaled to the user's whole pool of negatives.",
    )
    debias_iqr_coef: float = Field(
        default=1.5,
        ge=0.0,
        allow_inf_nan=False,
        description="`debiased_iqr`: items whose test popularity exceeds Q3 + coef·IQR keep "
        "that many of their relevant test pairs (RecTools' `iqr_coef`).",
    )
    definitions: Literal["receval", "spark_mllib", "recommenders"] = Field(
        default="receval",
        description="Whose precision, recall, ndcg and map formulas are reported "
        "(docs/evaluation.md#compatibility-profiles-evaluationdefinitions).",
    )
    users: UserRule | None = Field(
        default=None,
        description="Who is evaluated: `relevant` (users with a relevant test item) or "
        "`listed_or_relevant` (also users with an external model's list, who score 0 on "
        "accuracy: MLlib's mean); null: `listed_or_relevant` under definitions spark_mllib, "
        "else `relevant`.",
    )
    tuning: TuningConfig = Field(
        default_factory=TuningConfig,
        description="The metric hyperparameter grids are tuned by.",
    )
    filter_seen: bool = Field(
        default=True,
        description="Remove each user's train items from the lists and from Rel(u); false "
        "evaluates re-consumption.",
    )
    baseline: str | None = Field(
        default="popularity",
        description="The model every other model is compared with in `comparisons/`; null: "
        "no comparisons.",
    )
    agreement_reference: str | None = Field(
        default=None,
        description="The model whose lists intersection@k and agreement_rbo@k compare every "
        "model's with; null: the baseline.",
    )
    min_users: int = Field(
        default=100, ge=0, description="Warn when fewer users than this are evaluated."
    )
    min_list_coverage: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Warn when a model has lists for a smaller share of the evaluated users "
        "(none: the list_coverage check fails).",
    )
    segments: list[Segment] = Field(
        default_factory=lambda: list[Segment](["warm", "cold"]),
        description="Segments besides `all`: `warm`, `cold`, `activity`, `popularity`; "
        "default [warm, cold], [] under leave_last_n.",
    )
    metrics: list[MetricName] = Field(
        default_factory=lambda: list(ALL_METRICS),
        description="The built-in metrics computed (docs/reference/metrics.md); default: all.",
    )
    head_share: float = Field(
        default=0.5,
        gt=0.0,
        lt=1.0,
        description="Head items: the most popular items that together hold this share of the "
        "train interactions.",
    )
    f_beta: float = Field(
        default=2.0,
        gt=0.0,
        description="β of the f_beta metric: recall weighs β² times precision (1: F1).",
    )
    rbp_persistence: float = Field(
        default=0.8,
        gt=0.0,
        lt=1.0,
        description="Persistence p of the rbp metric: the weight of rank i is (1 - p)·p^(i - 1).",
    )
    correction: Literal["holm", "bonferroni", "benjamini_hochberg"] = Field(
        default="holm",
        description="The multiple-comparison adjustment that decides significance (report "
        "markers and sentences, alert rules with a significance test) over the run's one "
        "family of comparisons: `holm` (family-wise error), `bonferroni`, or "
        "`benjamini_hochberg` (false discovery rate); `comparisons` holds all three.",
    )
    rbo_persistence: float = Field(
        default=0.9,
        gt=0,
        lt=1,
        description="Persistence p of the night-over-night RBO@k (`output.lists`): the "
        "weight of rank d is (1 - p)·p^(d - 1) (0.9: the top 10 carry about 65% of it).",
    )
    personalization_pairs: int = Field(
        default=1000, ge=1, description="User pairs sampled for personalization_jaccard."
    )
    bootstrap_samples: int = Field(
        default=100,
        ge=0,
        le=10_000,
        description="Poisson bootstrap replicates of the group statistics' intervals; 0: no "
        "intervals.",
    )
    randomization_test: bool = Field(
        default=False,
        description="Add Fisher's paired randomization (sign-flip) test to every comparison "
        "(`p_randomization`): exact for few users, else from `randomization_permutations` "
        "seeded draws; costs time (docs/statistics.md#randomization-test).",
    )
    randomization_permutations: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Random sign assignments per comparison of the randomization test "
        "(its smallest p is 1 / (N + 1)); at most this many points are also enumerated "
        "exactly.",
    )
    alerts: list[AlertRule] = Field(
        default_factory=list, description="Regression alert rules (docs/nightly.md)."
    )
    alerts_exit_code: AlertsExitCode = Field(
        default=3,
        description="Exit status of a run an alert made regressed: 0 or 3 to 255 (1 and 2 "
        "mean failure and bad input).",
    )
    seed: int = Field(
        default=42,
        description="Seed of sampled statistics, the bootstrap and the randomization test.",
    )
    embeddings: EmbeddingsConfig = Field(
        default_factory=EmbeddingsConfig,
        description="Where the item vectors come from and, for ALS, its fit.",
    )
    serendipity: SerendipityConfig = Field(
        default_factory=SerendipityConfig, description="What serendipity counts as unexpected."
    )
    off_policy: OffPolicyConfig | None = Field(
        default=None,
        description="Off-policy settings, only with data.impressions (whose presence turns "
        "the estimates on); null: defaults.",
    )
    custom_metrics: list[CustomMetricConfig] = Field(
        default_factory=list, description="Your metrics (docs/extending.md)."
    )
    user_segments: UserSegmentsSource | None = Field(
        default=None, description="A table of user segments; null: none."
    )
    item_segments: ItemSegmentsSource | None = Field(
        default=None, description="A table of item segments (accuracy metrics); null: none."
    )
    data_quality: DataQualityConfig = Field(
        default_factory=DataQualityConfig,
        description="When a data-quality fact adds a warning.",
    )

    @field_validator("users")
    @classmethod
    def _users(cls, value: UserRule | None, info: ValidationInfo) -> UserRule | None:
        """``listed_or_relevant`` is not Microsoft Recommenders' user set: its inner join keeps
        only users with a list *and* a relevant item, so the profile could not be its number."""
        if value == "listed_or_relevant" and info.data.get("definitions") == "recommenders":
            raise ValueError(
                "listed_or_relevant cannot be combined with definitions: recommenders, which "
                "averages only users with both a list and a relevant test item (its inner "
                "join); use users: relevant (or null) with it, or definitions: spark_mllib"
            )
        return value

    def randomization(self) -> RandomizationTest | None:
        """The paired randomization test's settings (seeded by ``seed``); None when
        ``randomization_test`` is off."""
        if not self.randomization_test:
            return None
        return RandomizationTest(permutations=self.randomization_permutations, seed=self.seed)

    def user_rule(self) -> UserRule:
        """The resolved ``users``: as given, else ``listed_or_relevant`` under
        ``definitions: spark_mllib`` (MLlib averages over every query) and ``relevant``
        otherwise."""
        if self.users is not None:
            return self.users
        return "listed_or_relevant" if self.definitions == "spark_mllib" else "relevant"

    @field_validator("protocol", mode="before")
    @classmethod
    def _protocols(cls, value: Any) -> Any:
        """``full``, ``debiased_iqr``, ``sampled_<N>`` (N >= 1), or a list of them. ``full`` is
        always evaluated (and comes first): every other protocol adds rows labelled with its
        name."""
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names:
            raise ValueError(
                "give full, debiased_iqr, sampled_<N> (e.g. sampled_100) or a list of them"
            )
        bad = [n for n in names if not (isinstance(n, str) and PROTOCOL.fullmatch(n))]
        if bad:
            raise ValueError(
                f"unknown protocol {bad[0]!r}; use full, debiased_iqr or sampled_<N> with N "
                "negatives per user, e.g. [full, debiased_iqr, sampled_100]"
            )
        return sorted({"full", *names}, key=lambda n: (n != "full", len(n), n))


def sampled_negatives(protocol: str) -> int | None:
    """N of ``sampled_<N>``; None for ``full`` and ``debiased_iqr``."""
    found = PROTOCOL.fullmatch(protocol)
    return int(found.group(1)) if found and found.group(1) else None
