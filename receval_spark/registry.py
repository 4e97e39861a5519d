"""Every metric of the ``metrics`` dataset, defined once: family, per-user or group, range,
direction, cut-off, display, interval method and formula (DESIGN §5, §6, §8).

Read by config validation (the allowed names), the intervals (stats: bounds, Wilson for 0/1
values), the regression alerts (direction), the bootstrap and the compatibility profiles
(which metrics), the session protocol and the command line's output (percentages). Pure Python:
importable before a Spark session exists (config.py is checked without Spark).

Names are unique within a protocol: a ``metrics`` row's (protocol, metric) names one
definition (:func:`definitions`). The session protocol's recall and mrr are not the ranking
metrics of the same name (one target per prediction event); every name shared by two families
has the same bounds, direction and cut-off in both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

Bounds = tuple[float, float]
UNBOUNDED: Bounds = (-math.inf, math.inf)
UNIT: Bounds = (0.0, 1.0)
NON_NEGATIVE: Bounds = (0.0, math.inf)

Family = Literal["accuracy", "beyond", "rating", "session"]
Scope = Literal["user", "group"]
Display = Literal["proportion", "percent"]
SESSION_PROTOCOL = "session"


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric: its definition and the properties every reader takes from here.

    ``scope``: ``user`` for the mean of one value per unit (evaluated user; prediction event
    under the session protocol; test rating for mae and mse: n_users counts them, std is their
    spread); ``group`` for one statistic of a group's lists (n_users = lists). ``bounds``: the
    range of a value; every interval stays inside it (DESIGN §7). ``larger_is_better``: the
    direction a regression alert watches. ``has_k``: one value per cut-off k (else k is null).
    ``display``: how the command line prints it (the Parquet value is always a proportion).
    ``binary``: each per-unit value is 0 or 1, so the mean is a proportion (Wilson interval).
    ``bootstrapped``: a group statistic whose interval is value ± z·std of a Poisson bootstrap
    over users. ``peer_defined``: Spark MLlib's ``RankingMetrics`` defines it too (reported under
    ``evaluation.definitions`` spark_mllib / recommenders). ``formula``: the definition (of
    one unit's value for scope ``user``).
    """

    name: str
    family: Family
    scope: Scope
    formula: str
    bounds: Bounds = UNIT
    larger_is_better: bool = True
    has_k: bool = True
    display: Display = "proportion"
    binary: bool = False
    bootstrapped: bool = False
    peer_defined: bool = False


def _accuracy(name: str, formula: str, **properties: Any) -> Metric:
    return Metric(name=name, family="accuracy", scope="user", formula=formula, **properties)


METRICS: tuple[Metric, ...] = (
    # accuracy (DESIGN §5): per evaluated user at k, then the mean (macro average)
    _accuracy(
        "precision", "hits@k / k (k even where fewer than k candidates exist)", peer_defined=True
    ),
    _accuracy("recall", "hits@k / |Rel(u)|", peer_defined=True),
    _accuracy("hit_rate", "1 if hits@k ≥ 1 else 0", binary=True),
    _accuracy("mrr", "1 / rank of the first relevant item within k, else 0"),
    _accuracy(
        "map", "AP@k = (1 / min(k, |Rel(u)|)) · Σ_{i≤k} Precision@i · rel_i", peer_defined=True
    ),
    _accuracy(
        "ndcg",
        "DCG@k / IDCG@k, DCG@k = Σ_{i≤k} (2^{g_i} - 1) / log2(i + 1), IDCG@k the DCG of the "
        "user's own grades sorted descending",
        peer_defined=True,
    ),
    _accuracy("arhr", "(1 / |Rel(u)|) · Σ_{i≤k} rel_i / i"),
    _accuracy("f1", "harmonic mean of Precision@k and Recall@k (0 where both are 0)"),
    # beyond accuracy (DESIGN §6): over the non-empty top-k lists of the evaluated users
    Metric(
        name="coverage",
        family="beyond",
        scope="group",
        formula="|(union of the R_k(u)) ∩ I| / |I|, I = items with a train interaction",
        bootstrapped=True,
    ),
    Metric(
        name="gini",
        family="beyond",
        scope="group",
        formula="Σ_i (2i - n - 1) f_i / (n Σ_i f_i) over the n catalogue items by f ascending "
        "(0 = equal exposure)",
        larger_is_better=False,
        bootstrapped=True,
    ),
    Metric(
        name="entropy",
        family="beyond",
        scope="group",
        formula="-Σ_i (f_i/F) log2(f_i/F), F = Σ_i f_i",
        bounds=NON_NEGATIVE,  # <= log2 |I|; not known where the interval is formed
        bootstrapped=True,
    ),
    Metric(
        name="novelty",
        family="beyond",
        scope="user",
        formula="mean over i ∈ R_k(u) of -log2 p(i)",
        bounds=NON_NEGATIVE,
    ),
    Metric(
        name="popularity_bias",
        family="beyond",
        scope="group",
        formula="mean train interaction count of the list slots / mean train interaction "
        "count of the catalogue items",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        bootstrapped=True,
    ),
    Metric(
        name="personalization",
        family="beyond",
        scope="group",
        formula="1 - mean over user pairs of the cosine similarity of their binary list vectors",
        bootstrapped=True,
    ),
    Metric(
        name="personalization_jaccard",
        family="beyond",
        scope="group",
        formula="1 - mean Jaccard similarity of the lists of a seeded sample of user pairs",
    ),
    Metric(
        name="ild_category",
        family="beyond",
        scope="user",
        formula="1 - mean pairwise cosine of the list items' unit multi-hot category vectors",
    ),
    Metric(
        name="ild_embedding",
        family="beyond",
        scope="user",
        formula="1 - mean pairwise cosine of the list items' unit embeddings",
        # the mean cosine of n unit vectors is >= -1/(n - 1), so the value is <= 2
        bounds=(0.0, 2.0),
    ),
    Metric(
        name="category_coverage",
        family="beyond",
        scope="user",
        formula="distinct categories in R_k(u) / categories of the catalogue items",
    ),
    Metric(
        name="serendipity",
        family="beyond",
        scope="user",
        formula="|{i ∈ R_k(u) ∩ Rel(u) : i unexpected for u}| / k",
    ),
    # rating prediction (task rating_prediction only; not a measure of ranking)
    Metric(
        name="mae",
        family="rating",
        scope="user",
        formula="mean over test ratings of |r̂ - r|",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        has_k=False,
    ),
    Metric(
        name="mse",
        family="rating",
        scope="user",
        formula="mean over test ratings of (r̂ - r)²",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        has_k=False,
    ),
    Metric(
        name="rmse",
        family="rating",
        scope="group",
        formula="√MSE (its interval: the square roots of MSE's ends)",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        has_k=False,
    ),
    # the session protocol (DESIGN §8): over prediction events (prefix -> next click)
    Metric(
        name="recall",
        family="session",
        scope="user",
        formula="share of prediction events whose target is in the top k",
        display="percent",
        binary=True,
    ),
    Metric(
        name="mrr",
        family="session",
        scope="user",
        formula="mean over prediction events of 1 / the target's rank within k, else 0",
        display="percent",
    ),
    Metric(
        name="coverage",
        family="session",
        scope="group",
        formula="|(union of the events' R_k(e)) ∩ I| / |I|, I = items clicked in train",
    ),
    Metric(
        name="popularity_bias",
        family="session",
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


def family(name: Family) -> tuple[Metric, ...]:
    """The metrics of one family, in registry order."""
    return tuple(m for m in METRICS if m.family == name)


def names(name: Family) -> tuple[str, ...]:
    """The names of one family's metrics, in registry order."""
    return tuple(m.name for m in family(name))


def definitions(protocol: str = "full") -> Mapping[str, Metric]:
    """The metrics a ``metrics`` row of ``protocol`` can hold, by name: the session family
    under ``session``; accuracy, beyond and rating under ``full`` and ``sampled_<N>``."""
    return _SESSION if protocol == SESSION_PROTOCOL else _RANKING
