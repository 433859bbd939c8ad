"""The SQLite form of the inclusion counts (storage.queries.INCLUSION_SQLITE) counts what the
portable query counts, in arm id order, through SqlStore and LiteReader alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.simulate import simulate
from learning_bot.storage import SqlStore, queries
from learning_bot.storage.lite import LiteReader
from tests.storage.helpers import ARMS, report


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three learners whose traces interleave: baseline, conversational (guarded), passive and
    selected runs, and a reset that moves one learner's status to a new epoch."""
    file = tmp_path_factory.mktemp("lite") / "lite.sqlite"
    store = SqlStore(f"sqlite:///{file}")
    try:
        a, b = (LearningService(store, learner=name) for name in ("a", "b"))
        c = LearningService(store, LearningConfig(phase=Phase.PASSIVE), learner="c")
        for i in range(12):
            left_out = [ARMS[i % len(ARMS)].id] if i % 3 else []
            c.observe(report(f"c-{i}", excluded=left_out, calls=("Read", "Bash")))
        for seed in range(3):
            simulate(a, traces=40, arms=8, seed=seed)
            simulate(b, traces=25, arms=5, seed=seed)
        a.reset(actor="test")
        simulate(a, traces=15, arms=8, seed=9)
        c.set_phase(Phase.ACTIVE, actor="test")
        for i in range(12, 30):
            left_out = [ARMS[i % len(ARMS)].id] if i % 2 else []
            calls = ("message",) if i % 4 == 0 else ("Read", "WebSearch")
            c.observe(report(f"c-{i}", excluded=left_out, calls=calls, baseline=i % 5 == 0))
    finally:
        store.close()
    return file


@pytest.mark.parametrize("window", [1, 7, 30, 1000])
def test_the_sqlite_query_counts_what_the_portable_one_counts(path: Path, window: int) -> None:
    with sqlite3.connect(path) as conn:
        for learner in (1, 2, 3, 4):
            params = (learner, learner, window)
            portable = conn.execute(queries.INCLUSION, params).fetchall()
            fast = conn.execute(queries.INCLUSION_SQLITE, params).fetchall()
            assert fast == sorted(portable)
            assert len({row[0] for row in fast}) == len(fast)
    store = SqlStore(f"sqlite:///{path}", auto_create=False)
    reader = LiteReader(path)
    try:
        for name in ("a", "b", "c"):
            learner = store.learner_state(store.open_learner(name, Phase.PASSIVE).id).id
            counts = store.inclusion_counts(learner, window)
            assert counts == reader.inclusion_counts(learner, window)
            assert list(counts) == sorted(counts)
            assert counts or window < 30, name
    finally:
        store.close()
        reader.close()


def test_the_reader_serves_the_stores_reads(path: Path) -> None:
    store = SqlStore(f"sqlite:///{path}", auto_create=False)
    reader = LiteReader(path)
    try:
        for name in ("a", "b", "c"):
            state = store.open_learner(name, Phase.PASSIVE)
            assert reader.open_learner(name, Phase.PASSIVE) == state
            assert reader.learner_state(state.id) == store.learner_state(state.id)
            assert reader.load_arms(state.id) == store.load_arms(state.id)
            assert reader.run_stats(state.id) == store.run_stats(state.id)
            assert reader.last_reset(state.id) == store.last_reset(state.id)
    finally:
        store.close()
        reader.close()
