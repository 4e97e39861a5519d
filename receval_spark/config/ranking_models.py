"""The ranking job's ``models``: one configuration per kind, and their hyperparameter grids
(docs/configuration.md, docs/evaluation.md#candidate-models-and-tuning)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from receval_spark.config.als import MAX_ALS_BLOCKS, MAX_ALS_ITER, AlsParams
from receval_spark.config.common import _FileSource, _Strict
from receval_spark.config.ranking_data import AttributeNames


class RecommendationColumns(_Strict):
    user: str = "user_id"
    item: str = "item_id"
    score: str | None = "score"
    rank: str | None = None
    # further columns of each (user, item) handed to custom metrics (e.g. a personalised price)
    attributes: AttributeNames = Field(default_factory=list)

    @model_validator(mode="after")
    def _score_or_rank(self) -> RecommendationColumns:
        if (self.score is None) == (self.rank is None):
            raise ValueError(
                "map exactly one of columns.score or columns.rank (set the other to null)"
            )
        return self


class PopularityModel(_Strict):
    """Score = number of distinct train users of the item; ties by item id ascending."""

    name: str
    kind: Literal["popularity"]


class RandomModel(_Strict):
    """Seeded uniform random items from the train catalogue, independent of partitioning."""

    name: str
    kind: Literal["random"]
    seed: int = 42


class OracleModel(_Strict):
    """Each user's relevant test items, best grade first: the sanity upper bound."""

    name: str
    kind: Literal["oracle"]


class ExternalModel(_FileSource):
    """Recommendations made elsewhere: user, item, and score (higher better) or rank (1 best)."""

    name: str
    kind: Literal["external"]
    columns: RecommendationColumns = Field(default_factory=RecommendationColumns)


Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0.0)]
PositiveFloat = Annotated[float, Field(gt=0.0)]
Fallback = Literal["popularity", "none"]  # what a candidate model gives users it cannot score


class AlsModel(_Strict):
    """Spark ML ALS fitted inside the job. Implicit: confidence 1 + alpha · (interactions of
    the user with the item) (Hu, Koren, Volinsky 2008); explicit: the train ratings (a model
    that predicts ratings). A list is a grid tuned on the validation period. ``fallback``:
    users without factors get the popularity ranking (``popularity``) or nothing (``none``)."""

    name: str
    kind: Literal["als"]
    fallback: Fallback = "popularity"
    implicit: bool = True
    rank: Positive | list[Positive] = 32
    reg_param: NonNegative | list[NonNegative] = 0.1
    alpha: PositiveFloat | list[PositiveFloat] = 10.0
    max_iter: int = Field(default=10, ge=1, le=MAX_ALS_ITER)
    blocks: int = Field(default=10, ge=1, le=MAX_ALS_BLOCKS)
    seed: int = 42

    def als_params(self) -> AlsParams:
        """The parameters of this grid point (a point of :func:`hyperparameter_grid`);
        ValueError for a grid, whose points are chosen before a model is fitted."""
        rank, reg_param, alpha = self.rank, self.reg_param, self.alpha
        if isinstance(rank, list) or isinstance(reg_param, list) or isinstance(alpha, list):
            raise ValueError(f"models.{self.name}: a grid cannot be fitted; choose one point first")
        return AlsParams(
            rank=rank,
            max_iter=self.max_iter,
            reg_param=reg_param,
            alpha=alpha,
            implicit=self.implicit,
            blocks=self.blocks,
            seed=self.seed,
        )


class ItemKnnModel(_Strict):
    """Item-item cosine on train co-occurrence with each item's top ``neighbours``; a list is
    a grid tuned on the validation period. ``fallback``: users without any neighbour score get
    the popularity ranking (``popularity``) or nothing (``none``)."""

    name: str
    kind: Literal["item_knn"]
    fallback: Fallback = "popularity"
    neighbours: Positive | list[Positive] = 100


class BiasModel(_Strict):
    """Rating baseline mu + b_u + b_i with regularised biases (rating_prediction only)."""

    name: str
    kind: Literal["bias"]
    reg_item: NonNegative = 10.0
    reg_user: NonNegative = 15.0


ModelConfig = Annotated[
    PopularityModel
    | RandomModel
    | OracleModel
    | ExternalModel
    | AlsModel
    | ItemKnnModel
    | BiasModel,
    Field(discriminator="kind"),
]


@dataclass(frozen=True)
class Capabilities:
    """What a kind of model does: ``tunable``, the hyperparameters a list of values makes a
    grid of; ``ranks``, whether it makes top-k lists (task ``ranking``); ``predicts_ratings``,
    whether it can predict ratings (task ``rating_prediction``; ``als`` only with
    ``implicit: false``: :func:`predicts_ratings`)."""

    tunable: tuple[str, ...] = ()
    ranks: bool = True
    predicts_ratings: bool = False


# every kind's capabilities, read by validation and tuning
CAPABILITIES: dict[str, Capabilities] = {
    "popularity": Capabilities(),
    "random": Capabilities(),
    "oracle": Capabilities(),
    "external": Capabilities(),
    "als": Capabilities(tunable=("rank", "reg_param", "alpha"), predicts_ratings=True),
    "item_knn": Capabilities(tunable=("neighbours",)),
    "bias": Capabilities(ranks=False, predicts_ratings=True),
}


def predicts_ratings(model: ModelConfig) -> bool:
    """Whether ``model`` predicts ratings: its kind can, and (ALS) it is fitted on them."""
    explicit = not isinstance(model, AlsModel) or not model.implicit
    return CAPABILITIES[model.kind].predicts_ratings and explicit


def hyperparameter_grid(model: ModelConfig) -> list[ModelConfig]:
    """Every combination of the model's list-valued hyperparameters, in the order written
    (the last hyperparameter varies fastest); a model without lists is its own grid."""
    names = CAPABILITIES[model.kind].tunable
    values = [
        getattr(model, n) if isinstance(getattr(model, n), list) else [getattr(model, n)]
        for n in names
    ]
    return [
        model.model_copy(update=dict(zip(names, point, strict=True)))
        for point in itertools.product(*values)
    ]


def hyperparameters(model: ModelConfig) -> dict[str, int | float]:
    """The tunable values of one grid point."""
    return {n: getattr(model, n) for n in CAPABILITIES[model.kind].tunable}
