"""The learning-quality options (packing, min_score, exploration), the forgetting
math, the simulation study's workload knobs and oracle, and that the options pay off."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from learning_bot.engine import (
    Arm,
    ArmSet,
    ArmType,
    InvalidConfig,
    InvalidInput,
    LearningConfig,
    Phase,
    PosteriorArrays,
    rewards_for_run,
    select_arms,
)
from learning_bot.engine.config import DEFAULT_POLICY, POLICIES
from learning_bot.engine.simulation import (
    REALISTIC_TIERS,
    make_workload,
    oracle_mask,
    run_policy,
    stable_from,
)

# --- configuration ----------------------------------------------------------------------------


def test_defaults_are_the_recommended_preset_and_seed_is_the_seed_algorithm() -> None:
    c = LearningConfig()
    assert c.policy == DEFAULT_POLICY == "pooled-forgetting-per-token"
    assert c == LearningConfig.for_policy(DEFAULT_POLICY)
    assert {k: getattr(c, k) for k in POLICIES[DEFAULT_POLICY]} == POLICIES[DEFAULT_POLICY]
    optional = {"packing", "minScore", "exploration", "pooledPrior", "halfLife", "policy"}
    assert not optional & c.to_dict().keys()
    seed = LearningConfig.for_policy("seed")
    assert (seed.packing, seed.min_score, seed.exploration) == ("score", 0.0, 1.0)
    assert (seed.pooled_prior, seed.half_life, seed.policy) == (False, 0.0, "seed")
    written = seed.to_dict()
    assert written["policy"] == "seed"
    assert not optional - {"policy"} & written.keys()
    assert LearningConfig.from_dict(written) == seed
    assert LearningConfig.for_policy("seed", halfLife=30).half_life == 30.0


def test_camel_case_round_trip() -> None:
    data = {"packing": "score", "minScore": 0.05, "exploration": 0.25}
    c = LearningConfig.from_dict(data)
    assert (c.packing, c.min_score, c.exploration) == ("score", 0.05, 0.25)
    out = c.to_dict()
    assert {k: out[k] for k in data} == data
    assert LearningConfig.from_dict(out) == c
    snake = c.to_dict(camel=False)
    assert snake["min_score"] == 0.05 and snake["exploration"] == 0.25
    assert LearningConfig.from_dict(snake) == c


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"packing": "knapsack"}, "packing"),
        ({"packing": 1}, "packing"),
        ({"minScore": 1.5}, "minScore"),
        ({"min_score": -0.1}, "min_score"),
        ({"minScore": True}, "minScore"),
        ({"minScore": math.nan}, "minScore"),
        ({"exploration": 2}, "exploration"),
        ({"exploration": "wide"}, "exploration"),
        ({"pooledPrior": 1}, "pooledPrior"),
        ({"pooled_prior": "yes"}, "pooled_prior"),
        ({"pooledPrior": None}, "pooledPrior"),
    ],
)
def test_invalid_options_name_their_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        LearningConfig.from_dict(data)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")


def test_half_life_is_a_setting_and_policies_expand_to_their_options() -> None:
    config = LearningConfig.from_dict({"halfLife": 100})
    assert config.half_life == 100.0
    assert config.to_dict()["halfLife"] == 100.0
    assert "halfLife" not in LearningConfig().to_dict()
    assert LearningConfig.from_dict(config.to_dict()) == config
    for bad in (-1, "x", float("inf"), True):
        with pytest.raises(InvalidConfig) as info:
            LearningConfig.from_dict({"halfLife": bad})
        assert info.value.field == "halfLife"
    preset = LearningConfig.from_dict({"policy": "pooled-forgetting"})
    assert (preset.pooled_prior, preset.half_life, preset.packing) == (True, 100.0, "score")
    assert LearningConfig.from_dict(preset.to_dict()) == preset
    # options named next to the policy win over the preset's
    mixed = LearningConfig.from_dict({"policy": "pooled-forgetting", "halfLife": 50})
    assert (mixed.pooled_prior, mixed.half_life) == (True, 50.0)
    seed = LearningConfig.from_dict({"policy": "seed"})
    assert seed == LearningConfig.for_policy("seed") != LearningConfig()
    with pytest.raises(InvalidConfig) as info:
        LearningConfig.from_dict({"policy": "best"})
    assert info.value.field == "policy"


def test_forgetting_folds_like_single_steps_and_keeps_exact_sums_without_it() -> None:
    from learning_bot.engine.forgetting import fold, forget, keep_factor

    assert keep_factor(0) == keep_factor(None) == 1.0
    assert keep_factor(100) ** 100 == pytest.approx(0.5)
    rewards = [1.0, 0.0, 0.5, 1.0]
    plain = fold(rewards, 1.0)
    assert (plain.keep, plain.alpha_gain, plain.beta_gain, plain.pulls) == (1.0, 2.5, 1.5, 4)
    assert forget(7.25, 3.0, 1.0, 2.5) == 7.25 + 2.5
    keep = keep_factor(10)
    alpha = 5.0
    for r in rewards:
        alpha = forget(alpha, 3.0, keep, r)
    folded = fold(rewards, keep)
    assert forget(5.0, 3.0, folded.keep, folded.alpha_gain) == pytest.approx(alpha, rel=1e-12)
    # evidence beyond the prior halves every half-life when nothing new is learnt
    beta = 1.0 + 40.0
    for _ in range(10):
        beta = forget(beta, 1.0, keep, 0.0)
    alpha = 3.0 + 40.0
    for _ in range(10):
        alpha = forget(alpha, 3.0, keep, 0.0)
    assert alpha - 3.0 == pytest.approx(20.0)


# --- packing modes and threshold against a per-arm reference -----------------------------------


class RecordingGenerator(np.random.Generator):
    """A real numpy Generator that records the Beta parameters and draws it hands out."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.calls: list[tuple[Any, Any, npt.NDArray[np.float64]]] = []

    def beta(self, a: Any, b: Any, size: Any = None) -> Any:
        out = super().beta(a, b, size)
        self.calls.append((np.array(a), np.array(b), np.asarray(out, dtype=np.float64)))
        return out


def reference(
    arms: list[Arm],
    post: PosteriorArrays,
    cfg: LearningConfig,
    scores: npt.NDArray[np.float64],
) -> set[str]:
    """One arm at a time: forced arms in; the rest ranked by score (or score per token),
    those below min_score dropped, each taken while it fits."""
    seeds = set(cfg.seed_arm_ids)
    chosen: set[str] = set()
    used = 0
    rest = []
    for i, arm in enumerate(arms):
        if arm.id in seeds or int(post.pulls[i]) < cfg.min_pulls:
            chosen.add(arm.id)
            used += arm.token_cost
        else:
            score = float(scores[i])
            if cfg.packing == "score_per_token":
                key = score / arm.token_cost if arm.token_cost else math.inf
            else:
                key = score
            rest.append((key, score, arm))
    rest.sort(key=lambda item: -item[0])
    for _, score, arm in rest:
        if score < cfg.min_score:
            continue
        if used + arm.token_cost <= cfg.token_budget:
            chosen.add(arm.id)
            used += arm.token_cost
    return chosen


def random_case(seed: int) -> tuple[list[Arm], PosteriorArrays, int]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    costs = rng.integers(1, 900, size=n)
    arms = [Arm(f"tool:t:a{i}", int(c)) for i, c in enumerate(costs)]
    pulls = rng.integers(0, 30, size=n)
    hits = rng.binomial(pulls, rng.random(n))
    post = PosteriorArrays(1.0 + hits, 1.0 + pulls - hits, pulls.astype(np.int64))
    return arms, post, int(rng.integers(0, int(costs.sum())))


@pytest.mark.parametrize("packing", ["score", "score_per_token"])
@pytest.mark.parametrize("min_score", [0.0, 0.3])
@pytest.mark.parametrize("seed", range(12))
def test_packing_and_threshold_match_the_per_arm_reference(
    packing: str, min_score: float, seed: int
) -> None:
    arms, post, budget = random_case(seed)
    cfg = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        baseline_rate=0.0,
        token_budget=budget,
        min_pulls=3,
        seed_arm_ids=(arms[0].id,),
        packing=packing,
        min_score=min_score,
    )
    gen = RecordingGenerator(seed)
    selection = select_arms(ArmSet(arms), post, cfg, gen)
    (_, _, scores) = gen.calls[-1]
    assert set(selection.selected) == reference(arms, post, cfg, scores)
    assert selection.used_tokens == sum(a.token_cost for a in arms if a.id in selection.selected)


def test_per_token_prefers_two_cheap_arms_to_one_dear_one() -> None:
    arms = [Arm("tool:t:dear", 1000), Arm("tool:t:cheap1", 500), Arm("tool:t:cheap2", 500)]
    sharp = PosteriorArrays(
        np.array([0.9, 0.6, 0.6]) * 1e7, np.array([0.1, 0.4, 0.4]) * 1e7, np.full(3, 50)
    )
    base = LearningConfig.for_policy(
        "seed", phase=Phase.ACTIVE, baseline_rate=0.0, token_budget=1000
    )
    by_score = select_arms(arms, sharp, base, rng=1)
    by_density = select_arms(
        arms,
        sharp,
        LearningConfig(**{**_kw(base), "packing": "score_per_token"}),
        rng=1,
    )
    assert by_score.selected == ("tool:t:dear",)
    assert by_density.selected == ("tool:t:cheap1", "tool:t:cheap2")


def _kw(cfg: LearningConfig) -> dict[str, Any]:
    return {name: getattr(cfg, name) for name in cfg.__dataclass_fields__}


def test_threshold_leaves_out_low_scores_even_with_room() -> None:
    arms = [Arm("tool:t:used", 10), Arm("tool:t:idle", 10)]
    post = PosteriorArrays(np.array([9e6, 1e5]), np.array([1e6, 9.9e6]), np.full(2, 50))
    cfg = LearningConfig.for_policy(
        "seed", phase=Phase.ACTIVE, baseline_rate=0.0, token_budget=10_000
    )
    assert set(select_arms(arms, post, cfg, rng=0).selected) == {"tool:t:used", "tool:t:idle"}
    lean = LearningConfig(**{**_kw(cfg), "min_score": 0.05})
    assert select_arms(arms, post, lean, rng=0).selected == ("tool:t:used",)


def test_threshold_spares_seeds_under_explored_and_baseline_runs() -> None:
    arms = [Arm("tool:fs:Read", 10), Arm("tool:t:new", 10), Arm("tool:t:idle", 10)]
    post = PosteriorArrays(
        np.array([1e5, 1.0, 1e5]), np.array([9.9e6, 1.0, 9.9e6]), np.array([50, 0, 50])
    )
    cfg = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        baseline_rate=0.0,
        token_budget=10_000,
        min_score=0.5,
        min_pulls=5,
    )
    assert select_arms(arms, post, cfg, rng=0).selected == ("tool:fs:Read", "tool:t:new")
    baseline = LearningConfig(**{**_kw(cfg), "baseline_rate": 1.0})
    chosen = select_arms(arms, post, baseline, rng=0)
    assert chosen.is_baseline and len(chosen.selected) == 3


def test_exploration_narrows_the_draw_and_zero_uses_the_mean() -> None:
    arms = [Arm(f"tool:t:a{i}", 10) for i in range(4)]
    post = PosteriorArrays(
        np.array([2.0, 5.0, 1.0, 8.0]), np.array([6.0, 5.0, 3.0, 2.0]), np.full(4, 9)
    )
    cfg = LearningConfig.for_policy(
        "seed", phase=Phase.ACTIVE, baseline_rate=0.0, token_budget=20, exploration=0.25
    )
    gen = RecordingGenerator(3)
    select_arms(arms, post, cfg, gen)
    a, b, _ = gen.calls[-1]
    assert np.allclose(a, post.alpha * 4) and np.allclose(b, post.beta * 4)
    greedy = LearningConfig(**{**_kw(cfg), "exploration": 0.0})
    gen = RecordingGenerator(3)
    picked = select_arms(arms, post, greedy, gen)
    assert gen.calls == []  # no draw at all: the two highest means win
    assert picked.selected == ("tool:t:a1", "tool:t:a3")


def test_mask_follows_the_selected_ids_and_is_read_only() -> None:
    arms, post, budget = random_case(4)
    cfg = LearningConfig.for_policy("seed", phase=Phase.ACTIVE, token_budget=budget)
    selection = select_arms(ArmSet(arms), post, cfg, rng=2)
    mask = selection.mask
    assert tuple(a.id for a, m in zip(arms, mask, strict=True) if m) == selection.selected
    with pytest.raises(ValueError, match="read-only"):
        mask[0] = not mask[0]


# --- forgetting ---------------------------------------------------------------------------------


def test_forgetting_in_steps_equals_forgetting_at_once_and_returns_to_the_prior() -> None:
    """Without new evidence, each half-life halves what an arm holds beyond its prior, k
    observations then m forget as k + m do, no half-life forgets nothing, and a long run
    brings every arm back to its own prior."""
    from learning_bot.engine.forgetting import forget, keep_factor

    prior = np.array([3.0, 1.0, 1.0])
    alpha = np.array([41.0, 3.0, 1.0])
    keep = keep_factor(100)
    once = forget(alpha, prior, keep**100, 0.0)
    assert np.allclose(once - prior, (alpha - prior) / 2)
    twice = forget(once, prior, keep**50, 0.0)
    assert np.allclose(twice, forget(alpha, prior, keep**150, 0.0))
    assert np.array_equal(forget(alpha, prior, keep_factor(0), 0.0), alpha)
    far = forget(alpha, prior, keep_factor(10) ** 10_000, 0.0)
    assert np.allclose(far, prior)
    assert alpha[0] == 41.0  # the input is left alone


def test_forgetting_lets_a_learner_follow_a_shift() -> None:
    """An arm that was never used and then always is: with forgetting its mean climbs faster."""
    from learning_bot.engine.forgetting import forget, keep_factor

    plain = (1.0, 201.0)
    forgetful = plain
    keep = keep_factor(20)
    for _ in range(100):
        plain = (plain[0] + 1.0, plain[1])
        forgetful = (forget(forgetful[0], 1.0, keep, 1.0), forget(forgetful[1], 1.0, keep, 0.0))
    mean = plain[0] / (plain[0] + plain[1])
    forgetful_mean = forgetful[0] / (forgetful[0] + forgetful[1])
    assert mean < 0.35 and forgetful_mean > 0.75


@pytest.mark.parametrize("half_life", [-2, -0.5, math.nan, math.inf, True, "5"])
def test_keep_factor_rejects_bad_half_lives(half_life: Any) -> None:
    from learning_bot.engine.forgetting import keep_factor

    with pytest.raises(InvalidInput):
        keep_factor(half_life)


# --- the workload's knobs -----------------------------------------------------------------------


def test_realistic_workload_is_seeded() -> None:
    a = make_workload(60, seed=11, profile="realistic", drift_at=40)
    b = make_workload(60, seed=11, profile="realistic", drift_at=40)
    c = make_workload(60, seed=12, profile="realistic", drift_at=40)
    assert a.arms == b.arms and a.tiers == b.tiers
    assert np.array_equal(a.usefulness, b.usefulness)
    assert a.drifted_usefulness is not None and b.drifted_usefulness is not None
    assert np.array_equal(a.drifted_usefulness, b.drifted_usefulness)
    assert not np.array_equal(a.usefulness, c.usefulness)
    run_a = a.draw_run(80, np.random.default_rng(5))
    run_b = b.draw_run(80, np.random.default_rng(5))
    assert np.array_equal(run_a[0], run_b[0]) and np.array_equal(run_a[1], run_b[1])


def test_realistic_workload_shape() -> None:
    w = make_workload(200, seed=3, profile="realistic")
    assert {a.type for a in w.arms} == set(ArmType)
    assert len(w.tiers) == 200
    p = w.usefulness
    tiers = np.array(w.tiers)
    for tier in REALISTIC_TIERS:
        chosen = p[tiers == tier.name]
        assert chosen.size >= round(0.8 * tier.share * 200)
        assert ((chosen >= tier.low) & (chosen <= tier.high)).all()
    sections = np.array([a.type is ArmType.SECTION for a in w.arms])
    assert (p[sections] == 1.0).all()
    assert (tiers[:2] == "always").all()  # the seed arms
    costs = w.costs
    assert costs.min() >= 40 and costs.max() <= 6000
    assert 250 <= float(np.median(costs)) <= 600


def test_drift_shuffles_usefulness_at_the_given_trace() -> None:
    w = make_workload(50, seed=2, profile="realistic", drift_at=30)
    after = w.drifted_usefulness
    assert after is not None
    assert np.array_equal(w.usefulness_at(29), w.usefulness)
    assert np.array_equal(w.usefulness_at(30), after)
    assert np.array_equal(np.sort(after), np.sort(w.usefulness))  # the same values, moved
    pinned = np.array([a.type is ArmType.SECTION for a in w.arms])
    pinned[:2] = True
    assert np.array_equal(after[pinned], w.usefulness[pinned])
    assert not np.array_equal(after, w.usefulness)


@pytest.mark.parametrize("profile", ["two-tier", "realistic"])
def test_draw_run_uses_the_drifted_probabilities_from_drift_at(profile: str) -> None:
    w = make_workload(20, seed=9, profile=profile, drift_at=7, conversational_rate=0.4)
    conversational, used = w.draw_run(15, np.random.default_rng(1))
    check = np.random.default_rng(1)
    expected_conv = check.random(15) < 0.4
    uniforms = check.random((15, 20))
    expected = np.vstack([uniforms[t] < w.usefulness_at(t) for t in range(15)])
    expected[expected_conv] = False
    assert np.array_equal(conversational, expected_conv)
    assert np.array_equal(used, expected)
    assert not used[conversational].any()


@pytest.mark.parametrize("seed", range(4))
def test_realistic_reports_reference_exactly_the_included_used_arms(seed: int) -> None:
    w = make_workload(80, seed=seed, profile="realistic", conversational_rate=0.0)
    arm_set = ArmSet(w.arms)
    cfg = LearningConfig.for_policy(
        "seed", phase=Phase.ACTIVE, min_pulls=0, token_budget=arm_set.total_cost // 2
    )
    conversational, used = w.draw_run(10, np.random.default_rng(seed))
    for t in range(10):
        selection = select_arms(arm_set, None, cfg, rng=seed * 100 + t)
        report = w.report(f"t{t}", selection.selected, used[t], bool(conversational[t]))
        outcome = rewards_for_run(report, cfg)
        rewarded = {arm_id for arm_id, r in outcome.rewards.items() if r == 1.0}
        expected = {
            a.id for a, u, m in zip(w.arms, used[t], selection.mask, strict=True) if u and m
        }
        assert rewarded == expected


def test_bad_workload_knobs() -> None:
    with pytest.raises(InvalidInput):
        make_workload(10, profile="uniform")
    with pytest.raises(InvalidInput):
        make_workload(10, drift_at=-1)
    with pytest.raises(InvalidInput):
        make_workload(10).draw_run(-1, np.random.default_rng(0))


# --- the oracle -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_oracle_is_the_exact_knapsack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 9
    p = rng.random(n) * (rng.random(n) < 0.8)
    costs = rng.integers(0, 60, size=n)
    budget = int(rng.integers(0, 250))
    forced = np.zeros(n, dtype=bool)
    forced[0] = bool(rng.random() < 0.5)
    mask, grain = oracle_mask(p, costs, budget, forced)
    assert grain == 1 and mask[forced].all()
    room = budget - int(costs[forced].sum())
    assert int(costs[mask & ~forced].sum()) <= max(room, 0)
    best = 0.0
    free = np.flatnonzero(~forced)
    for bits in itertools.product((False, True), repeat=free.size):
        pick = free[np.array(bits, dtype=bool)]
        if int(costs[pick].sum()) <= room:
            best = max(best, float(p[pick].sum()))
    assert math.isclose(float(p[mask & ~forced].sum()), best, abs_tol=1e-9)


def test_oracle_on_a_coarse_grain_still_fits_the_budget() -> None:
    w = make_workload(100, seed=1)
    costs = w.costs
    budget = int(0.3 * costs.sum())
    forced = np.zeros(100, dtype=bool)
    exact, g1 = oracle_mask(w.usefulness, costs, budget, forced)
    coarse, g = oracle_mask(w.usefulness, costs, budget, forced, max_cells=100_000)
    assert g1 == 1 and g > 1
    assert int(costs[coarse].sum()) <= budget
    assert w.usefulness[coarse].sum() >= 0.97 * w.usefulness[exact].sum()


# --- stabilisation ---------------------------------------------------------------------------


def test_stable_from_finds_the_last_move() -> None:
    means = np.array([[0.5, 0.5], [0.7, 0.5], [0.72, 0.45], [0.75, 0.42], [0.74, 0.4]])
    assert stable_from(means, 10, tolerance=0.1) == 10
    assert stable_from(means, 10, tolerance=0.025) == 30
    assert stable_from(means, 10, tolerance=0.01) == 40
    assert stable_from(means, 10, tolerance=0.5) == 0


# --- the options pay off ----------------------------------------------------------------------


def research_regret(config: dict[str, Any], envs: int) -> float:
    """Mean regret against the oracle, research environment: 30 arms, 200 traces, budget 35%,
    2 seeds, minPulls 3, baselineRate 0.05, every arm from Beta(1, 1)."""
    total = 0.0
    for env in range(envs):
        w = make_workload(30, seed=1000 + env, conversational_rate=0.0)
        arm_set = ArmSet(w.arms)
        budget = round(0.35 * arm_set.total_cost)
        cfg = LearningConfig.for_policy(
            "seed",
            phase=Phase.ACTIVE,
            token_budget=budget,
            min_pulls=3,
            baseline_rate=0.05,
            seed_arm_ids=(w.arms[0].id, w.arms[1].id),
            **config,
        )
        oracle, _ = oracle_mask(
            w.usefulness, arm_set.costs, budget, arm_set.seed_mask(cfg.seed_arm_ids)
        )
        conversational, used = w.draw_run(200, np.random.default_rng([env, 1]))
        flat = (np.ones(30), np.ones(30))
        run = run_policy(
            arm_set, cfg, conversational, used, np.random.default_rng([env, 2]), prior=flat
        )
        value = run.included[~run.baseline] @ w.usefulness
        total += float((w.usefulness[oracle].sum() - value).sum())
    return total / envs


def test_sharpened_per_token_beats_the_seed_algorithm_on_regret() -> None:
    seed = research_regret({}, envs=10)
    best = research_regret({"packing": "score_per_token", "exploration": 0.1}, envs=10)
    assert best < 0.8 * seed


def test_run_policy_updates_like_spec_section_5() -> None:
    w = make_workload(12, seed=4, conversational_rate=0.5)
    arm_set = ArmSet(w.arms)
    cfg = LearningConfig.for_policy("seed", phase=Phase.ACTIVE, token_budget=2000, min_pulls=2)
    conversational, used = w.draw_run(60, np.random.default_rng(0))
    run = run_policy(arm_set, cfg, conversational, used, np.random.default_rng(1), checkpoints=60)
    working = ~conversational
    hits = (run.included & used)[working].sum(axis=0)
    pulls = run.included[working].sum(axis=0)
    expected_alpha = arm_set.prior_alpha + hits
    expected_beta = arm_set.prior_beta + pulls - hits
    assert np.allclose(run.means[-1], expected_alpha / (expected_alpha + expected_beta))
    # The same seeds give the same run.
    again = run_policy(arm_set, cfg, conversational, used, np.random.default_rng(1), checkpoints=60)
    assert np.array_equal(run.included, again.included)


# --- pooled prior -----------------------------------------------------------------------------


def test_pooled_prior_is_on_by_default_off_for_seed_and_round_trips() -> None:
    assert LearningConfig().pooled_prior is True
    assert "pooledPrior" not in LearningConfig().to_dict()
    assert LearningConfig.for_policy("seed").pooled_prior is False
    c = LearningConfig.from_dict({"policy": "seed", "pooledPrior": True, "exploration": 0.7})
    assert c.pooled_prior is True
    assert c.to_dict()["pooledPrior"] is True
    assert LearningConfig.from_dict(c.to_dict()) == c
    assert LearningConfig.from_dict(c.to_dict(camel=False)) == c


def _pooled_case() -> tuple[list[Arm], PosteriorArrays]:
    """One arm seen 3 times and never used, one seen 100 times and used 14 times, and 20 arms
    seen 40 times and never used: on its own the young arm's mean (0.2) beats the steady one's
    (0.15); judged by how arms in general turned out, it looks like the 20 unused ones."""
    arms = [Arm("tool:t:young", 10), Arm("tool:t:steady", 10)]
    arms += [Arm(f"tool:t:idle{i}", 1000) for i in range(20)]
    alpha = np.array([1.0, 15.0] + [1.0] * 20)
    beta = np.array([4.0, 87.0] + [41.0] * 20)
    pulls = np.array([3, 100] + [40] * 20)
    return arms, PosteriorArrays(alpha, beta, pulls)


def test_pooled_prior_judges_little_evidence_by_the_other_arms() -> None:
    arms, post = _pooled_case()
    base = LearningConfig.for_policy(
        "seed", phase=Phase.ACTIVE, baseline_rate=0.0, token_budget=10, min_pulls=0, seed_arm_ids=()
    )
    own = LearningConfig(**{**_kw(base), "exploration": 0.0})
    pooled = LearningConfig(**{**_kw(base), "exploration": 0.0, "pooled_prior": True})
    assert select_arms(arms, post, own, rng=0).selected == ("tool:t:young",)
    assert select_arms(arms, post, pooled, rng=0).selected == ("tool:t:steady",)
    # Thompson draws under the pooled prior mostly agree; under the flat one they do not.
    draws = LearningConfig(**{**_kw(base), "pooled_prior": True, "exploration": 0.7})
    gen = np.random.default_rng(5)
    steady = sum(
        select_arms(arms, post, draws, gen).selected == ("tool:t:steady",) for _ in range(200)
    )
    assert steady > 150


def test_pooled_prior_scores_stay_in_the_unit_interval_and_are_seeded() -> None:
    arms, post = _pooled_case()
    cfg = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        baseline_rate=0.0,
        token_budget=2000,
        min_pulls=0,
        seed_arm_ids=(),
        pooled_prior=True,
    )
    first = [select_arms(arms, post, cfg, rng=seed).selected for seed in range(20)]
    again = [select_arms(arms, post, cfg, rng=seed).selected for seed in range(20)]
    assert first == again
    assert len(set(first)) > 1  # exploration 1: the draws vary from seed to seed
    from learning_bot.engine.draws import _pooled_scores

    for e in (1.0, 0.5, 0.0):
        scores = _pooled_scores(post, e, np.random.default_rng(3))
        assert scores.shape == (22,) and ((scores >= 0) & (scores <= 1)).all()


def test_pooled_prior_keeps_seeds_under_explored_and_baseline_runs() -> None:
    arms = [Arm("tool:fs:Read", 10), Arm("tool:t:new", 10), Arm("tool:t:idle", 10)]
    post = PosteriorArrays(
        np.array([1.0, 1.0, 1.0]), np.array([50.0, 1.0, 50.0]), np.array([49, 0, 49])
    )
    cfg = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        baseline_rate=0.0,
        token_budget=20,
        min_pulls=5,
        pooled_prior=True,
    )
    assert select_arms(arms, post, cfg, rng=0).selected == ("tool:fs:Read", "tool:t:new")
    baseline = LearningConfig(**{**_kw(cfg), "baseline_rate": 1.0, "token_budget": 30})
    chosen = select_arms(arms, post, baseline, rng=0)
    assert chosen.is_baseline and len(chosen.selected) == 3


def test_pooled_prior_does_not_lose_to_sharpened_on_regret() -> None:
    sharpened = research_regret({"packing": "score_per_token", "exploration": 0.1}, envs=10)
    pooled = research_regret(
        {"packing": "score_per_token", "exploration": 0.7, "pooled_prior": True}, envs=10
    )
    assert pooled < sharpened + 3.0


def test_estimated_recall_observes_hits_and_estimates_only_what_was_left_out() -> None:
    from learning_bot.engine.metrics import estimated_recall

    # nothing left out: the observed hits are the whole answer
    assert estimated_recall({"a": 0.9, "b": 0.1}, {"a": (10, 10, 9), "b": (10, 10, 1)}) == 1.0
    # b left out in 8 of 10 runs at an estimated 0.5: 4 estimated misses against 10 hits
    got = estimated_recall({"a": 0.9, "b": 0.5}, {"a": (10, 10, 9), "b": (2, 10, 1)})
    assert got == pytest.approx(10 / 14)
    assert estimated_recall({}, {}) is None


def test_usefulness_estimates_read_few_observations_against_the_other_arms() -> None:
    from learning_bot.engine.metrics import usefulness_estimates

    assert usefulness_estimates({}) == {}
    rare = {f"rare{i}": (2.0, 400.0) for i in range(20)}
    got = usefulness_estimates({**rare, "busy": (900.0, 100.0), "new": (0.0, 5.0)})
    # plenty of evidence: the observed rate
    assert got["busy"] == pytest.approx(0.9, abs=0.01)
    assert got["rare0"] == pytest.approx(2 / 402, abs=0.003)
    # 0 uses in 5 among arms that are rarely used: rarely used, not the 1/12 a flat prior gives
    assert got["new"] < 0.02
    # the same five observations among busy arms read as a busier arm
    busy = {f"busy{i}": (700.0, 300.0) for i in range(20)}
    assert usefulness_estimates({**busy, "new": (0.0, 5.0)})["new"] > got["new"]
    # identical evidence, identical estimates; fractional evidence (forgetting) is fine
    assert got["rare3"] == got["rare7"]
    assert 0.0 < usefulness_estimates({"a": (0.4, 2.7)})["a"] < 1.0


def test_usefulness_estimates_asked_again_answer_alike_and_apart() -> None:
    """The last fits are kept (a server answers status after status from them): the same
    evidence gives the same figures, each caller gets its own dict, and evidence that changed
    is fitted again."""
    from learning_bot.engine.metrics import usefulness_estimates

    evidence = {"a": (3.0, 40.0), "b": (20.0, 2.0), "c": (0.0, 5.0), "d": (1.5, 0.25)}
    first = usefulness_estimates(evidence)
    first["a"] = -1.0
    again = usefulness_estimates(dict(evidence))
    assert again["a"] != -1.0 and set(again) == set(evidence)
    assert usefulness_estimates({"a": (3.0, 40.0)}) == usefulness_estimates({"a": (3, 40)})
    moved = usefulness_estimates({**evidence, "a": (30.0, 13.0)})
    assert moved["a"] > again["a"]
    assert usefulness_estimates(evidence) == again


def test_usefulness_estimates_add_up_to_the_true_usage_of_rarely_seen_arms() -> None:
    """Summed over many arms seen a few times each (what status multiplies by the runs that
    left them out), the estimates match the true usage probabilities; the flat Jeffreys
    reading overestimates it several times over."""
    from learning_bot.engine.metrics import usefulness_estimates

    rng = np.random.default_rng(7)
    n = 400
    p = np.where(rng.random(n) < 0.2, rng.uniform(0.4, 0.9, n), rng.uniform(0.0, 0.08, n))
    seen = rng.integers(3, 8, n)
    seen[: n // 2] = rng.integers(200, 600, n // 2)  # half of them well observed
    uses = rng.binomial(seen, p)
    got = usefulness_estimates(
        {str(i): (float(u), float(k - u)) for i, (u, k) in enumerate(zip(uses, seen, strict=True))}
    )
    few = np.flatnonzero(seen < 10)
    estimated = sum(got[str(i)] for i in few)
    flat = float(((uses[few] + 0.5) / (seen[few] + 1.0)).sum())
    truth = float(p[few].sum())
    assert abs(estimated - truth) < 0.12 * truth
    assert abs(flat - truth) > abs(estimated - truth)
