"""The local spool: runs storage cannot take are kept durably and replayed, in order, once."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from learning_bot.engine import LearningConfig, Phase, Unavailable
from learning_bot.engine.observation import observation_guard, rewards_for_run
from learning_bot.engine.records import RunRecord, record_from_report
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.spool import Spool, SpoolFull
from learning_bot.storage.spool_lines import read_spool_line, spool_line
from learning_bot.storage.spooling_store import SpoolingStore

from .helpers import ARMS, report


class Outage:
    """Wraps a store; while `down`, every write raises Unavailable like a lost connection."""

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.down = False
        self.calls = 0
        self.owner = threading.get_ident()
        self.refused_elsewhere = 0
        """Writes refused to another thread than the one that made it (the replay thread's)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def record_runs(self, learner_id: int, runs: Any, settings: str | None = None) -> Any:
        self.calls += 1
        self._refuse_while_down()
        return self.inner.record_runs(learner_id, runs, settings)

    def learner_state(self, learner_id: int) -> Any:
        self._refuse_while_down()
        return self.inner.learner_state(learner_id)

    def _refuse_while_down(self) -> None:
        if self.down:
            if threading.get_ident() != self.owner:
                self.refused_elsewhere += 1
            raise Unavailable("storage is unavailable: connection refused")


def record_of(svc: LearningService, run: Any) -> RunRecord:
    """The record observing `run` would write."""
    config = svc.config
    guard = observation_guard(run, config, ignore_phase=True)
    return record_from_report(run, rewards_for_run(run, config), config.phase, guard)


def wait_until(check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def test_outage_spools_then_replays_in_order_exactly_once(
    database_url: str, tmp_path: Path
) -> None:
    sql = SqlStore(database_url)
    outage = Outage(sql)
    store = SpoolingStore(outage, Spool(tmp_path / "spool"), retry_seconds=0.1)
    svc = LearningService(outage, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)  # type: ignore[arg-type]
    svc.observe(report("before"))
    outage.down = True
    during = [svc.observe(report(f"down-{i}", timestamp=1_000 + i)) for i in range(20)]
    assert all(r.spooled and not r.recorded for r in during)
    assert "spooled" in during[0].message
    assert svc.select(list(__import__("tests.storage.helpers").storage.helpers.ARMS)).selected
    again = svc.observe(report("down-3"))  # a retry of a spooled run, still down
    assert again.spooled
    outage.down = False
    wait_until(lambda: not store.spool.pending())
    page, total = svc.traces(limit=100)
    assert total == 21
    assert [
        t.trace_id for t in sorted(page, key=lambda t: t.timestamp) if t.trace_id != "before"
    ] == [f"down-{i}" for i in range(20)]
    assert svc.verify().ok
    after = svc.observe(report("after"))
    assert after.recorded
    store.close()


def test_runs_wait_behind_spooled_ones(database_url: str, tmp_path: Path) -> None:
    sql = SqlStore(database_url)
    outage = Outage(sql)
    store = SpoolingStore(outage, Spool(tmp_path / "spool"), retry_seconds=60)
    svc = LearningService(outage, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)  # type: ignore[arg-type]
    outage.down = True
    assert svc.observe(report("first")).spooled
    # the replay that spooling started has failed too: it now waits retry_seconds, so "first"
    # still waits when storage is back
    wait_until(lambda: outage.refused_elsewhere > 0)
    outage.down = False
    second = svc.observe(report("second"))
    assert second.spooled  # queued behind "first" so order is kept
    store.replay_now()
    wait_until(lambda: not store.spool.pending())
    traces = svc.traces()[0]
    assert [t.trace_id for t in traces] == ["second", "first"]
    pks = {t.trace_id: t for t in traces}
    assert set(pks) == {"first", "second"}
    with sql.engine.connect() as conn:
        order = [r[0] for r in conn.exec_driver_sql("SELECT trace_id FROM traces ORDER BY id")]
    assert order == ["first", "second"]
    store.close()


def test_spool_survives_a_killed_process(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "spool"
    dead = root / "p999999"
    dead.mkdir(parents=True)
    (dead / ".lock").write_text("")
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0)
    records = [record_of(svc, report(f"k{i}")) for i in range(5)]
    lines = "".join(spool_line(svc.learner_id, r) + "\n" for r in records)
    (dead / "000000000001.jsonl").write_text(lines + '{"l": 1, "trace_id": "torn')
    store = SpoolingStore(sql, Spool(root), retry_seconds=0.1)
    wait_until(lambda: svc.traces()[1] == 5)
    wait_until(lambda: not any(root.glob("p*/*.jsonl")))
    assert not dead.exists()
    assert svc.verify().ok
    store.close()


def test_full_spool_refuses_loudly(sqlite_url: str, tmp_path: Path, caplog: Any) -> None:
    sql = SqlStore(sqlite_url)
    outage = Outage(sql)
    store = SpoolingStore(outage, Spool(tmp_path / "spool", max_bytes=4000), retry_seconds=60)
    svc = LearningService(outage, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)  # type: ignore[arg-type]
    outage.down = True
    svc.observe(report("fits"))

    def fill() -> None:
        for i in range(50):
            svc.observe(report(f"more-{i}"))

    with pytest.raises(SpoolFull, match="spool is full"):
        fill()
    assert "spool" in caplog.text and "full" in caplog.text
    outage.down = False
    store.replay_now()
    wait_until(lambda: not store.spool.pending())
    kept = svc.traces()[1]
    assert kept >= 1
    assert svc.verify().ok
    store.close()


def test_records_round_trip_through_json(sqlite_url: str) -> None:
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE))
    record = record_of(svc, report("rt", text="see README.md"))
    learner, back = read_spool_line(spool_line(7, record))
    assert learner == 7
    assert back == record
    sql.close()


def test_spool_appends_are_fsynced(tmp_path: Path, sqlite_url: str, monkeypatch: Any) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE))
    spool = Spool(tmp_path / "spool")
    spool.append(svc.learner_id, [record_of(svc, report("f"))])
    assert synced
    spool.close()
    sql.close()


def _unreachable_engine(dialect: str, tmp_path: Path, host: str = "127.0.0.1:1") -> Any:
    """An engine of the same dialect whose database cannot be reached: a refused port (or a
    host that does not resolve), or a SQLite file in a folder that does not exist."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    if dialect == "postgresql":
        return create_engine(f"postgresql+psycopg://postgres@{host}/none", poolclass=NullPool)
    return create_engine(f"sqlite:///{tmp_path}/gone/learning.sqlite", poolclass=NullPool)


@pytest.mark.parametrize(
    "host",
    # a refused port; a host name that does not resolve, as the compose file's `postgres`
    # while its container restarts (the replay once dead-lettered runs on it)
    ["127.0.0.1:1", "no-such-host.invalid:5432"],
    ids=["refused", "host-does-not-resolve"],
)
def test_a_database_gone_mid_life_reads_unavailable_and_observe_spools(
    database_url: str, tmp_path: Path, host: str
) -> None:
    sql = SqlStore(database_url)
    store = SpoolingStore(sql, Spool(tmp_path / "spool"), retry_seconds=0.1)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=store)
    assert svc.observe(report("before")).recorded
    working = sql.engine
    sql.engine = _unreachable_engine(sql.dialect, tmp_path, host)
    try:
        # Every read a surface makes says "unavailable" instead of leaking a driver error.
        with pytest.raises(Unavailable, match="storage is unavailable"):
            sql.learner_state(svc.learner_id)
        with pytest.raises(Unavailable):
            sql.load_arms(svc.learner_id)
        # The agent's path keeps working: the cache refresh fails quietly, the run is spooled.
        during = svc.observe(report("during", timestamp=2_000))
        assert during.spooled and not during.recorded
        assert svc.select(list(ARMS)).selected
    finally:
        sql.engine = working
    wait_until(lambda: not store.spool.pending())
    _, total = svc.traces(limit=10)
    assert total == 2
    assert store.spool.dead_letter_count() == 0
    assert svc.verify().ok
    store.close()
