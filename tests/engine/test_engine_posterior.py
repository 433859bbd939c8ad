"""Priors, Beta posterior statistics, confidence bands and the update rule (SPEC section 3)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from learning_bot.engine import (
    Arm,
    ArmType,
    Confidence,
    InvalidInput,
    Posterior,
    check_reward,
    confidence_for_pulls,
    initial_prior,
    now_ms,
)

params = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
rewards = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


# --- priors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arm_type", "alpha", "beta"),
    [
        (ArmType.TOOL, 3.0, 1.0),
        (ArmType.SKILL, 3.0, 1.0),
        (ArmType.MEMORY, 3.0, 1.0),
        (ArmType.SECTION, 3.0, 1.0),
        (ArmType.FILE, 1.0, 1.0),
    ],
)
def test_initial_prior_by_type(arm_type: ArmType, alpha: float, beta: float) -> None:
    for given_as in (
        arm_type,
        arm_type.value,
        f"{arm_type.value}:cat:x",
        Arm(f"{arm_type}:c:x", 1),
    ):
        prior = initial_prior(given_as)
        assert (prior.alpha, prior.beta, prior.pulls) == (alpha, beta, 0)
        assert prior.last_updated is None
        assert prior.confidence is Confidence.NONE


def test_curated_prior_mean_is_three_quarters_and_file_prior_one_half() -> None:
    assert initial_prior("tool:fs:Read").mean == 0.75
    assert initial_prior("file:workspace:README.md").mean == 0.5


@pytest.mark.parametrize("bad", ["widget", "widget:x:y", "tool:x"])
def test_initial_prior_rejects_unknown_types(bad: str) -> None:
    with pytest.raises(InvalidInput):
        initial_prior(bad)


# --- statistics, pinned --------------------------------------------------------------------


def test_beta_3_1_statistics() -> None:
    p = Posterior(3, 1)
    assert p.mean == 0.75
    assert p.variance == pytest.approx(3 / (16 * 5))
    low, high = p.credible_interval()
    assert low == pytest.approx(0.75 - 1.96 * math.sqrt(0.0375))
    assert low == pytest.approx(0.3704476, abs=1e-7)
    assert high == 1.0  # 0.75 + 0.3795 clamped


def test_beta_1_1_interval_is_clamped_on_both_sides() -> None:
    p = Posterior(1, 1)
    assert p.mean == 0.5
    assert p.variance == pytest.approx(1 / 12)
    assert p.credible_interval() == (0.0, 1.0)


def test_interval_uses_z_196() -> None:
    p = Posterior(50, 50)
    half = 1.96 * math.sqrt(50 * 50 / (100**2 * 101))
    low, high = p.credible_interval()
    assert low == pytest.approx(0.5 - half, rel=1e-12)
    assert high == pytest.approx(0.5 + half, rel=1e-12)
    assert p.credible_interval(0.95) == (low, high)


def test_other_interval_levels_are_narrower_or_wider() -> None:
    p = Posterior(50, 50)
    l95, h95 = p.credible_interval(0.95)
    l80, h80 = p.credible_interval(0.80)
    l99, h99 = p.credible_interval(0.99)
    assert h80 - l80 < h95 - l95 < h99 - l99


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.2])
def test_interval_level_must_be_inside_0_1(level: float) -> None:
    with pytest.raises(InvalidInput):
        Posterior(2, 2).credible_interval(level)


# --- statistics, properties ----------------------------------------------------------------


@given(params, params)
def test_mean_and_variance_formulas(alpha: float, beta: float) -> None:
    p = Posterior(alpha, beta)
    assert 0.0 < p.mean < 1.0
    assert p.mean == pytest.approx(alpha / (alpha + beta))
    s = alpha + beta
    assert p.variance == pytest.approx(alpha * beta / (s * s * (s + 1)))
    assert p.variance > 0


@given(params, params)
def test_interval_contains_mean_and_lies_in_unit_range(alpha: float, beta: float) -> None:
    p = Posterior(alpha, beta)
    low, high = p.credible_interval()
    assert 0.0 <= low <= p.mean <= high <= 1.0
    half = 1.96 * math.sqrt(p.variance)
    assert low == pytest.approx(max(0.0, p.mean - half), abs=1e-12)
    assert high == pytest.approx(min(1.0, p.mean + half), abs=1e-12)


@given(params, params, st.integers(min_value=0, max_value=10_000), rewards)
def test_update_moves_alpha_and_beta_by_r_and_one_minus_r(
    alpha: float, beta: float, pulls: int, r: float
) -> None:
    p = Posterior(alpha, beta, pulls)
    q = p.updated(r, 1_700_000_000_000)
    assert q.alpha == pytest.approx(alpha + r)
    assert q.beta == pytest.approx(beta + (1 - r))
    assert q.alpha + q.beta == pytest.approx(alpha + beta + 1)
    assert q.pulls == pulls + 1
    assert q.last_updated == 1_700_000_000_000
    # the original is unchanged
    assert (p.alpha, p.beta, p.pulls) == (alpha, beta, pulls)


def test_reward_one_and_zero() -> None:
    p = Posterior(3, 1)
    hit = p.updated(1.0, 5)
    miss = p.updated(0.0, 5)
    assert (hit.alpha, hit.beta, hit.pulls) == (4.0, 1.0, 1)
    assert (miss.alpha, miss.beta, miss.pulls) == (3.0, 2.0, 1)
    assert hit.mean > p.mean > miss.mean


def test_update_stamps_the_time() -> None:
    before = now_ms()
    q = Posterior(1, 1).updated(1.0)
    assert q.last_updated is not None
    assert before <= q.last_updated <= now_ms()
    at = datetime(2024, 1, 2, tzinfo=UTC)
    assert Posterior(1, 1).updated(0.5, at).last_updated == int(at.timestamp() * 1000)


@pytest.mark.parametrize("bad", [float("nan"), 2, 2.0, -0.1, float("inf"), -float("inf"), 1.0001])
def test_reward_outside_unit_range_is_rejected(bad: float) -> None:
    with pytest.raises(InvalidInput, match="reward"):
        Posterior(3, 1).updated(bad)
    with pytest.raises(ValueError, match="reward"):
        check_reward(bad)


@pytest.mark.parametrize("bad", ["1", None, True])
def test_reward_must_be_a_number(bad: object) -> None:
    with pytest.raises(InvalidInput, match="reward"):
        Posterior(3, 1).updated(bad)  # type: ignore[arg-type]


@given(rewards)
def test_check_reward_accepts_the_unit_range(r: float) -> None:
    assert check_reward(r) == r


@pytest.mark.parametrize(
    "kwargs",
    [
        {"alpha": 0, "beta": 1},
        {"alpha": 1, "beta": -1},
        {"alpha": float("nan"), "beta": 1},
        {"alpha": 1, "beta": float("inf")},
        {"alpha": 1, "beta": 1, "pulls": -1},
    ],
)
def test_posterior_rejects_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInput):
        Posterior(**kwargs)  # type: ignore[arg-type]


# --- confidence ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pulls", "expected"),
    [
        (0, "none"),
        (1, "low"),
        (4, "low"),
        (5, "medium"),
        (19, "medium"),
        (20, "high"),
        (49, "high"),
        (50, "very high"),
        (10_000, "very high"),
    ],
)
def test_confidence_bands(pulls: int, expected: str) -> None:
    assert confidence_for_pulls(pulls) == expected
    assert Posterior(2, 2, pulls).confidence == expected


def test_confidence_grows_with_updates() -> None:
    p = Posterior(3, 1)
    seen = [p.confidence]
    for _ in range(50):
        p = p.updated(1.0, 0)
        seen.append(p.confidence)
    assert seen[0] is Confidence.NONE
    assert seen[1] is Confidence.LOW
    assert seen[5] is Confidence.MEDIUM
    assert seen[20] is Confidence.HIGH
    assert seen[50] is Confidence.VERY_HIGH
