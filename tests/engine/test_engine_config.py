"""LearningConfig defaults, validation and the original camelCase keys (SPEC sections 2, 4, 7)."""

from __future__ import annotations

from typing import Any

import pytest

from learning_bot.engine import (
    DEFAULT_SEED_ARM_IDS,
    InvalidConfig,
    InvalidInput,
    LearningConfig,
    Phase,
    recommended_baseline_rate,
    token_savings_percent,
)


def test_defaults() -> None:
    c = LearningConfig()
    assert c.enabled is True
    assert c.phase is Phase.PASSIVE
    assert c.strategy == "thompson"
    assert c.token_budget == 8000
    assert c.baseline_rate == 0.10
    assert c.min_pulls == 5
    assert c.seed_arm_ids == DEFAULT_SEED_ARM_IDS
    assert c.meta_tools == frozenset({"message"})
    assert c.is_active is False


def test_is_active_needs_active_phase_and_enabled() -> None:
    assert LearningConfig(phase=Phase.ACTIVE).is_active
    assert LearningConfig(phase="active").phase is Phase.ACTIVE  # type: ignore[arg-type]
    assert not LearningConfig(phase=Phase.ACTIVE, enabled=False).is_active


def test_to_dict_uses_the_original_camel_case_keys() -> None:
    d = LearningConfig().to_dict()
    assert d == {
        "enabled": True,
        "phase": "passive",
        "strategy": "thompson",
        "tokenBudget": 8000,
        "baselineRate": 0.10,
        "minPulls": 5,
        "seedArmIds": list(DEFAULT_SEED_ARM_IDS),
        "metaTools": ["message"],
    }


def test_to_dict_snake_case() -> None:
    d = LearningConfig().to_dict(camel=False)
    assert {"token_budget", "baseline_rate", "min_pulls", "seed_arm_ids"} <= d.keys()
    assert d["token_budget"] == 8000


def test_from_dict_reads_camel_case_keys() -> None:
    c = LearningConfig.from_dict(
        {
            "enabled": False,
            "phase": "active",
            "tokenBudget": 1234,
            "baselineRate": 0.25,
            "minPulls": 2,
            "seedArmIds": ["tool:fs:Read"],
        }
    )
    assert c.enabled is False
    assert c.phase is Phase.ACTIVE
    assert c.token_budget == 1234
    assert c.baseline_rate == 0.25
    assert c.min_pulls == 2
    assert c.seed_arm_ids == ("tool:fs:Read",)


def test_from_dict_reads_snake_case_keys() -> None:
    c = LearningConfig.from_dict({"token_budget": 10, "baseline_rate": 0, "min_pulls": 0})
    assert (c.token_budget, c.baseline_rate, c.min_pulls) == (10, 0.0, 0)


def test_round_trip_through_camel_case() -> None:
    c = LearningConfig(phase=Phase.ACTIVE, token_budget=99, baseline_rate=0.5, min_pulls=1)
    assert LearningConfig.from_dict(c.to_dict()) == c


def test_merged_changes_only_the_given_keys() -> None:
    c = LearningConfig(token_budget=50).merged({"minPulls": 9})
    assert (c.token_budget, c.min_pulls, c.baseline_rate) == (50, 9, 0.10)


def test_unknown_key_names_the_key() -> None:
    with pytest.raises(InvalidConfig) as info:
        LearningConfig.from_dict({"tokenBugdet": 5})
    assert info.value.field == "tokenBugdet"
    assert "tokenBugdet" in str(info.value)


def test_same_setting_given_twice_is_rejected() -> None:
    with pytest.raises(InvalidConfig, match="twice"):
        LearningConfig.from_dict({"tokenBudget": 5, "token_budget": 6})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"token_budget": -1}, "token_budget"),
        ({"token_budget": 1.5}, "token_budget"),
        ({"token_budget": "8000"}, "token_budget"),
        ({"baseline_rate": 1.01}, "baseline_rate"),
        ({"baseline_rate": -0.1}, "baseline_rate"),
        ({"baseline_rate": float("nan")}, "baseline_rate"),
        ({"baseline_rate": float("inf")}, "baseline_rate"),
        ({"baseline_rate": "0.1"}, "baseline_rate"),
        ({"min_pulls": -1}, "min_pulls"),
        ({"phase": "paused"}, "phase"),
        ({"strategy": "ucb"}, "strategy"),
        ({"enabled": "yes"}, "enabled"),
        ({"seed_arm_ids": "tool:fs:Read"}, "seed_arm_ids"),
        ({"seed_arm_ids": ["tool:fs"]}, "seed_arm_ids"),
        ({"seed_arm_ids": ["gadget:fs:Read"]}, "seed_arm_ids"),
    ],
)
def test_invalid_values_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        LearningConfig(**kwargs)
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"tokenBudget": -5}, "tokenBudget"),
        ({"baselineRate": 2}, "baselineRate"),
        ({"minPulls": -3}, "minPulls"),
        ({"seedArmIds": ["nope"]}, "seedArmIds"),
    ],
)
def test_invalid_camel_case_values_name_the_key_as_given(data: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        LearningConfig.from_dict(data)
    assert info.value.field == key


def test_invalid_config_is_an_invalid_input() -> None:
    assert issubclass(InvalidConfig, InvalidInput)
    assert issubclass(InvalidConfig, ValueError)


@pytest.mark.parametrize("rate", [0, 0.0, 1, 1.0, 0.5])
def test_baseline_rate_bounds_are_inclusive(rate: float) -> None:
    assert LearningConfig(baseline_rate=rate).baseline_rate == float(rate)


def test_zero_budget_and_zero_min_pulls_are_valid() -> None:
    c = LearningConfig(token_budget=0, min_pulls=0)
    assert (c.token_budget, c.min_pulls) == (0, 0)


# --- recommended baseline rate and token savings -------------------------------------------


@pytest.mark.parametrize(
    ("count", "rate"),
    [(1, 0.20), (10, 0.20), (11, 0.10), (50, 0.10), (51, 0.05), (100_000, 0.05)],
)
def test_recommended_baseline_rate(count: int, rate: float) -> None:
    assert recommended_baseline_rate(count) == rate


@pytest.mark.parametrize("bad", [-1, 1.5, "10"])
def test_recommended_baseline_rate_rejects_bad_counts(bad: object) -> None:
    with pytest.raises(InvalidInput):
        recommended_baseline_rate(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("baseline", "selected", "percent"),
    [(100.0, 75.0, 25.0), (8000.0, 2000.0, 75.0), (100.0, 100.0, 0.0), (100.0, 120.0, -20.0)],
)
def test_token_savings_percent(baseline: float, selected: float, percent: float) -> None:
    assert token_savings_percent(baseline, selected) == pytest.approx(percent)


@pytest.mark.parametrize(
    ("baseline", "selected"),
    [
        (None, 100.0),
        (100.0, None),
        (None, None),
        (0.0, 10.0),
        (float("nan"), 10.0),
        (100.0, float("nan")),
        (float("inf"), 10.0),
    ],
)
def test_token_savings_percent_is_none_when_not_computable(
    baseline: float | None, selected: float | None
) -> None:
    assert token_savings_percent(baseline, selected) is None
