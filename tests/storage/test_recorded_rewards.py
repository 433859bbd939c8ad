"""totalReward and accuracy are the rewards recorded since the last reset, on SQLite and
PostgreSQL, whether or not the posteriors forget: forgetting decays alpha and beta, never the
count of what was recorded. `db verify` proves the recorded sums and catches tampering."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import update

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.service import LearningService
from learning_bot.engine.simulation import make_workload
from learning_bot.storage import SqlStore
from learning_bot.storage.schema import posteriors


def observe_runs(service: LearningService, prefix: str, runs: int, seed: int) -> float:
    """`runs` selected and observed runs; returns the rewards they recorded (read back from
    the stored runs' outcomes)."""
    workload = make_workload(14, seed=seed)
    arm_set = ArmSet(workload.arms)
    rng = np.random.default_rng(seed)
    for t in range(runs):
        selection = service.select(arm_set)
        conversational, used = workload.draw_usage(t, rng)
        service.observe(
            workload.report(
                f"{prefix}-{t}", selection.selected, used, conversational,
                is_baseline=selection.is_baseline,
            )
        )  # fmt: skip
    return sum(
        o.reward or 0.0
        for run in service.store.iter_traces(service.learner_id)
        if run.trace_id.startswith(f"{prefix}-")
        for o in run.arms
    )


def stored_rewards(store: SqlStore, learner: int) -> tuple[float, int]:
    """(rewards, pulls) summed over the learner's rows, as another process reads them."""
    arms = store.load_arms(learner).values()
    return sum(a.rewards or 0.0 for a in arms), sum(a.posterior.pulls for a in arms)


@pytest.mark.parametrize("half_life", [0.0, 10.0])
def test_total_reward_counts_what_was_recorded(store: SqlStore, half_life: float) -> None:
    config = LearningConfig(phase=Phase.ACTIVE, half_life=half_life, token_budget=3000)
    service = LearningService(store, config, rng=3, cache_ttl=0)
    recorded = observe_runs(service, "a", 60, 1)
    arm = sorted(service.arms())[0]
    service.reward(arm, 0.25, actor="tester")
    recorded += 0.25
    service.observe_arm(arm, 1.0, referenced=True)
    recorded += 1.0
    summary = service.summary()
    assert summary.total_reward == pytest.approx(recorded)
    total, pulls = stored_rewards(store, service.learner_id)
    assert total == pytest.approx(recorded)
    assert summary.accuracy == pytest.approx(recorded / pulls)
    # a second replica reads the same figures from storage
    other = LearningService(SqlStore(store.engine.url.render_as_string(False)), config, rng=4)
    assert other.summary().total_reward == pytest.approx(recorded)
    assert other.summary().accuracy == pytest.approx(summary.accuracy)
    other.store.close()
    report = store.verify(service.learner_id)
    assert report.ok, report.problems


def test_forgetting_leaves_the_recorded_sum_whole(store: SqlStore) -> None:
    """With a short half-life the posterior's evidence is far below what was recorded, and
    the old reading of it (pulls - (beta - 1)) would be wrong; the summary is not."""
    config = LearningConfig(phase=Phase.ACTIVE, half_life=3.0, token_budget=3000)
    service = LearningService(store, config, rng=5, cache_ttl=0)
    recorded = observe_runs(service, "f", 80, 2)
    arms = store.load_arms(service.learner_id).values()
    from_posteriors = sum(max(0.0, a.posterior.pulls - (a.posterior.beta - 1.0)) for a in arms)
    assert abs(from_posteriors - recorded) > 1.0
    assert service.summary().total_reward == pytest.approx(recorded)


def test_reset_and_undo_move_the_recorded_sums(store: SqlStore) -> None:
    config = LearningConfig(phase=Phase.ACTIVE, half_life=10.0, token_budget=3000)
    service = LearningService(store, config, rng=6, cache_ttl=0)
    before = observe_runs(service, "r", 40, 3)
    service.reset(actor="tester")
    assert service.summary().total_reward == 0.0
    assert service.summary().accuracy is None
    after = observe_runs(service, "s", 20, 4)
    assert service.summary().total_reward == pytest.approx(after)
    service.undo_reset(actor="tester")
    assert service.summary().total_reward == pytest.approx(before + after)
    assert stored_rewards(store, service.learner_id)[0] == pytest.approx(before + after)
    # a changed half-life rebases every arm; the sums carry on
    rebased = LearningService(store, config.merged({"halfLife": 40}), rng=7, cache_ttl=0)
    more = observe_runs(rebased, "t", 10, 5)
    assert rebased.summary().total_reward == pytest.approx(before + after + more)
    report = store.verify(service.learner_id)
    assert report.ok, report.problems


def test_a_bootstrap_records_its_rewards(store: SqlStore) -> None:
    config = LearningConfig(half_life=8.0, token_budget=3000)
    service = LearningService(store, config, rng=8, cache_ttl=0)
    observe_runs(service, "p", 30, 6)  # passive: recorded on the runs, not yet learnt
    assert service.summary().total_reward == 0.0
    service.set_phase(Phase.ACTIVE, actor="tester", bootstrap=True)
    learnt = sum(o.reward or 0.0 for run in store.iter_traces(service.learner_id) for o in run.arms)
    assert learnt > 0
    assert service.summary().total_reward == pytest.approx(learnt)
    report = store.verify(service.learner_id)
    assert report.ok, report.problems


def test_verify_catches_a_tampered_reward_sum(store: SqlStore) -> None:
    config = LearningConfig(phase=Phase.ACTIVE, half_life=10.0, token_budget=3000)
    service = LearningService(store, config, rng=9, cache_ttl=0)
    observe_runs(service, "v", 30, 7)
    arm = sorted(service.arms())[0]
    with store.engine.begin() as conn:
        conn.execute(
            update(posteriors)
            .where(posteriors.c.learner_id == service.learner_id, posteriors.c.arm_id == arm)
            .values(rewards=posteriors.c.rewards + 1.0)
        )
    report = store.verify(service.learner_id)
    assert not report.ok
    assert any(p.arm_id == arm and "rewards" in p.message for p in report.problems)


def test_the_migration_fills_the_recorded_sums(database_url: str) -> None:
    """A database written before 0007 gets each arm's recorded rewards from its base and its
    recorded changes: the summary reads as before, and `db verify` passes."""
    from alembic import command

    from learning_bot.storage import HEAD_REVISION
    from learning_bot.storage.database import (
        _alembic_config,
        make_engine,
        upgrade,
        write_transaction,
    )

    store = SqlStore(database_url)
    config = LearningConfig(phase=Phase.ACTIVE, token_budget=3000)
    service = LearningService(store, config, rng=10, cache_ttl=0)
    recorded = observe_runs(service, "m", 40, 8)
    arm = sorted(service.arms())[0]
    service.reward(arm, 0.5, actor="tester")
    recorded += 0.5
    store.close()
    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0006")
    assert upgrade(engine) == ("0006", HEAD_REVISION)
    engine.dispose()
    again = SqlStore(database_url)
    assert stored_rewards(again, service.learner_id)[0] == pytest.approx(recorded)
    report = again.verify(service.learner_id)
    assert report.ok, report.problems
    again.close()
