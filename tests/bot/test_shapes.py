"""The JSON shapes every JSON-speaking surface sends (bot.shapes)."""

from __future__ import annotations

from bot.shapes import arm_json, selection_json
from engine import Arm, LearningConfig, Phase, Posterior, select_arms
from engine.views import ArmView


def test_selection_json_uses_camel_case_and_carries_the_guidance() -> None:
    arms = [Arm("tool:x:Cheap", 5), Arm("tool:x:Huge", 5)]
    config = LearningConfig(
        phase=Phase.ACTIVE, token_budget=5, min_pulls=0, baseline_rate=0.0, seed_arm_ids=()
    )
    sel = select_arms(arms, {}, config, rng=0)
    d = selection_json(sel)
    assert d["tokenBudget"] == 5
    assert d["usedTokens"] == 5
    assert d["isBaseline"] is False
    assert d["overBudget"] is False
    assert len(d["selected"]) == 1
    assert len(d["excluded"]) == 1
    assert d["guidance"] == sel.guidance and d["guidance"]


def test_confidence_has_the_original_three_values_and_the_five_bands() -> None:
    def view(pulls: int) -> ArmView:
        return ArmView("tool:fs:Read", "Read", 1, Posterior(3, 1, pulls, 1), False, False)

    shown = {
        n: (arm_json(view(n))["confidence"], arm_json(view(n))["confidenceBand"])
        for n in (0, 1, 5, 20, 50)
    }
    assert shown == {
        0: ("low", "none"),
        1: ("low", "low"),
        5: ("medium", "medium"),
        20: ("high", "high"),
        50: ("high", "very high"),
    }
