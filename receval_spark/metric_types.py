"""The type of a metric definition (receval_spark.registry holds them all): its ranges,
family, scope, display and the peer tools whose definitions the metric reference compares."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Bounds = tuple[float, float]
UNBOUNDED: Bounds = (-math.inf, math.inf)
UNIT: Bounds = (0.0, 1.0)
NON_NEGATIVE: Bounds = (0.0, math.inf)

Family = Literal["accuracy", "beyond", "stability", "rating", "session", "custom"]
Scope = Literal["user", "group"]
Display = Literal["proportion", "percent"]

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
