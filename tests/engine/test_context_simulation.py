"""The context study (engine.context_simulation) learns only what a runtime can report, runs
its learners under the product's defaults, and prices tool search where the runtime pays it."""

from __future__ import annotations

import numpy as np
import pytest

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.context import feature_hash
from learning_bot.engine.context_simulation import (
    SEARCH_TOOL_TOKENS,
    ContextSession,
    ContextTurn,
    Learner,
    run_study,
)
from learning_bot.engine.prompt_cache import Block
from learning_bot.engine.session_simulation import SessionShape

SMALL = [
    Arm("tool:t:weather", 100, description="weather forecast rain"),
    Arm("tool:t:calendar", 100, description="calendar meeting date"),
    Arm("tool:t:archive", 5_000, description="archive every record ever"),
]
BIG = 2  # never fits the budget below


def config(**options: object) -> LearningConfig:
    base: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
        "token_budget": 250,
    }
    return LearningConfig.for_policy(DEFAULT_POLICY, **{**base, **options})


def sessions(count: int, used: tuple[int, ...]) -> list[ContextSession]:
    turns = (ContextTurn("archive the weather records", used),) * 3
    return [ContextSession(f"s{i}", turns) for i in range(count)]


def test_a_tool_never_offered_is_never_reported_as_called() -> None:
    for policy in ("context", "default", "context per turn"):
        run = run_study(SMALL, sessions(20, (BIG,)), policy, config(), seed=1)
        learner = run.learner
        assert isinstance(learner, Learner)
        assert not any(SMALL[BIG].id in s for s in run.selections)
        # every turn needed the archive alone, which the model never had: it called nothing,
        # so nothing was learnt, about the archive or about the tools it was offered
        assert run.kept.sum() == 0 and run.used.sum() == 60
        assert learner.pulls.tolist() == [0, 0, 0]
        assert np.array_equal(learner.alpha, learner.prior_alpha)
        assert np.array_equal(learner.beta, learner.prior_beta)
        assert learner.evidence.cells == 0


def test_what_was_called_is_what_was_offered_and_needed() -> None:
    run = run_study(SMALL, sessions(20, (0, BIG)), "context", config(), seed=1)
    learner = run.learner
    assert isinstance(learner, Learner)
    evidence = learner.evidence
    assert evidence.cells > 0
    features = evidence.all_features()
    assert evidence.cells_of(features, [SMALL[BIG].id]) == []
    # the next turns' context names the tools called so far: the archive never was
    assert feature_hash("prev", SMALL[BIG].name) not in features
    assert feature_hash("prev", SMALL[0].name) in features
    assert learner.pulls[BIG] == 0
    assert run.recall == 0.5


def test_baseline_sessions_offer_every_tool_all_session_long() -> None:
    run = run_study(SMALL, sessions(30, (0, BIG)), "context", config(baseline_rate=0.3), seed=4)
    baseline = np.array(run.baseline)
    assert 0 < baseline.sum() < len(baseline)
    # a baseline session keeps what it needs; a selected one never has the archive
    assert np.array_equal(run.kept[baseline], run.used[baseline])
    assert np.array_equal(run.kept[~baseline], run.used[~baseline] / 2)
    assert all(len(s) == len(SMALL) for s, b in zip(run.selections, baseline, strict=True) if b)


def test_under_explored_tools_go_in_as_the_product_puts_them() -> None:
    run = run_study(SMALL, sessions(10, (0, BIG)), "context", config(min_pulls=2), seed=1)
    with_archive = [SMALL[BIG].id in s for s in run.selections]
    # the archive goes in until it has been offered on two turns that called a tool
    assert with_archive[0] and not with_archive[-1]


def test_a_search_sits_between_its_turns_message_and_reply() -> None:
    shape = SessionShape(history_tokens=1_000, message_tokens=100)
    found = [Block("search:0", 70)]
    keys = [b.key for b in shape.blocks([Block("tool", 10)], 1, searched={0: found})]
    assert keys == ["tool", "system", "message:0", "search:0", "reply:0", "message:1"]


def deferral_run(messages: list[tuple[str, tuple[int, ...]]]) -> tuple[float, float]:
    arms = [
        Arm("tool:t:kept", 50, description="kept"),
        Arm("tool:t:alpha", 200, description="alpha"),
        Arm("tool:t:beta", 300, description="beta"),
    ]
    turns = tuple(ContextTurn(m, used) for m, used in messages)
    # a budget that keeps the cheapest tool only; no learning signal can change that
    run = run_study(
        arms, [ContextSession("s", turns)], "context+deferral", config(token_budget=60), seed=0
    )
    assert run.selections == [("tool:t:kept",)]
    return float(run.tool_tokens[0]), float(run.prompt_cost[0])


def test_deferred_turns_count_the_tool_search_tool_and_repeated_searches_pay_again() -> None:
    quiet, _ = deferral_run([("kept", ()), ("kept", ())])
    assert quiet == 2 * (50 + SEARCH_TOOL_TOKENS)
    # turn 0 searches "alpha" and loads alpha; turn 1 searches "alpha beta": the search returns
    # alpha again beside beta, and the runtime appends both definitions
    tokens, _ = deferral_run([("alpha", (1,)), ("alpha beta", (2,))])
    turn0 = 50 + SEARCH_TOOL_TOKENS + 200
    turn1 = 50 + SEARCH_TOOL_TOKENS + 200 + (200 + 300)
    assert tokens == turn0 + turn1


def test_a_search_result_is_read_from_the_cache_on_the_next_turn() -> None:
    """The turn after a search reads the search from the cache; it pays for the reply and
    the new message only, as the turn after a turn without a search does."""
    _, searched = deferral_run([("alpha", (1,)), ("kept", ()), ("kept", ())])
    _, plain = deferral_run([("kept", ()), ("kept", ()), ("kept", ())])
    _, one = deferral_run([("alpha", (1,))])
    _, one_plain = deferral_run([("kept", ())])
    # the later turns differ only by reading the search's tokens from the cache (0.1x)
    later = searched - one - (plain - one_plain)
    assert later == pytest.approx(2 * 0.1 * (60 + 200))


def test_tool_search_at_its_best_defers_every_tool_and_finds_what_the_turn_needs() -> None:
    arms = [
        Arm("tool:t:kept", 50, description="kept"),
        Arm("tool:t:alpha", 200, description="alpha"),
        Arm("tool:t:beta", 300, description="beta"),
    ]
    turns = (
        ContextTurn("no word of any tool", (1,)),
        ContextTurn("again", (1,)),
        ContextTurn("more", (1, 2)),
    )
    run = run_study(arms, [ContextSession("s", turns)], "search at best", config(), seed=0)
    assert run.recall == 1.0
    # turn 0 loads alpha; turn 1 has it; turn 2 searches for beta alone
    assert run.searches.tolist() == [2] and run.round_trips.tolist() == [5]
    assert run.selections == [()]
    # the search tool each turn; alpha found on turn 0, then held; beta found on turn 2
    tokens = 3 * SEARCH_TOOL_TOKENS + 200 + 200 + 200 + 300
    assert run.tool_tokens.tolist() == [tokens]
    with_every = run_study(arms, [ContextSession("s", turns)], "every", config(), seed=0)
    assert with_every.round_trips.tolist() == [3]
