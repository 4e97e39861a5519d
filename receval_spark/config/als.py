"""Spark ML ALS settings shared by the ``als`` model and ``evaluation.embeddings``: the
parameters of one fit, their bounds, and the block sizing of the item embeddings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AlsParams:
    """The hyperparameters of one Spark ML ALS fit (``receval_spark.ranking.models.als``),
    whether the ``als`` model (:meth:`AlsModel.als_params`) or ``evaluation.embeddings``
    (:meth:`EmbeddingsConfig.als_params`) asks for it (docs/configuration.md).

    ``rank``: latent factors; ``max_iter``: alternating sweeps; ``reg_param``: the L2
    regularisation lambda; ``alpha``: the confidence slope of implicit ALS, confidence
    1 + alpha · (interactions of the user with the item) (Hu, Koren, Volinsky, "Collaborative
    Filtering for Implicit Feedback Datasets", ICDM 2008); ``implicit``: false fits the ratings;
    ``blocks``: Spark ML's numUserBlocks = numItemBlocks (the factors depend on it, not on the
    cluster); ``seed``: the factors' random initialisation.
    """

    rank: int
    max_iter: int
    reg_param: float
    alpha: float
    implicit: bool
    blocks: int
    seed: int


# ALS's user and item blocks (Spark ML's numUserBlocks = numItemBlocks; its default 10). The
# fitted factors depend on them (each block's factors start from their own seed) and on nothing
# about the cluster, so a given value gives the same model everywhere; fewer blocks are faster on
# few cores (benchmarks/README.md, "The demo's models: ALS blocks").
MAX_ALS_BLOCKS = 1024
MAX_ALS_ITER = 12  # deeper ALS lineages overflow the JVM stack without a checkpoint directory


# rows of train history per ALS block when evaluation.embeddings.blocks is auto, and its bounds
ROWS_PER_EMBEDDING_BLOCK = 200_000
EMBEDDING_BLOCKS = (2, 10)


def embedding_blocks(blocks: int | Literal["auto"], history_rows: int) -> int:
    """The ALS blocks of the item embeddings: ``blocks``, or for ``auto`` one block per
    ROWS_PER_EMBEDDING_BLOCK rows of train history, within EMBEDDING_BLOCKS (2 for
    MovieLens 100K, Spark ML's 10 above 1.8M rows). It depends on the data alone, so the factors
    are the same on every deployment; few blocks keep a small fit from running ten-task stages
    (benchmarks/README.md, ``evaluation.embeddings.blocks: auto``)."""
    if blocks != "auto":
        return blocks
    low, high = EMBEDDING_BLOCKS
    return min(high, max(low, -(-history_rows // ROWS_PER_EMBEDDING_BLOCK)))
