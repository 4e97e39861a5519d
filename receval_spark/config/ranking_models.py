"""The ranking job's ``models``: one configuration per kind, and their hyperparameter grids
(docs/configuration.md, docs/evaluation.md#candidate-models-and-tuning)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from receval_spark.config.als import MAX_ALS_BLOCKS, MAX_ALS_ITER, AlsParams
from receval_spark.config.common import ModelName, _FileSource, _Strict
from receval_spark.config.ranking_data import AttributeNames


class RecommendationColumns(_Strict):
    """Source column names of an external model's table: a score or a rank (task ``ranking``),
    a predicted rating (task ``rating_prediction``), or both."""

    user: str = Field(default="user_id", description="The user id column.")
    item: str = Field(default="item_id", description="The item id column.")
    score: str | None = Field(
        default="score",
        description="The score column (higher is better; task ranking); null with `rank`. "
        "Left out when `rank` or `prediction` is given: null.",
    )
    rank: str | None = Field(
        default=None,
        description="The rank column (1 is the best; task ranking); null with `score`. How "
        "gaps count: the model's `rank_semantics`.",
    )
    prediction: str | None = Field(
        default=None,
        description="The predicted-rating column (task rating_prediction: MAE, MSE, RMSE "
        "against the test ratings); null: the model predicts no ratings.",
    )
    attributes: AttributeNames = Field(
        default_factory=list,
        description="Further columns of each (user, item) handed to custom metrics (e.g. a "
        "personalised price).",
    )

    @model_validator(mode="before")
    @classmethod
    def _score_left_out(cls, data: Any) -> Any:
        """``score`` left out where ``rank`` or ``prediction`` is mapped: null (its default
        ``score`` serves a table of scores alone)."""
        other = isinstance(data, dict) and (data.get("rank") or data.get("prediction"))
        if other and "score" not in data:
            return {**data, "score": None}
        return data

    @model_validator(mode="after")
    def _score_or_rank(self) -> RecommendationColumns:
        if self.score is not None and self.rank is not None:
            raise ValueError("map one of columns.score or columns.rank, not both (set one to null)")
        if self.score is None and self.rank is None and self.prediction is None:
            raise ValueError(
                "map columns.score or columns.rank (task ranking) or columns.prediction (task "
                "rating_prediction)"
            )
        return self


class PopularityModel(_Strict):
    """Score = number of distinct train users of the item; ties by item id ascending."""

    name: ModelName
    kind: Literal["popularity"] = Field(description="Most popular items first.")


class RandomModel(_Strict):
    """Seeded uniform random items from the train catalogue, independent of partitioning."""

    name: ModelName
    kind: Literal["random"] = Field(description="Random items.")
    seed: int = Field(default=42, description="Seed of the random draws.")


class OracleModel(_Strict):
    """Each user's relevant test items, best grade first: the sanity upper bound."""

    name: ModelName
    kind: Literal["oracle"] = Field(description="The relevant test items: the upper bound.")


class ExternalModel(_FileSource):
    """Recommendations made elsewhere: user, item, and score (higher better) or rank (1 best);
    or predicted ratings (task ``rating_prediction``). ``rank_semantics``: ``order`` (the
    ranks order the items; gaps close, ties by item id) or ``positions`` (each rank is a
    slot; a gap is an empty slot), docs/evaluation.md#ranks-of-an-external-model."""

    name: ModelName
    kind: Literal["external"] = Field(description="Your model's recommendations, from a table.")
    columns: RecommendationColumns = Field(
        default_factory=RecommendationColumns, description="The table's column names."
    )
    rank_semantics: Literal["order", "positions"] = Field(
        default="order",
        description="How `columns.rank` is read: `order` (the default): the ranks order each "
        "user's items, gaps close (ranks 1, 3, 7 are positions 1, 2, 3), equal ranks tie by item "
        "id; `positions`: each rank is the item's position, a gap stays an empty slot (an item at "
        "rank 3 with nothing at rank 2 sits at position 3; a seen item filtered out leaves its "
        "slot empty), ranks must be whole numbers, one item per position.",
    )

    @model_validator(mode="after")
    def _positions_need_ranks(self) -> ExternalModel:
        if self.rank_semantics == "positions" and self.columns.rank is None:
            raise ValueError(
                "rank_semantics: positions reads the rank column: map columns.rank, or remove "
                "rank_semantics"
            )
        return self


Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0.0)]
PositiveFloat = Annotated[float, Field(gt=0.0)]
Fallback = Annotated[
    Literal["popularity", "none"],
    Field(
        description="What users the model cannot score get: the popularity ranking, or "
        "nothing (`none`)."
    ),
]


class AlsModel(_Strict):
    """Spark ML ALS fitted inside the job. Implicit: confidence 1 + alpha · (interactions of
    the user with the item) (Hu, Koren, Volinsky 2008); explicit: the train ratings (a model
    that predicts ratings). A list is a grid tuned on the validation period. ``fallback``:
    users without factors get the popularity ranking (``popularity``) or nothing (``none``)."""

    name: ModelName
    kind: Literal["als"] = Field(description="Spark ML ALS matrix factorisation.")
    fallback: Fallback = "popularity"
    implicit: bool = Field(
        default=True,
        description="Fit the interactions as implicit feedback; false: fit the ratings (and "
        "predict them).",
    )
    rank: Positive | list[Positive] = Field(
        default=32, description="Latent factors per user and item; a list: a grid."
    )
    reg_param: NonNegative | list[NonNegative] = Field(
        default=0.1, description="The L2 regularisation; a list: a grid."
    )
    alpha: PositiveFloat | list[PositiveFloat] = Field(
        default=10.0, description="Implicit: confidence 1 + alpha · interactions; a list: a grid."
    )
    max_iter: int = Field(
        default=10,
        ge=1,
        le=MAX_ALS_ITER,
        description="Alternating sweeps (at most 12: deeper lineages overflow the JVM stack).",
    )
    blocks: int = Field(
        default=10,
        ge=1,
        le=MAX_ALS_BLOCKS,
        description="Spark ML's user and item blocks; the factors depend on it, not on the "
        "cluster (about the number of cores is fastest).",
    )
    seed: int = Field(default=42, description="Seed of the factors' initialisation.")

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

    name: ModelName
    kind: Literal["item_knn"] = Field(description="Item-item cosine neighbours.")
    fallback: Fallback = "popularity"
    neighbours: Positive | list[Positive] = Field(
        default=100, description="Neighbours kept per item; a list: a grid."
    )


class BiasModel(_Strict):
    """Rating baseline mu + b_u + b_i with regularised biases (Koren, "Factor in the
    neighbors", ACM TKDD 2010); rating_prediction only."""

    name: ModelName
    kind: Literal["bias"] = Field(description="User and item rating biases.")
    reg_item: NonNegative = Field(
        default=10.0, description="`lambda_i`, the shrinkage of each item bias towards 0."
    )
    reg_user: NonNegative = Field(
        default=15.0, description="`lambda_u`, the shrinkage of each user bias towards 0."
    )


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
    ``implicit: false``, ``external`` only with ``columns.prediction``:
    :func:`predicts_ratings`)."""

    tunable: tuple[str, ...] = ()
    ranks: bool = True
    predicts_ratings: bool = False


# every kind's capabilities, read by validation and tuning
CAPABILITIES: dict[str, Capabilities] = {
    "popularity": Capabilities(),
    "random": Capabilities(),
    "oracle": Capabilities(),
    "external": Capabilities(predicts_ratings=True),
    "als": Capabilities(tunable=("rank", "reg_param", "alpha"), predicts_ratings=True),
    "item_knn": Capabilities(tunable=("neighbours",)),
    "bias": Capabilities(ranks=False, predicts_ratings=True),
}


def predicts_ratings(model: ModelConfig) -> bool:
    """Whether ``model`` predicts ratings: its kind can, (ALS) it is fitted on them, and
    (external) it maps ``columns.prediction``."""
    if isinstance(model, AlsModel):
        return not model.implicit
    if isinstance(model, ExternalModel):
        return model.columns.prediction is not None
    return CAPABILITIES[model.kind].predicts_ratings


def ranks_items(model: ModelConfig) -> bool:
    """Whether ``model`` makes top-k lists: its kind can, and (external) it maps a score or a
    rank column."""
    if isinstance(model, ExternalModel):
        return model.columns.score is not None or model.columns.rank is not None
    return CAPABILITIES[model.kind].ranks


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
