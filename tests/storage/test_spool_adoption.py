"""A dead process's spool in a shared directory is adopted by a live one: each segment by one
adopter only, even with two racing, and without waiting for a spool of the adopter's own."""

from __future__ import annotations

import threading
from pathlib import Path

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.spool import Spool, SpoolingStore, dead_letters

from .helpers import report
from .test_spool import record_of, wait_until

ACTIVE = LearningConfig(phase=Phase.ACTIVE)


def dead_spool(root: Path, svc: LearningService, count: int) -> None:
    """A process's spool left behind: `count` runs of svc's learner in many segments, its
    lock released as a process's is when it ends."""
    spool = Spool(root, segment_bytes=2_000)
    for i in range(count):
        spool.append(svc.learner_id, [record_of(svc, report(f"dead-{i}"))], name=svc.learner)
    spool.close()


def test_two_adopters_racing_replay_each_run_once(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "spool"
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, ACTIVE, cache_ttl=0)
    dead_spool(root, svc, 60)
    assert len(list(root.glob("p*/*.jsonl"))) > 10
    adopters = [Spool(root), Spool(root)]
    assert all(a.orphaned() for a in adopters)
    written: list[int] = []
    start = threading.Barrier(len(adopters))

    def replay(spool: Spool) -> None:
        start.wait()
        written.append(
            spool.replay(sql.record_runs, lambda name, _r: sql.open_learner(name, Phase.ACTIVE).id)
        )

    threads = [threading.Thread(target=replay, args=(a,)) for a in adopters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(written) == 60  # no run written twice: each segment had one adopter
    assert svc.traces()[1] == 60
    assert sum(v.posterior.pulls for v in svc.posteriors()) == 60 * 7
    assert not dead_letters(root)
    assert not any(root.glob("p*/*.jsonl"))
    for a in adopters:
        assert not a.orphaned()
        a.close()
    sql.close()


def test_a_live_process_adopts_a_dead_spool_on_its_own(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "spool"
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, ACTIVE, cache_ttl=0)
    live = SpoolingStore(sql, Spool(root), retry_seconds=0.05, adopt_seconds=0.05)
    try:
        assert not live.spool.pending()
        dead_spool(root, svc, 5)  # a process that ends after the live one started
        wait_until(lambda: svc.traces()[1] == 5)
        wait_until(lambda: not any(root.glob("p*/*.jsonl")))
        assert list(root.glob("p*")) == [live.spool.dir]
    finally:
        live.close()


def test_a_live_process_directory_is_never_adopted(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "spool"
    sql = SqlStore(sqlite_url)
    svc = LearningService(sql, ACTIVE, cache_ttl=0)
    alive = Spool(root)
    alive.append(svc.learner_id, [record_of(svc, report("mine"))], name=svc.learner)
    other = Spool(root)
    assert not other.orphaned() and other.adopt() == 0
    assert other.replay(sql.record_runs) == 0
    assert alive.pending() and svc.traces()[1] == 0
    other.close()
    alive.close()
    sql.close()
