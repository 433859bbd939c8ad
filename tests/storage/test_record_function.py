"""The PostgreSQL write of observed runs through `learning_bot_record_runs` (migration 0009):
the function comes and goes with its migration, and a run that waited for its arms' rows
applies its change to the values another writer committed meanwhile."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import HEAD_REVISION, SqlStore
from learning_bot.storage.database import SchemaError

from .helpers import ARMS, report

ACTIVE = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)


def functions(url: str) -> list[str]:
    """The learning_bot_ functions in the schema the URL's search_path starts with."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = current_schema() AND starts_with(p.proname, 'learning_bot_')"
            ).all()
    finally:
        engine.dispose()
    return sorted(r[0] for r in rows)


def test_the_function_comes_and_goes_with_its_migration(postgres_url: str) -> None:
    """At the head revision the function is there; down at 0008 it is gone and the store
    asks for an upgrade instead of writing; back up, observe writes and verify holds."""
    from alembic import command

    from learning_bot.storage.database import (
        _alembic_config,
        make_engine,
        upgrade,
        write_transaction,
    )

    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    assert service.observe(report("before")).recorded
    assert functions(postgres_url) == ["learning_bot_record_runs"]
    store.close()

    engine = make_engine(postgres_url)
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0008")
    assert functions(postgres_url) == []
    with pytest.raises(SchemaError, match=rf"revision 0008, this version needs {HEAD_REVISION}"):
        SqlStore(postgres_url, auto_create=False).load_arms(1)

    assert upgrade(engine) == ("0008", HEAD_REVISION)
    engine.dispose()
    assert functions(postgres_url) == ["learning_bot_record_runs"]
    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    assert service.observe(report("after")).recorded
    assert service.observe(report("after")).recorded is False
    check = service.verify()
    assert check.ok and check.traces_checked == 2
    store.close()


def test_a_run_that_waited_for_its_arms_builds_on_what_was_committed_meanwhile(
    postgres_url: str,
) -> None:
    """Another transaction holds every arm's row and changes it; an observe of those arms
    waits, then adds its pull to the committed value, not to the one it first read."""
    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    assert service.observe(report("first")).recorded
    learner = service.learner_id
    other = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    done = threading.Event()
    results: list[bool] = []

    def observe() -> None:
        results.append(service.observe(report("second")).recorded)
        done.set()

    with other.connect() as conn:
        conn.execute(
            sa.text("UPDATE posteriors SET pulls = pulls + 1000 WHERE learner_id = :learner"),
            {"learner": learner},
        )
        writer = threading.Thread(target=observe)
        writer.start()
        assert not done.wait(0.5), "the observe did not wait for the rows held"
        conn.commit()
    writer.join(timeout=120)
    other.dispose()
    assert results == [True]
    with store.engine.connect() as conn:
        pulls = conn.execute(
            sa.text("SELECT arm_id, pulls FROM posteriors WHERE learner_id = :learner"),
            {"learner": learner},
        ).all()
    assert dict(pulls) == {a.id: 1002 for a in ARMS}
    store.close()


def test_the_phase_gate_comes_and_goes_with_migration_0016(postgres_url: str) -> None:
    """Down at 0015 the function is the one without the phase and settings gate; back up,
    it takes them."""
    from alembic import command

    from learning_bot.storage.database import (
        _alembic_config,
        make_engine,
        upgrade,
        write_transaction,
    )

    def arguments() -> str:
        engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                return str(
                    conn.exec_driver_sql(
                        "SELECT pg_get_function_identity_arguments(p.oid) FROM pg_proc p "
                        "JOIN pg_namespace n ON n.oid = p.pronamespace "
                        "WHERE n.nspname = current_schema() "
                        "AND p.proname = 'learning_bot_record_runs'"
                    ).scalar_one()
                )
        finally:
            engine.dispose()

    SqlStore(postgres_url).close()
    assert "p_phase text, p_settings text" in arguments()
    engine = make_engine(postgres_url)
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0015")
    assert "p_phase" not in arguments()
    assert upgrade(engine) == ("0015", HEAD_REVISION)
    engine.dispose()
    assert "p_phase text, p_settings text" in arguments()
    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=0)
    assert service.observe(report("after")).recorded
    assert service.verify().ok
    store.close()
