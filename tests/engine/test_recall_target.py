"""The recall target (SPEC section 4b): the least-cost set whose estimated recall meets the
target, the budget a cap; the seed policy keeps its budget packing; the setting is validated,
read from the environment and stored with the learner."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.context import RequestContext
from learning_bot.engine.context_policy import ContextEvidence, ContextSettings, context_scores
from learning_bot.engine.draws import draw_scores
from learning_bot.engine.errors import InvalidConfig
from learning_bot.engine.inventory import ArmSet, PosteriorArrays
from learning_bot.engine.recall_target import (
    EVERY_ARM,
    RecallCalibration,
    inclusion_levels,
    pack_to_target,
    ranked,
)
from learning_bot.engine.selection import select_arms

ARMS = [Arm(f"tool:t:tool{i}", cost) for i, cost in enumerate((100, 200, 300, 400, 500, 600))]
# learnt usage rates: tool0 and tool3 are used most
USES = np.array([40.0, 5.0, 2.0, 30.0, 1.0, 0.0])
RUNS = np.full(6, 50.0)


def posteriors() -> PosteriorArrays:
    return PosteriorArrays(1.0 + USES, 1.0 + RUNS - USES, np.full(6, 50, dtype=np.int64))


def config(**options: object) -> LearningConfig:
    base: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "seed_arm_ids": (),
        "baseline_rate": 0.0,
        "token_budget": 10_000,
        "pooled_prior": False,
        "exploration": 0.0,
    }
    return LearningConfig.for_policy(DEFAULT_POLICY, **{**base, **options})


def estimated(mask: np.ndarray, means: np.ndarray) -> float:
    return float(means[mask].sum() / means.sum())


def test_packing_stops_at_the_target_and_the_budget_caps_it() -> None:
    means = np.array([0.5, 0.3, 0.1, 0.1])
    costs = np.array([100, 100, 100, 100])
    rank = means.copy()
    none = np.zeros(4, dtype=bool)
    mask, used, est = pack_to_target(means, rank, costs, none, 0.75, 10_000)
    assert mask.tolist() == [True, True, False, False] and used == 200 and est == pytest.approx(0.8)
    # a cap of 150 tokens: the second arm does not fit, so the target is not met
    mask, used, est = pack_to_target(means, rank, costs, none, 0.75, 150)
    assert mask.tolist() == [True, False, False, False] and est == pytest.approx(0.5)
    # forced arms count towards the target; an arm of mean 0 is never added
    forced = np.array([False, False, True, True])
    mask, _, est = pack_to_target(means, rank, costs, forced, 0.5, 10_000)
    assert mask.tolist() == [True, False, True, True] and est == pytest.approx(0.7)
    zero = np.array([0.6, 0.0, 0.4, 0.0])
    mask, _, est = pack_to_target(zero, rank, costs, none, 1.0, 10_000)
    assert mask.tolist() == [True, False, True, False] and est == 1.0


@pytest.mark.parametrize("target", [0.5, 0.8, 0.9, 0.97, 1.0])
def test_a_select_keeps_the_cheapest_prefix_that_meets_the_target(target: float) -> None:
    post = posteriors()
    means = post.alpha / (post.alpha + post.beta)
    chosen = select_arms(ARMS, post, config(recall_target=target), 1)
    mask = np.asarray(chosen.mask)
    assert estimated(mask, means) >= target - 1e-12
    # by mean per token: dropping the last arm taken falls short of the target
    order = np.argsort(-(means / ArmSet.of(ARMS).costs), kind="stable")
    taken = [i for i in order.tolist() if mask[i]]
    short = mask.copy()
    short[taken[-1]] = False
    assert estimated(short, means) < target
    assert chosen.used_tokens == sum(ARMS[i].token_cost for i in taken)
    assert chosen.token_budget == 10_000


def test_a_higher_target_keeps_more_and_a_budget_caps_it() -> None:
    post = posteriors()
    sizes = [
        len(select_arms(ARMS, post, config(recall_target=t), 1).selected) for t in (0.5, 0.9, 0.99)
    ]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    capped = select_arms(ARMS, post, config(recall_target=0.99, token_budget=600), 1)
    assert capped.used_tokens <= 600 and not capped.over_budget


def test_under_explored_arms_are_still_forced_in() -> None:
    post = posteriors()
    post.pulls[5] = 0
    chosen = select_arms(ARMS, post, config(recall_target=0.5, min_pulls=5), 1)
    assert "tool:t:tool5" in chosen.selected


def test_a_baseline_run_is_the_budget_behaviour_of_section_4() -> None:
    post = posteriors()
    for seed in range(5):
        with_target = select_arms(
            ARMS, post, config(recall_target=0.9, baseline_rate=1.0, token_budget=900), seed
        )
        without = select_arms(ARMS, post, config(baseline_rate=1.0, token_budget=900), seed)
        assert with_target == without and with_target.is_baseline


def test_the_estimate_reads_the_posterior_under_the_requests_context() -> None:
    """With a request context the means are the context-aware draw's (exploration 0): a tool
    the message points to outweighs what the learner-wide posteriors say."""
    arms = [
        Arm("tool:t:weather", 300, description="weather forecast rain umbrella"),
        Arm("tool:t:calendar", 300, description="calendar meeting invite"),
        Arm("tool:t:search", 300, description="web search pages"),
    ]
    post = PosteriorArrays(
        np.array([2.0, 20.0, 20.0]), np.array([40.0, 20.0, 20.0]), np.full(3, 50)
    )
    request = RequestContext("will it rain tomorrow, do I need an umbrella", "", "", ())
    evidence = ContextEvidence()
    for _ in range(30):
        evidence.record(request.features(), {"tool:t:weather": 1.0, "tool:t:calendar": 0.0})
    settings = ContextSettings()
    arm_set = ArmSet.of(arms)

    def draw(p: PosteriorArrays, c: LearningConfig, g: np.random.Generator) -> np.ndarray:
        return context_scores(arm_set, p, request, evidence, settings, c, g)

    cfg = config(recall_target=0.6, exploration=0.5)
    with_context = select_arms(arm_set, post, cfg, 3, draw=draw)
    without = select_arms(arm_set, post, cfg, 3)
    assert "tool:t:weather" in with_context.selected
    assert "tool:t:weather" not in without.selected
    means = draw_scores(post, config(exploration=0.0), np.random.default_rng(0))
    assert estimated(np.asarray(without.mask), means) >= 0.6


def test_the_setting_is_checked_and_named() -> None:
    assert LearningConfig().recall_target is None
    assert "recallTarget" not in LearningConfig().to_dict()
    cfg = LearningConfig.from_dict({"recallTarget": 0.97})
    assert cfg.recall_target == 0.97
    assert LearningConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.learner_settings()["recallTarget"] == 0.97
    for bad in (0, 1.5, -0.1, "high", True, float("nan")):
        with pytest.raises(InvalidConfig, match="recallTarget"):
            LearningConfig.from_dict({"recallTarget": bad})
    with pytest.raises(InvalidConfig, match="seed policy"):
        LearningConfig.for_policy("seed", recallTarget=0.9)


def test_the_environment_gives_it() -> None:
    from learning_bot.settings import load_settings

    assert load_settings({"LEARNING_BOT_RECALL_TARGET": "0.95"}).config.recall_target == 0.95
    assert load_settings({"LEARNING_BOT_RECALL_TARGET": "none"}).config.recall_target is None
    for bad in ("most", "2"):
        with pytest.raises(InvalidConfig, match="LEARNING_BOT_RECALL_TARGET"):
            load_settings({"LEARNING_BOT_RECALL_TARGET": bad})


def test_a_used_arms_level_is_the_share_ranked_before_it() -> None:
    means = np.array([0.1, 0.4, 0.2, 0.0, 0.3])
    costs = np.array([100, 100, 100, 100, 300])
    rank = ranked(means, costs)  # by mean per token: 1, 2, 0, 4; arm 3 never
    forced = np.array([False, False, False, False, False])
    levels = inclusion_levels(means, rank, forced, [1, 2, 0, 4, 3])
    assert levels[:4] == pytest.approx([0.0, 0.4, 0.6, 0.7]) and levels[4] == math.inf
    # a set that stops at share tau holds exactly the used arms whose level is below tau
    for tau in (0.3, 0.5, 0.65, 0.9):
        mask, _, _ = pack_to_target(means, rank, costs, forced, tau, 10_000)
        held = [i for i, lv in zip([1, 2, 0, 4, 3], levels, strict=True) if lv < tau]
        assert sorted(held) == np.flatnonzero(mask).tolist()
    forced[4] = True  # a forced arm is always held, and counts first
    assert inclusion_levels(means, rank, forced, [4, 1]) == pytest.approx([0.0, 0.3])


def test_the_calibrated_share_keeps_the_targets_share_of_recorded_uses() -> None:
    calibration = RecallCalibration(keep=100)
    assert calibration.share(0.9) == 0.9  # nothing recorded: the target itself
    gen = np.random.default_rng(2)
    levels = gen.uniform(0.0, 0.5, size=400).tolist()  # only the latest 100 are kept
    calibration.record(levels)
    assert len(calibration) == 100
    for target in (0.5, 0.9, 0.97):
        share = calibration.share(target)
        held = np.mean(np.array(levels[-100:]) < share)
        assert target <= held <= target + 0.02
    assert calibration.share(0.995) == 0.995  # 100 levels cannot vouch for 0.995
    calibration.record([math.inf] * 100)  # uses no set holds
    assert calibration.share(0.5) == EVERY_ARM


def test_baseline_sessions_calibrate_the_study_learner() -> None:
    from learning_bot.engine.context_simulation import Learner, run_study, task_type_workload

    arms, sessions = task_type_workload(tools=24, types=4, sessions=30, seed=3)
    total = sum(a.token_cost for a in arms)
    cfg = config(recall_target=0.9, baseline_rate=0.2, token_budget=total, min_pulls=0)
    run = run_study(arms, sessions, "context", cfg, seed=1)
    learner = run.learner
    assert isinstance(learner, Learner)
    baseline = np.array(run.baseline)
    # one level per tool a baseline session's turn used, none from the selected sessions
    assert len(learner.calibration) == int(run.used[baseline].sum()) > 0
