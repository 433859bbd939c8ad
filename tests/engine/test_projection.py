"""learning_bot.engine.projection: the active policy replayed over recorded full-feedback runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import SkipReason
from learning_bot.engine.projection import MIN_RUNS, MIN_SESSIONS, alternative_budgets, project
from learning_bot.engine.projection_report import Projection, SettingProjection
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord
from learning_bot.engine.store_records import ResetRecord
from learning_bot.engine.usage import Usage

TOOLS = [f"tool:t:T{i}" for i in range(10)]
COST = 1_000
USED = {0: 1.0, 1: 0.9, 2: 0.6}
"""The share of working runs that use each arm (the others are never used)."""
CONFIG = LearningConfig.for_policy("seed", token_budget=4_000, seed_arm_ids=())


def record(
    key: str,
    at: int,
    used: Sequence[int],
    *,
    phase: Phase = Phase.PASSIVE,
    baseline: bool = False,
    guard: SkipReason | None = None,
    rest: int = 3_000,
    included: Sequence[int] | None = None,
) -> RunRecord:
    """A run offering every tool (or `included`), the model using `used`."""
    chosen = set(range(len(TOOLS)) if included is None else included)
    arms = tuple(
        ArmOutcomeRecord(arm_id, "", i in chosen, i in used and i in chosen, COST, None)
        for i, arm_id in enumerate(TOOLS)
    )
    prompt = COST * len(chosen) + rest
    return RunRecord(
        trace_id=f"{key}-{at}",
        run_id="",
        session_id="",
        session_key=key,
        channel="",
        conversation=key,
        timestamp=at,
        provider="anthropic",
        model="claude",
        is_baseline=baseline,
        phase=phase,
        guard=guard,
        usage=Usage(input=0, output=100, cache_read=prompt // 2, cache_write=prompt - prompt // 2),
        duration_ms=0,
        system_prompt_chars=0,
        aborted=False,
        error=None,
        context={},
        arms=arms,
    )


def sessions(count: int, turns: int, *, start: int = 0, prefix: str = "s") -> list[RunRecord]:
    """`count` sessions of `turns` runs 30 s apart, an hour between sessions; turn k of
    session s uses arm i when (s * turns + k) * 7 % 10 < USED[i] * 10 (fixed, no randomness)."""
    out = []
    at = start
    for s in range(count):
        for k in range(turns):
            n = (s * turns + k) * 7 % 10
            used = [i for i, share in USED.items() if n < share * 10]
            out.append(record(f"{prefix}{s}", at, used, rest=2_000 + 1_000 * k))
            at += 30_000
        at += 3_600_000
    return out


def test_100_runs_in_20_sessions_are_enough_and_99_are_not() -> None:
    assert (MIN_RUNS, MIN_SESSIONS) == (100, 20)
    enough = project(sessions(20, 5), None, CONFIG)
    assert enough.reason is None and (enough.runs, enough.sessions) == (100, 20)
    short = project(sessions(20, 5)[1:], None, CONFIG)
    assert short.settings == () and short.current is None
    assert short.reason is not None and "99 usable runs in 20 sessions" in short.reason
    assert "100 runs in 20 sessions" in short.reason
    few = project(sessions(19, 6), None, CONFIG)
    assert few.reason is not None and "114 usable runs in 19 sessions" in few.reason


def test_the_current_budget_and_its_alternatives() -> None:
    made = project(sessions(30, 5), None, CONFIG)
    budgets = [s.token_budget for s in made.settings]
    assert budgets == [2_000, 3_000, 4_000, 6_000, 8_000]
    assert [s.current for s in made.settings] == [False, False, True, False, False]
    assert made.current is not None and made.current.token_budget == 4_000
    assert alternative_budgets(8_000, 19_242) == [4_000, 6_000, 8_000, 12_000, 16_000]
    assert alternative_budgets(8_000, 9_000) == [4_000, 6_000, 8_000]


def test_the_replay_learns_what_the_model_uses() -> None:
    made = project(sessions(40, 5), None, CONFIG)
    current = made.current
    assert current is not None
    # three arms are used, a budget of four arms holds them once learnt
    assert current.recall > 0.85
    assert current.recall_low <= current.recall <= current.recall_high
    assert current.cost_savings_percent is not None
    assert current.cost_low is not None and current.cost_high is not None
    assert 20 < current.cost_savings_percent < 80
    assert current.cost_low <= current.cost_savings_percent <= current.cost_high
    assert 20 < current.token_savings_percent < 80
    tight = made.settings[0]
    assert tight.token_budget == 2_000 and tight.recall < current.recall
    assert tight.cost_savings_percent is not None
    assert tight.cost_savings_percent > current.cost_savings_percent
    # everything fits in 10 arms: nothing left out, nothing saved
    roomy = project(sessions(40, 5), None, CONFIG, budgets=[10_000]).settings[-1]
    assert roomy.token_budget == 10_000 and roomy.recall == 1.0
    assert roomy.cost_savings_percent == pytest.approx(0.0)
    assert made.suggested is not None and made.suggested.recall >= 0.95


def test_the_same_runs_and_seed_give_the_same_projection() -> None:
    runs = sessions(25, 5)
    assert project(runs, None, CONFIG, seed=3) == project(runs, None, CONFIG, seed=3)


def test_runs_without_feedback_or_session_are_left_out_and_counted() -> None:
    runs = sessions(25, 5, start=10_000_000)
    others = [
        record("", 1_000, [0]),  # no session
        record("x", 2_000, [0], phase=Phase.ACTIVE, included=[0, 1]),  # selected, active
    ]
    baseline = record("b", 3_000, [0], phase=Phase.ACTIVE, baseline=True)
    made = project([*others, baseline, *runs], None, CONFIG)
    assert made.runs == len(runs) + 1 and made.sessions == 26
    assert dict(made.left_out) == {"noSession": 1, "selected": 1}
    reset = ResetRecord(1, (), True, "ada", 5_000)
    after = project([*others, baseline, *runs], None, CONFIG, resets=[reset])
    assert dict(after.left_out) == {"beforeReset": 2, "noSession": 1}
    assert after.runs == len(runs)
    undone = ResetRecord(1, (), True, "ada", 5_000, undone=True)
    assert project([baseline, *runs], None, CONFIG, resets=[undone]).runs == len(runs) + 1


def test_guarded_runs_are_priced_but_teach_nothing_and_count_no_use() -> None:
    runs = sessions(25, 5)
    quiet = [
        record(r.session_key, r.timestamp, [0, 1], guard=SkipReason.CONVERSATIONAL) for r in runs
    ]
    made = project(quiet, None, CONFIG)
    current = made.current
    assert current is not None
    assert current.recall == 1.0  # nothing was used, so nothing was missed
    # nothing was learnt: every arm is still under-explored (minPulls), so every arm stays in
    assert current.cost_savings_percent == pytest.approx(0.0)


def test_the_bound_keeps_sessions_together() -> None:
    runs = sessions(30, 5)
    made = project(runs, None, CONFIG, limit=102)
    # the latest 102 runs start three runs into a session: its last two go too
    assert made.runs == 100 and made.sessions == 20
    assert dict(made.left_out) == {"cut": 2}


def test_cancel_and_deadline_stop_with_a_reason() -> None:
    runs = sessions(25, 5)
    cancel = threading.Event()
    cancel.set()
    stopped = project(runs, None, CONFIG, cancel=cancel)
    assert stopped.settings == () and stopped.reason == "the projection was cancelled"
    ticks = iter(range(1_000_000))
    late = project(runs, None, CONFIG, deadline=10.0, clock=lambda: float(next(ticks)))
    assert late.settings == () and late.reason == "the projection was stopped at its time limit"


def test_bad_input_names_the_field() -> None:
    runs = sessions(25, 5)
    with pytest.raises(InvalidInput, match="time order"):
        project(list(reversed(runs)), None, CONFIG)
    with pytest.raises(InvalidInput, match="limit"):
        project(runs, None, CONFIG, limit=0)
    with pytest.raises(InvalidInput, match="budgets"):
        project(runs, None, CONFIG, budgets=[0])


def test_json_round_trip() -> None:
    made = project(sessions(25, 5), None, CONFIG)
    data = made.to_json()
    assert set(data) == {"runs", "sessions", "settings", "suggested", "leftOut"}
    current = [s for s in data["settings"] if s.get("current")]
    assert len(current) == 1
    back = SettingProjection.from_json(current[0])
    assert back.token_budget == 4_000 and back.current
    assert made.current is not None
    assert back.recall == pytest.approx(made.current.recall, abs=1e-4)
    with pytest.raises(InvalidInput, match="tokenBudget"):
        SettingProjection.from_json({"recall": 1})
    assert Projection(0, 0, reason="r").to_json()["settings"] == []


def test_session_settings_change_what_the_replay_keeps_and_pays() -> None:
    runs = sessions(30, 6)
    tight = replace(CONFIG, token_budget=2_000)
    grown = project(runs, None, replace(tight, session_growth="append")).current
    kept = project(runs, None, tight).current
    assert grown is not None and kept is not None
    # a tool the model needed joins the session's set for its next runs
    assert grown.recall > kept.recall
    # without sessions kept, every run draws again: the tools at the head of the cached
    # prompt change, and the cache is written again
    redrawn = project(runs, None, replace(tight, session_idle_seconds=0)).current
    assert redrawn is not None and redrawn.cost_savings_percent is not None
    assert kept.cost_savings_percent is not None
    assert redrawn.cost_savings_percent < kept.cost_savings_percent


def test_a_run_offering_nothing_is_left_out() -> None:
    runs = sessions(25, 5, start=10_000)
    empty = record("e", 1_000, [], included=[])
    made = project([empty, *runs], None, CONFIG)
    assert dict(made.left_out) == {"noArms": 1} and made.runs == len(runs)
