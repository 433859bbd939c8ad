"""The observe write checks the learner's phase and settings in its own statement: a replica
whose cached state is older than a phase or settings change made on another replica records
its next run under the learner's current phase and settings, never under ones that ended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.errors import Conflict
from learning_bot.engine.ports import LearnerChanged
from learning_bot.engine.records import RunRecord
from learning_bot.engine.service import RECORD_ATTEMPTS, LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.dead_letters import replay_dead_letters
from learning_bot.storage.spool import Spool
from learning_bot.storage.spool_lines import spool_line

from .helpers import ARMS, report
from .test_spool import record_of

LONG = 3600.0
"""A cache interval no test outlives: replica B never refreshes on its own."""


def replicas(url: str, phase: Phase) -> tuple[SqlStore, LearningService, SqlStore, LearningService]:
    """Two replicas of one learner, each with its own store (its own connections)."""
    config = LearningConfig.for_policy("seed", phase=phase)
    store_a, store_b = SqlStore(url), SqlStore(url)
    a = LearningService(store_a, config, rng=1, cache_ttl=LONG)
    b = LearningService(store_b, config, rng=2, cache_ttl=LONG)
    return store_a, a, store_b, b


def warm(service: LearningService) -> None:
    """The replica has seen the arms and holds the learner's state in its cache, which it
    will not read again on its own (`LONG`)."""
    assert service.observe(report("warm")).recorded
    service.refresh(force=True)
    assert service.selects_in_memory


def pulls(service: LearningService) -> dict[str, int]:
    store = service.store
    return {a: r.posterior.pulls for a, r in store.load_arms(service.learner_id).items()}


def stored(store: SqlStore, learner_id: int, trace_id: str) -> RunRecord:
    return next(r for r in store.iter_traces(learner_id) if r.trace_id == trace_id)


def test_a_run_observed_after_another_replica_went_passive_updates_nothing(
    database_url: str,
) -> None:
    store_a, a, store_b, b = replicas(database_url, Phase.ACTIVE)
    warm(b)  # B's cache holds the learner as active
    before = pulls(b)
    assert a.set_phase(Phase.PASSIVE).changed

    result = b.observe(report("after"))

    assert result.recorded and result.rewards == {}
    assert result.skipped is not None and result.skipped.value == "passive"
    run = stored(store_b, b.learner_id, "after")
    assert run.phase is Phase.PASSIVE
    assert all(o.reward is None for o in run.arms)
    assert pulls(b) == before
    assert b.config.phase is Phase.PASSIVE  # B took the learner's phase from the refusal
    assert b.verify().ok
    store_a.close()
    store_b.close()


def test_a_run_observed_after_another_replica_went_active_updates_posteriors(
    database_url: str,
) -> None:
    store_a, a, store_b, b = replicas(database_url, Phase.PASSIVE)
    warm(b)
    assert a.set_phase(Phase.ACTIVE).changed  # bootstraps "warm"
    before = pulls(a)

    result = b.observe(report("after"))

    assert result.recorded and result.rewards
    run = stored(store_b, b.learner_id, "after")
    assert run.phase is Phase.ACTIVE
    assert any(o.reward is not None for o in run.arms)
    after = pulls(a)
    assert after["tool:fs:Read"] == before["tool:fs:Read"] + 1
    assert b.verify().ok
    # a passive run recorded after the switch would never be bootstrapped: there is none
    passive = [r.trace_id for r in store_a.iter_traces(a.learner_id) if r.phase is Phase.PASSIVE]
    assert passive == ["warm"]
    store_a.close()
    store_b.close()


def test_a_run_observed_after_another_replica_disabled_learning_updates_nothing(
    database_url: str,
) -> None:
    store_a, a, store_b, b = replicas(database_url, Phase.ACTIVE)
    warm(b)
    before = pulls(b)
    a.set_settings({"enabled": False})

    result = b.observe(report("after"))

    assert result.recorded and result.rewards == {}
    assert result.skipped is not None and result.skipped.value == "disabled"
    assert stored(store_b, b.learner_id, "after").guard is not None
    assert pulls(b) == before
    assert b.verify().ok
    store_a.close()
    store_b.close()


def test_the_store_refuses_runs_built_under_another_phase(database_url: str) -> None:
    """Nothing is written, and the refusal names the learner's phase."""
    store = SqlStore(database_url)
    service = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE))
    record = record_of(service, report("built-active"))
    service.set_phase(Phase.PASSIVE)
    with pytest.raises(LearnerChanged) as refused:
        store.record_runs(service.learner_id, [record])
    assert refused.value.phase is Phase.PASSIVE
    assert [r.trace_id for r in store.iter_traces(service.learner_id)] == []
    store.close()


def test_a_spooled_run_is_replayed_under_the_phase_current_at_replay(
    database_url: str, tmp_path: Path
) -> None:
    store = SqlStore(database_url)
    service = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE))
    spool = Spool(tmp_path / "spool")
    spool.append(service.learner_id, [record_of(service, report("spooled"))])
    service.set_phase(Phase.PASSIVE)

    assert spool.replay(store.record_runs) == 1

    run = stored(store, service.learner_id, "spooled")
    assert run.phase is Phase.PASSIVE and all(o.reward is None for o in run.arms)
    assert set(pulls(service).values()) == {0}
    assert service.verify().ok
    spool.close()
    store.close()


def test_a_dead_letter_is_replayed_under_the_phase_current_at_replay(
    database_url: str, tmp_path: Path
) -> None:
    store = SqlStore(database_url)
    service = LearningService(store, LearningConfig.for_policy("seed"))
    root = tmp_path / "spool"
    root.mkdir()
    line = spool_line(service.learner_id, record_of(service, report("dead")), service.learner)
    entry = {"reason": "refused", "at": 0, "run": line}
    (root / "dead-letter.jsonl").write_text(json.dumps(entry) + "\n")
    service.set_phase(Phase.ACTIVE)

    done = replay_dead_letters(root, store.record_runs, lambda name, _r: service.learner_id)

    assert done.stored == 1
    run = stored(store, service.learner_id, "dead")
    assert run.phase is Phase.ACTIVE
    assert {o.arm_id: o.reward for o in run.arms if o.included}["tool:fs:Read"] == 1.0
    assert service.verify().ok
    store.close()


def test_a_learner_without_stored_settings_records_as_before(database_url: str) -> None:
    """A learner made before settings were stored (NULL) is written to under the settings
    of the process that opened it; the check compares JSON null."""
    import sqlalchemy as sa

    store_a, a, store_b, b = replicas(database_url, Phase.ACTIVE)
    with store_a.engine.begin() as conn:
        conn.execute(sa.text("UPDATE learners SET settings = NULL"))
    warm(b)
    result = b.observe(report("after"))
    assert result.recorded and result.rewards
    a.set_settings({"enabled": False})  # the learner gets stored settings
    assert b.observe(report("disabled")).skipped is not None
    assert b.verify().ok
    store_a.close()
    store_b.close()


def test_a_run_recorded_at_selection_takes_the_learner_phase(database_url: str) -> None:
    store_a, a, store_b, b = replicas(database_url, Phase.ACTIVE)
    warm(b)
    a.set_phase(Phase.PASSIVE)

    _, trace_id = b.select_run(list(ARMS), session_key="S1")

    assert stored(store_b, b.learner_id, trace_id).phase is Phase.PASSIVE
    store_a.close()
    store_b.close()


class Changing:
    """A writer whose learner changes before every write."""

    def __init__(self) -> None:
        self.calls = 0

    def record_runs(self, learner_id: int, runs: Any, settings: str | None = None) -> Any:
        self.calls += 1
        raise LearnerChanged(Phase.PASSIVE)


def test_an_observe_gives_up_when_the_learner_keeps_changing(database_url: str) -> None:
    store = SqlStore(database_url)
    writer = Changing()
    service = LearningService(store, LearningConfig(phase=Phase.ACTIVE), writer=writer)
    with pytest.raises(Conflict, match="kept changing"):
        service.observe(report("never"))
    assert writer.calls == RECORD_ATTEMPTS
    store.close()


def test_a_per_arm_outcome_after_another_replica_went_passive_changes_no_posterior(
    database_url: str,
) -> None:
    """observe_arm (an outcome reported arm by arm, as OpenClaw's gateway does) checks the
    learner's phase in its own transaction too: B still holds the learner as active, A made it
    passive, and B's outcome marks the run without touching the posterior."""
    store_a, a, store_b, b = replicas(database_url, Phase.ACTIVE)
    warm(b)
    before = pulls(b)
    assert a.set_phase(Phase.PASSIVE).changed
    outcome = b.observe_arm("tool:fs:Read", 1.0, referenced=True)
    assert not outcome.updated
    assert pulls(b) == before
    assert b.config.phase is Phase.PASSIVE
    assert b.verify().ok
    store_a.close()
    store_b.close()


def test_a_per_arm_outcome_after_another_replica_went_active_updates_the_posterior(
    database_url: str,
) -> None:
    store_a, a, store_b, b = replicas(database_url, Phase.PASSIVE)
    warm(b)
    assert a.set_phase(Phase.ACTIVE).changed
    before = pulls(b)
    outcome = b.observe_arm("tool:fs:Read", 1.0, referenced=True)
    assert outcome.updated
    after = pulls(b)
    assert after["tool:fs:Read"] == before["tool:fs:Read"] + 1
    assert b.verify().ok
    store_a.close()
    store_b.close()


def test_a_dead_lettered_outcome_is_replayed_under_the_phase_current_at_replay(
    database_url: str, tmp_path: Path
) -> None:
    from learning_bot.engine.store_records import PendingArmOutcome
    from learning_bot.storage.dead_letters import DEAD_LETTER
    from learning_bot.storage.spool_lines import outcome_line
    from learning_bot.storage.spool_writes import outcome_under_stored_phase

    store_a, a, store_b, b = replicas(database_url, Phase.ACTIVE)
    warm(b)
    before = pulls(b)
    pending = PendingArmOutcome("tool:fs:Read", 1.0, True, None, True, 1_000, "k-1", Phase.ACTIVE)
    line = outcome_line(b.learner_id, pending)
    (tmp_path / DEAD_LETTER).write_text(json.dumps({"reason": "x", "at": 1, "run": line}) + "\n")
    assert a.set_phase(Phase.PASSIVE).changed
    done = replay_dead_letters(
        tmp_path,
        store_b.record_runs,
        lambda name, item: b.learner_id,
        write_outcome=outcome_under_stored_phase(store_b.record_arm_outcome),
    )
    assert done.stored == 1 and not done.kept
    assert pulls(b) == before  # recorded under passive: no posterior change
    assert b.verify().ok
    store_a.close()
    store_b.close()
