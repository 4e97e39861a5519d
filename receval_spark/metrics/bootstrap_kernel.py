"""The numpy side of the Poisson bootstrap of the group statistics (``bootstrap_blocks`` of
:mod:`receval_spark.metrics.bootstrap`): one item bucket's ranking rows -> its part of every
replicate's exposure blocks.

Spark runs :func:`replicate_blocks_kernel` as a pandas UDF on the executors, which do not
import this package: :mod:`receval_spark.metrics.bootstrap` registers this module with
cloudpickle to be shipped by value, so everything here uses numpy, pandas and constants only
(no Spark, no other module of the package is called).

The user weights are Spark's, bit for bit: W(user, b) = the Poisson(1) inverse CDF at the low
40 bits of Spark's ``xxhash64`` of the int b seeded with xxhash64(seed, user), the XXH64 hash
of Collet's specification (github.com/Cyan4973/xxHash, doc/xxhash_spec.md) as Spark's
``XXH64.hashInt`` computes it for one 4-byte input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from receval_spark.columns import ITEM, RANK
from receval_spark.metrics.aggregate import LIMB

POISSON_MAX = 16
CHUNK_ROWS = 32_768  # list rows per weight matrix in the bootstrap kernel (x B int32)

# XXH64's primes; hashInt adds the 4 bytes of its input to PRIME64_5
PRIME64_1 = np.uint64(0x9E3779B185EBCA87)
PRIME64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
PRIME64_3 = np.uint64(0x165667B19E3779F9)
PRIME64_5_PLUS_4 = np.uint64(0x27D4EB2F165667C5 + 4)

Hashes = npt.NDArray[np.uint64]
Counts = npt.NDArray[np.int64]
Doubles = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]


def poisson_thresholds() -> list[float]:
    """P(W <= w) for W ~ Poisson(1), w = 0 .. POISSON_MAX - 1 (P(W > 16) < 1e-14)."""
    cdf, term, thresholds = 0.0, math.exp(-1.0), []
    for w in range(POISSON_MAX):
        cdf += term
        term /= w + 1
        thresholds.append(cdf)
    return thresholds


def xxhash64_ints(values: Hashes, seeds: Hashes) -> Hashes:
    """Spark's ``xxhash64`` of each non-negative 32-bit int of ``values`` seeded with each of
    ``seeds`` (XXH64 ``hashInt``): a (seeds x values) matrix."""
    h = (seeds[:, None] + PRIME64_5_PLUS_4) ^ (values * PRIME64_1)[None, :]
    h = ((h << np.uint64(23)) | (h >> np.uint64(41))) * PRIME64_2 + PRIME64_3
    return _avalanche(h)


def _avalanche(h: Hashes) -> Hashes:
    """XXH64's final mix, in place on ``h`` (a fresh matrix of users x replicates: no copy)."""
    h ^= h >> np.uint64(33)
    h *= PRIME64_2
    h ^= h >> np.uint64(29)
    h *= PRIME64_3
    h ^= h >> np.uint64(32)
    return h


def uniform_40(h: Hashes) -> Doubles:
    """A hash to [0, 1): its low 40 bits / 2^40 (``receval_spark.expressions.uniform``)."""
    return (h & np.uint64((1 << 40) - 1)).astype(np.float64) / float(1 << 40)


def replicate_weights(seeds: Hashes, *, samples: int, thresholds: Doubles) -> npt.NDArray[np.int32]:
    """W(user, b) for b = 0 .. samples - 1 of each user hash of ``seeds`` (xxhash64(seed,
    user)): the smallest w with P(W <= w) > u (``thresholds``: :func:`poisson_thresholds`),
    as ``receval_spark.metrics.bootstrap.replicate_weight`` draws it in Spark."""
    u = uniform_40(xxhash64_ints(np.arange(samples, dtype=np.uint64), seeds))
    return np.searchsorted(thresholds, u, side="right").astype(np.int32)


def changes(n: int, *columns: npt.NDArray[np.generic]) -> Flags:
    """Of n sorted rows: True on the first and where any column differs from the row before."""
    changed = np.zeros(n, dtype=bool)
    changed[:1] = True
    for values in columns:
        changed[1:] |= values[1:] != values[:-1]
    return changed


class Exposure(NamedTuple):
    """Per (list group, item) held at some k, per replicate: f, s and q of
    ``weighted_exposure``; ``list_group`` = ranking group x len(cut-offs) + the k's index,
    ``item_row`` = a row of the (ranking group, item)."""

    list_group: Counts
    item_row: Counts
    f: Counts
    s: Doubles
    q: Doubles


def replicate_blocks_kernel(
    samples: int, *, keys: Sequence[str], ks: Sequence[int]
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The numpy side of ``bootstrap_blocks``: ranking rows (``keys``, item_id,
    n_interactions, in_catalogue, ``_h`` = xxhash64(seed, user), rank, ``n_ranked``) of whole
    (ranking group, item)s, any number of groups -> the bucket's part of every replicate's
    exposure blocks of every list group (``keys``, k) for k in ``ks``: (``keys``, k, replicate,
    f, in_catalogue, c, interactions, pair_h, pair_m, pair_l, lists).

    A row of rank r is in R_k(u) for every k >= r, whose size is min(k, n_ranked) (ranks run
    1..n_ranked). W(user, b) (:func:`replicate_weights`) is drawn once per distinct user of the
    call (a user's rows in every group and item share them). The weights are summed once per
    (group, item, n_ranked, smallest k holding the row) (:func:`segment_weights`); per k those
    sums give each (group, item, list size) and so f, s and q (:func:`exposure_at_each_k`);
    items with f > 0 are then grouped as in ``exposure_blocks`` (:func:`replicate_blocks`).
    Rows are summed in chunks of ``CHUNK_ROWS``, so memory is bounded by the chunk, the users
    (B int32 each) and the (group, item, n_ranked, k) sums.
    """
    thresholds = np.asarray(poisson_thresholds())
    keys = list(keys)
    cut_offs = np.asarray(sorted({int(k) for k in ks}), dtype=np.int64)
    chunk_rows = CHUNK_ROWS

    def kernel(rows: pd.DataFrame) -> pd.DataFrame:
        band = np.searchsorted(cut_offs, rows[RANK].to_numpy(), side="left")  # smallest k >= r
        rows = rows.assign(_band=band).sort_values(
            [*keys, ITEM, "n_ranked", "_band"], kind="stable", ignore_index=True
        )
        n = len(rows)
        new_group = changes(n, *(rows[key].to_numpy() for key in keys))
        new_item = new_group | changes(n, rows[ITEM].to_numpy())
        n_ranked, band = rows["n_ranked"].to_numpy(), rows["_band"].to_numpy()
        starts = np.flatnonzero(new_item | changes(n, n_ranked, band))  # (item, n_ranked, band)s
        per_segment = segment_weights(
            rows["_h"].to_numpy().view(np.uint64),
            starts,
            samples=samples,
            thresholds=thresholds,
            chunk_rows=chunk_rows,
        )
        exposure = exposure_at_each_k(
            per_segment, starts, new_group, new_item, n_ranked, band, cut_offs=cut_offs
        )
        group_rows = np.flatnonzero(new_group)
        return replicate_blocks(rows, exposure, group_rows, keys=keys, cut_offs=cut_offs)

    return kernel


def segment_weights(
    seeds: Hashes, starts: Counts, *, samples: int, thresholds: Doubles, chunk_rows: int
) -> Counts:
    """(segments x samples): per segment (the sorted rows from one of ``starts`` to the next),
    the sum of its rows' user weights in each replicate, from the rows' user hashes ``seeds``;
    summed ``chunk_rows`` rows at a time."""
    n = len(seeds)
    users, user_of_row = np.unique(seeds, return_inverse=True)
    user_weights = replicate_weights(users, samples=samples, thresholds=thresholds)
    segment_of_row = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    per_segment = np.zeros((len(starts), samples), dtype=np.int64)
    for lo in range(0, n, chunk_rows):
        hi = min(lo + chunk_rows, n)
        segments = segment_of_row[lo:hi]
        bounds = np.flatnonzero(changes(hi - lo, segments))
        chunk = user_weights[user_of_row[lo:hi]]
        per_segment[segments[bounds]] += np.add.reduceat(chunk, bounds, axis=0)
    return per_segment


def exposure_at_each_k(
    per_segment: Counts,
    starts: Counts,
    new_group: Flags,
    new_item: Flags,
    n_ranked: Counts,
    band: Counts,
    *,
    cut_offs: Counts,
) -> Exposure:
    """f, s and q of every (list group, item) held at some k, from the weight sums of the
    segments (:func:`segment_weights`): at cut-off k, the segments of band <= k's index, with
    list size min(n_ranked, k), summed per (item, size) then per item."""
    item_of_segment = (np.cumsum(new_item) - 1)[starts]
    item_rows = np.flatnonzero(new_item)  # a row of each (group, item)
    group_of_item = (np.cumsum(new_group) - 1)[item_rows]
    parts = []  # per k: the items its lists hold; the largest k holds every row
    segment_band, segment_n = band[starts], n_ranked[starts]
    for j, k in enumerate(cut_offs):
        held = np.flatnonzero(segment_band <= j)  # segments of rows of rank <= k
        if not len(held):  # the bucket's items are all ranked below k
            continue
        size = np.minimum(segment_n[held], k)  # ascending within an item
        item = item_of_segment[held]
        runs = np.flatnonzero(changes(len(held), item, size))  # one per (item, size)
        per_size = np.add.reduceat(per_segment[held], runs, axis=0)
        x = 1.0 / np.sqrt(size[runs].astype(np.float64))
        item_starts = np.flatnonzero(changes(len(runs), item[runs]))
        items = item[runs][item_starts]
        parts.append(
            (
                group_of_item[items] * len(cut_offs) + j,
                item_rows[items],
                np.add.reduceat(per_size, item_starts, axis=0),
                np.add.reduceat(per_size * x[:, None], item_starts, axis=0),
                np.add.reduceat(per_size * x[:, None] * x[:, None], item_starts, axis=0),
            )
        )
    return Exposure(*(np.concatenate(a) for a in zip(*parts, strict=True)))


def limbs(x: Doubles) -> tuple[Doubles, Doubles, Doubles]:
    """``exact_sum``'s fixed-point limbs of x: floor(x), floor((x - h) 2^31) and the floor of
    the rest times 2^31, so the buckets' long sums recombine bit for bit (``limb_sum``)."""
    h = np.floor(x)
    middle = (x - h) * LIMB
    m = np.floor(middle)
    return h, m, np.floor((middle - m) * LIMB)


def replicate_blocks(
    rows: pd.DataFrame, exposure: Exposure, group_rows: Counts, *, keys: list[str], cut_offs: Counts
) -> pd.DataFrame:
    """The kernel's output: the (list group, item, replicate)s with f > 0 grouped into blocks
    per (list group, replicate, f, in_catalogue), as ``exposure_blocks``: c items, the sum of
    their n_interactions, of (s^2 - q) / 2 (as :func:`limbs`) and of q, ``lists`` (over every
    item of a group, sum_i q_i = sum_u W(u, b) |R(u)| / |R(u)|, the replicate's number of
    lists: a double within far less than 1/2 of that integer). ``group_rows``: the first row
    of each ranking group of the sorted ``rows``."""
    held, replicate = np.nonzero(exposure.f)  # the (list group, item, replicate)s with f > 0
    first = exposure.item_row[held]  # a row of each
    s_held = exposure.s[held, replicate]
    h, m, low = limbs((s_held * s_held - exposure.q[held, replicate]) / 2)
    group = exposure.list_group[held]
    f_held = exposure.f[held, replicate]
    in_catalogue = rows["in_catalogue"].to_numpy()[first]
    order = np.lexsort((in_catalogue, f_held, replicate, group))
    key = [v[order] for v in (group, replicate, f_held, in_catalogue)]
    bounds = np.flatnonzero(changes(len(order), *key))  # one block per distinct key

    def total(values: npt.NDArray[np.generic], dtype: type[np.generic] = np.int64) -> Counts:
        """Per block, the sum of a value of the held (group, item, replicate)s."""
        ordered = values[order].astype(dtype)
        return np.add.reduceat(ordered, bounds) if len(bounds) else ordered

    block_group = key[0][bounds]
    out = rows.loc[group_rows[block_group // len(cut_offs)], keys]
    return out.reset_index(drop=True).assign(
        k=cut_offs[block_group % len(cut_offs)].astype(np.int32),
        replicate=key[1][bounds].astype(np.int32),
        f=key[2][bounds],
        in_catalogue=key[3][bounds],
        c=np.diff(np.r_[bounds, len(order)]).astype(np.int64),
        interactions=total(rows["n_interactions"].to_numpy()[first]),
        pair_h=total(h),
        pair_m=total(m),
        pair_l=total(low),
        lists=total(exposure.q[held, replicate], np.float64),
    )
