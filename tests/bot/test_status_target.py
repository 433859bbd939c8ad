"""`/learning status` shows the recall target beside the recall the learner estimates it
achieves, on every surface: the text the terminal, MCP and HTTP give, the compact status Slack
and Discord lead with, and the data."""

from __future__ import annotations

import json

import pytest

from learning_bot.adapters.discord.render import render_reply as discord_reply
from learning_bot.adapters.slack.blocks import render_reply as slack_reply
from learning_bot.bot.bus import BusSettings, CommandBus, LearnerServices
from learning_bot.bot.render_text import render_text
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.simulate import simulate
from learning_bot.storage import SqlStore
from learning_bot.storage.command_log import SqlCommandLog

from .conftest import say


def bus_for(store: SqlStore, config: LearningConfig) -> CommandBus:
    def make(learner: str) -> LearningService:
        return LearningService(store, config, learner=learner, cache_ttl=0, rng=1)

    return CommandBus(LearnerServices(make, config), SqlCommandLog(store.engine), BusSettings())


def discord_text(reply: object) -> str:
    message = discord_reply(reply)  # type: ignore[arg-type]
    return "\n".join(
        [message.content or ""]
        + [json.dumps(embed.to_dict(), ensure_ascii=False) for embed in message.embeds]
    )


def slack_text(reply: object) -> str:
    return json.dumps(slack_reply(reply).blocks, ensure_ascii=False)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [0.97, None])
def test_status_shows_the_target_beside_the_estimated_recall(
    store: SqlStore, target: float | None
) -> None:
    config = LearningConfig(phase=Phase.ACTIVE, recall_target=target)
    bus = bus_for(store, config)
    service = bus.services.get("default", create=True)
    simulate(service, traces=120, arms=12, seed=4, sessions=True)
    estimate = service.summary().estimated_recall
    assert estimate is not None
    kept = f"{estimate * 100:.0f}%"

    reply = say(bus, "status")
    text = render_text(reply)
    assert reply.compact is not None
    compact = dict(reply.compact.headline)
    if target is None:
        assert "recallTarget" not in reply.data
        assert "recall target" not in text.lower()
        assert compact["Estimated recall"] == kept
        assert "target" not in slack_text(reply) and "target" not in discord_text(reply)
        return
    assert reply.data["recallTarget"] == 0.97
    # the headline line, then the settings' field
    assert f"Kept about {kept} of the components the model used (recall target 97%)" in text
    assert f"97% (estimated {kept} kept; token budget a cap)" in text
    # the compact status Slack and Discord show first
    assert compact["Estimated recall"] == f"{kept} (target 97%)"
    assert f"{kept} (target 97%)" in slack_text(reply)
    assert f"{kept} (target 97%)" in discord_text(reply)
    # the full tables (status top N) carry the headline line too
    full = say(bus, "status top 5")
    assert full.compact is None
    assert "(recall target 97%)" in slack_text(full)
    assert "(recall target 97%)" in discord_text(full)
