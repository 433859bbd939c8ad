"""Outcome rows and their traces since migration 0008 (no foreign key between them):
removing a learner's data removes its outcomes, the migration keeps every row, and the
observe write is what keeps every outcome row with a stored trace."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import HEAD_REVISION, SqlStore

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


def posterior_fill(url: str) -> list[str] | None:
    """The storage options of the posteriors table on PostgreSQL (None on SQLite)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        if engine.dialect.name != "postgresql":
            return None
        with engine.connect() as conn:
            return conn.execute(
                sa.text(
                    "SELECT coalesce(reloptions, '{}') FROM pg_class "
                    "WHERE oid = to_regclass('posteriors')"
                )
            ).scalar_one()
    finally:
        engine.dispose()


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
    view of posterior changes reads the same; on PostgreSQL posterior pages are filled to
    half. Going back down restores the key and the default fill."""
    from alembic import command

    from learning_bot.storage.database import (
        _alembic_config,
        make_engine,
        upgrade,
        write_transaction,
    )

    store = SqlStore(database_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    for i in range(5):
        assert service.observe(report(f"m-{i}", calls=("Read", "Bash"))).recorded
    assert not outcome_key(database_url)
    postgres = store.engine.dialect.name == "postgresql"
    assert posterior_fill(database_url) == (["fillfactor=50"] if postgres else None)
    before = outcome_rows(store)
    changes = view_rows(store)
    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0007")
    assert outcome_key(database_url)
    assert posterior_fill(database_url) == ([] if postgres else None)
    assert outcome_rows(store) == before
    assert view_rows(store) == changes
    assert upgrade(engine) == ("0007", HEAD_REVISION)
    engine.dispose()
    assert not outcome_key(database_url)
    assert posterior_fill(database_url) == (["fillfactor=50"] if postgres else None)
    assert outcome_rows(store) == before
    assert view_rows(store) == changes
    assert service.verify().ok
    assert service.observe(report("after")).recorded
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
