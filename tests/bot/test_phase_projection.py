"""`/learning phase` shows the projection of going active, its confirmation repeats it, the
switch keeps it, and status puts what is achieved beside it (through the real bus)."""

from __future__ import annotations

import pytest

from learning_bot.bot.bus import BusSettings, CommandBus, LearnerServices
from learning_bot.bot.commands import ConfirmCommand
from learning_bot.bot.render_text import render_text
from learning_bot.bot.replies import ReplyKind
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.simulate import simulate
from learning_bot.storage import SqlStore
from learning_bot.storage.command_log import SqlCommandLog

from .conftest import say

CONFIG = LearningConfig(phase=Phase.PASSIVE, token_budget=3_000)


@pytest.fixture
def passive_bus(store: SqlStore) -> CommandBus:
    def make(learner: str) -> LearningService:
        return LearningService(store, CONFIG, learner=learner, cache_ttl=0, rng=1)

    return CommandBus(LearnerServices(make, CONFIG), SqlCommandLog(store.engine), BusSettings())


def record_passive(bus: CommandBus, traces: int, learner: str = "default") -> None:
    service = bus.services.get(learner, create=True)
    simulate(service, traces=traces, arms=12, seed=4, sessions=True, phase=Phase.PASSIVE)


def test_phase_shows_the_projection_then_the_switch_keeps_it(
    passive_bus: CommandBus, store: SqlStore
) -> None:
    record_passive(passive_bus, 240)
    shown = say(passive_bus, "phase")
    assert shown.kind is ReplyKind.INFO and shown.data["phase"] == "passive"
    projection = shown.data["projection"]
    assert projection["runs"] == 240 and projection["sessions"] >= 20
    settings = projection["settings"]
    assert [s["tokenBudget"] for s in settings if s.get("current")] == [3_000]
    assert len(settings) >= 4
    for s in settings:
        assert 0 <= s["recallLow"] <= s["recall"] <= s["recallHigh"] <= 1
        assert s["costLow"] <= s["promptCostSavingsPercent"] <= s["costHigh"]
    assert "suggested" in projection
    text = render_text(shown)
    assert "Going active at budget 3,000 selection would have kept" in text
    assert f"over your last 240 runs in {projection['sessions']} sessions" in text
    # the lines come before the hint (the buttons of chat surfaces)
    assert text.index("Going active") < text.index("Switch with /learning phase active")

    prompt = say(passive_bus, "phase active")
    assert prompt.kind is ReplyKind.CONFIRM
    assert "Going active at budget 3,000" in render_text(prompt)
    assert prompt.data["projection"] == projection
    done = say(passive_bus, ConfirmCommand(prompt.actions[0].token))
    assert done.kind is ReplyKind.OK and done.data["phase"] == "active"

    service = passive_bus.services.get("default")
    kept = store.saved_projection(service.learner_id)
    assert kept is not None and '"current": true' in kept[0]
    status = say(passive_bus, "status")
    assert "Projected at the switch to active (budget 3,000, from 240 runs)" in render_text(status)
    projected = status.data["projectedAtSwitch"]
    current = next(s for s in settings if s.get("current"))
    assert projected["recall"] == current["recall"] and projected["runs"] == 240

    # active: the phase still shows the replay, to compare settings
    again = say(passive_bus, "phase")
    assert again.data["phase"] == "active" and "projection" in again.data
    assert "At budget 3,000 selection would have kept" in render_text(again)


def test_too_few_runs_say_how_few(passive_bus: CommandBus) -> None:
    record_passive(passive_bus, 30)
    shown = say(passive_bus, "phase")
    assert "projection" not in shown.data
    assert "only 30 usable runs in" in shown.data["reason"]
    assert "needs 100 runs in 20 sessions" in shown.data["reason"]
    assert "No projection of going active yet: only 30 usable runs" in render_text(shown)
