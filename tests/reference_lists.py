"""Independent reference for the beyond-accuracy metrics that read more than one list or the
users' histories (DESIGN §6): miscalibration, awrf, exposure_gap, intersection, agreement_rbo
and unexpectedness. Written from the definitions in DESIGN.md and the papers (Steck 2018;
Sapiezynski et al. 2019 as the TREC Fair Ranking track scores it; Diaz et al. 2020; Webber,
Moffat & Zobel 2010), in plain Python over collected lists, never from the Spark code.

``ranked``: a pandas frame (model, user_id, item_id, rank) of top-max(k) lists.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import reference as ref
from scipy.spatial.distance import jensenshannon

ALPHA = 0.01
HEAD, TAIL = "items=head", "items=tail"


def ordered_lists(ranked: pd.DataFrame, model: str, k: int) -> dict[object, list[object]]:
    """user -> the model's items of rank <= k, best first."""
    rows = ranked[(ranked["model"] == model) & (ranked["rank"] <= k)].sort_values("rank")
    lists: dict[object, list[object]] = {}
    for user, item in zip(rows["user_id"], rows["item_id"], strict=True):
        lists.setdefault(user, []).append(item)
    return lists


def category_distribution(items: Iterable[object], categories: Mapping[object, set]) -> dict:
    """Mean over the described ``items`` of each item's categories weighted 1 / |C_i|."""
    described = [i for i in items if categories.get(i)]
    counts: Counter[str] = Counter()
    for item in described:
        for c in categories[item]:
            counts[c] += 1 / len(categories[item])
    return {c: v / len(described) for c, v in counts.items()} if described else {}


def miscalibration(
    lists: Mapping[object, list[object]],
    history: Mapping[object, set[object]],
    categories: Mapping[object, set],
    alpha: float = ALPHA,
) -> dict[object, float]:
    """Steck's KL(p || (1 - alpha) q + alpha p) per user with a described history and list."""
    out = {}
    for user, items in lists.items():
        p = category_distribution(history.get(user, ()), categories)
        q = category_distribution(items, categories)
        if p and q:
            out[user] = sum(
                pc * math.log(pc / ((1 - alpha) * q.get(c, 0.0) + alpha * pc))
                for c, pc in p.items()
            )
    return out


def attention(rank: int) -> float:
    return 1 / math.log2(rank + 1)


def group_of(item: object, head: set[object]) -> str:
    return HEAD if item in head else TAIL


def targets(catalogue: Iterable[object], head: set[object]) -> dict[str, float]:
    """Each group's share of the catalogue items."""
    items = list(catalogue)
    counts = Counter(group_of(i, head) for i in items)
    return {g: n / len(items) for g, n in counts.items()}


def list_exposure(items: Sequence[object], head: set[object]) -> dict[str, float]:
    """The list's attention on each group, unnormalised."""
    exposure: Counter[str] = Counter()
    for rank, item in enumerate(items, start=1):
        exposure[group_of(item, head)] += attention(rank)
    return dict(exposure)


def awrf(lists: Mapping[object, list[object]], head: set[object], target: Mapping[str, float]):
    """1 - the base-2 Jensen-Shannon distance of each list's attention shares and the target."""
    groups = sorted(set(target) | {HEAD, TAIL})
    t = np.array([target.get(g, 0.0) for g in groups])
    out = {}
    for user, items in lists.items():
        exposure = list_exposure(items, head)
        e = np.array([exposure.get(g, 0.0) for g in groups])
        out[user] = 1 - float(jensenshannon(e / e.sum(), t, base=2))
    return out


def exposure_gap(
    lists: Mapping[object, list[object]], head: set[object], target: Mapping[str, float]
) -> tuple[float, int, float]:
    """(½ Σ_g |E_g - t_g|, users, std): std = sqrt(U) times the delta-method standard error,
    sqrt(U / (U - 1) · Σ_u g_u²), g_u = ∂gap/∂w_u at w = 1 for the weighted gap
    ½ Σ_g |Σ_u w_u a_ug / Σ_u w_u a_u - t_g|."""
    per_user = {u: list_exposure(items, head) for u, items in lists.items()}
    groups = sorted(set(target) | {g for e in per_user.values() for g in e})
    a_g = {g: sum(e.get(g, 0.0) for e in per_user.values()) for g in groups}
    total = sum(a_g.values())
    shares = {g: a_g[g] / total for g in groups}
    gap = 0.5 * sum(abs(shares[g] - target.get(g, 0.0)) for g in groups)
    signs = {g: float(np.sign(shares[g] - target.get(g, 0.0))) for g in groups}
    gradients = []
    for exposure in per_user.values():
        a_u = sum(exposure.values())
        gradients.append(
            0.5 * sum(signs[g] * (exposure.get(g, 0.0) - shares[g] * a_u) for g in groups) / total
        )
    n = len(per_user)
    se = math.sqrt(n / (n - 1) * sum(x * x for x in gradients))
    return gap, n, se * math.sqrt(n)


def agreement(
    lists: Mapping[object, list[object]], others: Mapping[object, list[object]], p: float
) -> tuple[dict, dict, dict]:
    """(intersection, RBO_ext, unexpectedness) per user with a list on both sides."""
    shared = [u for u in lists if u in others and lists[u] and others[u]]
    intersection = {u: len(set(lists[u]) & set(others[u])) / len(lists[u]) for u in shared}
    rbo = {u: ref.rbo_ext(lists[u], others[u], p) for u in shared}
    unexpected = {u: len(set(lists[u]) - set(others[u])) / len(lists[u]) for u in shared}
    return intersection, rbo, unexpected


def list_metrics(
    ranked: pd.DataFrame,
    *,
    models: Sequence[str],
    ks: Sequence[int],
    train: pd.DataFrame,
    categories: Mapping[object, set] | None,
    reference_model: str,
    persistence: float = 0.9,
) -> pd.DataFrame:
    """(model, metric, k, value, n_users, std) of the six metrics (macro averages over users,
    std ddof = 1; exposure_gap as :func:`exposure_gap`); head and catalogue from ``train``."""
    head = ref.head_items(train)
    target = targets(train["item_id"].unique(), head)
    history = train.groupby("user_id")["item_id"].apply(set).to_dict()
    rows = []
    for model in models:
        for k in ks:
            lists = ordered_lists(ranked, model, k)
            theirs = ordered_lists(ranked, reference_model, k)
            per_user = {"awrf": awrf(lists, head, target)}
            if categories is not None:
                per_user["miscalibration"] = miscalibration(lists, history, categories)
            (
                per_user["intersection"],
                per_user["agreement_rbo"],
                per_user["unexpectedness"],
            ) = agreement(lists, theirs, persistence)
            for metric, values in per_user.items():
                series = np.array(list(values.values()), dtype=float)
                rows.append((model, metric, k, float(series.mean()), len(series), _std(series)))
            gap, n, std = exposure_gap(lists, head, target)
            rows.append((model, "exposure_gap", k, gap, n, std))
    return pd.DataFrame(rows, columns=["model", "metric", "k", "value", "n_users", "std"])


def _std(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")


def auc(
    lists: Mapping[object, list[object]],
    relevant: Mapping[object, set[object]],
    catalogue: set[object],
    seen: Mapping[object, set[object]],
    k: int,
) -> dict[object, float]:
    """AUC per user by the Mann-Whitney rank sum: the items of R_k(u) score -rank, every other
    positive or negative -(k + 1) (tied below); positives Rel(u), negatives the catalogue items
    outside Rel(u) and the user's seen items; U / (P N) with average ranks for ties."""
    from scipy.stats import rankdata

    out = {}
    for user, positives in relevant.items():
        negatives = catalogue - positives - seen.get(user, set())
        if not negatives:
            continue
        position = {item: r for r, item in enumerate(lists.get(user, [])[:k], start=1)}
        items = [*positives, *negatives]
        ranks = rankdata([-position.get(i, k + 1) for i in items])
        p, n = len(positives), len(negatives)
        out[user] = (float(ranks[:p].sum()) - p * (p + 1) / 2) / (p * n)
    return out
