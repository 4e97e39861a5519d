"""Which adjusted p-value of a ``comparisons`` row decides, as the report reads it: the run's
``correction`` column (evaluation.correction; docs/statistics.md#multiple-comparisons), Holm
for reports written before the column existed."""

from __future__ import annotations

from typing import Any

import pandas as pd

from receval_spark.results import ADJUSTED_COLUMNS as COLUMNS

LABELS = {"holm": "Holm", "bonferroni": "Bonferroni", "benjamini_hochberg": "Benjamini-Hochberg"}


def _correction(row: Any) -> str:
    name = (
        getattr(row, "correction", None)
        if not isinstance(row, pd.Series)
        else row.get("correction")
    )
    return name if isinstance(name, str) and name in COLUMNS else "holm"


def adjusted_p(row: Any) -> float | None:
    """The row's p-value under its correction (a pandas row or a namedtuple of one)."""
    column = COLUMNS[_correction(row)]
    value = row.get(column) if isinstance(row, pd.Series) else getattr(row, column, None)
    return None if value is None or pd.isna(value) else float(value)


def randomization_p(row: Any) -> float | None:
    """The row's randomization-test p-value (unadjusted); None when the test did not run or
    the report predates the column."""
    value = (
        row.get("p_randomization")
        if isinstance(row, pd.Series)
        else getattr(row, "p_randomization", None)
    )
    return None if value is None or pd.isna(value) else float(value)


def correction_label(row: Any) -> str:
    """The correction's name for a sentence: Holm, Bonferroni or Benjamini-Hochberg."""
    return LABELS[_correction(row)]
