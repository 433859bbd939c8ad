"""Alerts in Discord end to end: a real `learning-bot serve` logged in to the fake Discord
gateway and REST API. An admin subscribes the channel with a gateway INTERACTION_CREATE; a
poisoning run (written to the same SQLite file) trips the starvation and accuracy alerts, each
posted to the channel once; healing edits each card in place and replies to it that it is
resolved; unsubscribe. The starved arm's label tries to ping (`@everyone`, a channel and a role
mention): every message the bot sends shows it escaped and allows no mention."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path
from typing import Any

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from tests import processes
from tests.adapters.discord.fake_discord import BOT_TOKEN, FakeDiscord, command_interaction
from tests.storage.helpers import ARMS, report

from .fake_gateway import FakeGateway
from .launch import environment, served
from .probes import (
    ANSWER_SECONDS,
    DISCORD_PLACE,
    DISCORD_USER,
    _discord_answer,
    discord_texts,
    eventually,
)

WEB = "tool:web:WebSearch"
HOSTILE_LABEL = "WebSearch @everyone <#123> <@&456>"
LABELLED = tuple(Arm(a.id, a.token_cost, label=HOSTILE_LABEL) if a.id == WEB else a for a in ARMS)
CHANNEL = str(DISCORD_PLACE.channel_id)
LIVE_MENTION = re.compile(r"@everyone|@here|(?<!\\)<[#@]")
"""A mention Discord would turn into a ping or a link: unescaped `@everyone`, `<#id>`, `<@&id>`."""


def _runs(database_url: str, start: int, count: int, *, poisoned: bool) -> None:
    """Runs written beside the server, dated by its clock (tests/processes.py)."""
    store = SqlStore(database_url)
    try:
        config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)
        service = LearningService(
            store, config, learner="default", cache_ttl=0, wall_clock=processes.now_ms
        )
        for i in range(start, start + count):
            at = processes.now_ms()
            if poisoned:  # the tool is never seen used again, and selection drops it
                service.observe(
                    report(f"t{i}", calls=("Grep",), arms=LABELLED, excluded={WEB}, timestamp=at)
                )
            else:
                service.observe(
                    report(f"t{i}", calls=("Read", "WebSearch"), arms=LABELLED, timestamp=at)
                )
    finally:
        store.close()


async def _command(
    fake: FakeDiscord, gateway: FakeGateway, sub: str, options: dict[str, Any]
) -> str:
    """`/learning <sub>` by an admin in the channel, through the gateway; the answer's text."""
    payload = command_interaction(sub, options, user=DISCORD_USER, place=DISCORD_PLACE)
    fake.expect(payload)
    await gateway.dispatch("INTERACTION_CREATE", payload)
    answer: dict[str, Any] = await eventually(
        f"the answer to /learning {sub}", lambda: _discord_answer(fake, int(payload["id"]))
    )
    return discord_texts(answer)


def _posted(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [body for channel, body in fake.channel_messages if channel == CHANNEL]


def _edits(fake: FakeDiscord) -> list[Any]:
    return [c for c in fake.calls if c.kind == "channel-edit" and c.status < 300]


async def test_discord_alerts_fire_once_are_edited_and_replied_to_when_resolved(
    tmp_path: Path,
) -> None:
    fake, gateway = FakeDiscord(), FakeGateway()
    env = environment(
        tmp_path,
        {
            "DISCORD_TOKEN": BOT_TOKEN,
            "DISCORD_API_URL": await fake.start(),
            "DISCORD_GATEWAY_URL": await gateway.start(),
            "LEARNING_BOT_ALERT_INTERVAL": "0.2",
        },
    )
    database_url = env["LEARNING_BOT_DATABASE_URL"]
    await asyncio.to_thread(_runs, database_url, 0, 60, poisoned=False)
    try:
        async with contextlib.AsyncExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, served(env))
            await asyncio.wait_for(gateway.identified.wait(), ANSWER_SECONDS)
            said = await _command(fake, gateway, "subscribe", {"kind": "alerts"})
            assert "now gets alerts" in said, said

            await asyncio.to_thread(_runs, database_url, 60, 55, poisoned=True)
            await eventually("two alert cards", lambda: len(_posted(fake)) >= 2)
            started = time.monotonic()
            while time.monotonic() - started < 1.0:  # several evaluations later: still two
                await asyncio.sleep(0.1)
            cards = _posted(fake)
            titles = sorted(discord_texts(c).split("\n")[1] for c in cards)
            assert len(cards) == 2, titles
            assert "Reward rate collapsed" in titles[0], titles
            assert titles[1].startswith("Starved arm: WebSearch @\u200beveryone \\<#123>"), titles
            assert not any("message_reference" in c for c in cards)
            ids = [i for c in cards for i, m in fake.messages.items() if m["embeds"] == c["embeds"]]
            assert len(ids) == 2, ids

            await asyncio.to_thread(_runs, database_url, 115, 60, poisoned=False)
            await eventually("two resolved replies", lambda: len(_posted(fake)) >= 4)
            edits = _edits(fake)
            assert len(edits) == 2 and all("RESOLVED" in discord_texts(e.body) for e in edits)
            edited = sorted(e.path.rsplit("/", 1)[1] for e in edits)
            assert sorted(str(i) for i in ids) == edited  # each card changed in place
            replies = _posted(fake)[2:]
            assert sorted(r["message_reference"]["message_id"] for r in replies) == edited
            assert all("Resolved:" in discord_texts(r) for r in replies)

            said = await _command(fake, gateway, "unsubscribe", {"kind": "all"})
            assert "no longer gets" in said, said

            for body in [*_posted(fake), *(e.body for e in edits)]:
                assert body["allowed_mentions"] == {"parse": []}, body
                text = discord_texts(body)
                assert not LIVE_MENTION.search(text), text
            posted = _posted(fake)
            # what each message was (its title and first line), should one more have come
            assert len(posted) == 4, [discord_texts(p).split("\n")[1:3] for p in posted]
            assert not fake.violations
    finally:
        await gateway.close()
        await fake.close()
