"""Why a metric moved since the previous night: the shift-share decomposition of each per-user
metric's change over a segmentation of the evaluated users (docs/nightly.md#change-attribution).

A per-user metric's value is the mean over the users of a partition's segments, weighted by
their shares: v = Σ_s p_s·v_s. Between the previous night (p, v) and tonight (p', v')

    Δv = Σ_s (p'_s - p_s)·(v_s + v'_s)/2   [mix: who was evaluated]
       + Σ_s (v'_s - v_s)·(p_s + p'_s)/2   [within: how each segment fared]

the symmetric (midpoint) form of the shift-share decomposition, so the two parts add up to Δv
exactly, with no interaction term (Jadidinejad, Macdonald & Ounis, "The Simpson's Paradox in the
Offline Evaluation of Recommendation Systems", ACM TOIS 2021, for why the mix matters). A
segment present on one night only contributes to the mix: +-p·v of that night.

Everything here is driver-side arithmetic on the two nights' ``metrics`` rows (a few per
model, metric, k and segment): no Spark job.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from receval_spark.registry import definitions
from receval_spark.results import AttributionRow, MetricRow

WARM_COLD = "warm/cold"
ACTIVITY = "activity"
COLD = "cold"


@dataclass(frozen=True)
class Segmentation:
    """A partition of the evaluated users into the ``metrics`` rows' segments: ``name`` (the
    ``attribution`` rows' segmentation) and the predicate of its segment labels."""

    name: str
    labels: frozenset[str]  # exact labels
    prefix: str | None = None  # and every label starting with it

    def holds(self, segment: str) -> bool:
        prefixed = self.prefix is not None and segment.startswith(self.prefix)
        return segment in self.labels or prefixed


def user_segmentations(segments: Sequence[str], named: str | None) -> list[Segmentation]:
    """The run's partitions of its evaluated users, from ``evaluation.segments`` and the
    label of ``evaluation.user_segments`` (``named``; None without the table): warm/cold,
    activity (cold with activity=q1..q4) and ``<name>=<value>``. A segmentation is attributed
    only where its segments' users add up to segment ``all`` on both nights (a user in two
    rows of the segment table, or activity without cold, does not)."""
    out = []
    if "warm" in segments and COLD in segments:
        out.append(Segmentation(WARM_COLD, frozenset({"warm", COLD})))
    if ACTIVITY in segments:
        out.append(Segmentation(ACTIVITY, frozenset({COLD}), prefix="activity="))
    if named is not None:
        out.append(Segmentation(named, frozenset(), prefix=f"{named}="))
    return out


Key = tuple[str, str, str, int | None]  # model, protocol, metric, k
Cell = tuple[float, int]  # value, n_users


def _by_key(rows: Iterable[MetricRow]) -> dict[Key, dict[str, Cell]]:
    """Per (model, protocol, metric, k) of a per-user metric, its segments' (value, n_users)."""
    out: dict[Key, dict[str, Cell]] = {}
    for r in rows:
        metric = definitions(r.protocol).get(r.metric)
        if metric is None or metric.scope != "user" or metric.family == "stability":
            continue
        if r.value is None or r.n_users <= 0:
            continue
        out.setdefault((r.model, r.protocol, r.metric, r.k), {})[r.segment] = (r.value, r.n_users)
    return out


def shift_share(
    tonight: Sequence[MetricRow],
    previous: Sequence[MetricRow],
    segmentations: Sequence[Segmentation],
    *,
    previous_date: str,
) -> list[AttributionRow]:
    """The ``attribution`` rows of tonight's per-user metrics against ``previous`` (the
    ``metrics`` rows of ``previous_date``): per model, protocol, metric, k and segmentation
    one row per segment (its shares, values, mix and within parts) and a row of segment
    ``all`` (the totals: the two nights' values of segment all, the parts' sums)."""
    now, before = _by_key(tonight), _by_key(previous)
    rows: list[AttributionRow] = []
    for key in sorted(now.keys() & before.keys(), key=lambda k: (k[0], k[1], k[2], k[3] or 0)):
        for segmentation in segmentations:
            rows += _decomposed(key, now[key], before[key], segmentation, previous_date)
    return rows


def _partition(cells: Mapping[str, Cell], segmentation: Segmentation) -> dict[str, Cell] | None:
    """The cells of the segmentation's segments, None when they do not partition ``all``."""
    parts = {s: c for s, c in cells.items() if s != "all" and segmentation.holds(s)}
    if "all" not in cells or not parts or sum(n for _, n in parts.values()) != cells["all"][1]:
        return None
    return parts


def _decomposed(
    key: Key,
    now: Mapping[str, Cell],
    before: Mapping[str, Cell],
    segmentation: Segmentation,
    previous_date: str,
) -> list[AttributionRow]:
    """One key's rows over one segmentation (none where it does not partition a night)."""
    parts_now, parts_before = _partition(now, segmentation), _partition(before, segmentation)
    if parts_now is None or parts_before is None:
        return []
    total_now, total_before = now["all"][1], before["all"][1]
    model, protocol, metric, k = key
    row = functools.partial(
        AttributionRow,
        model=model,
        protocol=protocol,
        metric=metric,
        k=k,
        previous_date=previous_date,
        segmentation=segmentation.name,
    )
    rows = []
    for segment in sorted(parts_now.keys() | parts_before.keys()):
        value, n = parts_now.get(segment, (None, 0))
        value_before, n_before = parts_before.get(segment, (None, 0))
        share, share_before = n / total_now, n_before / total_before
        mix, within = _parts(share_before, share, value_before, value)
        rows.append(
            row(
                segment=segment,
                share_previous=share_before,
                share=share,
                value_previous=value_before,
                value=value,
                mix=mix,
                within=within,
            )
        )
    total = row(
        segment="all",
        share_previous=1.0,
        share=1.0,
        value_previous=before["all"][0],
        value=now["all"][0],
        mix=sum(r.mix for r in rows),
        within=sum(r.within for r in rows),
    )
    return [*rows, total]


def _parts(
    share_before: float, share: float, value_before: float | None, value: float | None
) -> tuple[float, float]:
    """(mix, within) of one segment: the midpoint shift-share terms; a segment of one night
    only is all mix (its share times its value, entering or leaving)."""
    if value_before is None:
        assert value is not None
        return share * value, 0.0
    if value is None:
        return -share_before * value_before, 0.0
    mix = (share - share_before) * (value_before + value) / 2
    within = (value - value_before) * (share_before + share) / 2
    return mix, within
