"""A condition is logged by its changes: one line when it starts, a summary at most once a
minute by the injected clock while it lasts, one line when it ends with the totals."""

from __future__ import annotations

import logging

import pytest

from storage.outage_log import StateLog, duration


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
