"""A run's cache write (migration 0010) is stored and read back on both backends; the
PostgreSQL write function inserts it."""

from __future__ import annotations

from dataclasses import replace

from learning_bot.engine.service import LearningService
from learning_bot.engine.usage import Usage

from .helpers import report


def test_the_cache_write_is_stored_and_read_back(active: LearningService) -> None:
    usage = Usage(input=40, output=9, cache_read=1_000, cache_write=2_500)
    assert active.observe(replace(report("cw-1"), usage=usage)).recorded
    assert active.observe(report("cw-2")).recorded
    traces, total = active.traces()
    assert total == 2
    by_id = {t.trace_id: t.usage for t in traces}
    assert by_id["cw-1"] == usage
    assert by_id["cw-2"].cache_write == 0
