"""Every metric of the ``metrics`` dataset, defined once: family, per-user or group, range,
direction, cut-off, display, interval method, formula and reference (docs/evaluation.md).

Read by config validation (the allowed names), the intervals (stats: bounds, Wilson for 0/1
values), the regression alerts (direction), the bootstrap and the compatibility profiles
(which metrics), the session protocol and the command line's output (percentages). Pure Python:
importable before a Spark session exists (receval_spark.config is checked without Spark).

Names are unique within a protocol: a ``metrics`` row's (protocol, metric) names one
definition (:func:`definitions`). The session protocol's recall and mrr are not the ranking
metrics of the same name (one target per prediction event); every name shared by two families
has the same bounds, direction and cut-off in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from receval_spark.beyond_definitions import BEYOND_METRICS
from receval_spark.citations import (
    DESHPANDE_04,
    HANLEY_82,
    HERLOCKER_04,
    HIDASI_16,
    JARVELIN_02,
    LUDEWIG_18,
    MANNING_08,
    MANNING_08_MAP,
    MOFFAT_08,
    VAN_RIJSBERGEN_79,
    VOORHEES_99,
)
from receval_spark.metric_types import (
    NON_NEGATIVE,
    PEER_TOOLS,
    SAME,
    UNBOUNDED,
    UNIT,
    Bounds,
    Display,
    Family,
    Metric,
    Scope,
)

__all__ = [
    "NON_NEGATIVE",
    "PEER_TOOLS",
    "SAME",
    "UNBOUNDED",
    "UNIT",
    "Bounds",
    "Display",
    "Family",
    "Metric",
    "Scope",
]

SESSION_PROTOCOL = "session"


def _accuracy(name: str, formula: str, **properties: Any) -> Metric:
    return Metric(name=name, family="accuracy", scope="user", formula=formula, **properties)


METRICS: tuple[Metric, ...] = (
    # accuracy (docs/evaluation.md, Accuracy metrics): per evaluated user at k, then the mean
    # (macro average)
    _accuracy(
        "precision",
        "hits@k / k (k even where fewer than k candidates exist)",
        reference=MANNING_08,
        peer_defined=True,
        peers={
            "Spark MLlib": f"`precisionAt(k)`: {SAME}",
            "Recommenders": f"`precision_at_k`: {SAME}",
            "RePlay": f"`Precision`: {SAME}",
            "RecBole": f"`precision`: {SAME} (its lists are full rankings, k long)",
        },
    ),
    _accuracy(
        "recall",
        "hits@k / |Rel(u)|",
        reference=MANNING_08,
        peer_defined=True,
        peers={
            "Spark MLlib": f"`recallAt(k)`: {SAME}",
            "Recommenders": f"`recall_at_k`: {SAME}",
            "RePlay": f"`Recall`: {SAME}",
            "RecBole": f"`recall`: {SAME}",
        },
    ),
    _accuracy(
        "hit_rate",
        "1 if hits@k ≥ 1 else 0",
        reference=DESHPANDE_04,
        binary=True,
        peers={"RePlay": f"`HitRate`: {SAME}", "RecBole": f"`hit`: {SAME}"},
    ),
    _accuracy(
        "mrr",
        "1 / rank of the first relevant item within k, else 0",
        reference=VOORHEES_99,
        peers={"RePlay": f"`MRR`: {SAME}", "RecBole": f"`mrr`: {SAME}"},
    ),
    _accuracy(
        "map",
        "AP@k = (1 / min(k, |Rel(u)|)) · Σ_{i≤k} Precision@i · rel_i",
        reference=MANNING_08_MAP,
        peer_defined=True,
        peers={
            "Spark MLlib": f"`meanAveragePrecisionAt(k)`: {SAME}; `meanAveragePrecision` "
            "(no k) divides by |Rel(u)|",
            "Recommenders": f"`map_at_k`: {SAME}; `map` divides by |Rel(u)|",
            "RePlay": f"`MAP`: {SAME} (early releases divided by k)",
            "RecBole": f"`map`: {SAME} (its docstring writes min(|R̂(u)|, K); the code divides "
            "by min(|R(u)|, K))",
        },
    ),
    _accuracy(
        "ndcg",
        "DCG@k / IDCG@k, DCG@k = Σ_{i≤k} (2^{g_i} - 1) / log2(i + 1), IDCG@k the DCG of the "
        "user's own grades sorted descending",
        reference=JARVELIN_02,
        peer_defined=True,
        peers={
            "Spark MLlib": "`ndcgAt(k)`: binary gains (grades ignored); equal to ours at grade 1",
            "Recommenders": "`ndcg_at_k`: binary gains by default; `score_type='exp'` takes "
            "2^r - 1 of the raw rating r, not of a grade",
            "RePlay": "`NDCG`: binary gains; equal to ours at grade 1",
            "RecBole": "`ndcg`: binary gains; equal to ours at grade 1",
        },
    ),
    _accuracy(
        "arhr",
        "(1 / |Rel(u)|) · Σ_{i≤k} rel_i / i",
        reference=DESHPANDE_04,
    ),
    _accuracy(
        "f1",
        "harmonic mean of Precision@k and Recall@k (0 where both are 0)",
        reference=MANNING_08,
    ),
    _accuracy(
        "f_beta",
        "(1 + β²)·P·R / (β²·P + R) of Precision@k and Recall@k, β = evaluation.f_beta "
        "(default 2: recall weighs β² = 4 times precision); 0 where both are 0",
        reference=VAN_RIJSBERGEN_79,
    ),
    _accuracy(
        "r_precision",
        "hits within the top min(k, |Rel(u)|) / min(k, |Rel(u)|): R-precision wherever "
        "|Rel(u)| ≤ k, else Precision@k",
        reference=MANNING_08_MAP,
    ),
    _accuracy(
        "rbp",
        "(1 - p) · Σ_{i≤k} rel_i · p^(i-1), binary rel_i, p = evaluation.rbp_persistence "
        "(default 0.8); the residual beyond k is not added",
        reference=MOFFAT_08,
    ),
    _accuracy(
        "auc",
        "share of (positive, negative) pairs ordered correctly, ties ½: R_k(u) first in its "
        "order, every other item after it tied; positives Rel(u), negatives the catalogue items "
        "outside Rel(u) and the filtered seen items; ½ without a list, no value without a "
        "negative",
        reference=HANLEY_82,
        peers={"RecBole": "`gauc`: over the full ranking (k = |I|), the mean weighted by |Rel(u)|"},
    ),
    *BEYOND_METRICS,
    # rating prediction (task rating_prediction only; not a measure of ranking)
    Metric(
        name="mae",
        family="rating",
        reference=HERLOCKER_04,
        scope="user",
        formula="mean over test ratings of |r̂ - r|",
        peers={
            "Spark MLlib": f"`RegressionEvaluator(metricName='mae')`: {SAME} over the rows given",
            "Recommenders": f"`mae`: {SAME} over the pairs both tables hold",
            "RecBole": f"`mae`: {SAME}",
        },
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        has_k=False,
    ),
    Metric(
        name="mse",
        family="rating",
        reference=HERLOCKER_04,
        scope="user",
        formula="mean over test ratings of (r̂ - r)²",
        peers={"Spark MLlib": f"`RegressionEvaluator(metricName='mse')`: {SAME}"},
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        has_k=False,
    ),
    Metric(
        name="rmse",
        family="rating",
        reference=HERLOCKER_04,
        scope="group",
        formula="√MSE (its interval: the square roots of MSE's ends)",
        peers={
            "Spark MLlib": f"`RegressionEvaluator(metricName='rmse')`: {SAME}",
            "Recommenders": f"`rmse`: {SAME} over the pairs both tables hold",
            "RecBole": f"`rmse`: {SAME}",
        },
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        has_k=False,
    ),
    # the session protocol (docs/sessions.md): over prediction events (prefix -> next click)
    Metric(
        name="recall",
        family="session",
        reference=HIDASI_16,
        scope="user",
        formula="share of prediction events whose target is in the top k",
        display="percent",
        binary=True,
    ),
    Metric(
        name="mrr",
        family="session",
        reference=HIDASI_16,
        scope="user",
        formula="mean over prediction events of 1 / the target's rank within k, else 0",
        display="percent",
    ),
    Metric(
        name="coverage",
        family="session",
        reference=LUDEWIG_18,
        scope="group",
        formula="|(union of the events' R_k(e)) ∩ I| / |I|, I = items clicked in train",
    ),
    Metric(
        name="popularity_bias",
        family="session",
        reference=LUDEWIG_18,
        scope="group",
        formula="mean train clicks of the list slots / mean train clicks of the catalogue items",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
    ),
)

# what the command line prints and --summary-json and MLflow carry first
HEADLINE_METRICS = ("ndcg", "map", "recall", "precision", "mrr", "rmse", "mae")

_RANKING = MappingProxyType({m.name: m for m in METRICS if m.family != "session"})
_SESSION = MappingProxyType({m.name: m for m in METRICS if m.family == "session"})
BUILT_IN_NAMES = frozenset(m.name for m in METRICS)

# user-defined metrics (family custom, ranking protocols) of the jobs validated in this process,
# by name (receval_spark.extensions); a name's latest definition wins
_CUSTOM: dict[str, Metric] = {}


def define_custom(metric: Metric) -> None:
    """Make a user-defined metric's definition known to every reader of :func:`definitions`."""
    if metric.name in BUILT_IN_NAMES or metric.family != "custom":
        raise ValueError(f"{metric.name!r}: only a custom metric with a new name can be defined")
    _CUSTOM[metric.name] = metric


def family(name: Family) -> tuple[Metric, ...]:
    """The metrics of one family, in registry order."""
    return tuple(m for m in METRICS if m.family == name)


def names(name: Family) -> tuple[str, ...]:
    """The names of one family's metrics, in registry order."""
    return tuple(m.name for m in family(name))


def definitions(protocol: str = "full") -> Mapping[str, Metric]:
    """The metrics a ``metrics`` row of ``protocol`` can hold, by name: the session family
    under ``session``; accuracy, beyond, rating and the custom metrics defined in this process
    under ``full`` and the labelled ranking protocols (``debiased_iqr``, ``sampled_<N>``,
    ``sampled_<N>_corrected``: the same ranges and directions)."""
    if protocol == SESSION_PROTOCOL:
        return _SESSION
    return MappingProxyType({**_RANKING, **_CUSTOM}) if _CUSTOM else _RANKING
