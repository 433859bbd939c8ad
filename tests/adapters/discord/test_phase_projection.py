"""Discord: `/learning phase` shows the projection of going active, and the switch's
confirmation repeats it above its buttons."""

from __future__ import annotations

from learning_bot.app import App
from learning_bot.engine import Phase
from learning_bot.simulate import simulate

from .conftest import MEMBER, Harness
from .test_commands import embed_of


def record_passive(app: App) -> None:
    service = app.service()
    service.set_phase(Phase.PASSIVE, actor="test")
    simulate(service, traces=200, arms=24, seed=2, sessions=True, phase=Phase.PASSIVE)


async def test_phase_shows_the_projection_and_the_confirmation_repeats_it(h: Harness) -> None:
    record_passive(h.app)
    shown = embed_of(h.reply(await h.command("phase", user=MEMBER)))["description"]
    assert shown.startswith("Phase: PASSIVE")
    assert "Going active at budget 8,000 selection would have kept" in shown
    assert "over your last 200 runs in" in shown
    prompt = await h.command("phase", phase="active")
    description = embed_of(h.reply(prompt))["description"]
    assert "Switch learner 'default' from passive to active?" in description
    assert "Going active at budget 8,000" in description
    await h.click(h.prompt_id(prompt), "confirm")
    assert h.app.service().phase() is Phase.ACTIVE
