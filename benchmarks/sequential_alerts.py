"""Nightly alert rules on simulated quarters: how often a per-night paired t-test rule fires on
noise, how often the always-valid sequential rule does, and how soon each catches a real 2%
drop of NDCG@10 (docs/nightly.md#always-valid-sequential-rules).

The model (numpy only, seeded): the same N users are evaluated every night; user u's NDCG@10 on
night n is mu_u + delta_n + e_un with independent per-user noise e ~ N(0, sigma^2) (sigma 0.30:
per-user NDCG@10 values spread over [0, 1]), the mean level 0.25, delta_n = 0 on null nights and
-2% of the level (-0.005) from the change night on. Only each night's mean noise (N(0,
sigma^2 / N)) and the sample variance of the per-user differences (sigma_d^2 chi^2_{N-1} /
(N - 1), independent of the mean for Gaussian noise) are drawn, so a quarter costs O(nights),
not O(nights x users).

Rules, each watching one model's NDCG@10 from the rule's start over H = 90 nights:
  t-test   the significance-aware rule: tonight's per-user values against last night's, paired
           t-test (two-sided alpha 0.05, normal quantile: N >= 1,000), firing on a worsening;
           ``+2% gate``: also tonight's mean more than 2% below the trailing 7-night mean
           (``max_relative_drop: 0.02``, the rule's usual companion)
  sequential  ``significance: sequential``: each night's paired mean difference against the
           users' means over the W reference nights before the start, the mixture SPRT with
           the shared reference and a change that may begin on any of the 90 nights
           (receval_spark/sequential.py; ``horizon: 90``), alpha 0.05, tau = 2% of the
           reference level (``max_relative_drop: 0.02``)

    python benchmarks/sequential_alerts.py [--quarters 2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

LEVEL, SIGMA, DROP, ALPHA, NIGHTS = 0.25, 0.30, 0.02, 0.05, 90
Z = 1.959963984540054  # the two-sided 5% normal quantile


def night_noise(rng: np.random.Generator, quarters: int, nights: int, users: int) -> np.ndarray:
    """Each night's mean per-user noise, (quarters, nights)."""
    return rng.normal(0.0, SIGMA / np.sqrt(users), size=(quarters, nights))


def sample_sd(rng: np.random.Generator, shape: tuple[int, int], users: int, sd: float):
    """Sample standard deviations of ``users`` Gaussian differences of standard deviation sd."""
    return sd * np.sqrt(rng.chisquare(users - 1, size=shape) / (users - 1))


def t_test_alarms(
    rng: np.random.Generator, levels: np.ndarray, users: int, *, gate: bool
) -> np.ndarray:
    """(quarters, NIGHTS) alarms of the per-night rule; ``levels`` holds 7 earlier nights
    first (the trailing mean of the gate) and the night before the start."""
    quarters = levels.shape[0]
    diff = np.diff(levels, axis=1)[:, -NIGHTS:]
    sd = sample_sd(rng, (quarters, NIGHTS), users, SIGMA * np.sqrt(2))
    alarms = diff / (sd / np.sqrt(users)) < -Z
    if gate:
        windows = np.lib.stride_tricks.sliding_window_view(levels[:, :-1], 7, axis=1)
        trailing = windows.mean(axis=2)[:, -NIGHTS:]
        alarms &= (levels[:, -NIGHTS:] - trailing) / trailing < -DROP
    return alarms


def sequential_alarms(
    rng: np.random.Generator, levels: np.ndarray, users: int, window: int
) -> np.ndarray:
    """(quarters, NIGHTS) alarms of the sequential rule: ``levels`` holds the ``window``
    reference nights first, then the NIGHTS nights since the start."""
    reference = levels[:, :window].mean(axis=1, keepdims=True)
    y = levels[:, window:] - reference
    sd = sample_sd(rng, y.shape, users, SIGMA * np.sqrt(1 + 1 / window))
    log_ratio, worse = mixture_log_ratios(y, sd**2 / users, window)
    crossed = np.maximum.accumulate(log_ratio, axis=1) >= np.log(1 / ALPHA)
    return crossed & worse


def mixture_log_ratios(
    y: np.ndarray, variance: np.ndarray, window: int, tau: float = DROP * LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """log Λ_n after each night n of each quarter (rows) and whether the heaviest change
    night's estimate is a worsening: the rule's statistic (receval_spark/sequential.py,
    ``horizon`` = NIGHTS), vectorised over quarters with cumulative sums."""
    shared = 1.0 / (window + 1)
    inverse = 1.0 / ((1 - shared) * variance)
    root = np.sqrt(shared * variance)
    zero = np.zeros((y.shape[0], 1))
    a_sum, b_sum, p = (np.hstack([zero, np.cumsum(inverse * v, axis=1)]) for v in (1.0, y, root))
    q, ry = np.cumsum(inverse * root**2, axis=1), np.cumsum(inverse * root * y, axis=1)
    log_ratio, worse = np.empty_like(y), np.empty_like(y, dtype=bool)
    for n in range(y.shape[1]):  # night n: change nights c = 0..n, then NIGHTS - n - 1 pending
        suffix_p = p[:, n + 1 : n + 2] - p[:, : n + 1]
        a = a_sum[:, n + 1 : n + 2] - a_sum[:, : n + 1] - suffix_p**2 / (1 + q[:, n : n + 1])
        b = b_sum[:, n + 1 : n + 2] - b_sum[:, : n + 1]
        b = b - suffix_p * ry[:, n : n + 1] / (1 + q[:, n : n + 1])
        logs = tau**2 * b**2 / (2 * (1 + tau**2 * a)) - 0.5 * np.log1p(tau**2 * a)
        pending = np.full((y.shape[0], 1), np.log(NIGHTS - n - 1) if n + 1 < NIGHTS else -np.inf)
        log_ratio[:, n] = np.logaddexp.reduce(np.hstack([logs, pending]), axis=1) - np.log(NIGHTS)
        top = logs.argmax(axis=1)
        worse[:, n] = b[np.arange(y.shape[0]), top] < 0
    return log_ratio, worse


def levels_of(
    rng: np.random.Generator, quarters: int, before: int, users: int, change: int | None
) -> np.ndarray:
    """Nightly mean levels: ``before`` nights, then NIGHTS since the start, dropping by 2% from
    night ``change`` (0-based, since the start) on; None: no change."""
    levels = LEVEL + night_noise(rng, quarters, before + NIGHTS, users)
    if change is not None:
        levels[:, before + change :] -= DROP * LEVEL
    return levels


def first_alarm(alarms: np.ndarray) -> np.ndarray:
    """The first alarm night of each quarter (0-based), -1 without one."""
    return np.where(alarms.any(axis=1), alarms.argmax(axis=1), -1)


def null_rates(rng: np.random.Generator, quarters: int) -> None:
    """Share of null quarters with at least one alarm, and mean alarms per quarter."""
    print("null quarters (no change), 90 nights each:")
    for users in (1_000, 10_000):
        levels = levels_of(rng, quarters, 8, users, None)
        rules = {
            "t-test": t_test_alarms(rng, levels, users, gate=False),
            "t-test +2% gate": t_test_alarms(rng, levels, users, gate=True),
            "sequential W=7": sequential_alarms(rng, levels[:, 1:], users, 7),
        }
        levels28 = levels_of(rng, quarters, 28, users, None)
        rules["sequential W=28"] = sequential_alarms(rng, levels28, users, 28)
        for name, alarms in rules.items():
            any_alarm = alarms.any(axis=1).mean()
            print(
                f"  N={users:>6,}  {name:<16} quarters with >= 1 false alarm "
                f"{100 * any_alarm:5.1f}%   false alarms per quarter {alarms.sum(1).mean():.2f}"
            )


def delays(rng: np.random.Generator, quarters: int) -> None:
    """Nights from the change to the first alarm (median, 90th percentile) and the share of
    quarters caught within the quarter, per change night and user count."""
    print("a 2% drop of NDCG@10 (0.25 -> 0.245) from night c on:")
    for users in (1_000, 10_000, 100_000):
        for window in (7, 28):
            for change in (0, 30, 60):
                levels = levels_of(rng, quarters, window, users, change)
                alarms = sequential_alarms(rng, levels, users, window)[:, change:]
                first = first_alarm(alarms)
                caught = first >= 0
                median, p90 = (
                    np.percentile(first[caught], [50, 90]) if caught.any() else (np.nan,) * 2
                )
                t_levels = levels_of(rng, quarters, 8, users, change)
                t_first = first_alarm(t_test_alarms(rng, t_levels, users, gate=False)[:, change:])
                print(
                    f"  N={users:>7,} W={window:<2} c={change:<2}  sequential caught "
                    f"{100 * caught.mean():5.1f}% (delay median {median:.0f}, p90 {p90:.0f} "
                    f"nights)   t-test on the change night {100 * (t_first == 0).mean():5.1f}%"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quarters", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    null_rates(rng, args.quarters)
    delays(rng, args.quarters)
    print(
        f"{args.quarters} quarters per cell, seed {args.seed}: {time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    main()
