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
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

import numpy as np
import pandas as pd

USER = "user_id"
ITEM = "item_id"
TIMESTAMP = "timestamp"
RATING = "rating"
GRADE = "grade"
SCORE = "score"

METRICS = (
    "precision",
    "recall",
    "hit_rate",
    "mrr",
    "map",
    "ndcg",
    "arhr",
    "f1",
    "f_beta",
    "r_precision",
    "rbp",
)
F_BETA, RBP_PERSISTENCE = 2.0, 0.8  # evaluation.f_beta, evaluation.rbp_persistence defaults

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
    """Grade of one test interaction (DESIGN §3); 0 = not relevant.

    implicit: 1. threshold: 1 if rating >= threshold else 0. graded: relevant iff
    rating >= threshold, with grade rating - threshold + 1 (4★ -> 1, 5★ -> 2 at threshold 4);
    or, with a rating -> grade mapping, the mapped grade (a rating the mapping does not list,
    or maps below 1, is not relevant).
    """
    if kind == "implicit":
        return 1.0
    if rating is None:
        return 0.0
    if kind == "threshold":
        if threshold is None:
            raise ValueError("threshold relevance needs a threshold")
        return 1.0 if rating >= threshold else 0.0
    if kind == "graded":
        if grades:
            grade = float(grades.get(float(rating), 0.0))
            return grade if grade >= 1 else 0.0
        if threshold is None:
            raise ValueError("graded relevance needs a threshold or a mapping")
        return rating - threshold + 1.0 if rating >= threshold else 0.0
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


def relevance_by_user(
    truth: pd.DataFrame, *, seen: Mapping[object, set[object]] | None = None
) -> dict[object, dict[object, float]]:
    """user -> {item: grade} for the evaluated users (users with |Rel(u)| >= 1).

    DESIGN §3, seen items: under the seen filter (``seen`` given) the items u interacted with
    in train leave Rel(u), and a user left without relevant items is not evaluated.
    """
    by_user: dict[object, dict[object, float]] = {}
    for user, item, grade in zip(truth[USER], truth[ITEM], truth[GRADE], strict=True):
        if seen is not None and item in seen.get(user, set()):
            continue
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
    - f_beta    = (1 + b^2) P R / (b^2 P + R), 0 when both are 0 (van Rijsbergen 1979; b = 2)
    - r_precision = hits in the first min(k, |Rel(u)|) places / min(k, |Rel(u)|) (Manning et
                  al. 2008 §8.4: R-precision, the precision at rank |Rel(u)|, cut at k)
    - rbp       = (1 - p) * sum_{i<=k} rel_i * p^(i - 1) (Moffat & Zobel, TOIS 2008; p = 0.8,
                  binary rel_i, no residual)
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
        "f_beta": 0.0
        if hits == 0
        else (1 + F_BETA**2) * precision * recall / (F_BETA**2 * precision + recall),
        "r_precision": sum(1 for item in top[: min(k, n_rel)] if item in rel) / min(k, n_rel),
        "rbp": (1 - RBP_PERSISTENCE)
        * sum(RBP_PERSISTENCE ** (i - 1) for i, item in enumerate(top, start=1) if item in rel),
    }


def per_user_metrics(
    ranking: Mapping[object, Sequence[object]],
    relevance: Mapping[object, Mapping[object, float]],
    ks: Iterable[int],
    *,
    listed: Iterable[object] = (),
) -> pd.DataFrame:
    """Long per-user table (user_id, k, metric, value) over the evaluated users.

    Evaluated users are the keys of ``relevance`` (|Rel(u)| >= 1); a user absent from
    ``ranking`` (no recommendation) gets an empty list and so 0 on every metric. Users with
    recommendations but no relevant item are ignored, unless they are in ``listed``
    (docs/evaluation.md, ``evaluation.users: listed_or_relevant``: the users with an external
    model's list are evaluated too): such a user with an empty Rel(u) scores 0 on every
    metric, whatever the list holds (Spark MLlib returns 0 for an empty label set).
    """
    rows = []
    for user, rel in relevance.items():
        ranked = ranking.get(user, [])
        for k in ks:
            for metric, value in user_metrics(ranked, rel, k).items():
                rows.append((user, int(k), metric, float(value)))
    for user in sorted(set(listed) - set(relevance), key=repr):
        rows += [(user, int(k), metric, 0.0) for k in ks for metric in METRICS]
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
    listed: Iterable[object] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rank one model's candidates for the evaluated users and score them. ``listed``: under
    ``evaluation.users: listed_or_relevant`` the users with an external model's list (in the
    log), evaluated too (0 where Rel(u) is empty).

    Returns (per-user long table, macro averages).
    """
    relevance = relevance_by_user(truth, seen=seen)
    listed = set(listed)
    ranking = top_k(candidates, k=max(ks), seen=seen, users=set(relevance) | listed)
    per_user = per_user_metrics(ranking, relevance, ks, listed=listed)
    return per_user, macro_average(per_user)


# --- beyond-accuracy metrics (DESIGN §6) ---------------------------------------------------
#
# Inputs, all plain pandas / Python:
#   lists       DataFrame (user_id, k, item_id): one row per slot of R_k(u) (order irrelevant).
#               Only non-empty lists appear; a user without rows has no list and is left out.
#   train       DataFrame (user_id, item_id, ...): the train interactions (duplicates count
#               as separate interactions for the interaction counts).
#   categories  {item: set of categories}; items missing from it (or with an empty set) have
#               no categories.
#   vectors     {item: 1-d np.ndarray}; items missing from it (or with a zero vector) have no
#               embedding.
#   truth       DataFrame (user_id, item_id, ...): Rel(u).
#   expected    DataFrame (user_id, k, item_id): the popularity baseline's top-k lists (the
#               items that are *expected*, i.e. not surprising, for serendipity).
#
# Interpretation of DESIGN §6 used here: f_i, and with it Coverage, Gini and Entropy, are
# taken over the catalogue I only; list items outside I do not count there. I is the items
# with a train interaction (DESIGN §6), or a given catalogue (DESIGN §1: "the item universe I
# of §6, given as a table of item ids"), whose items need not have a train interaction nor
# include every train item. p(i) and the interaction counts always come from train, for any
# item: Novelty floors p at 1/(train users) for an item without train users (in I or not);
# PopularityBias takes every list slot with its item's train interaction count (0 without
# any) over the mean train interaction count of the items of I (0 for those without any);
# CategoryCoverage divides by the categories of the items of I; personalization, ILD and
# serendipity treat every item alike.

Lists = dict[object, list[object]]  # user -> the items of R_k(u) for one k


def lists_at(lists: pd.DataFrame, k: int) -> Lists:
    """user -> items of R_k(u) for one k, from the long (user_id, k, item_id) table."""
    rows = lists[lists["k"] == k]
    out: Lists = {}
    for user, item in zip(rows[USER], rows[ITEM], strict=True):
        out.setdefault(user, []).append(item)
    return out


def train_statistics(train: pd.DataFrame) -> tuple[dict, dict, int]:
    """(item -> distinct train users, item -> train interactions, number of train users).

    The keys of the first two are the catalogue I.
    """
    users_of: dict[object, set[object]] = {}
    interactions: dict[object, int] = {}
    for user, item in zip(train[USER], train[ITEM], strict=True):
        users_of.setdefault(item, set()).add(user)
        interactions[item] = interactions.get(item, 0) + 1
    n_users = len(set(train[USER]))
    return {i: len(u) for i, u in users_of.items()}, interactions, n_users


def exposure_counts(ranking: Lists, catalogue: Iterable[object]) -> dict[object, int]:
    """f_i for every catalogue item: the number of lists containing i (0 if never shown)."""
    f = dict.fromkeys(catalogue, 0)
    for items in ranking.values():
        for item in set(items):
            if item in f:
                f[item] += 1
    return f


def coverage(ranking: Lists, catalogue: Iterable[object]) -> float:
    """|union of the lists ∩ I| / |I|."""
    catalogue = set(catalogue)
    shown = {item for items in ranking.values() for item in items}
    return len(shown & catalogue) / len(catalogue)


def gini(ranking: Lists, catalogue: Iterable[object]) -> float:
    """G = sum_i (2i - n - 1) f_(i) / (n sum_i f_i), f ascending over all n catalogue items
    (never-recommended items included with f = 0), i = 1..n."""
    f = np.sort(np.asarray(list(exposure_counts(ranking, catalogue).values()), dtype="float64"))
    n = len(f)
    i = np.arange(1, n + 1, dtype="float64")
    return float(np.sum((2 * i - n - 1) * f) / (n * np.sum(f)))


def entropy(ranking: Lists, catalogue: Iterable[object]) -> float:
    """-sum_i (f_i / F) log2(f_i / F), F = sum f_i (terms with f_i = 0 are 0)."""
    f = np.asarray(list(exposure_counts(ranking, catalogue).values()), dtype="float64")
    p = f[f > 0] / f.sum()
    return float(-np.sum(p * np.log2(p)))


def novelty_per_user(
    ranking: Lists, users_of: Mapping[object, int], n_train_users: int
) -> dict[object, float]:
    """user -> mean over i in R_k(u) of -log2 p(i), p(i) = max(users of i, 1) / train users."""
    out = {}
    for user, items in ranking.items():
        info = [-math.log2(max(users_of.get(i, 0), 1) / n_train_users) for i in items]
        out[user] = sum(info) / len(info)
    return out


def popularity_bias(
    ranking: Lists,
    interactions: Mapping[object, int],
    catalogue: Iterable[object] | None = None,
) -> float:
    """Mean train interaction count over all list slots / mean over the catalogue items
    (``catalogue``; None: the train items, the keys of ``interactions``); an item without a
    train interaction counts 0 on either side."""
    slots = [interactions.get(i, 0) for items in ranking.values() for i in items]
    members = list(interactions) if catalogue is None else list(dict.fromkeys(catalogue))
    catalogue_mean = sum(interactions.get(i, 0) for i in members) / len(members)
    return (sum(slots) / len(slots)) / catalogue_mean


def list_cosine(a: Sequence[object], b: Sequence[object]) -> float:
    """Cosine of two binary list vectors: |A ∩ B| / sqrt(|A| |B|)."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / math.sqrt(len(sa) * len(sb))


def personalization(ranking: Lists) -> float | None:
    """1 - mean cosine over ALL unordered pairs of lists, by brute force (None below 2 lists)."""
    users = list(ranking)
    if len(users) < 2:
        return None
    total = 0.0
    pairs = 0
    for a in range(len(users)):
        for b in range(a + 1, len(users)):
            total += list_cosine(ranking[users[a]], ranking[users[b]])
            pairs += 1
    return 1.0 - total / pairs


def jaccard_distance(a: Sequence[object], b: Sequence[object]) -> float:
    """1 - |A ∩ B| / |A or B| (one minus the Jaccard index of the two item sets)."""
    sa, sb = set(a), set(b)
    return 1.0 - len(sa & sb) / len(sa | sb)


# Spark's xxhash64 (XXH64 with seed 42 over the columns in turn), for reproducing the pair
# sample of ``receval_spark.metrics.diversity.jaccard_pair_distances``: int (32-bit) values use
# XXH64.hashInt, long values XXH64.hashLong; the result is a signed 64-bit integer.
_M64 = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    return h ^ (h >> 32)


def _hash_int(value: int, seed: int) -> int:
    h = (seed + _P5 + 4) & _M64
    h ^= ((value & 0xFFFFFFFF) * _P1) & _M64
    return _fmix((_rotl(h, 23) * _P2 + _P3) & _M64)


def _hash_long(value: int, seed: int) -> int:
    h = (seed + _P5 + 8) & _M64
    h ^= (_rotl(((value & _M64) * _P2) & _M64, 31) * _P1) & _M64
    return _fmix((_rotl(h, 27) * _P1 + _P4) & _M64)


def spark_xxhash64(*values: tuple[int, str]) -> int:
    """Spark ``xxhash64(v1, v2, ...)`` of integer values given as (value, "int" | "long")."""
    h = 42
    for value, kind in values:
        h = _hash_int(value, h) if kind == "int" else _hash_long(value, h)
    return h - (1 << 64) if h >= 1 << 63 else h


def sampled_pairs(
    users: Iterable[int], *, pairs: int, seed: int, user_kind: str = "int"
) -> list[tuple[int, int]]:
    """The pair sample documented in ``jaccard_pair_distances``: users ordered by
    (xxhash64(seed, user), user), the first 2·pairs taken, positions (2j, 2j + 1) paired;
    an incomplete last pair is dropped. The seed is a Spark int literal when it fits."""
    seed_kind = "int" if -(2**31) <= seed < 2**31 else "long"
    ordered = sorted(
        users, key=lambda u: (spark_xxhash64((seed, seed_kind), (int(u), user_kind)), u)
    )[: 2 * pairs]
    return [(ordered[j], ordered[j + 1]) for j in range(0, len(ordered) - 1, 2)]


def category_cosine(a: set, b: set) -> float:
    """Cosine of two multi-hot category vectors, each normalised to length 1:
    |A ∩ B| / sqrt(|A| |B|)."""
    return len(a & b) / math.sqrt(len(a) * len(b))


def ild_category_per_user(ranking: Lists, categories: Mapping[object, set]) -> dict[object, float]:
    """user -> 1 - mean cosine over the explicit pairs of list items with categories, each item
    its unit-normalised multi-hot category vector (DESIGN §6).

    Items without categories are left out; lists with < 2 such items get no value.
    """
    out = {}
    for user, items in ranking.items():
        known = [set(categories[i]) for i in items if categories.get(i)]
        if len(known) < 2:
            continue
        cosines = [
            category_cosine(known[a], known[b])
            for a in range(len(known))
            for b in range(a + 1, len(known))
        ]
        out[user] = 1.0 - sum(cosines) / len(cosines)
    return out


def category_coverage_per_user(
    ranking: Lists, categories: Mapping[object, set], catalogue: Iterable[object]
) -> dict[object, float]:
    """user -> |distinct categories of R_k(u) that catalogue items have| / |categories of the
    catalogue items| (DESIGN §6, ``catalogue`` = I), for every user with a list; empty when the
    catalogue has no category."""
    known = set().union(*(categories.get(i, set()) for i in catalogue))
    if not known:
        return {}
    out = {}
    for user, items in ranking.items():
        shown = set().union(*(categories.get(i, set()) for i in items))
        out[user] = len(shown & known) / len(known)
    return out


def ild_embedding_per_user(
    ranking: Lists, vectors: Mapping[object, np.ndarray]
) -> dict[object, float]:
    """user -> 1 - mean cosine over the explicit pairs of embedded list items.

    Items without a (non-zero) vector are left out; lists with < 2 such items get no value.
    """
    out = {}
    for user, items in ranking.items():
        vs = [
            np.asarray(vectors[i], dtype="float64")
            for i in items
            if i in vectors and np.linalg.norm(vectors[i]) > 0
        ]
        if len(vs) < 2:
            continue
        cosines = [
            float(vs[a] @ vs[b] / (np.linalg.norm(vs[a]) * np.linalg.norm(vs[b])))
            for a in range(len(vs))
            for b in range(a + 1, len(vs))
        ]
        out[user] = 1.0 - sum(cosines) / len(cosines)
    return out


def serendipity_per_user(
    ranking: Lists, relevant: Mapping[object, Iterable[object]], expected: Lists, k: int
) -> dict[object, float]:
    """user -> |{i in R_k(u): i in Rel(u), i not in expected(u)}| / k, for users with a list."""
    out = {}
    for user, items in ranking.items():
        rel = set(relevant.get(user, ()))
        usual = set(expected.get(user, ()))
        out[user] = sum(1 for i in set(items) if i in rel and i not in usual) / k
    return out


HEAD_SHARE = 0.5  # evaluation.head_share's default


def head_items(train: pd.DataFrame, head_share: float = HEAD_SHARE) -> set[object]:
    """The head (docs/evaluation.md, segments items=head): train items by train interactions,
    most first, ties by item id; an item is in the head when the items before it hold less
    than head_share of all train interactions."""
    counts = train.groupby(ITEM).size()
    ordered = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    total, before, head = int(counts.sum()), 0, set()
    for item, n in ordered:
        if before < head_share * total:
            head.add(item)
        before += int(n)
    return head


def long_tail_per_user(ranking: Lists, head: set[object]) -> tuple[dict, dict]:
    """(APLT, ACLT) per user (Abdollahpouri, Burke & Mobasher, FLAIRS 2019): the share and the
    number of the list's items outside ``head``."""
    counts = {u: sum(1 for item in items if item not in head) for u, items in ranking.items()}
    return {u: counts[u] / len(items) for u, items in ranking.items()}, counts


def beyond_metrics(
    lists: pd.DataFrame,
    train: pd.DataFrame,
    *,
    categories: Mapping[object, set] | None = None,
    vectors: Mapping[object, np.ndarray] | None = None,
    truth: pd.DataFrame | None = None,
    expected: pd.DataFrame | None = None,
    catalogue: Iterable[object] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All beyond-accuracy metrics of one model's lists at every k present in ``lists``,
    over the catalogue I = ``catalogue`` (None: the items with a train interaction).

    Returns (group table (k, metric, value, n_users, std), per-user long table
    (user_id, k, metric, value)). Group metrics: coverage, gini, entropy, popularity_bias,
    personalization (n_users = number of lists, std NaN). Per-user metrics (novelty, aplt and
    aclt (the head of ``head_items``), and
    ild_category, category_coverage / ild_embedding / serendipity when their inputs are
    given) are macro averaged by ``macro_average`` (n_users = users with a value, std with
    ddof=1).
    personalization_jaccard is sampled and left to ``jaccard_distances``.
    """
    users_of, interactions, n_train_users = train_statistics(train)
    head = head_items(train)
    catalogue = list(users_of) if catalogue is None else list(dict.fromkeys(catalogue))
    relevant: dict[object, set[object]] = {}
    if truth is not None:
        for user, item in zip(truth[USER], truth[ITEM], strict=True):
            relevant.setdefault(user, set()).add(item)
    group_rows = []
    user_rows = []
    for k in sorted(set(lists["k"])):
        ranking = lists_at(lists, int(k))
        n = len(ranking)
        group = {
            "coverage": coverage(ranking, catalogue),
            "gini": gini(ranking, catalogue),
            "entropy": entropy(ranking, catalogue),
            "popularity_bias": popularity_bias(ranking, interactions, catalogue),
            "personalization": personalization(ranking),
        }
        group_rows += [(int(k), m, v, n, float("nan")) for m, v in group.items()]
        per_user = {"novelty": novelty_per_user(ranking, users_of, n_train_users)}
        per_user["aplt"], per_user["aclt"] = long_tail_per_user(ranking, head)
        if categories is not None:
            per_user["ild_category"] = ild_category_per_user(ranking, categories)
            per_user["category_coverage"] = category_coverage_per_user(
                ranking, categories, catalogue
            )
        if vectors is not None:
            per_user["ild_embedding"] = ild_embedding_per_user(ranking, vectors)
        if truth is not None and expected is not None:
            per_user["serendipity"] = serendipity_per_user(
                ranking, relevant, lists_at(expected, int(k)), int(k)
            )
        for metric, values in per_user.items():
            user_rows += [(u, int(k), metric, float(v)) for u, v in values.items()]
    per_user_long = pd.DataFrame(user_rows, columns=[USER, "k", "metric", "value"])
    groups = pd.DataFrame(group_rows, columns=["k", "metric", "value", "n_users", "std"])
    averaged = macro_average(per_user_long)[["k", "metric", "value", "n_users", "std"]]
    return pd.concat([groups, averaged], ignore_index=True), per_user_long


def jaccard_distances(
    lists: pd.DataFrame, k: int, *, pairs: int, seed: int, user_kind: str = "int"
) -> list[float]:
    """1 - Jaccard of each sampled pair of lists at k (pairs in sample order)."""
    ranking = lists_at(lists, k)
    chosen = sampled_pairs(ranking, pairs=pairs, seed=seed, user_kind=user_kind)
    return [jaccard_distance(ranking[u], ranking[v]) for u, v in chosen]


# --- session-based next-item protocol (DESIGN §8), plain pandas / Python -----------------
# Clicks: DataFrame (session_id, item_id, time, order). Session order: (time, order, item_id).


# --- always-valid sequential tests (DESIGN §7; Johari et al., Operations Research 2022) ---


def msprt_iid(observations: Sequence[float], variance: float, tau: float) -> float:
    """Johari et al.'s mixture SPRT for i.i.d. N(theta, V) observations, H0 theta = 0, mixing
    theta ~ N(0, tau^2): Lambda_n = sqrt(V/(V + n tau^2)) exp(n^2 tau^2 ybar^2 / (2V(V + n
    tau^2)))."""
    n = len(observations)
    ybar = sum(observations) / n
    scale = variance + n * tau**2
    return math.sqrt(variance / scale) * math.exp(n**2 * tau**2 * ybar**2 / (2 * variance * scale))


def msprt_by_integration(
    observations: Sequence[float],
    covariance: np.ndarray,
    tau: float,
    shape: Sequence[float] | None = None,
) -> float:
    """The mixture likelihood ratio by its definition, for observations jointly Gaussian with
    ``covariance``: the integral over theta ~ N(0, tau^2) of f_theta(y) / f_0(y), f_theta the
    N(theta shape, covariance) density (shape: all ones, or 0 before a change and 1 from it),
    on a fine grid (trapezoid rule)."""
    y = np.asarray(observations, dtype=float)
    ones = np.ones_like(y) if shape is None else np.asarray(shape, dtype=float)
    thetas = np.linspace(-12 * tau, 12 * tau, 200_001)

    def log_density(mean_shift: float) -> float:
        centred = y - mean_shift * ones
        return -0.5 * float(centred @ np.linalg.solve(covariance, centred))

    # log f_theta - log f_0 is c theta + q theta^2: fixed by theta = -1, 0, 1
    null = log_density(0.0)
    lin = (log_density(1.0) - log_density(-1.0)) / 2
    quad = (log_density(1.0) + log_density(-1.0)) / 2 - null
    ratios = np.exp(lin * thetas + quad * thetas**2)
    prior = np.exp(-(thetas**2) / (2 * tau**2)) / math.sqrt(2 * math.pi * tau**2)
    values = ratios * prior
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(thetas)))


# --- paired randomization (sign-flip) test (DESIGN §7; Fisher 1935) ------------------------


def sign_flip_exact(differences: Sequence[float]) -> Fraction:
    """Fisher's paired randomization test by its definition: every one of the 2^n assignments
    of a sign to each user's difference, in exact rational arithmetic (each float as the
    rational it is); p = #{assignments with |sum| >= |observed sum|} / 2^n."""
    d = [Fraction(x) for x in differences]
    observed = abs(sum(d))
    extreme = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return Fraction(extreme, 2 ** len(d))


def sign_flip_monte_carlo(
    differences: Sequence[float], permutations: int, rng: np.random.Generator
) -> float:
    """The test by simulation, one random sign per user and assignment (no grouping):
    p = (1 + #{j : |sum_j| >= |observed sum|}) / (permutations + 1), Phipson & Smyth (2010);
    sums compared after rounding to 9 decimals, so equal sums tie."""
    d = np.asarray(differences, dtype=float)
    signs = rng.choice([-1.0, 1.0], size=(permutations, len(d)))
    null = np.round(np.abs(signs @ d), 9)
    return (1 + int(np.sum(null >= round(abs(float(d.sum())), 9)))) / (permutations + 1)


def session_sequences(clicks: pd.DataFrame) -> dict[object, list[object]]:
    """session -> its items in session order."""
    ordered = clicks.sort_values(["session_id", "time", "order", "item_id"], kind="mergesort")
    return {s: list(g["item_id"]) for s, g in ordered.groupby("session_id", sort=False)}


def counts(clicks: pd.DataFrame) -> dict[str, int]:
    return {
        "clicks": len(clicks),
        "sessions": clicks["session_id"].nunique(),
        "items": clicks["item_id"].nunique(),
    }


def preprocess_sessions(
    clicks: pd.DataFrame,
    *,
    min_length: int,
    min_support: int,
    test_days: float,
    split_by: str = "end",
) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """Filter sessions and items until stable; split at cut = last click - test_days: by end,
    train = sessions whose last click is before cut, test = the others; by start, test =
    sessions starting after cut, train = sessions ending at or before it, the sessions in
    between dropped (counted after the test part); drop test clicks on unseen items and
    short test sessions."""
    steps = [counts(clicks)]
    while True:
        before = len(clicks)
        size = clicks.groupby("session_id")["item_id"].transform("size")
        clicks = clicks[size >= min_length]
        steps.append(counts(clicks))
        support = clicks.groupby("item_id")["item_id"].transform("size")
        clicks = clicks[support >= min_support]
        steps.append(counts(clicks))
        if len(clicks) == before:
            break
    cut = clicks["time"].max() - pd.Timedelta(days=test_days)
    start = clicks.groupby("session_id")["time"].transform("min")
    end = clicks.groupby("session_id")["time"].transform("max")
    if split_by == "end":
        train, test = clicks[end < cut], clicks[end >= cut]
        steps += [counts(train), counts(test)]
    else:
        train, test = clicks[end <= cut], clicks[start > cut]
        steps += [counts(train), counts(test), counts(clicks[(start <= cut) & (end > cut)])]
    test = test[test["item_id"].isin(set(train["item_id"]))]
    steps.append(counts(test))
    size = test.groupby("session_id")["item_id"].transform("size")
    test = test[size >= 2]
    steps.append(counts(test))
    return train, test, steps


def next_item_events(test: dict[object, list[object]]) -> list[tuple[object, int, list, object]]:
    """(session, i, prefix s_1..s_i, target s_{i+1}) for i = 1..n-1."""
    return [(s, i, items[:i], items[i]) for s, items in test.items() for i in range(1, len(items))]


def _top(scores: Mapping[object, float | Fraction], k: int) -> list[object]:
    return [item for item, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def session_pop(train: dict[object, list[object]], k: int):
    clicks: dict[object, int] = {}
    for items in train.values():
        for item in items:
            clicks[item] = clicks.get(item, 0) + 1
    top = _top(clicks, k)
    return lambda prefix: top


def session_s_pop(train: dict[object, list[object]], k: int):
    clicks: dict[object, int] = {}
    for items in train.values():
        for item in items:
            clicks[item] = clicks.get(item, 0) + 1

    popular = sorted(clicks, key=lambda i: (-clicks[i], i))

    def predict(prefix):
        in_prefix = {i: prefix.count(i) for i in set(prefix)}
        ordered = sorted(in_prefix, key=lambda i: (-in_prefix[i], -clicks.get(i, 0), i))
        rest = [i for i in popular[: k + len(in_prefix)] if i not in in_prefix]
        return (ordered + rest)[:k]

    return predict


def session_markov(train: dict[object, list[object]], k: int):
    transitions: dict[object, dict[object, int]] = {}
    for items in train.values():
        for a, b in itertools.pairwise(items):
            row = transitions.setdefault(a, {})
            row[b] = row.get(b, 0) + 1
    return lambda prefix: _top(transitions.get(prefix[-1], {}), k)


def session_item_knn(
    train: dict[object, list[object]], k: int, neighbours: int, shrinkage: float = 0.0
):
    sessions_of: dict[object, set] = {}
    for s, items in train.items():
        for item in items:
            sessions_of.setdefault(item, set()).add(s)

    @functools.cache
    def neighbours_of(last):
        """The cosine compared exactly, as the rational sim² = both² / (|S_i| |S_j|) (DESIGN §8:
        1/√3 and 3/√27 tie, whatever their doubles); a shrunk cosine as its double."""
        mine = sessions_of.get(last, set())
        scores: dict[object, float | Fraction] = {}
        for other in {i for s in mine for i in train[s]} - {last}:
            both, product = len(mine & sessions_of[other]), len(mine) * len(sessions_of[other])
            if shrinkage:
                scores[other] = both / (math.sqrt(product) + shrinkage)
            else:
                scores[other] = Fraction(both * both, product)
        return _top(scores, min(k, neighbours))

    def predict(prefix):
        return neighbours_of(prefix[-1])

    return predict


def session_sr(train: dict[object, list[object]], k: int, window: int):
    """Sequential rules (session-rec, weighting div): in each train session, click j before
    click i with i - j <= window adds 1/(i - j) to the rule items[j] -> items[i]; a prefix's
    list: items by summed rule weight from its last item (exact fractions), then item id."""
    rules: dict[object, dict[object, Fraction]] = {}
    for items in train.values():
        for i, b in enumerate(items):
            for j in range(max(0, i - window), i):
                row = rules.setdefault(items[j], {})
                row[b] = row.get(b, Fraction(0)) + Fraction(1, i - j)
    return lambda prefix: _top(rules.get(prefix[-1], {}), k)


def recall_mrr(events, predict, k: int) -> tuple[float, float]:
    """Recall@k and MRR@k over the events."""
    hits, reciprocal = 0, 0.0
    for _, _, prefix, target in events:
        ranked = predict(prefix)[:k]
        if target in ranked:
            hits += 1
            reciprocal += 1 / (ranked.index(target) + 1)
    return hits / len(events), reciprocal / len(events)


# --- night-over-night list stability (DESIGN §6) -------------------------------------------


def rbo_ext(a: Sequence[object], b: Sequence[object], p: float) -> float:
    """Extrapolated rank-biased overlap of two lists (Webber, Moffat & Zobel, TOIS 2010,
    eq. 32), depth by depth: X_d = |S_{:d} ∩ L_{:d}| with S the shorter list (length s), L the
    longer (length l); for d > s the whole of S counts.
    RBO = (1-p)/p · (Σ_{d≤l} X_d/d p^d + Σ_{s<d≤l} X_s (d-s)/(s d) p^d)
          + ((X_l - X_s)/l + X_s/s) p^l."""
    short, long_ = (list(a), list(b)) if len(a) <= len(b) else (list(b), list(a))
    s, n = len(short), len(long_)

    def overlap(d: int) -> int:
        return len(set(short[: min(d, s)]) & set(long_[:d]))

    x_s, x_l = overlap(s), overlap(n)
    first = sum(overlap(d) / d * p**d for d in range(1, n + 1))
    second = sum(x_s * (d - s) / (s * d) * p**d for d in range(s + 1, n + 1))
    return (1 - p) / p * (first + second) + ((x_l - x_s) / n + x_s / s) * p**n


def jaccard_index(a: Sequence[object], b: Sequence[object]) -> float:
    """|A ∩ B| / |A or B| of the two item sets."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb)


def exposure_churn(tonight: Lists, previous: Lists) -> float:
    """½ Σ_i |e_i - e'_i|, e_i = the share of the night's list slots holding item i."""

    def shares(ranking: Lists) -> dict[object, float]:
        slots = [i for items in ranking.values() for i in items]
        return {i: slots.count(i) / len(slots) for i in set(slots)}

    e, f = shares(tonight), shares(previous)
    return sum(abs(e.get(i, 0.0) - f.get(i, 0.0)) for i in set(e) | set(f)) / 2


# --- labelled protocols: debiased_iqr, sampled_<N>_corrected (docs/evaluation.md) -----------


def debias_bound(popularity: Sequence[int], iqr_coef: float = 1.5) -> tuple[float, float, int]:
    """(Q1, Q3, bound) as RecTools' ``make_debias``: the quartiles of the item popularities by
    pandas' ``Series.quantile`` (linear interpolation), bound = int(Q3 + iqr_coef · IQR)."""
    quartiles = pd.Series(list(popularity), dtype="float64").quantile([0.25, 0.75])
    q1, q3 = float(quartiles.loc[0.25]), float(quartiles.loc[0.75])
    return q1, q3, int(q3 + iqr_coef * (q3 - q1))


def debiased_truth(
    truth: pd.DataFrame,
    *,
    seed: int,
    iqr_coef: float = 1.5,
    kinds: tuple[str, str] = ("int", "int"),
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Rel(u) with each item whose popularity (users with it in Rel(u)) exceeds the bound cut to
    ``bound`` pairs: its users ordered by (xxhash64(seed, user, item), user), the first kept;
    ``kinds``: the Spark types of the user and item ids. Returns the kept pairs and the facts
    (q1, q3, bound, items_down_sampled, pairs_removed, users_removed)."""
    popularity = truth.groupby(ITEM)[USER].nunique()
    q1, q3, bound = debias_bound(popularity.to_numpy(), iqr_coef)
    kept = []
    for item, group in truth.groupby(ITEM, sort=False):
        users = sorted(
            group[USER],
            key=lambda u: (
                spark_xxhash64((seed, "int"), (int(u), kinds[0]), (int(item), kinds[1])),
                u,
            ),
        )
        chosen = set(users[:bound])
        kept.append(group[group[USER].isin(chosen)])
    debiased = pd.concat(kept, ignore_index=True)
    facts = {
        "q1": q1,
        "q3": q3,
        "bound": bound,
        "items_down_sampled": int((popularity > bound).sum()),
        "pairs_removed": len(truth) - len(debiased),
        "users_removed": truth[USER].nunique() - debiased[USER].nunique(),
    }
    return debiased, facts


def sampled_order(
    pairs: Iterable[tuple[int, int]],
    score: Callable[[int, int], float | None],
    *,
    seed: int,
) -> dict[int, list[int]]:
    """Each user's sampled items, best first (DESIGN §7): score descending (None last), equal
    scores by xxhash64(seed, user, item) (int ids), then item id."""
    by_user: dict[int, list[int]] = {}
    for user, item in pairs:
        by_user.setdefault(user, []).append(item)

    def key(user: int, item: int) -> tuple[int, float, int, int]:
        value = score(user, item)
        hashed = spark_xxhash64((seed, "int"), (user, "int"), (item, "int"))
        return (value is None, -(value or 0.0), hashed, item)

    return {u: sorted(items, key=lambda i, u=u: key(u, i)) for u, items in by_user.items()}


def corrected_positions(
    ordered: Sequence[object], rel: Iterable[object], *, pool: int, negatives: int
) -> dict[object, Fraction]:
    """Each positive's estimated place in the full list: with s its place in the sampled
    order, j its place among the positives and r = s - j + 1 its rank among the negatives
    alone, j + (r - 1)·pool/negatives (j without negatives); an exact rational."""
    relevant, places, j = set(rel), {}, 0
    for s, item in enumerate(ordered, start=1):
        if item in relevant:
            j += 1
            r = s - j + 1
            places[item] = Fraction(j) + (Fraction((r - 1) * pool, negatives) if negatives else 0)
    return places


def metrics_at_places(
    places: Mapping[object, Fraction], rel: Mapping[object, float], k: int
) -> dict:
    """``user_metrics``' definitions with each positive at a (rational) place instead of an
    integer rank: a hit at k where place <= k; P@i at a hit = (hits at places <= its
    place) / place; 1/place for MRR and ARHR; 1/log2(place + 1) for DCG; p^(place - 1) for
    RBP. The thresholds compare rationals; the values are doubles of the rounded places."""
    n_rel = len(rel)
    hits = sorted((place, item) for item, place in places.items() if place <= k)
    at = [float(place) for place, _ in hits]
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum((2.0**g - 1.0) / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    precision, recall = len(hits) / k, len(hits) / n_rel
    cut = min(k, n_rel)
    return {
        "precision": precision,
        "recall": recall,
        "hit_rate": 1.0 if hits else 0.0,
        "mrr": 1.0 / at[0] if hits else 0.0,
        "map": sum(j / p for j, p in enumerate(at, start=1)) / cut,
        "ndcg": sum((2.0 ** rel[item] - 1.0) / math.log2(float(place) + 1) for place, item in hits)
        / idcg,
        "arhr": sum(1.0 / p for p in at) / n_rel,
        "f1": 0.0 if not hits else 2.0 * precision * recall / (precision + recall),
        "f_beta": 0.0
        if not hits
        else (1 + F_BETA**2) * precision * recall / (F_BETA**2 * precision + recall),
        "r_precision": sum(1 for place, _ in hits if place <= cut) / cut,
        "rbp": (1 - RBP_PERSISTENCE) * sum(RBP_PERSISTENCE ** (p - 1) for p in at),
    }


def item_neighbours(
    pairs: Iterable[tuple[object, object]], neighbours: int
) -> dict[tuple[object, object], tuple[float, int]]:
    """Item-kNN's neighbour table from its definition (DESIGN §4, docs/evaluation.md):
    (item i, neighbour j) -> (sim(i, j), rank) for each item's ``neighbours`` most similar
    other items, sim(i, j) = |U_i ∩ U_j| / sqrt(|U_i| |U_j|) over the distinct (user, item)
    ``pairs``, ranked by the exact rational sim² (Fraction), ties by item id, items without a
    common user left out; the similarity as one rounding of sqrt(|U_i ∩ U_j|² / (|U_i| |U_j|))
    (Python's int division is correctly rounded). The counts are a dense 0/1 matrix product."""
    frame = pd.DataFrame(list(set(pairs)), columns=[USER, ITEM])
    users = sorted(frame[USER].unique())
    items = sorted(frame[ITEM].unique())
    row = {u: n for n, u in enumerate(users)}
    col = {i: n for n, i in enumerate(items)}
    x = np.zeros((len(users), len(items)), dtype=np.int64)
    x[[row[u] for u in frame[USER]], [col[i] for i in frame[ITEM]]] = 1
    both = x.T @ x
    support = x.sum(axis=0)
    table: dict[tuple[object, object], tuple[float, int]] = {}
    for a, item in enumerate(items):
        ranked = sorted(
            (-Fraction(int(both[a, b]) ** 2, int(support[b])), items[b], b)
            for b in np.flatnonzero(both[a])
            if b != a
        )
        for rank, (_, neighbour, b) in enumerate(ranked[:neighbours], start=1):
            square = int(both[a, b]) ** 2
            similarity = math.sqrt(square / (int(support[a]) * int(support[b])))
            table[(item, neighbour)] = (similarity, rank)
    return table
