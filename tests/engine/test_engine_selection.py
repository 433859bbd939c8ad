"""Thompson selection under a token budget (SPEC section 4)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from learning_bot.engine import (
    DEFAULT_SEED_ARM_IDS,
    Arm,
    ArmSet,
    InvalidInput,
    LearningConfig,
    Phase,
    Posterior,
    PosteriorArrays,
    Selection,
    excluded_tools_guidance,
    include_everything,
    initial_prior,
    packing,
    select_arms,
    selection,
)

N = 10_000_000.0
"""Total pseudo-count of a 'sharp' posterior: its draws stay within ~1e-4 of the mean."""


def sharp(mean: float, pulls: int = 100) -> Posterior:
    """A posterior whose Thompson draw is, for these tests, its mean."""
    return Posterior(mean * N, (1 - mean) * N, pulls)


def config(**kwargs: Any) -> LearningConfig:
    """Active phase, no baseline runs, no seeds, no exploration floor unless asked for."""
    base: dict[str, Any] = {
        "phase": Phase.ACTIVE,
        "baseline_rate": 0.0,
        "seed_arm_ids": (),
        "min_pulls": 0,
    }
    base.update(kwargs)
    return LearningConfig.for_policy("seed", **base)


class SpyGenerator(np.random.Generator):
    """A real numpy Generator that records the Beta scores and the permutations it hands out."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.beta_draws: list[npt.NDArray[np.float64]] = []
        self.permutations: list[list[int]] = []

    def beta(self, a: Any, b: Any, size: Any = None) -> Any:
        out = super().beta(a, b, size)
        self.beta_draws.append(np.asarray(out, dtype=np.float64))
        return out

    def permutation(self, x: Any, axis: int = 0) -> Any:
        out = super().permutation(x, axis)
        self.permutations.append(np.asarray(out).tolist())
        return out


PATHS = ("small", "sorted", "bucketed")
"""The ways `select_arms` can rank and pack: plain Python, arrays sorted, arrays bucketed."""


@contextmanager
def selection_path(name: str) -> Iterator[None]:
    """Force `select_arms` onto one of PATHS, whatever the size of the inventory."""
    small, bucketed_from = {"small": (10**9, 1), "sorted": (0, 10**9), "bucketed": (0, 1)}[name]
    with (
        mock.patch.object(selection, "SMALL_INVENTORY", small),
        mock.patch.object(packing, "BUCKETED_FROM", bucketed_from),
    ):
        yield


def reference_select(
    arms: Sequence[Arm],
    posteriors: Mapping[str, Posterior],
    cfg: LearningConfig,
    scores: Mapping[str, float] | None,
    shuffle: Sequence[int] = (),
) -> tuple[tuple[str, ...], int]:
    """SPEC section 4, one arm at a time. `scores` None means a baseline run, which offers
    the non-seed arms in the order `shuffle` gives (positions into the non-seed arms)."""
    seeds = set(cfg.seed_arm_ids)

    def pulls(arm: Arm) -> int:
        p = posteriors.get(arm.id)
        return p.pulls if p is not None else 0

    if scores is None:
        forced = [a for a in arms if a.id in seeds]
        others = [a for a in arms if a.id not in seeds]
        assert sorted(shuffle) == list(range(len(others)))
        rest = [others[j] for j in shuffle]
    else:
        forced = [a for a in arms if a.id in seeds or pulls(a) < cfg.min_pulls]
        forced_ids = {a.id for a in forced}
        rest = sorted(
            (a for a in arms if a.id not in forced_ids), key=lambda a: scores[a.id], reverse=True
        )
    chosen = {a.id for a in forced}
    used = sum(a.token_cost for a in forced)
    for arm in rest:
        if used + arm.token_cost <= cfg.token_budget:
            chosen.add(arm.id)
            used += arm.token_cost
    return tuple(a.id for a in arms if a.id in chosen), used


def inventory(costs: Sequence[int], kind: str = "tool") -> list[Arm]:
    return [Arm(f"{kind}:x:a{i}", c) for i, c in enumerate(costs)]


def check_invariants(sel: Selection, arms: Sequence[Arm]) -> None:
    ids = [a.id for a in arms]
    cost = {a.id: a.token_cost for a in arms}
    assert set(sel.selected).isdisjoint(sel.excluded)
    assert sorted(sel.selected + sel.excluded) == sorted(ids)
    # both lists keep inventory order
    assert list(sel.selected) == [i for i in ids if i in set(sel.selected)]
    assert list(sel.excluded) == [i for i in ids if i in set(sel.excluded)]
    assert sel.used_tokens == sum(cost[i] for i in sel.selected)
    assert sel.over_budget == (sel.used_tokens > sel.token_budget)


# --- passive phase and disabled learning ---------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        LearningConfig.for_policy("seed", token_budget=10),  # passive is the default
        LearningConfig.for_policy("seed", phase=Phase.ACTIVE, enabled=False, token_budget=10),
        LearningConfig.for_policy("seed", phase=Phase.PASSIVE, baseline_rate=1.0, token_budget=0),
    ],
)
def test_passive_or_disabled_includes_everything(cfg: LearningConfig) -> None:
    arms = inventory([100, 200, 300])
    posteriors = {arms[0].id: Posterior(1, 1000, 500)}
    sel = select_arms(arms, posteriors, cfg, rng=1)
    assert sel.selected == tuple(a.id for a in arms)
    assert sel.excluded == ()
    assert sel.is_baseline is False
    assert sel.used_tokens == 600
    assert sel.token_budget == cfg.token_budget
    assert sel.fallback
    assert sel.guidance is None


def test_include_everything() -> None:
    arms = inventory([1, 2])
    sel = include_everything(arms, LearningConfig.for_policy("seed"), "storage is down")
    assert sel.selected == (arms[0].id, arms[1].id)
    assert sel.excluded == ()
    assert sel.fallback == "storage is down"


def test_active_selection_has_no_fallback() -> None:
    sel = select_arms(inventory([1, 2]), {}, config(), rng=0)
    assert sel.fallback is None


def test_empty_inventory() -> None:
    sel = select_arms([], {}, config(), rng=0)
    assert sel.selected == ()
    assert sel.excluded == ()
    assert sel.used_tokens == 0


# --- reproducibility -----------------------------------------------------------------------


def _mixed_case() -> tuple[list[Arm], dict[str, Posterior], LearningConfig]:
    rng = np.random.default_rng(1234)
    arms = [Arm(f"tool:x:t{i}", int(c)) for i, c in enumerate(rng.integers(10, 500, size=60))]
    posteriors = {
        a.id: Posterior(float(rng.uniform(0.5, 20)), float(rng.uniform(0.5, 20)), 10) for a in arms
    }
    cfg = config(token_budget=4000, baseline_rate=0.1, seed_arm_ids=(arms[3].id,), min_pulls=5)
    return arms, posteriors, cfg


def test_same_int_seed_gives_the_same_selection() -> None:
    arms, posteriors, cfg = _mixed_case()
    for seed in range(20):
        a = select_arms(arms, posteriors, cfg, rng=seed)
        b = select_arms(arms, posteriors, cfg, rng=seed)
        assert a == b
        assert a.selected == b.selected
        assert a.is_baseline == b.is_baseline


def test_same_generator_state_gives_the_same_sequence_of_selections() -> None:
    arms, posteriors, cfg = _mixed_case()
    g1, g2 = np.random.default_rng(99), np.random.default_rng(99)
    first = [select_arms(arms, posteriors, cfg, rng=g1) for _ in range(10)]
    second = [select_arms(arms, posteriors, cfg, rng=g2) for _ in range(10)]
    assert first == second
    # the generator advances: successive selections are not all the same
    assert len({s.selected for s in first}) > 1


def test_different_seeds_give_different_selections() -> None:
    arms, posteriors, cfg = _mixed_case()
    assert len({select_arms(arms, posteriors, cfg, rng=s).selected for s in range(20)}) > 1


def test_rng_must_be_a_generator_or_an_int() -> None:
    arms, posteriors, cfg = _mixed_case()
    with pytest.raises(InvalidInput, match="rng"):
        select_arms(arms, posteriors, cfg, rng="seed")  # type: ignore[arg-type]


def test_arm_set_and_posterior_arrays_give_the_same_result_as_list_and_dict() -> None:
    arms, posteriors, cfg = _mixed_case()
    arm_set = ArmSet(arms)
    arrays = arm_set.align(posteriors)
    for seed in range(30):
        plain = select_arms(arms, posteriors, cfg, rng=seed)
        assert select_arms(arm_set, arrays, cfg, rng=seed) == plain
        assert select_arms(arm_set, posteriors, cfg, rng=seed) == plain


def test_hand_built_posterior_arrays_match_the_dict_path() -> None:
    arms = inventory([30, 30, 30, 30])
    posteriors = {a.id: Posterior(1.0 + i, 2.0, 3 * i) for i, a in enumerate(arms)}
    arrays = PosteriorArrays(
        np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0] * 4), np.array([0, 3, 6, 9])
    )
    cfg = config(token_budget=60, min_pulls=4)
    for seed in range(20):
        assert select_arms(ArmSet(arms), arrays, cfg, seed) == select_arms(
            arms, posteriors, cfg, seed
        )


def test_posterior_arrays_of_the_wrong_size_are_rejected() -> None:
    arms = inventory([1, 2, 3])
    bad = PosteriorArrays(np.ones(2), np.ones(2), np.zeros(2, dtype=np.int64))
    with pytest.raises(InvalidInput):
        select_arms(ArmSet(arms), bad, config(), rng=0)


def test_duplicate_arm_ids_are_rejected() -> None:
    arms = [Arm("tool:x:a", 1), Arm("tool:x:a", 2)]
    with pytest.raises(InvalidInput, match="tool:x:a"):
        select_arms(arms, {}, config(), rng=0)


# --- the algorithm, case by case -----------------------------------------------------------


def test_greedy_packing_skips_what_does_not_fit_and_takes_a_later_cheaper_arm() -> None:
    # Listed out of score order so that result order (inventory order) is visible.
    arms = [Arm("tool:x:D", 20), Arm("tool:x:A", 60), Arm("tool:x:E", 10), Arm("tool:x:B", 50)]
    arms.append(Arm("tool:x:C", 30))
    means = {"A": 0.9, "B": 0.8, "C": 0.7, "D": 0.6, "E": 0.5}
    posteriors = {f"tool:x:{k}": sharp(m) for k, m in means.items()}
    for seed in range(10):
        sel = select_arms(arms, posteriors, config(token_budget=100), rng=seed)
        # A (60) in; B (50) does not fit, skipped; C (30) in; D (20) does not fit; E (10) in.
        assert sel.selected == ("tool:x:A", "tool:x:E", "tool:x:C")
        assert sel.excluded == ("tool:x:D", "tool:x:B")
        assert sel.used_tokens == 100
        assert sel.over_budget is False
        assert sel.is_baseline is False


def test_higher_scores_win_the_budget() -> None:
    arms = inventory([10] * 6)
    posteriors = {a.id: sharp(0.99 if i % 2 else 0.01) for i, a in enumerate(arms)}
    sel = select_arms(arms, posteriors, config(token_budget=30), rng=3)
    assert sel.selected == (arms[1].id, arms[3].id, arms[5].id)


def test_seeds_are_always_in_even_when_they_exceed_the_budget() -> None:
    seeds = [Arm(a, 5000) for a in DEFAULT_SEED_ARM_IDS]
    others = inventory([10, 10, 10])
    arms = [others[0], *seeds, *others[1:]]
    posteriors = {a.id: sharp(0.01) for a in seeds} | {a.id: sharp(0.99) for a in others}
    cfg = config(token_budget=100, seed_arm_ids=DEFAULT_SEED_ARM_IDS)
    for seed in range(10):
        sel = select_arms(arms, posteriors, cfg, rng=seed)
        assert set(DEFAULT_SEED_ARM_IDS) <= set(sel.selected)
        assert set(sel.excluded) == {a.id for a in others}
        assert sel.used_tokens == 30_000
        assert sel.over_budget is True


def test_seeds_are_in_with_the_default_config() -> None:
    arms = [Arm(a, 1000) for a in DEFAULT_SEED_ARM_IDS] + inventory([1000] * 4)
    posteriors = {a.id: sharp(0.01 if a.id in DEFAULT_SEED_ARM_IDS else 0.99) for a in arms}
    cfg = LearningConfig.for_policy(
        "seed", phase=Phase.ACTIVE, token_budget=1000, baseline_rate=0.5
    )
    for seed in range(20):
        sel = select_arms(arms, posteriors, cfg, rng=seed)
        assert set(DEFAULT_SEED_ARM_IDS) <= set(sel.selected)
        assert len(sel.excluded) == 4


def test_seeds_are_in_during_baseline_runs_too() -> None:
    seeds = ("tool:x:a3", "tool:x:a4")
    arms = inventory([60, 60, 60, 500, 500])
    cfg = config(token_budget=100, baseline_rate=1.0, seed_arm_ids=seeds)
    sel = select_arms(arms, {}, cfg, rng=0)
    assert sel.is_baseline is True
    assert sel.selected == seeds
    assert sel.over_budget is True
    assert sel.used_tokens == 1000


def test_unknown_seed_ids_are_ignored() -> None:
    arms = inventory([10, 10])
    sel = select_arms(arms, {}, config(token_budget=10, seed_arm_ids=("tool:fs:Nope",)), rng=0)
    assert len(sel.selected) == 1


def test_under_explored_arms_are_always_in() -> None:
    arms = inventory([40, 40, 40, 40, 40])
    posteriors = {
        arms[0].id: sharp(0.001, pulls=4),  # under-explored despite a hopeless score
        arms[1].id: sharp(0.9, pulls=5),
        arms[2].id: sharp(0.8, pulls=5),
        arms[3].id: sharp(0.7, pulls=50),
        # arms[4] has no posterior: zero pulls, under-explored
    }
    for seed in range(10):
        sel = select_arms(arms, posteriors, config(token_budget=120, min_pulls=5), rng=seed)
        # forced: a0 + a4 = 80; room 40 goes to the best of the rest, a1.
        assert sel.selected == (arms[0].id, arms[1].id, arms[4].id)
        assert sel.used_tokens == 120


def test_under_explored_arms_are_in_even_beyond_the_budget() -> None:
    arms = inventory([100, 100, 100, 5])
    posteriors = {arms[3].id: sharp(0.99, pulls=10)}
    sel = select_arms(arms, posteriors, config(token_budget=50, min_pulls=1), rng=0)
    assert sel.selected == tuple(a.id for a in arms[:3])
    assert sel.excluded == (arms[3].id,)
    assert sel.over_budget is True
    assert sel.used_tokens == 300


def test_min_pulls_zero_forces_nothing() -> None:
    arms = inventory([100, 100])
    sel = select_arms(arms, {}, config(token_budget=50), rng=0)
    assert sel.selected == ()
    assert sel.excluded == tuple(a.id for a in arms)
    assert sel.used_tokens == 0


def test_baseline_run_offers_the_arms_in_a_random_order_ignoring_scores() -> None:
    arms = inventory([50, 60, 40, 10, 5])
    posteriors = {a.id: sharp(0.01) for a in arms[:3]} | {a.id: sharp(0.99) for a in arms[3:]}
    cfg = config(token_budget=100, baseline_rate=1.0, min_pulls=1000)
    seen = set()
    for seed in range(40):
        spy = SpyGenerator(seed)
        sel = select_arms(arms, posteriors, cfg, rng=spy)
        assert sel.is_baseline is True
        (order,) = spy.permutations
        # greedy over the generator's order: each arm that still fits goes in
        room, expected = 100, set()
        for i in order:
            if arms[i].token_cost <= room:
                expected.add(arms[i].id)
                room -= arms[i].token_cost
        assert set(sel.selected) == expected
        assert sel.used_tokens == 100 - room
        assert sel.over_budget is False
        seen.add(sel.selected)
    # scores play no part, and the order changes from run to run
    assert len(seen) > 2
    assert any(arms[1].id in s for s in seen)


def test_baseline_order_repeats_for_the_same_seed() -> None:
    arms = inventory([30] * 12)
    cfg = config(token_budget=100, baseline_rate=1.0)
    first = [select_arms(arms, {}, cfg, rng=s).selected for s in range(10)]
    assert first == [select_arms(arms, {}, cfg, rng=s).selected for s in range(10)]
    assert len(set(first)) > 1


@pytest.mark.parametrize("size", [30, 400])
def test_every_arm_appears_in_baseline_runs_over_time(size: int) -> None:
    """Baseline runs hold a tenth of the inventory here; in inventory order the late arms
    would never be in one. In a random order each is, within a few dozen runs."""
    arms = inventory([100] * size)
    seeds = (arms[0].id,)
    cfg = config(token_budget=10 * size, baseline_rate=1.0, seed_arm_ids=seeds)
    rng = np.random.default_rng(4)
    counts = dict.fromkeys((a.id for a in arms), 0)
    runs = 200
    for _ in range(runs):
        sel = select_arms(arms, {}, cfg, rng)
        assert sel.is_baseline
        assert sel.selected[0] == arms[0].id
        assert len(sel.selected) == size // 10
        for arm_id in sel.selected:
            counts[arm_id] += 1
    assert counts[arms[0].id] == runs
    # each other arm is in a run with probability (size/10 - 1) / (size - 1), about 1/10
    assert min(counts.values()) > 0
    assert counts[arms[-1].id] > 0


def test_zero_cost_arms_always_fit() -> None:
    arms = inventory([100, 0, 100, 0])
    sel = select_arms(arms, {a.id: sharp(0.5) for a in arms}, config(token_budget=0), rng=0)
    assert sel.selected == (arms[1].id, arms[3].id)
    assert sel.used_tokens == 0


def test_everything_fits_under_a_large_budget() -> None:
    arms = inventory([10, 20, 30])
    sel = select_arms(arms, {a.id: sharp(0.1) for a in arms}, config(token_budget=60), rng=0)
    assert sel.excluded == ()
    assert sel.used_tokens == 60


def test_arms_without_posteriors_are_scored_from_their_prior() -> None:
    # Curated prior Beta(3,1) (mean 0.75) against a file prior Beta(1,1) (mean 0.5): over many
    # draws the tool wins the single slot more often: P = P(X > Y), X ~ Beta(3,1), Y ~ U(0,1)
    # = E[X] = 0.75.
    arms = [Arm("file:w:notes.md", 10), Arm("tool:x:t", 10)]
    assert initial_prior(arms[1]).mean == 0.75
    rng = np.random.default_rng(5)
    draws = 3000
    wins = sum(
        select_arms(arms, {}, config(token_budget=10), rng).selected == ("tool:x:t",)
        for _ in range(draws)
    )
    sigma = math.sqrt(0.75 * 0.25 / draws)
    assert abs(wins / draws - 0.75) < 4 * sigma


# --- against a per-arm reference implementation --------------------------------------------


@st.composite
def selection_cases(draw: st.DrawFn) -> tuple[list[Arm], dict[str, Posterior], LearningConfig]:
    n = draw(st.integers(min_value=1, max_value=25))
    costs = draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))
    kinds = draw(st.lists(st.sampled_from(["tool", "file", "skill"]), min_size=n, max_size=n))
    arms = [Arm(f"{k}:c:a{i}", c) for i, (k, c) in enumerate(zip(kinds, costs, strict=True))]
    posteriors: dict[str, Posterior] = {}
    for arm in arms:
        if draw(st.booleans()):
            posteriors[arm.id] = Posterior(
                draw(st.floats(1.0, 50)), draw(st.floats(1.0, 50)), draw(st.integers(0, 12))
            )
    seeds = draw(st.lists(st.sampled_from([a.id for a in arms]), max_size=3, unique=True))
    cfg = config(
        token_budget=draw(st.integers(0, 2000)),
        min_pulls=draw(st.integers(0, 8)),
        seed_arm_ids=tuple(seeds),
        baseline_rate=draw(st.sampled_from([0.0, 0.5, 1.0])),
    )
    return arms, posteriors, cfg


@settings(max_examples=300, deadline=None)
@given(selection_cases(), st.integers(0, 2**32 - 1))
def test_matches_a_per_arm_reference_with_the_same_scores(
    case: tuple[list[Arm], dict[str, Posterior], LearningConfig], seed: int
) -> None:
    """Every path (plain Python for small inventories, arrays sorted or bucketed for large
    ones) takes the same draws from the generator in the same order, makes the reference's
    selection from them, and leaves the generator in the same state."""
    arms, posteriors, cfg = case
    results = []
    for name in PATHS:
        spy = SpyGenerator(seed)
        with selection_path(name):
            sel = select_arms(arms, posteriors, cfg, rng=spy)
        check_invariants(sel, arms)
        results.append((sel, spy.beta_draws, spy.permutations, spy.bit_generator.state))
        scores = None
        shuffle: list[int] = []
        if sel.is_baseline:
            assert spy.beta_draws == []
            assert len(spy.permutations) == 1, "one permutation orders a baseline run"
            (shuffle,) = spy.permutations
        else:
            assert spy.permutations == []
            assert len(spy.beta_draws) == 1, "all arms are scored in one vectorised draw"
            (draw,) = spy.beta_draws
            assert draw.shape == (len(arms),)
            scores = {a.id: float(s) for a, s in zip(arms, draw, strict=True)}
        expected, used = reference_select(arms, posteriors, cfg, scores, shuffle)
        assert sel.selected == expected
        assert sel.used_tokens == used
        assert sel.guidance == excluded_tools_guidance(sel.excluded)
        assert sel.mask.tolist() == [a.id in sel.selected for a in arms]
        assert set(cfg.seed_arm_ids) <= set(sel.selected)
        if not sel.is_baseline:
            for arm in arms:
                p = posteriors.get(arm.id)
                if (p.pulls if p else 0) < cfg.min_pulls:
                    assert arm.id in sel.selected
        forced_cost = sum(
            a.token_cost
            for a in arms
            if a.id in cfg.seed_arm_ids
            or (
                not sel.is_baseline
                and (posteriors[a.id].pulls if a.id in posteriors else 0) < cfg.min_pulls
            )
        )
        if forced_cost <= cfg.token_budget:
            assert sel.used_tokens <= cfg.token_budget
            assert sel.over_budget is False
    (small_sel, *small_draws), *others = results
    for array_sel, *array_draws in others:
        assert small_sel == array_sel
        assert small_sel.is_baseline == array_sel.is_baseline
        for small_part, array_part in zip(small_draws[:2], array_draws[:2], strict=True):
            assert len(small_part) == len(array_part)
            for a, b in zip(small_part, array_part, strict=True):
                assert np.array_equal(a, b)
        assert small_draws[2] == array_draws[2], "every path leaves the generator in one state"


@st.composite
def option_cases(draw: st.DrawFn) -> tuple[list[Arm], dict[str, Posterior], LearningConfig]:
    """Cases with the options beyond SPEC, equal posteriors (ties) and free arms."""
    arms, posteriors, cfg = draw(selection_cases())
    if draw(st.booleans()):  # many equal scores: ties must break the same way on both paths
        posteriors = {a.id: Posterior(2.0, 2.0, 9) for a in arms}
    options: dict[str, Any] = {
        "packing": draw(st.sampled_from(["score", "score_per_token"])),
        "exploration": draw(st.sampled_from([1.0, 0.5, 0.0])),
        "min_score": draw(st.sampled_from([0.0, 0.3])),
        "pooled_prior": draw(st.booleans()),
    }
    fields = ("token_budget", "min_pulls", "seed_arm_ids", "baseline_rate")
    return arms, posteriors, config(**{f: getattr(cfg, f) for f in fields}, **options)


@settings(max_examples=200, deadline=None)
@given(option_cases(), st.integers(0, 2**32 - 1))
def test_both_paths_agree_with_every_option(
    case: tuple[list[Arm], dict[str, Posterior], LearningConfig], seed: int
) -> None:
    arms, posteriors, cfg = case
    got = []
    for name in PATHS:
        gen = np.random.default_rng(seed)
        with selection_path(name):
            sel = select_arms(arms, posteriors, cfg, rng=gen)
        check_invariants(sel, arms)
        got.append((sel, gen.bit_generator.state))
    assert got[0] == got[1] == got[2]


def test_equal_scores_keep_inventory_order_on_both_paths() -> None:
    arms = inventory([40, 10, 30, 20, 50, 10])
    posteriors = {a.id: Posterior(5.0, 5.0, 10) for a in arms}
    cfg = config(token_budget=60, exploration=0.0)  # every score is the same mean
    for name in PATHS:
        with selection_path(name):
            sel = select_arms(arms, posteriors, cfg, rng=0)
        # greedy in inventory order: a0 (40) in, a1 (10) in, a2 (30) no, a3 (20) no, ...
        assert sel.selected == (arms[0].id, arms[1].id, arms[5].id)
        assert sel.used_tokens == 60


def test_reference_agreement_on_a_large_inventory() -> None:
    rng = np.random.default_rng(77)
    arms = [Arm(f"tool:x:t{i}", int(c)) for i, c in enumerate(rng.integers(1, 400, 3000))]
    posteriors = {
        a.id: Posterior(float(rng.uniform(0.5, 30)), float(rng.uniform(0.5, 30)), int(p))
        for a, p in zip(arms, rng.integers(0, 20, 3000), strict=True)
    }
    cfg = config(token_budget=50_000, min_pulls=3, seed_arm_ids=(arms[0].id, arms[-1].id))
    for seed in range(5):
        spy = SpyGenerator(seed)
        sel = select_arms(arms, posteriors, cfg, rng=spy)
        scores = {a.id: float(s) for a, s in zip(arms, spy.beta_draws[0], strict=True)}
        assert (sel.selected, sel.used_tokens) == reference_select(arms, posteriors, cfg, scores)


# --- proportions over many draws -----------------------------------------------------------


def test_baseline_rate_within_statistical_tolerance() -> None:
    arms = inventory([10, 20, 30, 40])
    cfg = config(token_budget=50, baseline_rate=0.1)
    rng = np.random.default_rng(2024)
    draws = 4000
    baseline = sum(select_arms(arms, {}, cfg, rng).is_baseline for _ in range(draws))
    sigma = math.sqrt(0.1 * 0.9 / draws)
    assert abs(baseline / draws - 0.1) < 4 * sigma


@pytest.mark.parametrize(("rate", "expected"), [(0.0, 0), (1.0, 200)])
def test_baseline_rate_extremes(rate: float, expected: int) -> None:
    arms = inventory([10, 20])
    cfg = config(token_budget=5, baseline_rate=rate)
    rng = np.random.default_rng(1)
    assert sum(select_arms(arms, {}, cfg, rng).is_baseline for _ in range(200)) == expected


def test_inclusion_follows_the_posteriors() -> None:
    # One slot, two arms: A ~ Beta(2,1), B ~ Beta(1,1). P(A wins) = P(X > U) = E[X] = 2/3.
    arms = [Arm("tool:x:A", 10), Arm("tool:x:B", 10)]
    posteriors = {"tool:x:A": Posterior(2, 1, 10), "tool:x:B": Posterior(1, 1, 10)}
    rng = np.random.default_rng(11)
    draws = 3000
    a_in = 0
    for _ in range(draws):
        sel = select_arms(arms, posteriors, config(token_budget=10), rng)
        assert len(sel.selected) == 1
        a_in += sel.selected == ("tool:x:A",)
    sigma = math.sqrt((2 / 3) * (1 / 3) / draws)
    assert abs(a_in / draws - 2 / 3) < 4 * sigma


def test_a_much_better_arm_is_included_much_more_often() -> None:
    arms = inventory([10] * 4)
    posteriors = {
        arms[0].id: Posterior(30, 2, 30),
        arms[1].id: Posterior(2, 30, 30),
        arms[2].id: Posterior(5, 5, 30),
        arms[3].id: Posterior(2, 30, 30),
    }
    rng = np.random.default_rng(8)
    counts = dict.fromkeys((a.id for a in arms), 0)
    for _ in range(1000):
        for arm_id in select_arms(arms, posteriors, config(token_budget=20), rng).selected:
            counts[arm_id] += 1
    assert counts[arms[0].id] > 980
    assert counts[arms[2].id] > 900
    assert counts[arms[1].id] < 100
    assert counts[arms[3].id] < 100


def test_seeds_and_under_explored_in_every_one_of_many_draws() -> None:
    arms, posteriors, _ = _mixed_case()
    young = {arms[i].id for i in (5, 17, 40)}
    posteriors = {
        k: Posterior(p.alpha, p.beta, 1 if k in young else 10) for k, p in posteriors.items()
    }
    seeds = (arms[0].id, arms[59].id)
    cfg = config(token_budget=3000, baseline_rate=0.2, seed_arm_ids=seeds, min_pulls=5)
    rng = np.random.default_rng(3)
    forced_cost = sum(a.token_cost for a in arms if a.id in young or a.id in seeds)
    assert forced_cost <= cfg.token_budget
    for _ in range(500):
        sel = select_arms(arms, posteriors, cfg, rng)
        check_invariants(sel, arms)
        assert set(seeds) <= set(sel.selected)
        if not sel.is_baseline:
            assert young <= set(sel.selected)
        assert sel.used_tokens <= cfg.token_budget
        assert not sel.over_budget


# --- guidance for excluded tools -----------------------------------------------------------


def test_selection_guidance_follows_its_excluded_tools() -> None:
    arms = [Arm("tool:x:Cheap", 10), Arm("tool:x:Huge", 1000), Arm("skill:s:main", 1000)]
    posteriors = {a.id: sharp(0.5) for a in arms}
    sel = select_arms(arms, posteriors, config(token_budget=10), rng=0)
    assert sel.excluded == ("tool:x:Huge", "skill:s:main")
    assert sel.guidance is not None
    assert "Huge" in sel.guidance
    assert "Cheap" not in sel.guidance
