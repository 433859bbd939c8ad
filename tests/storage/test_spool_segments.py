"""A replay that stores the segments an outage closed takes the one left open behind them
too: its runs do not wait for the next retry (a minute, by default) once storage answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.records import RunRecord
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.spool import Spool
from tests.storage.helpers import report
from tests.storage.test_spool import record_of


def test_a_replay_takes_the_segment_left_open_behind_the_stored_ones(
    sqlite_url: str, tmp_path: Path
) -> None:
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE))
    spool = Spool(tmp_path / "spool")
    spool.append(svc.learner_id, [record_of(svc, report("first"))])

    def down(learner_id: int, runs: list[RunRecord]) -> object:
        raise Unavailable("storage is unavailable: connection refused")

    with pytest.raises(Unavailable):
        spool.replay(down)  # closes the open segment to replay it, and keeps it
    spool.append(svc.learner_id, [record_of(svc, report("second"))])  # a new open segment
    assert len(list(spool.dir.glob("*.jsonl"))) == 2

    assert spool.replay(sql.record_runs) == 2
    assert not spool.pending() and not list(spool.dir.glob("*.jsonl"))
    runs, total = svc.traces()
    assert total == 2 and [r.trace_id for r in runs] == ["second", "first"]
    spool.append(svc.learner_id, [record_of(svc, report("third"))])  # the spool goes on
    assert spool.replay(sql.record_runs) == 1
    spool.close()
    sql.close()
