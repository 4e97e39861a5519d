"""The beyond-accuracy and night-over-night stability metrics' definitions
(docs/evaluation.md, "Beyond-accuracy metrics" and "Stability"), in registry order; every
reader takes them through receval_spark.registry."""

from __future__ import annotations

from receval_spark.citations import (
    ABDOLLAHPOURI_19,
    ABDOLLAHPOURI_19_LONG_TAIL,
    ADAMOPOULOS_14,
    DIAZ_20,
    GE_10,
    SAPIEZYNSKI_19,
    SHANI_11,
    STECK_18,
    VARGAS_14,
    WEBBER_10,
    ZHOU_10,
    ZIEGLER_05,
)
from receval_spark.metric_types import NON_NEGATIVE, SAME, Metric

BEYOND_METRICS: tuple[Metric, ...] = (
    # beyond accuracy (docs/evaluation.md, Beyond-accuracy metrics): over the non-empty top-k
    # lists of the evaluated users
    Metric(
        name="coverage",
        family="beyond",
        reference=GE_10,
        scope="group",
        formula="|(union of the R_k(u)) ∩ I| / |I|, I = items with a train interaction",
        bootstrapped=True,
        peers={
            "Recommenders": "`catalog_coverage`: distinct items of the lists as given (not cut "
            "at k; items outside train count) / distinct train items",
            "RePlay": "`Coverage`: distinct items of the top k / distinct items of the log it "
            "is given; unknown items can take it above 1",
            "RecBole": "`itemcoverage`: distinct items of the top k / all items of the dataset, "
            "including items no train interaction has",
        },
    ),
    Metric(
        name="gini",
        family="beyond",
        reference=SHANI_11,
        scope="group",
        formula="Σ_i (2i - n - 1) f_i / (n Σ_i f_i) over the n catalogue items by f ascending "
        "(0 = equal exposure)",
        larger_is_better=False,
        bootstrapped=True,
        peers={"RecBole": "`giniindex`: the same formula over all items of the dataset"},
    ),
    Metric(
        name="entropy",
        family="beyond",
        reference=SHANI_11,
        scope="group",
        formula="-Σ_i (f_i/F) log2(f_i/F), F = Σ_i f_i",
        bounds=NON_NEGATIVE,  # <= log2 |I|; not known where the interval is formed
        bootstrapped=True,
        peers={
            "Recommenders": f"`distributional_coverage`: {SAME} over the lists as given "
            "(some releases scale it by -2/|train items|)",
            "RecBole": "`shannonentropy`: natural log, divided by the number of distinct "
            "recommended items",
        },
    ),
    Metric(
        name="aplt",
        family="beyond",
        reference=ABDOLLAHPOURI_19_LONG_TAIL,
        scope="user",
        formula="|{i ∈ R_k(u) : i in the long tail}| / |R_k(u)|; long tail = the items outside "
        "the head (items=head: the most popular train items holding evaluation.head_share of "
        "the train interactions), items without a train interaction included",
        peers={
            "Recommenders": "none; its issue #2283 asks for APLT/ACLT",
            "RecBole": "`tailpercentage`: the same share, the tail being the least popular "
            "`tail_ratio` (default 10%) of the items, or those with at most that many "
            "interactions",
        },
    ),
    Metric(
        name="aclt",
        family="beyond",
        reference=ABDOLLAHPOURI_19_LONG_TAIL,
        scope="user",
        formula="|{i ∈ R_k(u) : i in the long tail}|, the long tail as for aplt",
        bounds=NON_NEGATIVE,
    ),
    Metric(
        name="novelty",
        family="beyond",
        reference=ZHOU_10,
        scope="user",
        formula="mean over i ∈ R_k(u) of -log2 p(i)",
        bounds=NON_NEGATIVE,
        peers={
            "Recommenders": "`novelty`: -log2 of the item's share of train interactions (not "
            "of users), averaged over all list slots rather than per user",
            "RePlay": "`Surprisal`: ours divided by log2(train users), summed over the list and "
            "divided by k; its `Novelty` is another measure (the share of the list unseen by "
            "the user)",
        },
    ),
    Metric(
        name="popularity_bias",
        family="beyond",
        reference=ABDOLLAHPOURI_19,
        scope="group",
        formula="mean train interaction count of the list slots / mean train interaction "
        "count of the catalogue items",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
        bootstrapped=True,
        peers={
            "RecBole": "`averagepopularity`: the mean over users of the list's mean train count, "
            "not divided by the catalogue's mean (ours times that mean for lists of one length)"
        },
    ),
    Metric(
        name="personalization",
        family="beyond",
        reference=ZHOU_10,
        scope="group",
        formula="1 - mean over user pairs of the cosine similarity of their binary list vectors",
        bootstrapped=True,
    ),
    Metric(
        name="personalization_jaccard",
        family="beyond",
        reference=ZHOU_10,
        scope="group",
        formula="1 - mean Jaccard similarity of the lists of a seeded sample of user pairs",
    ),
    Metric(
        name="ild_category",
        family="beyond",
        reference=ZIEGLER_05,
        scope="user",
        formula="1 - mean pairwise cosine of the list items' unit multi-hot category vectors",
    ),
    Metric(
        name="ild_embedding",
        family="beyond",
        reference=ZIEGLER_05,
        scope="user",
        formula="1 - mean pairwise cosine of the list items' unit embeddings",
        peers={
            "Recommenders": "`diversity` with `item_sim_measure='item_feature_vector'`: "
            f"{SAME} for feature vectors; its default similarity is the items' co-occurrence "
            "in train"
        },
        # the mean cosine of n unit vectors is >= -1/(n - 1), so the value is <= 2
        bounds=(0.0, 2.0),
    ),
    Metric(
        name="category_coverage",
        family="beyond",
        reference=VARGAS_14,
        scope="user",
        formula="distinct categories in R_k(u) / categories of the catalogue items",
        peers={"RePlay": "`CategoricalDiversity`: distinct categories in the top k / k"},
    ),
    Metric(
        name="serendipity",
        family="beyond",
        reference=GE_10,
        scope="user",
        formula="|{i ∈ R_k(u) ∩ Rel(u) : i unexpected for u}| / k",
        peers={
            "Recommenders": "`serendipity`: relevance times (1 - mean similarity to the user's "
            "train items) per list item: dissimilarity, not absence from a primitive model's list",
            "RePlay": "`Unexpectedness`: the share of the list absent from a base model's list, "
            "relevant or not",
        },
    ),
    Metric(
        name="miscalibration",
        family="beyond",
        reference=STECK_18,
        scope="user",
        formula="KL(p ‖ q̃) = Σ_c p(c|u) ln(p(c|u) / q̃(c|u)), p the category shares of u's "
        "train items, q those of R_k(u) (each item's categories weighted 1/|C_i|), "
        "q̃ = 0.99·q + 0.01·p; no value without described history or list items",
        bounds=NON_NEGATIVE,
        larger_is_better=False,
    ),
    Metric(
        name="awrf",
        family="beyond",
        reference=SAPIEZYNSKI_19,
        scope="user",
        formula="1 - JS distance (base 2) between the list's attention-weighted group shares "
        "(a_i = 1/log2(i + 1)) and the target (the groups' catalogue shares); groups: "
        "evaluation.item_segments, else items=head / items=tail",
    ),
    Metric(
        name="exposure_gap",
        family="beyond",
        reference=DIAZ_20,
        scope="group",
        formula="½ Σ_g |E_g - t_g|, E_g the share of the lists' attention (a_i = 1/log2(i + 1)) "
        "on group g over all lists, t_g the group's catalogue share; groups as for awrf",
        larger_is_better=False,
    ),
    Metric(
        name="intersection",
        family="beyond",
        reference="the overlap share of two top-k lists (RecTools `Intersection`)",
        scope="user",
        formula="|A ∩ B| / |A|, A the model's top k, B the reference model's "
        "(evaluation.agreement_reference, default the baseline)",
        larger_is_better=False,
    ),
    Metric(
        name="agreement_rbo",
        family="beyond",
        reference=WEBBER_10,
        scope="user",
        formula="RBO_ext of A and B at depth k, persistence evaluation.rbo_persistence, B the "
        "reference model's top k (as stability_rbo)",
        larger_is_better=False,
    ),
    Metric(
        name="unexpectedness",
        family="beyond",
        reference=ADAMOPOULOS_14,
        scope="user",
        formula="|A \\ B| / |A|, B the baseline model's top k (evaluation.baseline)",
        peers={"RePlay": f"`Unexpectedness`: {SAME} (its base recommendations given as a table)"},
    ),
    # night-over-night stability (docs/evaluation.md#stability, output.lists): tonight's
    # lists against the model's lists of the previous date that committed them
    Metric(
        name="stability_jaccard",
        family="stability",
        scope="user",
        formula="|A ∩ B| / |A or B| of the user's lists at k tonight (A) and last night (B)",
        reference="Jaccard, Bulletin de la Société Vaudoise des Sciences Naturelles 1901",
    ),
    Metric(
        name="stability_rbo",
        family="stability",
        scope="user",
        formula="RBO_ext of A and B at depth k, persistence p (evaluation.rbo_persistence); "
        "k long: (X_k/k)·p^k + ((1 - p)/p)·Σ_{d≤k} (X_d/d)·p^d, X_d = |A_{1:d} ∩ B_{1:d}|",
        reference=WEBBER_10,
    ),
    Metric(
        name="exposure_churn",
        family="stability",
        scope="group",
        formula="½ Σ_i |e_i - e'_i|, e_i = item i's share of the night's list slots at k",
        larger_is_better=False,
        reference="the total variation distance of the two nights' exposure distributions",
    ),
)
