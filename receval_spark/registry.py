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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from receval_spark.citations import (
    ABDOLLAHPOURI_19,
    ABDOLLAHPOURI_19_LONG_TAIL,
    DESHPANDE_04,
    GE_10,
    HERLOCKER_04,
    HIDASI_16,
    JARVELIN_02,
    LUDEWIG_18,
    MANNING_08,
    MANNING_08_MAP,
    MOFFAT_08,
    SHANI_11,
    VAN_RIJSBERGEN_79,
    VARGAS_14,
    VOORHEES_99,
    WEBBER_10,
    ZHOU_10,
    ZIEGLER_05,
)

Bounds = tuple[float, float]
UNBOUNDED: Bounds = (-math.inf, math.inf)
UNIT: Bounds = (0.0, 1.0)
NON_NEGATIVE: Bounds = (0.0, math.inf)

Family = Literal["accuracy", "beyond", "stability", "rating", "session", "custom"]
Scope = Literal["user", "group"]
Display = Literal["proportion", "percent"]
SESSION_PROTOCOL = "session"

# the tools whose definitions the metric reference compares with ours (versions read)
PEER_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "Spark MLlib": "Spark MLlib 4 `RankingMetrics` / `RankingEvaluator`",
        "Recommenders": "Microsoft Recommenders 1.2 `python_evaluation` / `spark_evaluation`",
        "RePlay": "RePlay 0.18 `replay.metrics`",
        "RecBole": "RecBole 1.2 `recbole.evaluator.metrics`",
    }
)
SAME = "same"

# the metrics' references (Metric.reference): receval_spark.citations


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric: its definition and the properties every reader takes from here.

    ``scope``: ``user`` for the mean of one value per unit (evaluated user; prediction event
    under the session protocol; test rating for mae and mse: n_users counts them, std is their
    spread); ``group`` for one statistic of a group's lists (n_users = lists). ``bounds``: the
    range of a value; every interval stays inside it (docs/statistics.md). ``larger_is_better``: the
    direction a regression alert watches. ``has_k``: one value per cut-off k (else k is null).
    ``display``: how the command line prints it (the Parquet value is always a proportion).
    ``binary``: each per-unit value is 0 or 1, so the mean is a proportion (Wilson interval).
    ``bootstrapped``: a group statistic whose interval is value ± z·std of a Poisson bootstrap
    over users. ``peer_defined``: Spark MLlib's ``RankingMetrics`` defines it too (reported under
    ``evaluation.definitions`` spark_mllib / recommenders). ``formula``: the definition (of
    one unit's value for scope ``user``). ``reference``: where the definition comes from (the
    paper or book, author, venue, year; empty for a user-defined metric). ``peers``: how each
    tool of :data:`PEER_TOOLS` that offers the metric defines it (its name there, and what
    differs); absent: the tool has none.
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
    reference: str = ""
    peers: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)


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
    # beyond accuracy (docs/evaluation.md, Beyond-accuracy metrics): over the non-empty top-k
    # lists of the evaluated users
    Metric(
        name="coverage",
        family="beyond",
        reference=GE_10,
        scope="group",
        formula="|(union of the R_k(u)) ∩ I| / |I|, I = items with a train interaction",
        bootstrapped=True,
        peers={
            "Recommenders": "`catalog_coverage`: distinct items of the lists as given (not cut "
            "at k; items outside train count) / distinct train items",
            "RePlay": "`Coverage`: distinct items of the top k / distinct items of the log it "
            "is given; unknown items can take it above 1",
            "RecBole": "`itemcoverage`: distinct items of the top k / all items of the dataset, "
            "including items no train interaction has",
        },
    ),
    Metric(
        name="gini",
        family="beyond",
        reference=SHANI_11,
        scope="group",
        formula="Σ_i (2i - n - 1) f_i / (n Σ_i f_i) over the n catalogue items by f ascending "
        "(0 = equal exposure)",
        larger_is_better=False,
        bootstrapped=True,
        peers={"RecBole": "`giniindex`: the same formula over all items of the dataset"},
    ),
    Metric(
        name="entropy",
        family="beyond",
        reference=SHANI_11,
        scope="group",
        formula="-Σ_i (f_i/F) log2(f_i/F), F = Σ_i f_i",
        bounds=NON_NEGATIVE,  # <= log2 |I|; not known where the interval is formed
        bootstrapped=True,
        peers={
            "Recommenders": f"`distributional_coverage`: {SAME} over the lists as given "
            "(some releases scale it by -2/|train items|)",
            "RecBole": "`shannonentropy`: natural log, divided by the number of distinct "
            "recommended items",
        },
    ),
    Metric(
        name="aplt",
        family="beyond",
        reference=ABDOLLAHPOURI_19_LONG_TAIL,
        scope="user",
        formula="|{i ∈ R_k(u) : i in the long tail}| / |R_k(u)|; long tail = the items outside "
        "the head (items=head: the most popular train items holding evaluation.head_share of "
        "the train interactions), items without a train interaction included",
        peers={
            "Recommenders": "none; its issue #2283 asks for APLT/ACLT",
        },
    ),
    Metric(
        name="aclt",
        family="beyond",
        reference=ABDOLLAHPOURI_19_LONG_TAIL,
        scope="user",
        formula="|{i ∈ R_k(u) : i in the long tail}|, the long tail as for aplt",
        bounds=NON_NEGATIVE,
    ),
    Metric(
        name="novelty",
        family="beyond",
        reference=ZHOU_10,
        scope="user",
        formula="mean over i ∈ R_k(u) of -log2 p(i)",
        bounds=NON_NEGATIVE,
        peers={
            "Recommenders": "`novelty`: -log2 of the item's share of train interactions (not "
            "of users), averaged over all list slots rather than per user",
            "RePlay": "`Surprisal`: ours divided by log2(train users), summed over the list and "
            "divided by k; its `Novelty` is another measure (the share of the list unseen by "
            "the user)",
        },
    ),
    Metric(
        name="popularity_bias",
        family="beyond",
        reference=ABDOLLAHPOURI_19,
        scope="group",
        formula="mean train interaction count of the list slots / mean train interaction "
        "count of the catalogue items",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        bootstrapped=True,
        peers={
            "RecBole": "`averagepopularity`: the mean over users of the list's mean train count, "
            "not divided by the catalogue's mean (ours times that mean for lists of one length)"
        },
    ),
    Metric(
        name="personalization",
        family="beyond",
        reference=ZHOU_10,
        scope="group",
        formula="1 - mean over user pairs of the cosine similarity of their binary list vectors",
        bootstrapped=True,
    ),
    Metric(
        name="personalization_jaccard",
        family="beyond",
        reference=ZHOU_10,
        scope="group",
        formula="1 - mean Jaccard similarity of the lists of a seeded sample of user pairs",
    ),
    Metric(
        name="ild_category",
        family="beyond",
        reference=ZIEGLER_05,
        scope="user",
        formula="1 - mean pairwise cosine of the list items' unit multi-hot category vectors",
    ),
    Metric(
        name="ild_embedding",
        family="beyond",
        reference=ZIEGLER_05,
        scope="user",
        formula="1 - mean pairwise cosine of the list items' unit embeddings",
        peers={
            "Recommenders": "`diversity` with `item_sim_measure='item_feature_vector'`: "
            f"{SAME} for feature vectors; its default similarity is the items' co-occurrence "
            "in train"
        },
        # the mean cosine of n unit vectors is >= -1/(n - 1), so the value is <= 2
        bounds=(0.0, 2.0),
    ),
    Metric(
        name="category_coverage",
        family="beyond",
        reference=VARGAS_14,
        scope="user",
        formula="distinct categories in R_k(u) / categories of the catalogue items",
        peers={"RePlay": "`CategoricalDiversity`: distinct categories in the top k / k"},
    ),
    Metric(
        name="serendipity",
        family="beyond",
        reference=GE_10,
        scope="user",
        formula="|{i ∈ R_k(u) ∩ Rel(u) : i unexpected for u}| / k",
        peers={
            "Recommenders": "`serendipity`: relevance times (1 - mean similarity to the user's "
            "train items) per list item: dissimilarity, not absence from a primitive model's list",
            "RePlay": "`Unexpectedness`: the share of the list absent from a base model's list, "
            "relevant or not",
        },
    ),
    # night-over-night stability (docs/evaluation.md#stability, output.lists): tonight's
    # lists against the model's lists of the previous date that committed them
    Metric(
        name="stability_jaccard",
        family="stability",
        scope="user",
        formula="|A ∩ B| / |A or B| of the user's lists at k tonight (A) and last night (B)",
        reference="Jaccard, Bulletin de la Société Vaudoise des Sciences Naturelles 1901",
    ),
    Metric(
        name="stability_rbo",
        family="stability",
        scope="user",
        formula="RBO_ext of A and B at depth k, persistence p (evaluation.rbo_persistence); "
        "k long: (X_k/k)·p^k + ((1 - p)/p)·Σ_{d≤k} (X_d/d)·p^d, X_d = |A_{1:d} ∩ B_{1:d}|",
        reference=WEBBER_10,
    ),
    Metric(
        name="exposure_churn",
        family="stability",
        scope="group",
        formula="½ Σ_i |e_i - e'_i|, e_i = item i's share of the night's list slots at k",
        larger_is_better=False,
        reference="the total variation distance of the two nights' exposure distributions",
    ),
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
    under ``full`` and ``sampled_<N>``."""
    if protocol == SESSION_PROTOCOL:
        return _SESSION
    return MappingProxyType({**_RANKING, **_CUSTOM}) if _CUSTOM else _RANKING
