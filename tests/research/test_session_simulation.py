"""Multi-turn sessions priced through the prompt cache: the session workload, the per-session
wrapper, and what each policy's sessions cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from learning_bot.engine.arms import Arm
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.cost import ANTHROPIC
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.usage import Usage
from learning_bot.research.session_simulation import (
    EveryArm,
    OracleArms,
    Session,
    SessionShape,
    SessionStable,
    ThompsonArms,
    draw_sessions,
    run_sessions,
)
from learning_bot.research.simulation import Workload, make_tool_workload


def test_sessions_are_seeded_and_shaped() -> None:
    w = make_tool_workload(20, 4_000, seed=3)
    a = draw_sessions(w, 400, np.random.default_rng(1))
    b = draw_sessions(w, 400, np.random.default_rng(1))
    assert [s.turns for s in a] == [s.turns for s in b]
    assert all(np.array_equal(x.used, y.used) for x, y in zip(a, b, strict=True))
    turns = np.array([s.turns for s in a])
    assert turns.min() >= 1
    assert 7.0 < turns.mean() < 9.0  # geometric, mean 8
    gaps = np.concatenate([np.diff(s.times) for s in a])
    assert (gaps >= 0).all()
    assert 0.05 < (gaps > 300).mean() < 0.16  # about one gap in ten outside the cache window
    starts = [s.times[0] for s in a]
    assert starts == sorted(starts) and len({s.key for s in a}) == 400
    assert all(s.used.shape == (s.turns, 20) for s in a)
    assert not any(s.used[s.conversational].any() for s in a)


def test_tool_workload_scales_costs_to_the_total() -> None:
    w = make_tool_workload(40, 16_000, seed=0)
    assert int(w.costs.sum()) == 16_000
    assert all(arm.type.value == "tool" for arm in w.arms)
    with pytest.raises(InvalidInput):
        make_tool_workload(40, 10)


def two_arm_workload() -> Workload:
    arms = (Arm("tool:fs:Read", 1_000), Arm("tool:x:Search", 3_000))
    return Workload(arms, np.array([1.0, 0.0]), conversational_rate=0.0)


def session(times: Sequence[float], used: Sequence[Sequence[bool]]) -> Session:
    return Session(
        "s",
        np.array(times, dtype=np.float64),
        np.zeros(len(times), dtype=bool),
        np.array(used, dtype=bool),
    )


SHAPE = SessionShape(history_tokens=2_500, message_tokens=100, system_tokens=1_200)


def test_a_full_prompt_session_by_hand() -> None:
    """Turn 0 writes tools + system + message 0 (4,000 + 1,200 + 100); turn 1, 60 s later,
    reads those 5,300 and writes the reply to message 0 and message 1 (2,400 + 100); turn 2,
    after 10 minutes, finds the cache expired and writes its whole prompt (10,300)."""
    w = two_arm_workload()
    s = session([0, 60, 660], [[True, False]] * 3)
    run = run_sessions(w, [s], EveryArm(2), shape=SHAPE, prices=ANTHROPIC)
    assert run.prompt_tokens[0] == 5_300 + 7_800 + 10_300
    assert run.prompt_cost[0] == pytest.approx((5_300 + 2_500 + 10_300) * 1.25 + 5_300 * 0.1)
    assert run.tool_tokens[0] == 3 * 4_000
    assert run.output_cost[0] == pytest.approx(3 * 300 * 5.0)
    assert (run.used[0], run.kept[0], run.recall) == (3, 3, 1.0)


class Scripted:
    """A policy that answers each call with the next of the given choices."""

    def __init__(self, *choices: list[int]) -> None:
        self.choices = list(choices)
        self.calls = 0
        self.observed: list[list[int]] = []

    def choose(self, session: Session, turn: int) -> list[int]:
        self.calls += 1
        return self.choices.pop(0)

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        self.observed.append(list(included))

    def is_baseline(self) -> bool:
        return self.calls == 1

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        return {}


def test_per_session_keeps_the_first_set_and_appends_what_a_turn_lacked() -> None:
    w = two_arm_workload()
    s = session([0, 30, 60], [[False, True], [False, False], [False, True]])
    inner = Scripted([0], [1], [0, 1])
    run = run_sessions(w, [s], SessionStable(inner), shape=SHAPE)
    assert inner.calls == 1
    assert inner.observed == [[0], [0, 1], [0, 1]]  # Search joined after turn 0 lacked it
    assert (run.used[0], run.kept[0]) == (2, 1)
    assert bool(run.baseline[0])
    # turn 0 writes Read + system + message 0; turn 1 reads only Read (Search now follows it
    # where the system prompt was) and writes the rest; turn 2 reads all of turn 1's prompt
    first = 1_000 + 1_200 + 100
    second = 1_000 + 3_000 + 1_200 + 2_500 + 100
    expected = (first + (second - 1_000) + 2_500) * 1.25 + (1_000 + second) * 0.1
    assert run.prompt_cost[0] == pytest.approx(expected)


def test_a_lacked_tool_loaded_into_the_conversation_keeps_the_cache() -> None:
    """Search, lacked on turn 0, is loaded after turn 0's reply: turn 1 reads turn 0's prompt
    and writes the reply, Search and message 1; turn 2 reads all of turn 1's."""
    w = two_arm_workload()
    s = session([0, 30, 60], [[False, True], [False, False], [False, True]])
    inner = Scripted([0])
    run = run_sessions(w, [s], SessionStable(inner, missing="load"), shape=SHAPE)
    assert inner.observed == [[0], [0, 1], [0, 1]]
    assert (run.used[0], run.kept[0]) == (2, 1)
    assert run.tool_tokens[0] == 1_000 + 2 * 4_000
    first = 1_000 + 1_200 + 100
    second = first + 2_400 + 3_000 + 100
    expected = (first + (second - first) + 2_500) * 1.25 + (first + second) * 0.1
    assert run.prompt_cost[0] == pytest.approx(expected)


def test_a_lacked_tool_can_stay_out() -> None:
    w = two_arm_workload()
    s = session([0, 30, 60], [[False, True], [False, False], [False, True]])
    inner = Scripted([0])
    run = run_sessions(w, [s], SessionStable(inner, missing="never"), shape=SHAPE)
    assert inner.observed == [[0], [0], [0]]
    assert (run.used[0], run.kept[0]) == (2, 0)
    # writes: turn 0 whole (2,300), then each new reply and message (2,500)
    assert run.prompt_cost[0] == pytest.approx((2_300 + 2 * 2_500) * 1.25 + (2_300 + 4_800) * 0.1)
    with pytest.raises(InvalidInput, match="missing"):
        SessionStable(inner, missing="sometimes")  # type: ignore[arg-type]


def test_per_request_changes_the_set_each_turn() -> None:
    w = two_arm_workload()
    s = session([0, 30], [[True, False], [True, False]])
    inner = Scripted([1], [0])
    run = run_sessions(w, [s], inner, shape=SHAPE)
    assert inner.calls == 2
    assert run.prompt_cost[0] == pytest.approx((3_000 + 1_300 + 1_000 + 3_800) * 1.25)
    assert (run.used[0], run.kept[0]) == (2, 1)


def test_per_session_selection_costs_less_than_per_request_and_the_full_prompt() -> None:
    """On the cached multi-turn workload a new tool set every turn costs more than sending
    every tool; keeping the session's set costs less, at a recall close to the oracle's."""
    w = make_tool_workload(40, 16_000, seed=1)
    config = LearningConfig(phase=Phase.ACTIVE, token_budget=5_600, baseline_rate=0.1)
    sessions = draw_sessions(w, 150, np.random.default_rng(5))
    full = run_sessions(w, sessions, EveryArm(40)).prompt_cost.mean()
    per_request = run_sessions(w, sessions, ThompsonArms(w, config, np.random.default_rng(9)))
    per_session = run_sessions(
        w, sessions, SessionStable(ThompsonArms(w, config, np.random.default_rng(9)))
    )
    oracle = run_sessions(w, sessions, OracleArms(w, config))
    assert per_request.prompt_cost.mean() > 1.5 * full
    assert per_session.prompt_cost.mean() < full
    assert oracle.prompt_cost.mean() < per_session.prompt_cost.mean()
    assert per_session.recall > per_request.recall
    assert oracle.recall > 0.9
    assert per_session.tool_tokens.sum() < 0.5 * 16_000 * per_session.turns.sum()


def test_session_shape_is_checked() -> None:
    with pytest.raises(InvalidInput):
        SessionShape(mean_turns=0.5)
    with pytest.raises(InvalidInput):
        SessionShape(history_tokens=10, message_tokens=20)
    with pytest.raises(InvalidInput):
        draw_sessions(two_arm_workload(), -1, np.random.default_rng(0))
