"""The observe write: one round trip per run on PostgreSQL (one call of the server-side
function), with the same outcomes as before on both backends (runs stored meanwhile, a
half-life changed by another replica, arm rows gone)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.pool import Pool

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.forgetting import fold, forget, keep_factor
from learning_bot.engine.posterior import prior_parameters
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

from .helpers import ARMS, report

ACTIVE = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)


@pytest.fixture
def round_trips() -> Iterator[list[Any]]:
    """Every PostgreSQL connection opened while the test runs writes its protocol trace to a
    file of its own (libpq's PQtrace); yields the open trace files."""
    from psycopg import pq

    files: list[Any] = []

    def trace(dbapi_conn: Any, _record: Any) -> None:
        pgconn = getattr(dbapi_conn, "pgconn", None)
        if pgconn is None:
            return
        out = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed when the test ends
        files.append(out)
        pgconn.trace(out.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    event.listen(Pool, "connect", trace)
    try:
        yield files
    finally:
        event.remove(Pool, "connect", trace)
        for out in files:
            out.close()


def _answers(files: list[Any]) -> int:
    """Server round trips so far: each ends with the server's ReadyForQuery."""
    total = 0
    for out in files:
        out.flush()
        out.seek(0)
        total += sum("\tReadyForQuery" in line for line in out if line.startswith("B"))
    return total


def test_an_observe_is_one_round_trip_on_postgresql(
    postgres_url: str, round_trips: list[Any]
) -> None:
    """Once its arms are known, an observe is one call, sent alone in autocommit: no
    BEGIN, no COMMIT, no ping, one answer from the server; a duplicate is one as well."""
    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=3600)
    for i in range(3):  # the arms' rows, the cache's first loads, the statement prepared
        assert service.observe(report(f"warm-{i}")).recorded
    before = _answers(round_trips)
    for i in range(5):
        assert service.observe(report(f"run-{i}", calls=("Read", "Bash"))).recorded
    assert service.observe(report("run-0")).duplicate
    assert _answers(round_trips) - before == 6
    assert service.verify().ok
    posteriors = {p.arm_id: p.posterior for p in service.posteriors()}
    assert posteriors["tool:exec:Bash"].pulls == 8
    assert posteriors["tool:exec:Bash"].alpha == 3.0 + 5  # Beta(3, 1) and 5 uses
    store.close()


def _expected(rewards: dict[str, list[list[float]]], half_life: float) -> dict[str, float]:
    """Each arm's alpha after its rewards, one folded step per write, as storage applies them."""
    keep = keep_factor(half_life)
    out = {}
    for arm_id, writes in rewards.items():
        prior = prior_parameters(parse_arm_id(arm_id).type)[0]
        alpha = prior
        for write in writes:
            f = fold(write, keep)
            alpha = forget(alpha, prior, f.keep, f.alpha_gain)
        out[arm_id] = alpha
    return out


def test_a_batch_with_a_run_stored_meanwhile_folds_only_the_new_ones(database_url: str) -> None:
    """A batch holding a trace already stored records the others, folded together without
    it (PostgreSQL rolls the first attempt back and writes the new runs again), to the bit."""
    store = SqlStore(database_url)
    service = LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE, half_life=7.0)
    )
    first = service.observe(report("a", calls=("Read",)))
    batch = service.observe_many(
        [
            report("b", calls=("Bash",)),
            report("a", calls=("Bash",)),
            report("c", calls=("Read", "Bash")),
            report("b"),
        ]
    )
    assert [r.recorded for r in batch] == [True, False, True, False]
    assert [r.duplicate for r in batch] == [False, True, False, True]
    expected = _expected(
        {
            "tool:fs:Read": [[first.rewards["tool:fs:Read"]], [0.0, 1.0]],
            "tool:exec:Bash": [[first.rewards["tool:exec:Bash"]], [1.0, 1.0]],
        },
        7.0,
    )
    stored = store.load_arms(service.learner_id)
    for arm_id, alpha in expected.items():
        assert stored[arm_id].posterior.alpha == alpha
        assert stored[arm_id].posterior.pulls == 3
    assert service.traces()[1] == 3
    assert service.status().summary.trace_count == 3
    report_ = service.verify()
    assert report_.ok, report_.problems
    assert report_.observations_checked == 3 * len(ARMS)
    store.close()


def test_a_half_life_set_by_another_replica_is_used_by_the_next_write(database_url: str) -> None:
    """A store that last wrote without forgetting writes the next run with the half-life
    another replica set meanwhile, so `verify` replays it exactly."""
    writer = SqlStore(database_url)
    other = SqlStore(database_url)
    service = LearningService(writer, ACTIVE, cache_ttl=3600)
    before = service.observe(report("before"))
    LearningService(other, ACTIVE).set_settings({"halfLife": 4.0}, actor="other replica")
    after = service.observe(report("after", calls=("Bash",)))
    assert after.recorded
    stored = other.load_arms(service.learner_id)
    keep = keep_factor(4.0)
    for arm_id in ("tool:fs:Read", "tool:exec:Bash"):
        prior = prior_parameters(parse_arm_id(arm_id).type)[0]
        base = prior + before.rewards[arm_id]  # the rebase made this the new epoch's base
        assert stored[arm_id].posterior.alpha == forget(base, prior, keep, after.rewards[arm_id])
    result = other.verify(service.learner_id)
    assert result.ok, result.problems
    writer.close()
    other.close()


def test_arm_rows_removed_under_a_store_are_made_again(postgres_url: str) -> None:
    """A store that knew the arms finds their rows gone (PostgreSQL's statement checks that
    every arm has its row): the run is still recorded whole, the rows made again at their
    priors, never an outcome without its posterior."""
    store = SqlStore(postgres_url)
    service = LearningService(store, ACTIVE, cache_ttl=3600)
    assert service.observe(report("one")).recorded
    assert service.observe(report("two")).recorded  # the store and the cache know every arm
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM trace_arms"))
        conn.execute(text("DELETE FROM traces"))
        conn.execute(text("DELETE FROM run_stats"))
        conn.execute(text("DELETE FROM posteriors"))
    assert service.observe(report("three")).recorded
    stored = store.load_arms(service.learner_id)
    assert stored["tool:fs:Read"].posterior.pulls == 1
    result = store.verify(service.learner_id)
    assert result.ok, result.problems
    assert result.traces_checked == 1
    store.close()


def test_writers_beside_resets_rewards_and_half_life_changes_stay_exact(
    database_url: str,
) -> None:
    """Per-call and batched observes from two replicas while a third changes the half-life,
    resets arms, undoes resets and gives manual rewards: no deadlock reaches a caller, every
    run is stored once, and `verify` replays every posterior (each change numbered in the
    order it was applied, with the half-life in force when it was)."""
    import threading

    from learning_bot.engine.store_records import RewardChange

    stores = [SqlStore(database_url) for _ in range(3)]
    services = [LearningService(s, ACTIVE, cache_ttl=0.01) for s in stores]
    learner = services[0].learner_id
    assert services[0].observe(report("first")).recorded  # the arms' rows
    errors: list[BaseException] = []
    sent: list[str] = ["first"]

    def writer(index: int) -> None:
        service = services[index]
        try:
            for i in range(40):
                calls = ("Read", "Bash") if i % 3 else ("WebSearch",)
                if i % 5 == 4:
                    batch = [report(f"w{index}-{i}-{j}", calls=calls) for j in range(3)]
                    batch.append(report(f"w{index}-{i}-0"))  # a duplicate inside the batch
                    results = service.observe_many(batch)
                    assert [r.recorded for r in results] == [True, True, True, False]
                    sent.extend(r.trace_id for r in results[:3])
                else:
                    assert service.observe(report(f"w{index}-{i}", calls=calls)).recorded
                    sent.append(f"w{index}-{i}")
        except BaseException as exc:
            errors.append(exc)

    def meddler() -> None:
        store = stores[2]
        try:
            for i in range(12):
                store.set_half_life(learner, (0.0, 6.0, 11.0)[i % 3], at=i)
                store.record_rewards(
                    learner,
                    [RewardChange("tool:fs:Read", 1.0), RewardChange("tool:exec:Bash", 0.0)],
                    actor="test",
                    reason=None,
                    trace_id=None,
                    at=i,
                )
                if i % 4 == 1:
                    store.reset(learner, ["tool:fs:Read"], actor="test", at=i)
                if i % 4 == 3:
                    store.undo_reset(learner, actor="test", at=i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=meddler))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    result = stores[0].verify(learner)
    assert result.ok, result.problems
    assert result.traces_checked == len(sent) == len(set(sent))
    assert services[0].summary().trace_count == len(sent)
    for s in stores:
        s.close()


def test_writers_meeting_new_arms_create_them_one_at_a_time(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas see the same new arms at once. The first has created their rows and is
    about to write its run when the second starts creating them too: the second waits for the
    first to commit instead of inserting rows with the same new keys, on which each would
    wait for the other (a deadlock PostgreSQL breaks by failing one of them)."""
    import threading

    import learning_bot.storage.database as database
    import learning_bot.storage.runs as runs_module

    retried: list[BaseException] = []
    is_retryable = database.is_retryable

    def counting(exc: BaseException) -> bool:
        retried.append(exc)
        return is_retryable(exc)

    monkeypatch.setattr(database, "is_retryable", counting)
    holding, release = threading.Event(), threading.Event()
    record = runs_module.record_postgres

    def pausing(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "first" and not release.is_set():
            holding.set()
            release.wait(120)
        return record(*args, **kwargs)

    monkeypatch.setattr(runs_module, "record_postgres", pausing)
    stores = [SqlStore(postgres_url), SqlStore(postgres_url)]
    services = [LearningService(s, ACTIVE, cache_ttl=0) for s in stores]
    first = threading.Thread(target=services[0].observe, args=(report("a1"),), name="first")
    # the second's runtime offers one more arm, whose id sorts first: without one creator at a
    # time it would give that arm the key the first gave its first arm
    extra = report("b1", arms=(Arm("file:a:notes.md", 10), *ARMS))
    second = threading.Thread(target=services[1].observe, args=(extra,), name="second")
    first.start()
    assert holding.wait(120)
    second.start()
    second.join(0.5)  # it waits for the first (for the learner row, or for its new rows)
    release.set()
    first.join(120)
    second.join(120)
    assert not first.is_alive() and not second.is_alive()
    assert not retried, retried
    arms = stores[0].load_arms(services[0].learner_id)
    assert len(arms) == len(ARMS) + 1
    assert all(a.posterior.pulls == 2 for a in arms.values() if a.arm_id == "tool:fs:Read")
    assert stores[0].verify(services[0].learner_id).ok
    for s in stores:
        s.close()
