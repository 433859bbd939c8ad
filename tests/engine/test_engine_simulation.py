"""Synthetic workloads: seeded, and reporting usage the way reference detection reads it."""

from __future__ import annotations

import numpy as np
import pytest

from learning_bot.engine import (
    DEFAULT_SEED_ARM_IDS,
    ArmType,
    InvalidInput,
    LearningConfig,
    Phase,
    SkipReason,
    referenced_arms,
    rewards_for_run,
    select_arms,
)
from learning_bot.engine.simulation import make_workload


def test_same_seed_same_workload() -> None:
    a = make_workload(40, seed=7)
    b = make_workload(40, seed=7)
    assert a.arms == b.arms
    assert [arm.content for arm in a.arms] == [arm.content for arm in b.arms]
    assert np.array_equal(a.usefulness, b.usefulness)
    ua = a.draw_usage(0, np.random.default_rng(3))
    ub = b.draw_usage(0, np.random.default_rng(3))
    assert ua[0] == ub[0]
    assert np.array_equal(ua[1], ub[1])


def test_different_seeds_differ() -> None:
    a = make_workload(40, seed=1)
    b = make_workload(40, seed=2)
    assert not np.array_equal(a.usefulness, b.usefulness)


@pytest.mark.parametrize("count", [1, 2, 5, 30, 200])
def test_inventory_shape(count: int) -> None:
    w = make_workload(count, seed=0)
    assert len(w.arms) == count
    assert len({arm.id for arm in w.arms}) == count
    assert w.usefulness.shape == (count,)
    assert ((w.usefulness >= 0) & (w.usefulness <= 1)).all()
    assert w.arms[0].id == DEFAULT_SEED_ARM_IDS[0]
    assert all(arm.token_cost > 0 for arm in w.arms)
    assert all(arm.content for arm in w.arms if arm.type is ArmType.MEMORY)


def test_drift_switches_usefulness() -> None:
    w = make_workload(30, seed=4, drift_at=100)
    assert np.array_equal(w.usefulness_at(99), w.usefulness)
    assert w.drifted_usefulness is not None
    assert np.array_equal(w.usefulness_at(100), w.drifted_usefulness)
    assert not np.array_equal(w.usefulness_at(0), w.usefulness_at(100))


@pytest.mark.parametrize(
    "kwargs",
    [{"arm_count": 0}, {"useful_fraction": 1.5}, {"conversational_rate": -0.1}],
)
def test_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInput):
        make_workload(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(8))
def test_report_references_exactly_the_included_used_arms(seed: int) -> None:
    w = make_workload(150, seed=seed, conversational_rate=0.0)
    rng = np.random.default_rng(seed)
    config = LearningConfig(phase=Phase.ACTIVE, min_pulls=0, token_budget=20_000)
    for step in range(25):
        selection = select_arms(w.arms, {}, config, rng)
        conversational, used = w.draw_usage(step, rng)
        assert conversational is False
        report = w.report(f"t{seed}-{step}", selection.selected, used, conversational)
        included = set(selection.selected)
        assert {a.id for a in report.included_arms} == included
        expected = {a.id for a, hit in zip(w.arms, used, strict=True) if hit and a.id in included}
        got = {arm_id for arm_id, hit in referenced_arms(report).items() if hit}
        assert got == expected
        outcome = rewards_for_run(report, config)
        assert outcome.skipped is None
        assert {k for k, v in outcome.rewards.items() if v == 1.0} == expected
        assert set(outcome.rewards) == included


def test_report_with_nothing_used_references_nothing() -> None:
    w = make_workload(30, seed=5)
    everything = [a.id for a in w.arms]
    report = w.report("t", everything, np.zeros(len(w.arms), dtype=bool), conversational=False)
    assert not any(referenced_arms(report).values())
    outcome = rewards_for_run(report, LearningConfig(phase=Phase.ACTIVE))
    assert outcome.skipped is None
    assert set(outcome.rewards.values()) == {0.0}


def test_conversational_report_is_skipped() -> None:
    w = make_workload(30, seed=6)
    everything = [a.id for a in w.arms]
    report = w.report("t", everything, np.ones(len(w.arms), dtype=bool), conversational=True)
    outcome = rewards_for_run(report, LearningConfig(phase=Phase.ACTIVE))
    assert outcome.skipped is SkipReason.CONVERSATIONAL
    assert dict(outcome.rewards) == {}


def test_report_carries_the_run_details() -> None:
    w = make_workload(20, seed=8)
    included = [a.id for a in w.arms[:10]]
    report = w.report(
        "trace-x",
        included,
        np.ones(20, dtype=bool),
        False,
        is_baseline=True,
        conversation="slack:C1",
        timestamp=1_700_000_000_000,
    )
    assert report.trace_id == "trace-x"
    assert report.is_baseline is True
    assert report.conversation == "slack:C1"
    assert report.timestamp == 1_700_000_000_000
    prompt = sum(a.token_cost for a in w.arms[:10])
    assert report.system_prompt_chars == prompt * 4
    assert report.usage.input == prompt + 1200
