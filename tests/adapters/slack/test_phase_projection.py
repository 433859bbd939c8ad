"""Slack: `/learning phase` shows the projection of going active before the switch, and the
switch's confirmation repeats it above its buttons."""

from __future__ import annotations

from learning_bot.app import App
from learning_bot.engine import Phase
from learning_bot.simulate import simulate

from .conftest import DriverFactory, buttons, texts
from .fake_slack import FakeSlack


def record_passive(core: App) -> None:
    service = core.service()
    service.set_phase(Phase.PASSIVE, actor="test")
    simulate(service, traces=200, arms=24, seed=2, sessions=True, phase=Phase.PASSIVE)


async def test_phase_shows_the_projection_and_the_confirmation_repeats_it(
    core: App, make_driver: DriverFactory, fake_slack: FakeSlack
) -> None:
    record_passive(core)
    slack = await make_driver(inline_seconds=0.0)  # the replay answers through response_url
    _, key = await slack.command("phase", user="U-member")
    shown = texts((await fake_slack.next_post(key)).body)
    assert "Phase: PASSIVE" in shown
    assert "Going active at budget 8,000 selection would have kept" in shown
    assert "over your last 200 runs in" in shown
    _, key = await slack.command("phase active", user="U-owner")
    prompt = (await fake_slack.next_post(key)).body
    assert "Switch learner 'default' from passive to active?" in texts(prompt)
    assert "Going active at budget 8,000" in texts(prompt)
    assert {"learning_confirm", "learning_cancel"} <= set(buttons(prompt))
    assert core.service().phase() is Phase.PASSIVE
