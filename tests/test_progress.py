"""Progress of a run (receval_spark.progress): a line per stage start and end, and the stage's
name on the Spark jobs it starts (job tag; job description in a classic session)."""

from __future__ import annotations

import logging

import pytest

from receval_spark.progress import DESCRIPTION, LOGGER, StageClock


def labels(spark) -> tuple[set[str], str | None]:
    """The current thread's job tags and job description."""
    return set(spark.getTags()), spark.sparkContext.getLocalProperty(DESCRIPTION)


def test_each_stage_logs_its_start_and_end_and_labels_its_spark_jobs(spark, caplog):
    spark.sparkContext.setJobDescription("the caller's own")
    caplog.set_level(logging.INFO, logger=LOGGER.name)
    with StageClock(spark, run="nightly") as clock:
        clock.start("read")
        during_read = labels(spark)
        assert spark.range(10).count() == 10
        clock.note(users=1234)
        clock.start("split")
        during_split = labels(spark)
        clock.stop()
    after = labels(spark)
    spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]

    assert during_read == ({"receval-read"}, "receval · nightly · read")
    assert during_split == ({"receval-split"}, "receval · nightly · split")
    assert after == (set(), "the caller's own")
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER.name]
    assert lines[0] == "nightly · read started"
    assert lines[1].startswith("nightly · read done in ") and lines[1].endswith(" s (users 1,234)")
    assert lines[2] == "nightly · split started"
    assert lines[3].startswith("nightly · split done in ")
    assert len(lines) == 4
    assert set(clock.seconds) == {"read", "split"}
    assert all(seconds >= 0 for seconds in clock.seconds.values())


def test_a_stage_an_exception_ends_is_logged_as_failed_and_its_labels_go(spark, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER.name)
    with pytest.raises(ValueError, match="bad"), StageClock(spark, run="nightly") as clock:
        clock.start("beyond")
        raise ValueError("bad")

    assert labels(spark) == (set(), None)
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER.name]
    assert lines[-1].startswith("nightly · beyond failed after ")
    assert "beyond" not in clock.seconds
