"""Progress of a run: a log line as each stage starts and ends, and the stage's name on the
Spark jobs it starts.

Lines go to the ``receval_spark.progress`` logger at INFO (the command line prints them on
stdout, ``--quiet`` hides them; a notebook sees them once it configures logging). The Spark
jobs of a stage carry the job tag ``receval-<stage>`` (``SparkSession.addTag``, also over Spark
Connect) and, in a classic session, the job description ``receval · <run> · <stage>``, which the
Spark UI and the history server show in place of the call site (``collect at
pipeline.py:420``).
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from receval_spark.spark import classic_context

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOGGER = logging.getLogger("receval_spark.progress")
TAG_PREFIX = "receval-"
DESCRIPTION = "spark.job.description"


class StageClock:
    """Wall seconds per stage of one run (``seconds``). :meth:`start` ends the running stage
    and starts the next, :meth:`stop` ends the last; as a context manager, a stage an
    exception ends is logged as failed and the Spark labels are cleared either way. Spark is
    lazy: a stage ends at an action and holds every transformation that action ran."""

    def __init__(self, spark: SparkSession | None = None, *, run: str = "receval") -> None:
        self.seconds: dict[str, float] = {}
        self._spark = spark
        self._run = run
        self._stage: str | None = None
        self._started = 0.0
        self._details: dict[str, Any] = {}
        self._previous_description: str | None = None

    def start(self, stage: str) -> None:
        """End the running stage, if any, and start ``stage``."""
        self._end()
        LOGGER.info("%s · %s started", self._run, stage)
        self._stage, self._started, self._details = stage, time.monotonic(), {}
        self._label(stage)

    def note(self, **details: Any) -> None:
        """Facts about the running stage for its closing line (counts the job has anyway)."""
        self._details.update(details)

    def stop(self) -> None:
        """End the running stage and clear the Spark labels."""
        self._end()
        self._unlabel()

    def __enter__(self) -> StageClock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end(failed=exc_type is not None)
        self._unlabel()

    def _end(self, *, failed: bool = False) -> None:
        if self._stage is None:
            return
        seconds = time.monotonic() - self._started
        if failed:
            LOGGER.info("%s · %s failed after %.1f s", self._run, self._stage, seconds)
        else:
            self.seconds[self._stage] = self.seconds.get(self._stage, 0.0) + seconds
            facts = ", ".join(f"{key} {_number(value)}" for key, value in self._details.items())
            suffix = f" ({facts})" if facts else ""
            LOGGER.info("%s · %s done in %.1f s%s", self._run, self._stage, seconds, suffix)
        if self._spark is not None:
            self._spark.removeTag(TAG_PREFIX + self._stage)
        self._stage = None

    def _label(self, stage: str) -> None:
        if self._spark is None:
            return
        self._spark.addTag(TAG_PREFIX + stage)
        context = classic_context(self._spark)
        if context is not None:
            if self._previous_description is None:
                self._previous_description = context.getLocalProperty(DESCRIPTION) or ""
            context.setJobDescription(f"receval · {self._run} · {stage}")

    def _unlabel(self) -> None:
        context = classic_context(self._spark) if self._spark is not None else None
        if context is not None and self._previous_description is not None:
            # None clears it (pyspark types the argument as str only)
            context.setJobDescription(self._previous_description or None)  # type: ignore[arg-type]
        self._previous_description = None


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
