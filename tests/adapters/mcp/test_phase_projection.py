"""MCP: the learning_phase tool without a phase shows the projection of going active."""

from __future__ import annotations

from learning_bot.adapters.mcp.tools import LearningTools
from learning_bot.app import App
from learning_bot.engine import Phase
from learning_bot.simulate import simulate

from . import openclaw_calls as oc
from .test_tools import app, tools  # noqa: F401  (fixtures)


def test_phase_tool_shows_the_projection(tools: LearningTools, app: App) -> None:  # noqa: F811
    service = app.service(oc.LEARNER, create=True)
    simulate(service, traces=30, arms=24, seed=2, sessions=True, phase=Phase.PASSIVE)
    text = tools.learning_phase(None, False, oc.LEARNER)
    assert "No projection of going active yet: only 30 usable runs" in text
    simulate(service, traces=170, arms=24, seed=3, sessions=True, phase=Phase.PASSIVE)
    text = tools.learning_phase(None, False, oc.LEARNER)
    assert "Going active at budget 8,000 selection would have kept" in text
    assert "over your last 200 runs in" in text
