"""Deterministic generator of realistic interaction logs and candidate lists.

Zipf item popularity, log-normal (skewed) user activity, timestamps over one year, 1-3 of 20
categories per item, and a model's top-``n_candidates`` scored candidates per user.
Everything is drawn from one numpy Generator seeded by ``seed``: the same arguments give
byte-identical Parquet files.

The named scales (``SCALES``) are the comparison data of ``side_by_side.py``: users arrive
through the year and stay active for an exponential number of days, the test period is the
part of the year after ``cutoff`` (written to ``meta.json``), and candidates are a model's
top-``n_candidates`` for each *test* user, drawn from items the user did not interact with
before the cutoff, with each of the user's test items included with probability 0.3 and
scored higher (a model with some signal).

    python benchmarks/generate.py --users 50000 --out /tmp/bench/1x
    python benchmarks/generate.py --scale medium --out /tmp/receval-bench/medium
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

N_CATEGORIES = 20
YEAR_SECONDS = 365 * 24 * 3600
START = 1_700_000_000
DAY = 24 * 3600

SCALES = {
    "small": {"users": 5_000},
    "medium": {"users": 100_000},
    "large": {"users": 1_000_000},
}
SCALE_DEFAULTS = {
    "items": 20_000,
    "mean_activity": 20.0,
    "n_candidates": 100,
    "seed": 7,
    "active_days": 90.0,
    "cutoff": 0.8,
}


def zipf_items(rng: np.random.Generator, n_items: int, size: int, exponent: float) -> np.ndarray:
    """Item ids 0..n_items-1 drawn with probability proportional to 1 / rank^exponent."""
    weights = 1.0 / np.arange(1, n_items + 1) ** exponent
    return rng.choice(n_items, size=size, p=weights / weights.sum())


def _timestamps(
    rng: np.random.Generator, activity: np.ndarray, active_days: float | None
) -> np.ndarray:
    """Uniform over the year, or uniform over each user's active span (arrival uniform over the
    year, span Exponential(active_days) days, clipped to the year)."""
    if active_days is None:
        return START + rng.integers(0, YEAR_SECONDS, size=int(activity.sum()))
    arrival = rng.integers(0, YEAR_SECONDS, size=len(activity))
    span = np.minimum(
        rng.exponential(active_days * DAY, size=len(activity)), YEAR_SECONDS - arrival
    )
    offsets = np.repeat(arrival, activity) + rng.random(int(activity.sum())) * np.repeat(
        span, activity
    )
    return START + offsets.astype(np.int64)


def _candidates(
    rng: np.random.Generator,
    *,
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    timestamps: np.ndarray,
    items: int,
    n_candidates: int,
    cut: int | None,
    users: int,
) -> pa.Table:
    """(user_id, item_id, score), one row per (user, item): every user's draws, or, with a
    cut-off timestamp ``cut``, the test users' draws minus their train items plus 30% of their
    test items."""
    if cut is None:
        candidate_users = np.arange(users, dtype=np.int64)
    else:
        test = timestamps >= cut
        candidate_users = np.unique(user_ids[test])
    rows_user = np.repeat(candidate_users, n_candidates)
    rows_item = zipf_items(rng, items, len(rows_user), exponent=0.8)
    scores = rng.random(len(rows_user))
    if cut is not None:
        train_keys = np.unique(user_ids[~test] * items + item_ids[~test])
        unseen = ~np.isin(rows_user * items + rows_item, train_keys)
        known = rng.random(int(test.sum())) < 0.3
        rows_user = np.concatenate([user_ids[test][known], rows_user[unseen]])
        rows_item = np.concatenate([item_ids[test][known], rows_item[unseen]])
        scores = np.concatenate([0.5 + rng.random(int(known.sum())), scores[unseen]])
        # a test item the user also had in train is not a candidate either
        unseen = ~np.isin(rows_user * items + rows_item, train_keys)
        rows_user, rows_item, scores = rows_user[unseen], rows_item[unseen], scores[unseen]
    # one row per (user, item): keep the first draw of a repeated item
    _, first = np.unique(rows_user * items + rows_item, return_index=True)
    first = np.sort(first)
    return pa.table(
        {
            "user_id": rows_user[first],
            "item_id": rows_item[first].astype(np.int64),
            "score": scores[first],
        }
    )


def generate(
    *,
    users: int,
    items: int,
    mean_activity: float,
    n_candidates: int,
    seed: int,
    out: Path,
    active_days: float | None = None,
    cutoff: float | None = None,
) -> dict[str, int]:
    """Write interactions/, items/ and candidates/ Parquet under ``out``; return their sizes.

    ``active_days``: users arrive through the year and stay active that many days on average
    (None: every user active all year). ``cutoff``: the fraction of the year where the test
    period starts; candidates are then generated for test users only (see the module doc).
    """
    rng = np.random.default_rng(seed)
    cut = None if cutoff is None else START + int(cutoff * YEAR_SECONDS)
    activity = np.maximum(
        1, rng.lognormal(np.log(mean_activity) - 0.5, 1.0, size=users).astype(np.int64)
    )
    user_ids = np.repeat(np.arange(users, dtype=np.int64), activity)
    item_ids = zipf_items(rng, items, len(user_ids), exponent=1.05).astype(np.int64)
    timestamps = _timestamps(rng, activity, active_days)
    ratings = rng.choice(
        [1.0, 2.0, 3.0, 4.0, 5.0], size=len(user_ids), p=[0.06, 0.11, 0.27, 0.34, 0.22]
    )
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "user_id": user_ids,
                "item_id": item_ids,
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
    candidates = _candidates(
        rng,
        user_ids=user_ids,
        item_ids=item_ids,
        timestamps=timestamps,
        items=items,
        n_candidates=n_candidates,
        cut=cut,
        users=users,
    )
    pq.write_table(candidates, out / "candidates.parquet")
    sizes = {"interactions": len(user_ids), "items": items, "candidates": candidates.num_rows}
    if cut is not None:
        test = timestamps >= cut
        sizes |= {
            "users": users,
            "cutoff": cut,
            "train_interactions": int((~test).sum()),
            "test_interactions": int(test.sum()),
            "test_users": int(np.unique(user_ids[test]).size),
        }
        (out / "meta.json").write_text(json.dumps(sizes, indent=2))
    return sizes


def generate_scale(scale: str, out: Path) -> dict[str, int]:
    """Generate one named scale (SCALES) into ``out`` unless it is already there; its sizes."""
    if not (out / "meta.json").exists():
        generate(**SCALE_DEFAULTS, **SCALES[scale], out=out)
    return json.loads((out / "meta.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), help="a named scale (SCALES)")
    parser.add_argument("--users", type=int)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--mean-activity", type=float, default=20.0)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.scale is not None:
        print(generate_scale(args.scale, args.out))
        return
    if args.users is None:
        parser.error("give --scale or --users")
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
