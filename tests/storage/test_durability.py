"""Concurrent writers, duplicate traces from two processes, SIGKILL mid-run, migrations."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import HEAD_REVISION, SchemaError, SqlStore, upgrade
from learning_bot.storage.database import make_engine

from .helpers import workload_arms, workload_report

ARM_COUNT = 20


def _writer(url: str, worker: int, count: int, start: mp.synchronize.Event) -> None:
    import random

    store = SqlStore(url)
    svc = LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0.05
    )
    arms = workload_arms(ARM_COUNT)
    rng = random.Random(worker)
    start.wait()
    for i in range(count):
        used = [j for j in range(ARM_COUNT) if rng.random() < 0.3] or [0]
        svc.observe(workload_report(f"w{worker}-{i}", arms, used))
    store.close()


def _duplicate_writer(url: str, count: int, start: mp.synchronize.Event) -> None:
    store = SqlStore(url)
    svc = LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0.05
    )
    arms = workload_arms(ARM_COUNT)
    start.wait()
    for i in range(count):
        svc.observe(workload_report(f"shared-{i}", arms, [i % ARM_COUNT]))
    store.close()


def _run(target: object, args_list: list[tuple[object, ...]]) -> None:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(*args, start)) for args in args_list]  # type: ignore[arg-type]
    for p in procs:
        p.start()
    time.sleep(0.5)
    start.set()
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"


def _totals(store: SqlStore) -> tuple[float, int]:
    with store.engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT SUM(alpha + beta - prior_alpha - prior_beta), SUM(pulls) FROM posteriors"
        ).one()
    return float(row[0] or 0), int(row[1] or 0)


@pytest.mark.slow
def test_four_processes_lose_nothing(database_url: str) -> None:
    SqlStore(database_url).close()  # create the schema before the race
    _run(_writer, [(database_url, w, 500) for w in range(4)])
    store = SqlStore(database_url)
    svc = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    expected = 4 * 500 * ARM_COUNT
    mass, pulls = _totals(store)
    assert mass == expected
    assert pulls == expected
    report = svc.verify()
    assert report.ok, report.problems
    assert report.traces_checked == 2000
    assert svc.status().summary.trace_count == 2000
    store.close()


@pytest.mark.slow
def test_duplicate_traces_from_two_processes_count_once(database_url: str) -> None:
    SqlStore(database_url).close()
    _run(_duplicate_writer, [(database_url, 200), (database_url, 200)])
    store = SqlStore(database_url)
    svc = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    assert svc.traces(limit=1)[1] == 200
    mass, pulls = _totals(store)
    assert pulls == 200 * ARM_COUNT
    assert mass == 200 * ARM_COUNT
    assert svc.verify().ok
    store.close()


def _endless_writer(url: str, ready: mp.synchronize.Event) -> None:
    store = SqlStore(url)
    svc = LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0.05
    )
    arms = workload_arms(ARM_COUNT)
    i = 0
    while True:
        svc.observe_many(
            [workload_report(f"k{i}-{j}", arms, [j % ARM_COUNT, 3]) for j in range(25)]
        )
        i += 1
        if i == 3:
            ready.set()


@pytest.mark.slow
def test_sigkill_mid_run_leaves_only_whole_traces(database_url: str) -> None:
    SqlStore(database_url).close()
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_endless_writer, args=(database_url, ready))
    proc.start()
    assert ready.wait(120)
    time.sleep(0.7)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    store = SqlStore(database_url)
    svc = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    report = svc.verify()
    assert report.ok, report.problems
    total = svc.traces(limit=1)[1]
    assert total >= 75
    assert total % 25 == 0
    with store.engine.connect() as conn:
        arm_rows = conn.exec_driver_sql("SELECT COUNT(*) FROM trace_arms").scalar_one()
    assert arm_rows == total * ARM_COUNT
    _, pulls = _totals(store)
    assert pulls == total * ARM_COUNT
    store.close()


def test_new_database_is_created_at_head(database_url: str) -> None:
    store = SqlStore(database_url)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == (
            HEAD_REVISION
        )
    store.close()


def test_outdated_schema_needs_explicit_upgrade(database_url: str) -> None:
    from alembic import command

    from learning_bot.storage.database import _alembic_config, write_transaction

    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        command.upgrade(_alembic_config(conn), "0001")
    with pytest.raises(SchemaError, match="run `learning-bot db upgrade`"):
        SqlStore(database_url)
    assert upgrade(engine) == ("0001", HEAD_REVISION)
    SqlStore(database_url).close()
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(SchemaError, match="newer version"):
        SqlStore(database_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE alembic_version")
    with pytest.raises(SchemaError, match="not created by learning-bot"):
        SqlStore(database_url)
    engine.dispose()


def test_upgrade_is_idempotent(database_url: str) -> None:
    engine = make_engine(database_url)
    assert upgrade(engine) == (None, HEAD_REVISION)
    assert upgrade(engine) == (HEAD_REVISION, HEAD_REVISION)
    SqlStore(database_url).close()
    engine.dispose()


def test_sqlite_settings(sqlite_url: str) -> None:
    store = SqlStore(sqlite_url)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
    store.close()


def test_unreachable_database_is_a_clear_error() -> None:
    from learning_bot.engine import Unavailable

    # The store opens anyway (a server starts while its database is down); its first use
    # says why it cannot answer.
    store = SqlStore("postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(Unavailable, match="storage is unavailable"):
        store.learner_names()
    store.close()


def test_default_url_honours_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from learning_bot.storage import default_database_url

    monkeypatch.setenv("LEARNING_BOT_DATABASE_URL", f"sqlite:///{tmp_path}/x.sqlite")
    assert default_database_url().endswith("x.sqlite")
    monkeypatch.delenv("LEARNING_BOT_DATABASE_URL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_database_url().startswith("sqlite:///")
    assert "learning-bot" in default_database_url()


def test_read_only_sqlite_file_is_a_clear_error(tmp_path: object) -> None:
    from learning_bot.engine import Unavailable

    from .helpers import report

    path = f"{tmp_path}/ro.sqlite"
    rw = SqlStore(f"sqlite:///{path}")
    svc = LearningService(rw, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    svc.observe(report("before"))
    rw.close()
    ro = SqlStore(f"sqlite:///file:{path}?mode=ro&uri=true")
    ro_svc = LearningService(ro, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    with pytest.raises(Unavailable, match="readonly"):
        ro_svc.observe(report("after"))
    assert ro_svc.status().summary.trace_count == 1
    ro.close()
    rw = SqlStore(f"sqlite:///{path}")
    again = LearningService(rw, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    assert again.verify().ok
    assert again.traces()[1] == 1
    rw.close()


def test_migrations_match_the_schema(database_url: str) -> None:
    """The tables the code declares are exactly what the migrations build."""
    from alembic import command
    from alembic.util.exc import AutogenerateDiffsDetected

    from learning_bot.storage.database import _alembic_config, write_transaction

    SqlStore(database_url).close()
    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        try:
            command.check(_alembic_config(conn))
        except AutogenerateDiffsDetected as exc:  # pragma: no cover - the failure message
            pytest.fail(f"schema and migrations differ: {exc}")
    engine.dispose()


def test_arm_key_migration_keeps_the_data(database_url: str) -> None:
    """0003 stored arm ids in every trace outcome; 0004 stores arm keys: nothing is lost."""
    from alembic import command

    from learning_bot.storage.database import _alembic_config, write_transaction

    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        command.upgrade(_alembic_config(conn), "0003")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO learners (name, phase, stats_epoch, status_from_epoch, created_at) "
            "VALUES ('default', 'active', 0, 0, 1)"
        )
        lid = conn.exec_driver_sql("SELECT id FROM learners").scalar_one()
        mark = "?" if "sqlite" in database_url else "%s"
        for arm, alpha, beta, pulls in (("tool:a:X", 5.0, 2.0, 3), ("tool:a:Y", 4.0, 3.0, 3)):
            conn.exec_driver_sql(
                "INSERT INTO posteriors (learner_id, arm_id, label, token_cost, alpha, beta, "
                "pulls, last_updated, prior_alpha, prior_beta, prior_pulls, epoch, "
                f"reset_trace_pk) VALUES ({', '.join([mark] * 13)})",
                (lid, arm, arm[-1], 10, alpha, beta, pulls, 5, 3.0, 1.0, 0, 0, 0),
            )
        for i in range(3):
            conn.exec_driver_sql(
                "INSERT INTO traces (learner_id, trace_id, run_id, session_id, session_key, "
                "channel, conversation, timestamp, provider, model, is_baseline, phase, guard, "
                "usage_input, usage_output, usage_cache_read, usage_total, duration_ms, "
                "system_prompt_chars, aborted, error, context, stats_epoch, bootstrapped) "
                f"VALUES ({', '.join([mark] * 24)})",
                (
                    lid,
                    f"t{i}",
                    f"t{i}",
                    "",
                    "",
                    "c",
                    "c",
                    10 + i,
                    "",
                    "",
                    False,
                    "active",
                    None,
                    1,
                    1,
                    0,
                    2,
                    5,
                    0,
                    False,
                    None,
                    "{}",
                    0,
                    False,
                ),
            )
            pk = conn.exec_driver_sql(
                f"SELECT id FROM traces WHERE trace_id = {mark}", (f"t{i}",)
            ).scalar_one()
            for arm, hit in (("tool:a:X", i != 1), ("tool:a:Y", i == 1)):
                conn.exec_driver_sql(
                    "INSERT INTO trace_arms (trace_pk, arm_id, included, referenced, token_cost, "
                    f"reward, epoch) VALUES ({', '.join([mark] * 7)})",
                    (pk, arm, True, hit, 10, 1.0 if hit else 0.0, 0),
                )
        conn.exec_driver_sql(
            "INSERT INTO run_stats (learner_id, stats_epoch, shard, trace_count, total_tokens, "
            "min_ts, max_ts, baseline_runs, baseline_tokens, baseline_duration, selected_runs, "
            f"selected_tokens, selected_duration, changes) VALUES ({', '.join([mark] * 14)})",
            (lid, 0, 0, 3, 6, 10, 12, 0, 0, 0, 3, 6, 15, 6),
        )
    assert upgrade(engine)[1] == HEAD_REVISION
    store = SqlStore(database_url)
    svc = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    report = svc.verify()
    assert report.ok, report.problems
    traces, total = svc.traces()
    assert total == 3
    outcomes = {(t.trace_id, a.arm_id): a.referenced for t in traces for a in t.arms}
    assert outcomes == {
        ("t0", "tool:a:X"): True,
        ("t0", "tool:a:Y"): False,
        ("t1", "tool:a:X"): False,
        ("t1", "tool:a:Y"): True,
        ("t2", "tool:a:X"): True,
        ("t2", "tool:a:Y"): False,
    }
    from .helpers import workload_arms, workload_report

    arms = workload_arms(3)
    svc.observe(workload_report("after", arms, [0]))
    assert svc.verify().ok
    with store.engine.connect() as conn:
        changes = conn.exec_driver_sql(
            "SELECT arm_id, COUNT(*) FROM posterior_changes GROUP BY arm_id ORDER BY arm_id"
        ).all()
    assert [tuple(r) for r in changes][:2] == [("tool:a:X", 3), ("tool:a:Y", 3)]
    store.close()
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0003")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM trace_arms").scalar_one() == 9
    assert upgrade(engine) == ("0003", HEAD_REVISION)
    engine.dispose()


def test_verify_reads_one_snapshot_while_a_writer_commits(database_url: str) -> None:
    """A writer that commits between verify's reads (the change log first, the posteriors
    after) is either wholly seen or wholly unseen: verify reports no problem either way, as
    when a killed client's last statement still commits on the server."""
    from sqlalchemy import event

    config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)
    arms = workload_arms(ARM_COUNT)
    reader = SqlStore(database_url)
    svc = LearningService(reader, config, cache_ttl=0)
    svc.observe_many([workload_report(f"v{j}", arms, [j % ARM_COUNT]) for j in range(10)])
    writer_store = SqlStore(database_url)
    writer = LearningService(writer_store, config, cache_ttl=0)
    writer.observe(workload_report("w-setup", arms, [1]))
    fired: list[int] = []

    def commit_in_between(conn: object, *_: object) -> None:
        if not fired:
            fired.append(1)
            writer.observe_many([workload_report(f"w{j}", arms, [2, 3]) for j in range(25)])

    event.listen(reader.engine, "after_cursor_execute", commit_in_between)
    try:
        report = svc.verify()
    finally:
        event.remove(reader.engine, "after_cursor_execute", commit_in_between)
    assert fired
    assert report.ok, report.problems
    assert svc.verify().ok
    assert svc.traces(limit=1)[1] == 36
    reader.close()
    writer_store.close()
