"""engine.alerts: the rules' thresholds and the alert state machine (one message per
episode, a resolution, changes announced once)."""

from __future__ import annotations

from learning_bot.engine.alert_records import AlertState
from learning_bot.engine.alerts import (
    FIRING,
    NOTE,
    RESOLVED,
    STILL,
    RewardLevels,
    Signals,
    advance,
    card_detail,
    findings,
    firing_details,
    stored_finding,
)
from learning_bot.engine.savings import CostSavings
from learning_bot.engine.starvation import StarvedArm

STARVED = StarvedArm("tool:web", "web_search", 0, 120, 40, 0.7)


def _keys(signals: Signals, firing: dict | None = None) -> list[str]:  # type: ignore[type-arg]
    return [f.alert for f in findings(signals, firing or {})]


def test_each_rule_fires_at_its_threshold() -> None:
    assert _keys(Signals("l", starved=[STARVED])) == ["starvation:tool:web"]
    collapsed = RewardLevels(0.03, 50, 0.6, 200)
    assert _keys(Signals("l", levels=collapsed)) == ["accuracy"]
    assert _keys(Signals("l", levels=RewardLevels(0.31, 50, 0.6, 200))) == []
    assert _keys(Signals("l", levels=RewardLevels(0.03, 10, 0.6, 200))) == []  # too few runs
    assert _keys(Signals("l", levels=RewardLevels(0.01, 50, 0.1, 200))) == []  # low anyway
    costly = CostSavings(-12.0, -20.0, -4.0, 30, 10, 1.1, 1.0)
    unsure = CostSavings(-12.0, -30.0, 5.0, 30, 10, 1.1, 1.0)
    assert _keys(Signals("l", cost=costly)) == ["savings"]
    assert _keys(Signals("l", cost=unsure)) == []
    assert _keys(Signals("l", prompt_savings_percent=-3.0)) == ["savings"]
    spool = {"deadLetters": 2, "pending": 1001, "bytes": 10, "full": False}
    assert _keys(Signals("l", spool=spool)) == ["dead-letters", "spool"]
    assert _keys(Signals("l", spool={"deadLetters": 0, "pending": 3})) == []


def test_accuracy_resolves_against_the_level_it_fell_from() -> None:
    firing = {"accuracy": {"level": 0.6}}
    # the reference window has filled with poisoned runs: still firing until 75% of 0.6
    assert _keys(Signals("l", levels=RewardLevels(0.4, 50, 0.1, 200)), firing) == ["accuracy"]
    assert _keys(Signals("l", levels=RewardLevels(0.46, 50, 0.1, 200)), firing) == []


def test_an_alert_fires_once_per_episode_and_resolves() -> None:
    found = findings(Signals("l", starved=[STARVED]), {})
    [t] = advance("l", [], found, 1000)
    assert (t.stage, t.state.state, t.state.episode) == (FIRING, FIRING, 1)
    [t2] = advance("l", [t.state], found, 2000)
    assert (t2.stage, t2.state.first_seen, t2.state.last_seen) == (STILL, 1000, 2000)
    [t3] = advance("l", [t2.state], [], 3000)
    assert (t3.stage, t3.state.state, t3.state.resolved_at) == (RESOLVED, RESOLVED, 3000)
    assert advance("l", [t3.state], [], 4000) == []
    [t4] = advance("l", [t3.state], found, 5000)
    assert (t4.stage, t4.state.episode) == (FIRING, 2)


def test_changes_are_announced_when_they_differ_from_what_was_seen() -> None:
    first = advance("l", [], findings(Signals("l", phase="passive"), {}), 1)
    assert [t.stage for t in first] == [STILL, STILL]  # the first values are only recorded
    states = [t.state for t in first]
    assert advance("l", states, findings(Signals("l", phase="passive"), {}), 2) == []
    [changed] = advance("l", states, findings(Signals("l", phase="active"), {}), 3)
    assert changed.stage == NOTE and changed.finding is not None
    assert changed.finding.title == "Phase is now ACTIVE" and changed.state.episode == 1
    assert firing_details([changed.state]) == {"change:phase": {"value": "active"}}


def test_firing_details_read_stored_json() -> None:
    [accuracy] = findings(Signals("l", levels=RewardLevels(0.03, 50, 0.6, 200)), {})
    states = [
        AlertState("l", "accuracy", FIRING, 1, 0, 0, None, card_detail(accuracy)),
        AlertState("l", "spool", RESOLVED, 1, 0, 0, 0, "{}"),
    ]
    assert firing_details(states) == {"accuracy": {"level": 0.6, "recent": 0.03}}
    assert stored_finding(states[0]) == accuracy
    assert stored_finding(states[1]).title == "spool"  # unreadable: the key stands in
