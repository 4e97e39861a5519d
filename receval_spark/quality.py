"""Data-quality facts, shared by both protocols: a count out of a total, optionally about one
model's lists at one cut-off, and the warnings for facts above their configured thresholds
(docs/evaluation.md#data-quality-facts). The facts themselves are computed by each protocol
(receval_spark.ranking.quality, receval_spark.sessions.pipeline)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Fact:
    """``count`` of ``total`` (``of`` names what the total counts); ``model`` and ``k`` where
    the fact is about one model's lists at one cut-off."""

    fact: str
    count: int
    total: int
    of: str
    model: str | None = None
    k: int | None = None

    @property
    def share(self) -> float:
        """count / total (0 when there is nothing to count)."""
        return self.count / self.total if self.total else 0.0

    def record(self) -> dict[str, object]:
        """The run record's form: the fields and the share."""
        return {**asdict(self), "share": self.share}


def quality_warnings(
    facts: Sequence[Fact],
    thresholds: Mapping[str, float],
    *,
    checking: Sequence[str] = (),
    filter_seen: bool = True,
) -> list[str]:
    """A warning for each fact whose share exceeds its threshold (``evaluation.data_quality``,
    by fact name; a fact without one never warns);
    the per-model facts only for the models in ``checking`` (the oracle's lists are short and
    tied by design), and the list facts at the largest k. ``filter_seen`` says what became of
    the re-consumed pairs."""
    warnings = []
    largest = max((f.k for f in facts if f.k is not None), default=None)
    for f in facts:
        limit = thresholds.get(f.fact)
        if limit is None or f.share <= limit:
            continue
        if f.model is not None and (f.model not in checking or f.k not in (None, largest)):
            continue
        warnings.append(_warning(f, limit, filter_seen=filter_seen))
    return warnings


WHAT = {
    "duplicate_rows": "interaction rows are exact duplicates of another row",
    "duplicate_pairs": "user-item pairs occur more than once in the log",
    "conflicting_pairs": "user-item pairs have rows on both sides of the relevance threshold "
    "(the test keeps the highest grade)",
    "reconsumed_pairs": "relevant test pairs were already consumed in train",
    "users_all_relevant_seen": "users with relevant test items had seen all of them in train",
    "cold_users": "evaluated users are cold (no train interaction; the warm segment shows the "
    "others)",
    "score_ties_at_k": "evaluated users have a score tie between their k-th and (k+1)-th "
    "candidates (the item id decides the cut)",
    "short_lists": "evaluated users have fewer than k candidates",
    "no_list": "evaluated users have no list",
    "outside_catalogue": "list slots hold items outside the catalogue",
    "events_without_list": "prediction events have no list (they score 0)",
}


def _warning(fact: Fact, limit: float, *, filter_seen: bool) -> str:
    """One line: the share and count, what they count, and the threshold's key."""
    who = f"{fact.model}: " if fact.model else ""
    at = f" (k = {fact.k})" if fact.k is not None else ""
    text = WHAT[fact.fact]
    if fact.fact == "reconsumed_pairs":
        text += (
            " and left Rel(u) (evaluation.filter_seen)"
            if filter_seen
            else "; they stay relevant (evaluation.filter_seen is false)"
        )
    return (
        f"data quality: {who}{fact.share:.2%} of {fact.of} ({fact.count} of {fact.total}): "
        f"{text}{at}; evaluation.data_quality.{fact.fact} = {limit}"
    )
