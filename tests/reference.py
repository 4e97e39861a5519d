"""An independent numpy/pandas reference for the evaluation pipeline, written from DESIGN.md.

Nothing here imports Spark or ``receval_spark``: every step is the literal definition from
the design (sections 2-5), computed with plain loops over users where that is clearer. It is
meant for parity tests on small real datasets (ml-100k runs in about a second).

Tables use the canonical column names: interactions ``user_id, item_id, timestamp`` (epoch
seconds), optional ``rating``; relevance ``user_id, item_id, grade``; candidates
``user_id, item_id, score``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

USER = "user_id"
ITEM = "item_id"
TIMESTAMP = "timestamp"
RATING = "rating"
GRADE = "grade"
SCORE = "score"

METRICS = ("precision", "recall", "hit_rate", "mrr", "map", "ndcg", "arhr", "f1")

Ranking = dict[object, list[object]]  # user -> recommended items, best first


# --- split (DESIGN §2) -------------------------------------------------------------------


def epoch_seconds(moment: dt.datetime | dt.date | float) -> float:
    """A time point as epoch seconds; naive datetimes and dates are taken as UTC."""
    if isinstance(moment, dt.datetime):
        aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
        return aware.timestamp()
    if isinstance(moment, dt.date):
        return dt.datetime(moment.year, moment.month, moment.day, tzinfo=dt.UTC).timestamp()
    return float(moment)


def global_temporal_split(
    interactions: pd.DataFrame, cutoff: dt.datetime | dt.date | float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Global temporal split: train = rows with timestamp < cutoff, test = timestamp >= cutoff."""
    cut = epoch_seconds(cutoff)
    ts = interactions[TIMESTAMP].astype("float64")
    return interactions[ts < cut].copy(), interactions[ts >= cut].copy()


# --- relevance (DESIGN §3) ---------------------------------------------------------------


def grade_of(
    rating: float | None,
    *,
    kind: str,
    threshold: float | None = None,
    grades: Mapping[float, float] | None = None,
) -> float:
    """Grade of one test interaction.

    implicit: 1. threshold: 1 if rating >= threshold else 0. graded: the rating itself, or
    ``grades[rating]`` when a mapping is given (ratings missing from the mapping get 0).
    """
    if kind == "implicit":
        return 1.0
    if kind == "threshold":
        if threshold is None:
            raise ValueError("threshold relevance needs a threshold")
        return 1.0 if rating is not None and rating >= threshold else 0.0
    if kind == "graded":
        if rating is None:
            return 0.0
        if grades:
            return float(grades.get(float(rating), 0.0))
        return float(rating)
    raise ValueError(f"unknown relevance kind {kind!r}")


def relevant_items(
    test: pd.DataFrame,
    *,
    kind: str,
    threshold: float | None = None,
    grades: Mapping[float, float] | None = None,
) -> pd.DataFrame:
    """Rel(u) with grades: (user_id, item_id, grade).

    Each test row gets its grade; duplicate (user, item) rows collapse to the maximum grade;
    only pairs with grade > 0 are kept.
    """
    best: dict[tuple[object, object], float] = {}
    ratings = test[RATING] if RATING in test.columns else [None] * len(test)
    for user, item, rating in zip(test[USER], test[ITEM], ratings, strict=True):
        value = None if rating is None or pd.isna(rating) else float(rating)
        g = grade_of(value, kind=kind, threshold=threshold, grades=grades)
        key = (user, item)
        best[key] = max(best.get(key, g), g)
    rows = [(u, i, g) for (u, i), g in best.items() if g > 0]
    truth = pd.DataFrame(rows, columns=[USER, ITEM, GRADE])
    return truth.sort_values([USER, ITEM], ignore_index=True)


def relevance_by_user(truth: pd.DataFrame) -> dict[object, dict[object, float]]:
    """user -> {item: grade} for the evaluated users (users with |Rel(u)| >= 1)."""
    by_user: dict[object, dict[object, float]] = {}
    for user, item, grade in zip(truth[USER], truth[ITEM], truth[GRADE], strict=True):
        by_user.setdefault(user, {})[item] = float(grade)
    return by_user


def seen_items(train: pd.DataFrame) -> dict[object, set[object]]:
    """user -> set of items the user interacted with in train."""
    seen: dict[object, set[object]] = {}
    for user, item in zip(train[USER], train[ITEM], strict=True):
        seen.setdefault(user, set()).add(item)
    return seen


# --- models -------------------------------------------------------------------------------


def popularity_scores(train: pd.DataFrame) -> dict[object, float]:
    """Popularity model: item -> number of distinct train users who interacted with it."""
    users_of: dict[object, set[object]] = {}
    for user, item in zip(train[USER], train[ITEM], strict=True):
        users_of.setdefault(item, set()).add(user)
    return {item: float(len(users)) for item, users in users_of.items()}


def popularity_candidates(train: pd.DataFrame, users: Iterable[object]) -> pd.DataFrame:
    """Every train catalogue item for every user in ``users``, scored by popularity."""
    scores = popularity_scores(train)
    items = list(scores)
    values = [scores[i] for i in items]
    users = list(users)
    return pd.DataFrame(
        {
            USER: np.repeat(np.asarray(users, dtype=object), len(items)),
            ITEM: np.tile(np.asarray(items, dtype=object), len(users)),
            SCORE: np.tile(np.asarray(values, dtype="float64"), len(users)),
        }
    )


def oracle_candidates(truth: pd.DataFrame) -> pd.DataFrame:
    """Oracle model: each user's relevant items scored by their grade (best grade first)."""
    return truth.rename(columns={GRADE: SCORE})[[USER, ITEM, SCORE]]


# --- top-k (DESIGN §4) --------------------------------------------------------------------


def top_k(
    candidates: pd.DataFrame,
    *,
    k: int,
    seen: Mapping[object, set[object]] | None = None,
    users: Iterable[object] | None = None,
) -> Ranking:
    """R_k(u) for every user with candidates (restricted to ``users`` when given).

    A user's seen items are removed first (when ``seen`` is given); the rest are ordered by
    score descending, ties by item id ascending, and the first k are kept.
    """
    wanted = None if users is None else set(users)
    ranking: Ranking = {}
    for user, group in candidates.groupby(USER, sort=False):
        if wanted is not None and user not in wanted:
            continue
        rows = list(zip(group[ITEM], group[SCORE].astype("float64"), strict=True))
        if seen is not None:
            excluded = seen.get(user, set())
            rows = [(item, score) for item, score in rows if item not in excluded]
        rows.sort(key=lambda row: (-row[1], row[0]))
        ranking[user] = [item for item, _ in rows[:k]]
    return ranking


# --- accuracy metrics (DESIGN §5) ----------------------------------------------------------


def user_metrics(ranked: Sequence[object], rel: Mapping[object, float], k: int) -> dict:
    """All accuracy metrics of one user at cut-off k, each straight from its definition.

    ranked: R(u), best first (only the first k are used); rel: Rel(u) as {item: grade > 0}.
    rel_i = 1 if the item at rank i is in Rel(u), else 0; g_i its grade (0 if not relevant).

    - precision = hits@k / k  (k even when fewer than k items are recommended)
    - recall    = hits@k / |Rel(u)|
    - hit_rate  = 1 if hits@k >= 1 else 0
    - mrr       = 1 / rank of the first relevant item within k, else 0
    - map (AP)  = 1 / min(k, |Rel(u)|) * sum_{i<=k} P@i * rel_i,  P@i = hits@i / i
    - ndcg      = DCG@k / IDCG@k, DCG@k = sum_{i<=k} (2^g_i - 1) / log2(i + 1); IDCG@k is the
                  DCG of the user's own grades sorted descending, cut at k
    - arhr      = 1 / |Rel(u)| * sum_{i<=k} rel_i / i
    - f1        = 2 P R / (P + R), 0 when both are 0
    """
    n_rel = len(rel)
    if n_rel == 0:
        raise ValueError("a user without relevant items is not evaluated")
    top = list(ranked)[:k]
    hits = 0
    first_hit_rank = None
    precision_sum = 0.0
    dcg = 0.0
    reciprocal_sum = 0.0
    for i, item in enumerate(top, start=1):
        if item not in rel:
            continue
        hits += 1
        if first_hit_rank is None:
            first_hit_rank = i
        precision_sum += hits / i  # P@i * rel_i with rel_i = 1
        dcg += (2.0 ** rel[item] - 1.0) / math.log2(i + 1)
        reciprocal_sum += 1.0 / i
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum((2.0**g - 1.0) / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    precision = hits / k
    recall = hits / n_rel
    return {
        "precision": precision,
        "recall": recall,
        "hit_rate": 1.0 if hits >= 1 else 0.0,
        "mrr": 0.0 if first_hit_rank is None else 1.0 / first_hit_rank,
        "map": precision_sum / min(k, n_rel),
        "ndcg": dcg / idcg,
        "arhr": reciprocal_sum / n_rel,
        "f1": 0.0 if hits == 0 else 2.0 * precision * recall / (precision + recall),
    }


def per_user_metrics(
    ranking: Mapping[object, Sequence[object]],
    relevance: Mapping[object, Mapping[object, float]],
    ks: Iterable[int],
) -> pd.DataFrame:
    """Long per-user table (user_id, k, metric, value) over the evaluated users.

    Evaluated users are the keys of ``relevance`` (|Rel(u)| >= 1); a user absent from
    ``ranking`` (no recommendation) gets an empty list and so 0 on every metric. Users with
    recommendations but no relevant item are ignored.
    """
    rows = []
    for user, rel in relevance.items():
        ranked = ranking.get(user, [])
        for k in ks:
            for metric, value in user_metrics(ranked, rel, k).items():
                rows.append((user, int(k), metric, float(value)))
    return pd.DataFrame(rows, columns=[USER, "k", "metric", "value"])


def macro_average(per_user: pd.DataFrame) -> pd.DataFrame:
    """(metric, k, value, n_users, std): mean over users, user count, sample std (ddof=1)."""
    rows = []
    for (metric, k), group in per_user.groupby(["metric", "k"], sort=True):
        values = group["value"].to_numpy(dtype="float64")
        std = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
        rows.append((metric, int(k), float(np.mean(values)), len(values), std))
    return pd.DataFrame(rows, columns=["metric", "k", "value", "n_users", "std"])


# --- the whole protocol -------------------------------------------------------------------


def evaluate_model(
    candidates: pd.DataFrame,
    *,
    truth: pd.DataFrame,
    ks: Sequence[int],
    seen: Mapping[object, set[object]] | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rank one model's candidates for the evaluated users and score them.

    Returns (per-user long table, macro averages).
    """
    relevance = relevance_by_user(truth)
    ranking = top_k(candidates, k=max(ks), seen=seen, users=list(relevance))
    per_user = per_user_metrics(ranking, relevance, ks)
    return per_user, macro_average(per_user)
