"""The numpy side of item-kNN's neighbour table (:func:`~receval_spark.ranking.models.item_knn.
item_neighbours`): one block of items -> each item's most similar other items.

Spark runs :func:`neighbours_kernel` as a pandas UDF on the executors, which do not import
this package: :mod:`receval_spark.ranking.models.item_knn` registers this module with
cloudpickle to be shipped by value, so everything here uses numpy, pandas, scipy and
constants only.

Items are numbered 0..n-1 in item-id order. A block is the items numbered ``lo`` to ``hi - 1``
with every train (user, item) pair of the users who have one of them. Their co-occurrence
counts |U_a ∩ U_j|, for every a of the block and every item j, are one sparse product
X_A^T X of the users' 0/1 rows: exact integers. Each item's neighbours are then ordered as the
rationals |U_a ∩ U_j|² / |U_j| (the order of the cosines, |U_a| being common), exactly: by the
integer part and the first 18 decimals as two floors of 9 digits, integer division only
(:func:`~receval_spark.expressions.cosine_order` computes the same keys in Spark), then by item
number, that is by item id; the first ``neighbours`` are kept with their rank.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pandas as pd

from receval_spark.columns import USER

DIGITS = 10**9  # the decimals of an order key come in two floors of 9 digits
Longs = npt.NDArray[np.int64]


def exact_order(a: Longs, b: Longs, both: Longs, support: Longs) -> Longs:
    """The positions of the pairs (a, b) sorted by a, then by both² / support descending
    (exact while supports are at most 10^9 and both² fits a long), then by b."""
    square = both * both
    whole = square // support
    rest = square % support
    first = rest * DIGITS // support
    second = rest * DIGITS % support * DIGITS // support
    order: Longs = np.lexsort((b, -second, -first, -whole, a))
    return order


def ranks_within(groups: Longs) -> Longs:
    """1, 2, ... along each run of equal values of the sorted ``groups``."""
    if len(groups) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(groups[1:] != groups[:-1]) + 1]
    lengths = np.diff(np.r_[starts, len(groups)])
    ranks: Longs = np.arange(len(groups)) - np.repeat(starts, lengths) + 1
    return ranks


def neighbours_kernel(
    *, items: int, block_items: int, neighbours: int
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The pandas UDF of one block (``_block``; rows user_id, ``_number`` 0..``items`` - 1,
    ``_n`` = |U| of the item) -> (``_a``, ``_b``, ``_both``, ``_nb``, neighbour_rank): each
    block item a's ``neighbours`` most similar other items b with |U_a ∩ U_b| and |U_b|."""
    from scipy import sparse

    def kernel(rows: pd.DataFrame) -> pd.DataFrame:
        users, user = np.unique(rows[USER].to_numpy(), return_inverse=True)
        number = rows["_number"].to_numpy().astype(np.int64)
        ones = np.ones(len(number), dtype=np.int64)
        x = sparse.csr_matrix((ones, (user, number)), shape=(len(users), items))
        low = int(rows["_block"].iloc[0]) * block_items
        counts = (x[:, low : low + block_items].T @ x).tocoo()
        a = counts.row.astype(np.int64) + low
        b = counts.col.astype(np.int64)
        other = a != b
        a, b, both = a[other], b[other], counts.data.astype(np.int64)[other]
        support = np.zeros(items, dtype=np.int64)
        support[number] = rows["_n"].to_numpy()
        order = exact_order(a, b, both, support[b])
        rank = ranks_within(a[order])
        kept = order[rank <= neighbours]
        return pd.DataFrame(
            {
                "_a": a[kept].astype(np.int32),
                "_b": b[kept].astype(np.int32),
                "_both": both[kept],
                "_nb": support[b[kept]],
                "neighbour_rank": rank[rank <= neighbours].astype(np.int32),
            }
        )

    return kernel
