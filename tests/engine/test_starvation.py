"""engine.starvation: which arms count as starved, at the documented thresholds."""

from __future__ import annotations

from learning_bot.engine.starvation import (
    MAX_INCLUDED_SHARE,
    MIN_OFFERED,
    ArmRecord,
    starved_arms,
)


def _arm(arm_id: str, pulls: int = 40, rewards: float = 30.0) -> ArmRecord:
    return ArmRecord(arm_id, arm_id.rsplit(":", 1)[-1], pulls, rewards)


def test_a_useful_arm_left_out_of_nearly_every_run_is_starved() -> None:
    arms = [_arm("tool:web"), _arm("tool:fs"), _arm("tool:rarely", pulls=40, rewards=2.0)]
    counts = {"tool:web": (1, 100, 0), "tool:fs": (90, 100, 60), "tool:rarely": (0, 100, 0)}
    [starved] = starved_arms(arms, counts)
    assert (starved.arm_id, starved.included, starved.offered) == ("tool:web", 1, 100)
    assert starved.accuracy == 0.75


def test_thresholds_are_the_documented_ones() -> None:
    offered = MIN_OFFERED
    limit = int(MAX_INCLUDED_SHARE * 100)
    arms = [_arm("a"), _arm("b"), _arm("c"), _arm("d", pulls=4, rewards=4.0), _arm("seed")]
    counts = {
        "a": (limit, 100, 0),  # at the share limit: starved
        "b": (limit + 1, 100, 0),  # just above: not
        "c": (0, offered - 1, 0),  # too few offers to tell
        "d": (0, 100, 0),  # too few pulls to call useful
        "seed": (0, 100, 0),
    }
    assert [s.arm_id for s in starved_arms(arms, counts, seeds={"seed"})] == ["a"]


def test_an_arm_the_model_uses_whenever_included_is_useful_whatever_its_rewards() -> None:
    arms = [_arm("used", pulls=40, rewards=0.0)]
    assert [s.arm_id for s in starved_arms(arms, {"used": (2, 100, 2)})] == ["used"]
    assert starved_arms(arms, {"used": (2, 100, 0)}) == []
