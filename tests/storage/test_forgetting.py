"""Forgetting in stored posteriors: the service on a real SqlStore (SQLite and PostgreSQL),
driven one select and one observe per run, makes the study's selections and holds the
study's decayed posteriors; `db verify` proves them and catches tampering."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import update

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.forgetting import fold, forget, keep_factor
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.service import LearningService
from learning_bot.engine.simulation import make_workload, run_policy
from learning_bot.storage import SqlStore
from learning_bot.storage.schema import posteriors

RUNS = 120


def drive(service: LearningService, seed: int, half_life: float) -> tuple[np.ndarray, ArmSet]:
    """The run the study would simulate, through the service; returns its inclusions."""
    workload = make_workload(14, seed=seed)
    arm_set = ArmSet(workload.arms)
    conversational, used = workload.draw_run(RUNS, np.random.default_rng(seed + 100))
    included = np.zeros((RUNS, len(arm_set)), dtype=bool)
    for t in range(RUNS):
        selection = service.select(arm_set)
        included[t] = selection.mask
        service.observe(
            workload.report(
                f"t{t}", selection.selected, used[t], bool(conversational[t]),
                is_baseline=selection.is_baseline,
            )
        )  # fmt: skip
    return included, arm_set


@pytest.mark.parametrize("policy", ["seed", "pooled-forgetting", "pooled-forgetting-per-token"])
def test_service_matches_the_study_selection_for_selection(store: SqlStore, policy: str) -> None:
    config = LearningConfig.from_dict({"policy": policy, "phase": "active", "tokenBudget": 3000})
    service = LearningService(store, config, rng=5, cache_ttl=0)
    included, arm_set = drive(service, 3, config.half_life)
    workload = make_workload(14, seed=3)
    conversational, used = workload.draw_run(RUNS, np.random.default_rng(103))
    study = run_policy(
        arm_set, config, conversational, used, np.random.default_rng(5),
        half_life=config.half_life or None,
    )  # fmt: skip
    assert (study.included == included).all()
    stored = store.load_arms(service.learner_id)
    final = study.means[-1]
    for i, arm_id in enumerate(arm_set.ids):
        assert stored[arm_id].posterior.mean == pytest.approx(final[i], abs=1e-9)
    assert store.verify(service.learner_id).ok
    # cached == stored
    cached = {a: v.posterior for a, v in service.arms().items()}
    for arm_id, rec in store.load_arms(service.learner_id).items():
        assert cached[arm_id].alpha == pytest.approx(rec.posterior.alpha, abs=1e-12)
        assert cached[arm_id].beta == pytest.approx(rec.posterior.beta, abs=1e-12)


@pytest.mark.parametrize("policy", ["pooled-forgetting", "pooled-forgetting-per-token"])
def test_after_a_reset_arms_forget_toward_beta_1_1_as_the_study_does(
    store: SqlStore, policy: str
) -> None:
    """A reset returns every arm to Beta(1, 1), which is then what its evidence decays
    toward: the service after a reset holds the study's posteriors for a learner that starts
    from Beta(1, 1) (the research scenarios), not a pull toward the type's Beta(3, 1)."""
    config = LearningConfig.from_dict({"policy": policy, "phase": "active", "tokenBudget": 3000})
    first = LearningService(store, config, rng=1, cache_ttl=0)
    drive_more(first)
    first.reset(actor="tester")
    service = LearningService(store, config, rng=5, cache_ttl=0)
    included, arm_set = drive(service, 3, config.half_life)
    workload = make_workload(14, seed=3)
    conversational, used = workload.draw_run(RUNS, np.random.default_rng(103))
    flat = (np.ones(len(arm_set)), np.ones(len(arm_set)))
    study = run_policy(
        arm_set, config, conversational, used, np.random.default_rng(5),
        prior=flat, half_life=config.half_life,
    )  # fmt: skip
    assert (study.included == included).all()
    stored = store.load_arms(service.learner_id)
    for i, arm_id in enumerate(arm_set.ids):
        assert stored[arm_id].posterior.alpha == pytest.approx(study.final.alpha[i], abs=1e-9)
        assert stored[arm_id].posterior.beta == pytest.approx(study.final.beta[i], abs=1e-9)
        assert stored[arm_id].forgets_toward == (1.0, 1.0)
    report = store.verify(service.learner_id)
    assert report.ok, report.problems
    cached = service.arms()
    for arm_id, rec in stored.items():
        assert cached[arm_id].posterior.alpha == pytest.approx(rec.posterior.alpha, abs=1e-12)
    # a manual reward after the reset forgets toward Beta(1, 1) too, and verify replays it
    arm = arm_set.ids[3]
    before = store.load_arms(service.learner_id)[arm].posterior
    service.reward(arm, 1.0, actor="tester")
    after = store.load_arms(service.learner_id)[arm].posterior
    keep = keep_factor(config.half_life)
    assert after.alpha == pytest.approx(forget(before.alpha, 1.0, keep, 1.0), abs=1e-12)
    assert after.beta == pytest.approx(forget(before.beta, 1.0, keep, 0.0), abs=1e-12)
    assert store.verify(service.learner_id).ok
    # undo brings back the arms' earlier life, and its prior: verify still holds
    service.undo_reset(actor="tester")
    drive_more(service)
    assert store.verify(service.learner_id).ok


def test_decayed_posteriors_are_verified_and_tampering_is_caught(store: SqlStore) -> None:
    config = LearningConfig(phase=Phase.ACTIVE, half_life=20.0, token_budget=3000)
    service = LearningService(store, config, rng=1, cache_ttl=0)
    drive(service, 1, 20.0)
    learner = service.learner_id
    # a batch of runs folds into one step per arm; manual rewards decay as well
    arm = sorted(service.arms())[0]
    before = store.load_arms(learner)[arm].posterior
    service.reward(arm, 0.25, actor="tester")
    after = store.load_arms(learner)[arm].posterior
    pa, pb = (3.0, 1.0) if not arm.startswith("file:") else (1.0, 1.0)
    keep = keep_factor(20.0)
    assert after.alpha == pytest.approx(forget(before.alpha, pa, keep, 0.25))
    assert after.beta == pytest.approx(forget(before.beta, pb, keep, 0.75))
    report = store.verify(learner)
    assert report.ok, report.problems
    assert report.observations_checked > 0
    with store.engine.begin() as conn:
        conn.execute(
            update(posteriors)
            .where(posteriors.c.learner_id == learner, posteriors.c.arm_id == arm)
            .values(alpha=posteriors.c.alpha + 0.01)
        )
    bad = store.verify(learner)
    assert not bad.ok
    assert any(p.arm_id == arm for p in bad.problems)


def test_resets_undo_and_a_changed_half_life_keep_verify_passing(store: SqlStore) -> None:
    config = LearningConfig(phase=Phase.ACTIVE, half_life=10.0, token_budget=3000)
    service = LearningService(store, config, rng=2, cache_ttl=0)
    drive(service, 2, 10.0)
    arm = sorted(service.arms())[1]
    service.reset([arm], actor="tester")
    drive_more(service)
    assert store.verify(service.learner_id).ok
    service.undo_reset(actor="tester")
    drive_more(service)
    assert store.verify(service.learner_id).ok
    # another replica configured with another half-life changes nothing: the learner's
    # settings are its own; the settings command changes it and the posteriors rebase
    other = LearningService(store, config.merged({"halfLife": 40}), rng=3, cache_ttl=0)
    assert store.learner_state(other.learner_id).half_life == 10.0
    assert other.config.half_life == 10.0
    assert other.settings_differ is not None and "halfLife" in other.settings_differ
    other.set_settings({"halfLife": 40}, actor="tester")
    assert store.learner_state(other.learner_id).half_life == 40.0
    service.refresh(force=True)
    assert service.config.half_life == 40.0
    drive_more(other)
    assert store.verify(other.learner_id).ok


def drive_more(service: LearningService) -> None:
    workload = make_workload(14, seed=2)
    rng = np.random.default_rng(9)
    arm_set = ArmSet(workload.arms)
    for t in range(30):
        selection = service.select(arm_set)
        conversational, used = workload.draw_usage(t, rng)
        service.observe(
            workload.report(
                f"more-{service.learner_id}-{id(service)}-{t}", selection.selected, used,
                conversational, is_baseline=selection.is_baseline,
            )
        )  # fmt: skip


def test_batched_writes_fold_like_single_ones(store: SqlStore) -> None:
    """observe_many folds a batch per arm (F, Ga, Gb); the result equals one-by-one."""
    keep = keep_factor(15.0)
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0]
    f = fold(rewards, keep)
    alpha = 3.0
    for r in rewards:
        alpha = forget(alpha, 3.0, keep, r)
    assert forget(3.0, 3.0, f.keep, f.alpha_gain) == pytest.approx(alpha, rel=1e-12)


def test_migration_backfills_the_prompt_counters(database_url: str) -> None:
    """A database written before 0005 gets its selected runs' offered and selected prompt
    tokens from trace_arms; status then reads the same savings as if they had been counted."""
    from alembic import command

    from learning_bot.storage import HEAD_REVISION
    from learning_bot.storage.database import (
        _alembic_config,
        make_engine,
        upgrade,
        write_transaction,
    )

    store = SqlStore(database_url)
    service = LearningService(
        store, LearningConfig(phase=Phase.ACTIVE, token_budget=3000), rng=4, cache_ttl=0
    )
    drive(service, 4, 0.0)
    counted = store.run_stats(service.learner_id)
    assert counted.offered_prompt_tokens > counted.selected_prompt_tokens > 0
    store.close()
    engine = make_engine(database_url)
    with write_transaction(engine) as conn:
        command.downgrade(_alembic_config(conn), "0004")
    assert upgrade(engine) == ("0004", HEAD_REVISION)
    engine.dispose()
    again = SqlStore(database_url)
    filled = again.run_stats(service.learner_id)
    assert filled.offered_prompt_tokens == counted.offered_prompt_tokens
    assert filled.selected_prompt_tokens == counted.selected_prompt_tokens
    assert filled.selected_runs == counted.selected_runs
    again.close()


def test_bootstrap_with_forgetting_is_verified(store: SqlStore) -> None:
    config = LearningConfig(half_life=8.0, token_budget=3000)
    service = LearningService(store, config, rng=6, cache_ttl=0)
    drive(service, 6, 8.0)  # passive: every arm in, nothing learnt yet
    assert all(v.posterior.pulls == 0 for v in service.arms().values())
    change = service.set_phase(Phase.ACTIVE, actor="tester", bootstrap=True)
    assert change.bootstrapped_observations > 0
    report = store.verify(service.learner_id)
    assert report.ok, report.problems
    cached = {a: v.posterior for a, v in service.arms().items()}
    for arm_id, rec in store.load_arms(service.learner_id).items():
        assert cached[arm_id].alpha == pytest.approx(rec.posterior.alpha)


def test_replicas_writing_at_once_stay_consistent(database_url: str) -> None:
    """Two replicas (own stores, own caches) observe concurrently with forgetting: the
    stored posteriors replay exactly (seq orders the changes as they were applied), and each
    replica's cache reads back what is stored."""
    from concurrent.futures import ThreadPoolExecutor

    config = LearningConfig(phase=Phase.ACTIVE, half_life=12.0, token_budget=3000)
    stores = [SqlStore(database_url), SqlStore(database_url)]
    services = [LearningService(s, config, rng=i, cache_ttl=0) for i, s in enumerate(stores)]
    workload = make_workload(14, seed=8)
    arm_set = ArmSet(workload.arms)

    def work(job: int) -> None:
        service = services[job % 2]
        rng = np.random.default_rng(job)
        for t in range(15):
            selection = service.select(arm_set)
            conversational, used = workload.draw_usage(t, rng)
            service.observe(
                workload.report(
                    f"r{job}-{t}", selection.selected, used, conversational,
                    is_baseline=selection.is_baseline,
                )
            )  # fmt: skip

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(work, range(6)))
    report = stores[0].verify(services[0].learner_id)
    assert report.ok, report.problems
    assert report.traces_checked == 90
    stored = stores[1].load_arms(services[0].learner_id)
    for service in services:
        service.refresh(force=True)
        for arm_id, rec in stored.items():
            assert service._cache.arms[arm_id].posterior() == rec.posterior
    for s in stores:
        s.close()
