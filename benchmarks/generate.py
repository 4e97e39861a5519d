"""Deterministic generator of realistic interaction logs and candidate lists.

Zipf item popularity, log-normal (skewed) user activity, timestamps over one year, 1-3 of 20
categories per item, and a model's top-``n_candidates`` scored candidates per user.
Everything is drawn from one numpy Generator seeded by ``seed``: the same arguments give
byte-identical Parquet files.

    python benchmarks/generate.py --users 50000 --out /tmp/bench/1x
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

N_CATEGORIES = 20
YEAR_SECONDS = 365 * 24 * 3600
START = 1_700_000_000


def zipf_items(rng: np.random.Generator, n_items: int, size: int, exponent: float) -> np.ndarray:
    """Item ids 0..n_items-1 drawn with probability proportional to 1 / rank^exponent."""
    weights = 1.0 / np.arange(1, n_items + 1) ** exponent
    return rng.choice(n_items, size=size, p=weights / weights.sum())


def generate(
    *, users: int, items: int, mean_activity: float, n_candidates: int, seed: int, out: Path
) -> dict[str, int]:
    """Write interactions/, items/ and candidates/ Parquet under ``out``; return their sizes."""
    rng = np.random.default_rng(seed)
    activity = np.maximum(
        1, rng.lognormal(np.log(mean_activity) - 0.5, 1.0, size=users).astype(np.int64)
    )
    user_ids = np.repeat(np.arange(users, dtype=np.int64), activity)
    item_ids = zipf_items(rng, items, len(user_ids), exponent=1.05)
    timestamps = START + rng.integers(0, YEAR_SECONDS, size=len(user_ids))
    ratings = rng.choice(
        [1.0, 2.0, 3.0, 4.0, 5.0], size=len(user_ids), p=[0.06, 0.11, 0.27, 0.34, 0.22]
    )
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "user_id": user_ids,
                "item_id": item_ids.astype(np.int64),
                "timestamp": timestamps.astype(np.int64),
                "rating": ratings,
            }
        ),
        out / "interactions.parquet",
    )
    n_categories = rng.integers(1, 4, size=items)
    categories = [
        [f"c{c}" for c in rng.choice(N_CATEGORIES, size=n, replace=False)] for n in n_categories
    ]
    pq.write_table(
        pa.table({"item_id": np.arange(items, dtype=np.int64), "categories": categories}),
        out / "items.parquet",
    )
    candidate_users = np.repeat(np.arange(users, dtype=np.int64), n_candidates)
    candidate_items = zipf_items(rng, items, len(candidate_users), exponent=0.8)
    scores = rng.random(len(candidate_users))
    table = pa.table(
        {"user_id": candidate_users, "item_id": candidate_items.astype(np.int64), "score": scores}
    )
    # one row per (user, item): keep the first draw of a repeated item
    keys = candidate_users * items + candidate_items
    _, first = np.unique(keys, return_index=True)
    pq.write_table(table.take(np.sort(first)), out / "candidates.parquet")
    return {"interactions": len(user_ids), "items": items, "candidates": len(first)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--mean-activity", type=float, default=20.0)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sizes = generate(
        users=args.users,
        items=args.items,
        mean_activity=args.mean_activity,
        n_candidates=args.candidates,
        seed=args.seed,
        out=args.out,
    )
    print(sizes)


if __name__ == "__main__":
    main()
