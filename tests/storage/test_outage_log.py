"""A condition is logged by its changes: one line when it starts, a summary at most once a
minute by the injected clock while it lasts, one line when it ends with the totals."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from learning_bot.engine import LearningConfig, Phase, Unavailable
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.outage_log import StateLog, duration
from learning_bot.storage.spool import Spool, SpoolingStore

from .helpers import report
from .test_spool import Outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "learning_bot.test_outage"]


def test_an_hour_of_occurrences_is_a_line_a_minute_at_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock = Clock()
    state = StateLog(logging.getLogger("learning_bot.test_outage"), "storage is down", clock=clock)
    state.count("run(s) spooled", 3)  # not down yet: not counted
    state.ended("storage is back")  # not down: nothing to say
    assert messages(caplog) == []
    for _ in range(28_800):  # eight a second for an hour
        state.occurred("connection refused", "spooling runs")
        state.count("run(s) spooled")
        clock.now += 0.125
    lines = messages(caplog)
    assert lines[0] == "storage is down (connection refused); spooling runs"
    assert len(lines) <= 61, len(lines)
    assert lines[1] == "storage is down for 1 min 0 s now (connection refused): 480 run(s) spooled"
    state.count("replayed", 28_800)
    state.ended("storage is back")
    last = messages(caplog)[-1]
    assert last == "storage is back after 1 h 0 min: 28,800 run(s) spooled, 28,800 replayed"
    assert not state.active
    # A new outage starts over: its own first line, its own totals.
    state.occurred("disk full")
    state.ended("storage is back")
    assert messages(caplog)[-2:] == ["storage is down (disk full)", "storage is back after 0.0 s"]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.25, "0.2 s"), (42, "42 s"), (185, "3 min 5 s"), (7440, "2 h 4 min")],
)
def test_durations_read_as_people_say_them(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_a_spooling_outage_is_summarised_by_the_replays_that_fail(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Once runs wait in the spool, new runs go straight behind them: the replay's retries
    (the background thread's and these) are what say the outage still lasts (a summary a
    minute at most), and the replay that empties the spool ends it with the totals."""
    caplog.set_level(logging.INFO, "learning_bot.spool")
    clock = Clock()
    sql = SqlStore(sqlite_url)
    outage = Outage(sql)
    store = SpoolingStore(
        outage, Spool(tmp_path / "spool", clock=clock), retry_seconds=3600, clock=clock
    )  # type: ignore[arg-type]
    svc = LearningService(outage, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)  # type: ignore[arg-type]
    svc.observe(report("before"))
    outage.down = True
    for i in range(3):
        assert svc.observe(report(f"r{i}")).spooled
    for _ in range(4):  # retries 20 s apart: one summary in the minute
        clock.now += 20
        with pytest.raises(Unavailable):
            store.replay_now()
    outage.down = False
    clock.now += 10
    # A replay takes the segments closed before it (the open one waits for the next), and the
    # background replay may take some first: whichever empties the spool ends the outage.
    for _ in range(5):
        if store.spool.pending():
            store.replay_now()
    assert not store.spool.pending()
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "learning_bot.spool"
        and not r.getMessage().startswith("replayed spool segment")
    ]
    assert len(lines) == 3, lines
    assert (
        lines[0] == "storage is unavailable (connection refused); spooling runs until it takes them"
    )
    assert lines[1].startswith("storage is unavailable for 1 min "), lines
    assert lines[1].endswith(" now (connection refused): 3 run(s) spooled"), lines
    assert lines[2] == "storage is back after 1 min 30 s: 3 run(s) spooled, 3 replayed"
    assert svc.traces(limit=1)[1] == 4
    store.close()
