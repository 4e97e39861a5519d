"""The names receval_spark.ranking still imports from here: each lives in its family module."""

# temporary: ranking stage modules move to the family modules
from receval_spark.metrics.diversity import unit_vectors
from receval_spark.metrics.exposure import long_tail, ranking_exposure
from receval_spark.metrics.group import group_beyond
from receval_spark.metrics.lists import (
    BeyondInputs,
    catalogue_totals,
    item_statistics,
    top_k_lists,
)
from receval_spark.metrics.novelty import content_expected
from receval_spark.metrics.per_user import per_user_beyond

__all__ = [
    "BeyondInputs",
    "catalogue_totals",
    "content_expected",
    "group_beyond",
    "item_statistics",
    "long_tail",
    "per_user_beyond",
    "ranking_exposure",
    "top_k_lists",
    "unit_vectors",
]
