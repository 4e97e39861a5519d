"""The report's sections read off the run record (``runs.split``): the split's parts and
settings (with the catalogue, docs/evaluation.md#catalogue), and the data-quality facts
(docs/evaluation.md#data-quality-facts)."""

from __future__ import annotations

from typing import Any


def split_parts(split: dict[str, Any]) -> list[dict[str, Any]]:
    """The split's parts (train, validation, test, ...) with their counts and time range."""
    return [{"part": name, **part} for name, part in split.items() if _is_part(part)]


QUALITY_LABELS = {
    "duplicate_rows": "exact duplicate interaction rows",
    "duplicate_pairs": "user-item pairs with several rows",
    "conflicting_pairs": "user-item pairs with grades on both sides of the threshold",
    "reconsumed_pairs": "relevant test pairs already consumed in train",
    "users_all_relevant_seen": "users whose relevant test items were all seen in train",
    "cold_users": "evaluated users without train interactions",
    "empty_truth_users": "evaluated users without a relevant test item (scored 0)",
    "no_list": "evaluated users without a list",
    "score_ties_at_k": "users whose candidates at ranks k and k+1 tie in score",
    "short_lists": "users with fewer than k candidates",
    "outside_catalogue": "list slots outside the catalogue",
    "test_events": "prediction events (of the test clicks)",
    "events_without_list": "prediction events without a list",
}


def quality_rows(split: dict[str, Any]) -> list[dict[str, Any]]:
    """The run record's data-quality facts (``runs.split.data_quality``) as report rows:
    label (with the model and k it is about), count, total and the share as a percentage."""
    rows = []
    for fact in split.get("data_quality", []):
        label = QUALITY_LABELS.get(fact["fact"], fact["fact"])
        if fact.get("k") is not None:
            k = fact["k"]
            label = label.replace("ranks k and k+1", f"ranks {k} and {k + 1}")
            label = label.replace("than k", f"than {k}")
        if fact.get("model"):
            label = f"{fact['model']}: {label}"
        share = f"{100 * fact['share']:.2f}%"
        rows.append({"label": label, "share": share, **{n: fact[n] for n in ("count", "total")}})
    return rows


def split_settings(split: dict[str, Any]) -> dict[str, Any]:
    """The split's scalar settings: method, cutoffs, quantile, filter_seen, ..., and the
    catalogue of the beyond-accuracy metrics (:func:`catalogue_summary`)."""
    settings = {key: value for key, value in split.items() if not isinstance(value, dict | list)}
    if "catalogue" in split:
        settings["catalogue"] = catalogue_summary(split["catalogue"])
    return settings


def catalogue_summary(catalogue: dict[str, Any]) -> str:
    """One line for the run record's ``catalogue`` (docs/evaluation.md#catalogue): its
    source and size, and for a configured catalogue its items without a train interaction and
    the train items outside it."""
    line = f"{catalogue['source']}: {catalogue['items']:,} items"
    if "items_without_train_interactions" in catalogue:
        line += (
            f" ({catalogue['items_without_train_interactions']:,} without a train interaction;"
            f" {catalogue['train_items_outside']:,} train items outside it)"
        )
    return line


def _is_part(value: Any) -> bool:
    return isinstance(value, dict) and "rows" in value
