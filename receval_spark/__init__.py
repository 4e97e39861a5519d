"""receval_spark: offline evaluation of recommender systems on Spark, as a library and a job.

The public API (CONTRACT.md "Python API"): :func:`evaluate` and :func:`evaluate_sessions`
return an :class:`Evaluation` of Spark DataFrames; :func:`write_reports` commits it;
:func:`judge` gives tonight's verdict against the committed history before anything is
written; :func:`read_reports` and :func:`render_report` read committed reports back;
:func:`run_job` is the whole nightly job (the command line's run shell). The names load
on first use, so ``import receval_spark.config`` (and the CLI's ``--help``) stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from receval_spark.api import (
        Commit,
        Evaluation,
        evaluate,
        evaluate_sessions,
        judge,
        read_reports,
        render_report,
        write_reports,
    )
    from receval_spark.config import JobConfig, SessionJobConfig
    from receval_spark.errors import ConfigError, InputError
    from receval_spark.extensions import register_metric
    from receval_spark.judgement import Judgement
    from receval_spark.run import Run, run_job

__all__ = [
    "Commit",
    "ConfigError",
    "Evaluation",
    "InputError",
    "JobConfig",
    "Judgement",
    "Run",
    "SessionJobConfig",
    "__version__",
    "evaluate",
    "evaluate_sessions",
    "judge",
    "read_reports",
    "register_metric",
    "render_report",
    "run_job",
    "write_reports",
]
_MODULES = {"ConfigError": "errors", "InputError": "errors", "JobConfig": "config"}
_MODULES["SessionJobConfig"] = "config"
_MODULES["register_metric"] = "extensions"
_MODULES |= {"Judgement": "judgement", "Run": "run", "run_job": "run"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'receval_spark' has no attribute {name!r}")
    module = importlib.import_module(f"receval_spark.{_MODULES.get(name, 'api')}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(__all__)
