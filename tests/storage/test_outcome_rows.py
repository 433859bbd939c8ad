"""Outcome rows and their traces since migration 0008 (no foreign key between them):
removing a learner's data removes its outcomes, the migration keeps every row, and a run
writes its trace and counters before it waits for the posterior rows it changes."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from engine import LearningConfig, Phase
from engine.service import LearningService
from storage import HEAD_REVISION, SqlStore
from storage.hotpath import SHARDS

from .helpers import ARMS, report

ACTIVE = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)
KEY = "fk_trace_arms_trace_pk_traces"


def outcome_rows(store: SqlStore) -> dict[int, int]:
    """Outcome rows per learner, and those whose trace is gone under learner 0."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT coalesce(t.learner_id, 0), count(*) FROM trace_arms ta "
                "LEFT JOIN traces t ON t.id = ta.trace_pk GROUP BY coalesce(t.learner_id, 0)"
            )
        ).all()
    return {int(learner): int(n) for learner, n in rows}


def view_rows(store: SqlStore) -> list[tuple[object, ...]]:
    """The posterior_changes view, in a fixed order."""
    with store.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text(
                    "SELECT learner_id, arm_id, epoch, reward, source, trace_id "
                    "FROM posterior_changes ORDER BY trace_id, arm_id"
                )
            )
        ]


def outcome_key(url: str) -> bool:
    """Whether trace_arms.trace_pk references traces.id in this database (read on a new
    connection: a pooled SQLite one can still hold the schema it read before a migration)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            keys = sa.inspect(conn).get_foreign_keys("trace_arms")
    finally:
        engine.dispose()
    return any(k["referred_table"] == "traces" for k in keys)


def test_removing_a_learners_data_removes_its_outcomes(database_url: str) -> None:
    """delete_learner_data takes a learner's outcome rows with its traces (nothing cascades
    any more), and leaves the other learner's alone."""
    store = SqlStore(database_url)
    kept = LearningService(store, ACTIVE, learner="kept", cache_ttl=0)
    gone = LearningService(store, ACTIVE, learner="gone", cache_ttl=0)
    for i in range(4):
        assert kept.observe(report(f"k-{i}")).recorded
        assert gone.observe(report(f"g-{i}")).recorded
    assert outcome_rows(store) == {kept.learner_id: 4 * len(ARMS), gone.learner_id: 4 * len(ARMS)}
    store.delete_learner_data(gone.learner_id)
    assert outcome_rows(store) == {kept.learner_id: 4 * len(ARMS)}
    assert kept.verify().ok
    store.close()


def test_the_migration_drops_the_key_and_keeps_every_row(database_url: str) -> None:
    """0008 drops the outcome rows' key (SQLite rebuilds the table) and changes no row; the
    view of posterior changes reads the same; going back down restores the key."""
    from alembic import command

    from storage.database import _alembic_config, make_engine, upgrade, write_transaction

    store = SqlStore(database_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    for i in range(5):
        assert service.observe(report(f"m-{i}", calls=("Read", "Bash"))).recorded
    assert not outcome_key(database_url)
    before = outcome_rows(store)
    changes = view_rows(store)
    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0007")
    assert outcome_key(database_url)
    assert outcome_rows(store) == before
    assert view_rows(store) == changes
    assert upgrade(engine) == ("0007", HEAD_REVISION)
    engine.dispose()
    assert not outcome_key(database_url)
    assert outcome_rows(store) == before
    assert view_rows(store) == changes
    assert service.verify().ok
    assert service.observe(report("after")).recorded
    store.close()


def test_a_run_writes_its_trace_and_counters_before_it_waits_for_posterior_rows(
    postgres_url: str,
) -> None:
    """While another transaction holds an arm's posterior row, an observe of that arm waits,
    already holding its counter row: it locks the posterior rows last, so other writers wait
    on them for as short a time as possible. Once the row is free, the run is recorded whole."""
    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    i = 0
    with store.engine.connect() as conn:
        count = sa.text("SELECT count(*) FROM run_stats WHERE learner_id = :l")
        while conn.execute(count, {"l": service.learner_id}).scalar() < SHARDS:
            assert service.observe(report(f"warm-{i}")).recorded
            i += 1
            assert i < 2000, "every counter shard should exist after a few hundred runs"
    first = min((a.id for a in ARMS), key=lambda a: a.encode())
    holder = store.engine.connect()
    holder.execute(
        sa.text("SELECT 1 FROM posteriors WHERE learner_id = :l AND arm_id = :a FOR UPDATE"),
        {"l": service.learner_id, "a": first},
    )
    results: list[bool] = []
    writer = threading.Thread(
        target=lambda: results.append(service.observe(report("blocked")).recorded)
    )
    writer.start()
    free = sa.text(
        "SELECT shard FROM run_stats WHERE learner_id = :l ORDER BY shard FOR UPDATE SKIP LOCKED"
    )
    waiting = False
    try:
        with store.engine.connect() as probe:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                unlocked = probe.execute(free, {"l": service.learner_id}).scalars().all()
                probe.rollback()
                if len(unlocked) == SHARDS - 1:
                    waiting = True
                    break
                time.sleep(0.02)
        assert not results, "the observe should wait for the posterior row held elsewhere"
    finally:
        holder.rollback()
        holder.close()
        writer.join(timeout=30)
    assert waiting, "the waiting observe should hold one counter row"
    assert results == [True]
    assert service.verify().ok
    assert service.status().summary.trace_count == i + 1
    store.close()


@pytest.mark.parametrize("runs", [1, 3])
def test_outcome_rows_name_only_stored_traces(database_url: str, runs: int) -> None:
    """Every outcome row written, singly or in a batch, belongs to a stored trace of its
    learner: no key checks it, the write itself does."""
    store = SqlStore(database_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    reports = [report(f"b-{i}") for i in range(runs)]
    service.observe_many(reports)
    service.observe_many(reports)  # all duplicates: nothing more
    assert outcome_rows(store) == {service.learner_id: runs * len(ARMS)}
    store.close()
