"""The recall target (README, "How it learns"): the least-cost set whose estimated recall meets the
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
    SearchPricing,
    inclusion_levels,
    pack_below,
    pack_to_target,
    ranked,
    search_charges,
    search_levels,
    session_search_levels,
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


def test_a_used_arms_level_is_the_means_total_over_its_mean_per_token() -> None:
    means = np.array([0.1, 0.4, 0.2, 0.0, 0.3])
    costs = np.array([100, 100, 100, 100, 300])
    rank = ranked(means, costs)  # by mean per token: 1, 2, 0, 4; arm 3 never
    forced = np.array([False, False, False, False, False])
    levels = inclusion_levels(means, rank, forced, [1, 2, 0, 4, 3])
    assert levels[:4] == pytest.approx([250.0, 500.0, 1000.0, 1000.0]) and levels[4] == math.inf
    # a set below threshold t holds exactly the used arms whose level is below t, by rank
    for t in (300.0, 600.0, 1000.5, 5000.0):
        mask, used = pack_below(means, rank, costs, forced, t, 10_000)
        held = [i for i, lv in zip([1, 2, 0, 4, 3], levels, strict=True) if lv < t]
        assert sorted(held) == np.flatnonzero(mask).tolist()
        assert used == int(costs[mask].sum())
    # the budget caps it: the arms that fit, by rank
    mask, used = pack_below(means, rank, costs, forced, 5000.0, 250)
    assert np.flatnonzero(mask).tolist() == [1, 2] and used == 200
    forced[4] = True  # a forced arm is always held
    assert inclusion_levels(means, rank, forced, [4, 1]) == pytest.approx([0.0, 250.0])
    # one scale across requests: the same arm, its mean concentrated, ranks lower
    spread = np.array([0.1, 0.4, 0.2, 0.0, 0.9])
    assert inclusion_levels(spread, ranked(spread, costs), forced * False, [1])[0] > levels[0]


def test_a_deferred_arm_the_search_finds_is_offered_above_the_rivals_it_outranks() -> None:
    levels = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    # the search ranks 5 first, then 4, 3, 2, 1, 0; arm 0 is forced (kept)
    scores = np.array([0.5, 1.0, 2.0, 3.0, 4.0, 5.0])
    # top 2: arm 2 is found when fewer than 2 deferred arms outrank it (of 3, 4, 5): when
    # arm 4 (level 40) is kept too, i.e. above 40; kept itself above 20: offered above 20
    assert search_levels(levels, scores, [2], top=2) == [20.0]
    # arm 5 outranks everything: found whatever is deferred
    assert search_levels(levels, scores, [5], top=2) == [0.0]
    # arm 4: one rival (5) ahead of it, fewer than 2: found at any threshold
    assert search_levels(levels, scores, [4], top=2) == [0.0]
    # top 1: arm 3 is found when 4 and 5 are kept, above 50; its own level 30 is lower
    assert search_levels(levels, scores, [3], top=1) == [30.0]
    # a search that scores the arm 0 never finds it: its own level
    assert search_levels(levels, np.array([0, 0, 0, 0, 0, 0.0]), [3], top=5) == [30.0]


def test_a_tool_an_earlier_search_loaded_is_offered_on_the_sessions_later_turns() -> None:
    levels = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    nothing = np.zeros(6)
    first = np.array([0.0, 0.0, 0.0, 3.0, 1.0, 0.0])  # the search ranks 3, then 4
    # one turn: the same as search_levels (offered; there when the turn begins: kept only)
    assert session_search_levels(levels, [(first, [3])], top=1) == ([0.0], [30.0])
    assert session_search_levels(levels, [(first, [3])], top=1)[0] == search_levels(
        levels, first, [3], top=1
    )
    # turn 1's search would not find 3, but turn 0's found it below 30 and it stayed loaded
    assert search_levels(levels, nothing, [3], top=1) == [30.0]
    assert session_search_levels(levels, [(first, [3]), (nothing, [3])], top=1) == (
        [0.0],
        [0.0],
    )
    # a turn that needs nothing searches for nothing: 4 is loaded only by a search that ran
    assert session_search_levels(levels, [(first, []), (nothing, [4])], top=2) == (
        [40.0],
        [40.0],
    )
    # turn 0 needs 3: below 30 its search loads 3 and 4; from 30 to 40 it no longer runs and
    # turn 1's search does not find 4: offered at every threshold above 40 only
    offered, there = session_search_levels(levels, [(first, [3]), (nothing, [4])], top=2)
    assert (offered, there) == ([40.0], [40.0])
    # no search finds it: its own level; one no set keeps: inf
    assert session_search_levels(levels, [(nothing, [2])], top=5) == ([20.0], [20.0])
    inf = np.array([0.0, 10.0, math.inf])
    assert session_search_levels(inf, [(np.zeros(3), [2])], top=5) == ([math.inf], [math.inf])
    assert session_search_levels(inf, [(np.array([0, 0, 1.0]), [2])], top=5) == ([0.0], [math.inf])


def test_a_turn_is_charged_one_search_below_the_highest_threshold_it_lacks_a_tool() -> None:
    assert search_charges([]) == []
    assert search_charges([10.0]) == [10.0]
    # below 30 the turn lacks tool 1 (and below 10 tool 0 too): one search, charged to tool 1
    assert search_charges([10.0, 30.0, 0.0]) == [0.0, 30.0, 0.0]
    assert search_charges([30.0, 30.0]) == [30.0, 0.0]
    # counted over the uses: the turns that search below t
    turns = [[10.0, 30.0], [0.0, 0.0], [20.0]]
    charges = [c for turn in turns for c in search_charges(turn)]
    for t in (5.0, 15.0, 25.0, 35.0):
        assert sum(c >= t for c in charges) == sum(max(turn) >= t for turn in turns)


def test_the_calibrated_threshold_keeps_the_targets_share_of_recorded_uses() -> None:
    calibration = RecallCalibration(keep=100)
    assert calibration.threshold(0.9) is None  # nothing recorded: uncalibrated
    gen = np.random.default_rng(2)
    levels = gen.uniform(0.0, 500.0, size=400).tolist()  # only the latest 100 are kept
    calibration.record(levels)
    assert len(calibration) == 100 and calibration.levels() == levels[-100:]
    for target in (0.5, 0.9, 0.97):
        threshold = calibration.threshold(target)
        assert threshold is not None
        held = np.mean(np.array(levels[-100:]) < threshold)
        assert target <= held <= target + 0.02
    assert calibration.threshold(0.995) is None  # 100 levels cannot vouch for 0.995
    calibration.record([math.inf] * 100)  # uses no set holds
    assert calibration.threshold(0.5) == EVERY_ARM


def test_the_priced_threshold_keeps_an_arm_whose_searches_cost_more_than_it() -> None:
    # ten sessions, each using one arm: nine at level 1 (kept), one at level 100 found by
    # search at level 1: the target 0.9 is met at a threshold just above 1
    levels = np.array([1.0, 50.0, 100.0])
    costs = np.array([100, 100, 100])
    cheap = RecallCalibration(keep=100, pricing=SearchPricing(keep=1.0, search=10.0))
    dear = RecallCalibration(keep=100, pricing=SearchPricing(keep=1.0, search=10_000.0))
    for calibration in (cheap, dear):
        for s in range(9):
            calibration.record([1.0], [1.0], f"s{s}")
        calibration.record([1.0], [100.0], "s9")
    least = cheap.threshold(0.9)
    assert least is not None and 1.0 < least < 50.0
    # a search costs 10 a session x 0.1 of sessions: cheaper than keeping 200 tokens
    assert cheap.priced_threshold(0.9, levels, costs) == least
    # at 10,000 a search, keeping arms 1 and 2 (200 tokens) is cheaper than 0.1 search
    assert dear.priced_threshold(0.9, levels, costs) > 100.0
    # no pricing: the least threshold
    plain = RecallCalibration(keep=100)
    plain.record([1.0] * 10)
    assert plain.priced_threshold(0.9, levels, costs) == plain.threshold(0.9)


def test_baseline_sessions_calibrate_the_study_learner() -> None:
    from learning_bot.research.context_simulation import Learner, run_study
    from learning_bot.research.task_types import task_type_workload

    arms, sessions = task_type_workload(tools=24, types=4, sessions=30, seed=3)
    total = sum(a.token_cost for a in arms)
    cfg = config(recall_target=0.9, baseline_rate=0.2, token_budget=total, min_pulls=0)
    run = run_study(arms, sessions, "context", cfg, seed=1)
    learner = run.learner
    assert isinstance(learner, Learner)
    baseline = np.array(run.baseline)
    # one level per tool a baseline session's turn used, none from the selected sessions
    assert len(learner.calibration) == int(run.used[baseline].sum()) > 0


def test_with_deferral_the_study_learner_counts_what_the_search_would_find() -> None:
    from learning_bot.research.context_simulation import Learner, run_study
    from learning_bot.research.task_types import task_type_workload

    arms, sessions = task_type_workload(tools=24, types=4, sessions=40, seed=3)
    total = sum(a.token_cost for a in arms)
    cfg = config(recall_target=0.9, baseline_rate=0.2, token_budget=total, min_pulls=0)
    run = run_study(arms, sessions, "context+deferral", cfg, seed=1)
    learner = run.learner
    assert isinstance(learner, Learner) and learner.search is not None
    assert learner.calibration.pricing is not None and learner.calibration.pricing.search > 0
    baseline = np.array(run.baseline)
    assert len(learner.calibration) == int(run.used[baseline].sum()) > 0
    # a turn's search is charged to one of its uses, at the highest threshold below which one
    # of them is not there when the turn begins (not kept, not loaded by an earlier search):
    # at most one charge a turn, at a level no lower than that use's offered level
    offered = np.array(learner.calibration.levels())
    own = np.array(learner.calibration.own_levels())
    charged = own > 0.0
    assert 0 < charged.sum() <= int(run.turns[baseline].sum())
    assert (offered[charged] <= own[charged]).all()
    # the search finds some below the level at which the set would keep them
    assert (offered[charged] < own[charged]).any()


def test_the_study_learner_prices_a_search_at_the_prompts_its_requests_read() -> None:
    from learning_bot.engine.bm25 import BM25Index
    from learning_bot.engine.cost import ANTHROPIC
    from learning_bot.research.context_simulation import Learner

    arm_set = ArmSet.of(ARMS)
    search = BM25Index.of_texts([a.name for a in ARMS])

    def learner() -> Learner:
        return Learner(arm_set, config(recall_target=0.9), ContextSettings(), search, ANTHROPIC)

    read = learner()
    # nothing reported: a search re-reads nothing but appends its result
    before = read.pricing().search
    read.observe([0, 1], {0}, None, "s", prompt_tokens=5_000.0)
    # a request read 5,000 tokens: a search reads that prompt again
    assert read.pricing().search - before == pytest.approx(ANTHROPIC.cache_read * 5_000.0)
    # a baseline session's prompt (every tool) says nothing of the selected sessions'
    read.was_baseline = True
    read.observe([0, 1], {0}, None, "b", prompt_tokens=50_000.0)
    assert read.pricing().search - before == pytest.approx(ANTHROPIC.cache_read * 5_000.0)
    # before a selected session reports its prompt, a baseline session's tells the rest of a
    # request: what it read beside the tools it offered (no study constant is told)
    first = learner()
    first.was_baseline = True
    first.observe([0, 1], {0}, None, "b", prompt_tokens=50_000.0)
    rest = 50_000.0 - float(arm_set.costs[[0, 1]].sum())
    assert first.pricing().search - before == pytest.approx(ANTHROPIC.cache_read * rest)
