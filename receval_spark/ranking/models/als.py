"""Spark ML ALS on the train interactions (implicit or explicit): a candidate model, a rating
predictor, and (implicit) item factors that serve as item embeddings where the data has none."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import reduce
from itertools import combinations

from pyspark.ml.recommendation import ALS, ALSModel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from receval_spark.cache import keep, persist
from receval_spark.columns import ITEM, RANK, RATING, SCORE, USER
from receval_spark.config.als import AlsParams
from receval_spark.ranking.models.common import dense_ids
from receval_spark.ranking.topk import rank_candidates

# users (and items) per block of the blocked top-m product: a block's score matrix and its
# per-user top-m queues stay small (Spark's default 4096 ran a 1 GiB driver out of heap with
# m ~ 2,700 on ml-latest-small)
BLOCK_SIZE = 1024
# A user's top m must reach k + |seen(u)| items for k to remain after seen-item filtering. One m
# for everyone, k + the longest history, makes every list as long as the heaviest user's: rows
# grow as users x the longest history. So users are grouped by tiers of their number of seen
# items, FIRST_TIER · TIER_BASE^j (j ≥ 0), each group asking for k + its users' longest
# history; tiers are merged where a group of its own costs more than the list rows it saves
# (BRANCH_ROWS: a group is one more blocked product, ~8 Spark jobs, about 1.6 s on local[2],
# the cost of ~0.5M list rows there).
FIRST_TIER = 64
TIER_BASE = 4
BRANCH_ROWS = 500_000


def als_item_embeddings(history: DataFrame, *, params: AlsParams) -> DataFrame:
    """(item_id, embedding array<double>): the item factors of ALS fitted on train with
    ``params`` (:func:`fit_als`; ``evaluation.embeddings`` asks for implicit ALS)."""
    fitted = fit_als(history, params=params)
    factors = fitted.model.itemFactors.withColumnRenamed("id", "_item")
    return factors.join(fitted.item_ids, on="_item").select(
        ITEM, F.col("features").cast("array<double>").alias("embedding")
    )


@dataclass(frozen=True)
class _Memo:
    """The last item embeddings fitted (:func:`memoized_item_embeddings`): the session they
    belong to, what they were fitted on and with, and the embeddings (kept)."""

    session: weakref.ref[SparkSession]
    key: tuple[AlsParams, tuple[int, int, int]]
    embeddings: DataFrame


_LAST: list[_Memo] = []  # at most one: item-sized, kept for the session's lifetime


def memoized_item_embeddings(history: DataFrame, *, params: AlsParams) -> DataFrame:
    """:func:`als_item_embeddings`, fitted once per session for the same training rows and
    ``params``: a notebook evaluating again on the same split reuses the last fit (about 50
    Spark jobs on ml-100k) instead of repeating it. The rows are identified by their count and
    two order-independent sums of row hashes (one Spark job); a fit is deterministic given its
    rows and params, so the reused embeddings equal a new fit's."""
    session = history.sparkSession
    key = (params, fingerprint(training_rows(history, implicit=params.implicit)))
    last = _LAST[0] if _LAST else None
    if last is not None and last.session() is session and last.key == key:
        return last.embeddings
    embeddings = keep(als_item_embeddings(history, params=params))
    _LAST[:] = [_Memo(weakref.ref(session), key, embeddings)]
    return embeddings


def fingerprint(rows: DataFrame) -> tuple[int, int, int]:
    """(rows, Σ xxhash64(row), Σ hash(row)) of ``rows``: exact integer sums (decimal), the
    same whatever the rows' order or partitioning."""
    columns = [F.col(c) for c in rows.columns]
    total = rows.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*columns).cast("decimal(38,0)")).alias("x"),
        F.sum(F.hash(*columns).cast("decimal(38,0)")).alias("h"),
    ).first()
    assert total is not None  # a global aggregate has one row
    return int(total["n"]), int(total["x"] or 0), int(total["h"] or 0)


def training_rows(history: DataFrame, *, implicit: bool) -> DataFrame:
    """The train rows ALS fits: (user_id, item_id), or explicit (user_id, item_id, rating) of
    the rows with a rating."""
    if implicit:  # implicit logs may lack ratings
        return history.select(USER, ITEM)
    return history.select(USER, ITEM, RATING).filter(F.col(RATING).isNotNull())


@dataclass(frozen=True)
class FittedAls:
    """A fitted Spark ML ALS model and the id maps between the log's ids and ALS's ints: the
    users and items of the training rows, each numbered 0..n-1 (:func:`dense_ids`)."""

    model: ALSModel
    user_ids: DataFrame  # (user_id, _user)
    item_ids: DataFrame  # (item_id, _item)


def fit_als(history: DataFrame, *, params: AlsParams) -> FittedAls:
    """ALS on ``history`` with ``params``. Implicit: confidence 1 + alpha · (number of
    interactions of the user with the item) (Hu, Koren, Volinsky 2008); explicit: the mean train
    rating of each (user, item) (rows without a rating are left out). Users and items get dense,
    collision-free 32-bit numbers (:func:`dense_ids`), whatever the type of the log's ids, so
    no two users (or items) are ever fitted as one. ``params.blocks``: Spark ML's numUserBlocks
    and numItemBlocks (the factors depend on it, not on the cluster). Fitting runs Spark jobs."""
    implicit = params.implicit
    rows = training_rows(history, implicit=implicit)
    user_ids = persist(dense_ids(rows, USER, name="_user"))  # read by every later join
    item_ids = persist(dense_ids(rows, ITEM, name="_item"))
    numbered = rows.join(item_ids, on=ITEM).join(user_ids, on=USER)
    if implicit:
        training = numbered.groupBy("_user", "_item").agg(
            F.count(F.lit(1)).cast("float").alias("_r")
        )
    else:
        training = numbered.groupBy("_user", "_item").agg(F.avg(RATING).cast("float").alias("_r"))
    model = ALS(
        rank=params.rank,
        maxIter=params.max_iter,
        regParam=params.reg_param,
        alpha=params.alpha,
        implicitPrefs=implicit,
        seed=params.seed,
        numUserBlocks=params.blocks,
        numItemBlocks=params.blocks,
        userCol="_user",
        itemCol="_item",
        ratingCol="_r",
        coldStartStrategy="drop",
        blockSize=BLOCK_SIZE,
    ).fit(training)
    return FittedAls(model, user_ids, item_ids)


def als_candidates(fitted: FittedAls, users: DataFrame, *, m: int) -> DataFrame:
    """(user_id, item_id, score): ALS's top m items per user in ``users`` (m at least k plus
    the user's number of seen items leaves k after filtering them: :func:`tiered_als_candidates`).

    Top-m scoring is Spark ML's ``recommendForUserSubset``, a blocked product of user and item
    factor blocks keeping m items per user: no users x items table is materialised. Users
    without train rows get no candidates.
    """
    wanted = users.select(USER).join(fitted.user_ids, on=USER)
    recommended = fitted.model.recommendForUserSubset(wanted.select("_user").distinct(), m)
    return (
        recommended.select("_user", F.explode("recommendations").alias("_r"))
        .select("_user", F.col("_r._item").alias("_item"), F.col("_r.rating").alias(SCORE))
        .join(wanted, on="_user")
        .join(fitted.item_ids, on="_item")
        .select(USER, ITEM, F.col(SCORE).cast("double").alias(SCORE))
    )


@dataclass(frozen=True)
class SeenTiers:
    """Users grouped for top-m scoring. ``seen``: (user_id, item_id), the items filtered from
    their lists; ``bounds``: (user_id, _bound), each user's tier (the smallest
    FIRST_TIER · TIER_BASE^j not below its number of seen items); ``groups``: (the largest tier
    of the group, k + the group's longest history = its m), by tier."""

    seen: DataFrame
    bounds: DataFrame
    groups: list[tuple[int, int]]


def seen_tiers(seen: DataFrame, *, k: int) -> SeenTiers:
    """The :class:`SeenTiers` of the users of ``seen`` (Spark jobs: the users' tiers are
    materialised; one row per tier, at most log_TIER_BASE of the longest history, reaches the
    driver)."""
    counts = seen.groupBy(USER).agg(F.count(F.lit(1)).alias("_seen"))
    power = F.greatest(F.lit(0.0), F.ceil(F.log(float(TIER_BASE), F.col("_seen") / FIRST_TIER)))
    bound = (F.lit(FIRST_TIER) * F.pow(F.lit(float(TIER_BASE)), power)).cast("long")
    # a log rounded down at an exact power would leave the bound one tier short
    safe = F.when(bound < F.col("_seen"), bound * TIER_BASE).otherwise(bound)
    bounds = persist(counts.select(USER, safe.alias("_bound"), "_seen"))
    tiers = bounds.groupBy("_bound").agg(F.count(F.lit(1)), F.max("_seen")).collect()
    groups = tier_groups(sorted(map(tuple, tiers)), k=k)
    return SeenTiers(seen, bounds.select(USER, "_bound"), groups)


def tier_groups(tiers: list[tuple[int, int, int]], *, k: int) -> list[tuple[int, int]]:
    """(largest tier, m) per group from (tier, users, longest history) rows sorted by tier: the
    merge of adjacent tiers with the fewest list rows plus BRANCH_ROWS per group, where a
    group's rows are its users x (k + its longest history). No tiers: one group of m = k."""
    if not tiers:
        return [(FIRST_TIER, k)]
    best: tuple[int, list[tuple[int, int]]] | None = None
    for cuts in range(len(tiers)):
        for ends in combinations(range(len(tiers) - 1), cuts):
            groups, rows, start = [], 0, 0
            for end in (*ends, len(tiers) - 1):
                members = tiers[start : end + 1]
                m = k + max(most for _, _, most in members)
                rows += sum(users for _, users, _ in members) * m + BRANCH_ROWS
                groups.append((tiers[end][0], m))
                start = end + 1
            if best is None or rows < best[0]:
                best = (rows, groups)
    assert best is not None
    return best[1]


def tiered_als_candidates(
    fitted: FittedAls, users: DataFrame, *, k: int, tiers: SeenTiers | None
) -> DataFrame:
    """(user_id, item_id, score): enough of ALS's best items per user in ``users`` that the top
    k after filtering the user's seen items (``tiers.seen``) are exact, ties by item id
    included. Each user gets the top m of its group in ``tiers`` (users without seen items: the
    first group); a user whose k-th unseen item scores the same as the last of its m (a tie
    that may continue beyond m, where Spark ML's top-m cuts it arbitrarily) gets every item.
    Without ``tiers`` (no seen-item filtering): the top k. Spark jobs: the lists are
    materialised, and the tied users counted."""
    if tiers is None:
        return als_candidates(fitted, users, m=k)
    wanted = users.select(USER).join(tiers.bounds, on=USER, how="left")
    bound = F.coalesce(F.col("_bound"), F.lit(FIRST_TIER))
    parts, above = [], 0
    for largest, m in tiers.groups:
        part = als_candidates(fitted, wanted.filter((bound > above) & (bound <= largest)), m=m)
        parts.append(part.withColumn("_m", F.lit(m)))
        above = largest
    retrieved = persist(reduce(DataFrame.unionByName, parts))
    kth = rank_candidates(retrieved, k=k, seen=tiers.seen).filter(F.col(RANK) == k)
    last = retrieved.groupBy(USER).agg(
        F.min(SCORE).alias("_last"), F.count(F.lit(1)).alias("_n"), F.max("_m").alias("_m")
    )
    tied = (
        last.join(kth, on=USER)
        .filter((F.col("_n") == F.col("_m")) & (F.col(SCORE) == F.col("_last")))
        .select(USER)
    )
    lists = retrieved.drop("_m")
    if tied.isEmpty():
        return lists
    everything = als_candidates(fitted, tied, m=fitted.item_ids.count())
    return lists.join(tied, on=USER, how="left_anti").unionByName(everything)


def als_scores(fitted: FittedAls, pairs: DataFrame) -> DataFrame:
    """(user_id, item_id, score) for the distinct (user, item) ``pairs``: the factor dot
    product (explicit ALS: the predicted rating); null where the user or the item has no
    train rows."""
    pairs = pairs.select(USER, ITEM).distinct()
    known = pairs.join(fitted.user_ids, on=USER).join(fitted.item_ids, on=ITEM)
    predicted = fitted.model.transform(known).select(
        USER, ITEM, F.col("prediction").cast("double").alias(SCORE)
    )
    return pairs.join(predicted, on=[USER, ITEM], how="left")
