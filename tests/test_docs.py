"""The documentation site (docs/, built by ``make docs`` in ``make test-all``): its reference
pages are generated from the code, and its Python examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from receval_spark import registry
from receval_spark.reference import configuration_page, metrics_page

DOCS = Path(__file__).resolve().parents[1] / "docs"
EXAMPLE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_the_configuration_reference_names_the_keys_with_types_and_defaults():
    page = configuration_page()

    for row in (
        "| `evaluation.alerts_exit_code` | int (≥ 0, ≤ 255) | `3` |",
        "| `evaluation.alerts[].significance` | float (> 0.0, < 1.0) or `sequential` or null | "
        "`null` |",
        '| `tracking.mlflow.experiment` | str | `"receval"` |',
        "| `models[].blocks` | int (≥ 1, ≤ 1024) | `10` |",
        "| `split.quantile` | float or null (> 0.0, < 1.0) | `null` |",
    ):
        assert row in page, row
    assert "### `models[] (kind: als)`" in page and "### `split (method: leave_last_n)`" in page
    assert "## Session job" in page and "### `preprocessing`" in page


def test_the_configuration_reference_gives_every_key_its_meaning():
    page = configuration_page()
    rows = [line for line in page.splitlines() if line.startswith("| `")]

    assert rows and not [row for row in rows if row.endswith("|  |")]
    assert (
        "| `models[].blocks` | int (≥ 1, ≤ 1024) | `10` | Spark ML's user and item blocks; " in page
    )
    # a key holding a section: its meaning leads the section
    assert "### `evaluation.embeddings`\n\nWhere the item vectors come from" in page


def test_the_metric_reference_has_every_metric_of_the_registry():
    page = metrics_page()

    for metric in registry.METRICS:
        assert f"| `{metric.name}` | " in page, metric.name
    assert "| `hit_rate` | 1 if hits@k ≥ 1 else 0 | [0, 1] | larger | yes | Wilson | no |" in page
    assert (
        "| `ndcg` | `ndcgAt(k)`: binary gains (grades ignored); equal to ours at grade 1 |" in page
    )
    assert "| ties | score descending, then item id ascending |" in page
    for tool in registry.PEER_TOOLS:
        assert f"| {tool} |" in page or f" {tool} |" in page, tool


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_the_python_examples_of_a_page_run(spark, page, restore_sql_conf):
    examples = EXAMPLE.findall((DOCS / page).read_text(encoding="utf-8"))
    for code in examples:
        exec(compile(code, f"docs/{page}", "exec"), {"spark": spark})
