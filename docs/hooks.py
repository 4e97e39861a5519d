"""MkDocs hook: the reference pages generated at build time from the code, so they cannot drift
from it: ``reference/configuration.md`` from the config schema (receval_spark.config),
``reference/metrics.md`` from the metric registry (receval_spark.registry)."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from receval_spark.reference import configuration_page, metrics_page

PAGES = {"reference/configuration.md": configuration_page, "reference/metrics.md": metrics_page}


def on_files(files: Files, config: Any) -> Files:
    for path, page in PAGES.items():
        files.append(File.generated(config, path, content=page()))
    return files
