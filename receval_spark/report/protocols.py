"""The report's labelled protocols (docs/evaluation.md#labelled-protocols): every protocol but
``full`` (and the session protocol) is shown in a table of its own under a caveat saying what
its numbers are, never mixed with the full-catalogue tables."""

from __future__ import annotations

from typing import Any

from receval_spark.config import CORRECTED_SUFFIX, DEBIASED_PROTOCOL
from receval_spark.registry import SESSION_PROTOCOL

UNLABELLED = ("full", SESSION_PROTOCOL)
SAMPLED_CAVEAT = (
    "Sampled protocol: each user's relevant test items are ranked among N seeded negatives "
    "(items the user never interacted with), not the whole catalogue. Such numbers are "
    "inflated, can reorder models, and are not comparable with the full-catalogue tables above."
)
CORRECTED_CAVEAT = (
    "Corrected sampled protocol: the same sampled lists, each relevant item moved to its "
    "estimated place in the full list (its rank among the sampled negatives scaled by the "
    "user's pool of negatives over the negatives drawn; Krichene & Rendle, KDD 2020). An "
    "estimate with its own bias, not a full-catalogue number."
)


def is_labelled(protocol: str) -> bool:
    """Whether rows of ``protocol`` are shown apart from the full-catalogue tables."""
    return protocol not in UNLABELLED


def protocol_caveat(protocol: str, split: dict[str, Any]) -> str:
    """The caveat above ``protocol``'s table; for ``debiased_iqr`` with what the run record
    (``split``: ``runs.split``) says the down-sampling did."""
    if protocol.endswith(CORRECTED_SUFFIX):
        return CORRECTED_CAVEAT
    if protocol == DEBIASED_PROTOCOL:
        return debiased_caveat(split.get(DEBIASED_PROTOCOL))
    return SAMPLED_CAVEAT


def debiased_caveat(facts: dict[str, Any] | None) -> str:
    """What ``debiased_iqr`` evaluated against (``facts``: ``runs.split.debiased_iqr``)."""
    text = (
        "Popularity-debiased protocol: the full-catalogue lists against a test set whose "
        "most popular items keep at most Q3 + c·IQR of their relevant pairs (RecTools' "
        "DebiasConfig), so accuracy is not won by recommending bestsellers."
    )
    if not facts:
        return text
    return (
        f"{text} Bound {facts['bound']} (Q1 {facts['q1']:g}, Q3 {facts['q3']:g}, "
        f"c {facts['iqr_coef']:g}): {facts['items_down_sampled']:,} of {facts['items']:,} "
        f"items down-sampled, {facts['pairs_removed']:,} of {facts['pairs']:,} relevant test "
        f"pairs removed, {facts['users_removed']:,} of {facts['users']:,} users left without "
        "a relevant item (not evaluated here)."
    )
