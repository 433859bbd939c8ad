"""How answers reach Discord: slow commands defer and follow up, a twice-delivered interaction
counts once, no message can ping anyone, and the fake enforces what Discord enforces."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import discord
import pytest

from learning_bot.adapters.discord import LearningClient, create_client
from learning_bot.app import App
from learning_bot.bot.bus import CommandBus, Invocation
from learning_bot.bot.replies import Reply

from .conftest import (
    ADMIN,
    HERE,
    MEMBER,
    SETTINGS,
    Harness,
    logged_in,
    make_app,
    observe,
    posteriors,
)
from .fake_discord import (
    BOT_TOKEN,
    EPHEMERAL,
    LOADING,
    FakeDiscord,
    autocomplete_interaction,
    command_interaction,
)

SLOW = 0.4


def slow_bus(app: App) -> CommandBus:
    """The app's bus, but every command takes SLOW seconds more."""

    class SlowBus(CommandBus):
        def dispatch(self, invocation: Invocation) -> Reply:
            time.sleep(SLOW)
            return super().dispatch(invocation)

    return SlowBus(app.services, app.bus.commands, app.bus.settings)


@pytest.fixture
async def slow(fake: FakeDiscord, sqlite_app: App) -> AsyncIterator[Harness]:
    client = create_client(replace(SETTINGS, defer_after=0.05), slow_bus(sqlite_app))
    await client.login(BOT_TOKEN)
    try:
        yield Harness(fake, client, sqlite_app)
    finally:
        await client.close()


def kinds(h: Harness, payload: dict[str, Any]) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for call in h.calls(payload):
        kind = call.body.get("type") if isinstance(call.body, dict) else None
        out.append((call.kind, kind if call.kind == "callback" else None))
    return out


# -- slow paths: defer, then follow up ---------------------------------------------------------


async def test_a_slow_command_is_deferred_then_followed_up(slow: Harness) -> None:
    h = slow
    observe(h.app, "r1", ["Read"])
    started = time.perf_counter()
    payload = await h.command("status")
    calls = h.calls(payload)
    assert kinds(h, payload) == [("callback", 5), ("followup", None)]
    defer, followup = calls
    assert defer.body == {"type": 5, "data": {"flags": EPHEMERAL}}
    assert defer.at - started < SLOW, "the defer went out while the bus was still working"
    assert followup.at - started >= SLOW
    message = h.fake.message(h.prompt_id(payload))
    assert message["embeds"][0]["title"].startswith("Learning status")
    assert message["flags"] & EPHEMERAL and not message["flags"] & LOADING
    assert h.fake.violations == []


async def test_a_slow_public_answer_stays_public(slow: Harness) -> None:
    h = slow
    payload = await h.command("status", public=True)
    assert kinds(h, payload) == [("callback", 5), ("followup", None)]
    assert h.calls(payload)[0].body == {"type": 5}
    message = h.fake.message(h.prompt_id(payload))
    assert not message["flags"] & EPHEMERAL
    assert message["embeds"][0]["title"].startswith("Learning status")


async def test_a_slow_error_after_a_public_defer_is_shown_only_to_the_user(
    slow: Harness,
) -> None:
    h = slow
    observe(h.app, "r1", ["Read"])
    payload = await h.command("status", public=True, arm="Nothing")
    assert kinds(h, payload) == [("callback", 5), ("delete", None), ("followup", None)]
    followup = h.calls(payload)[-1].body
    assert isinstance(followup, dict) and followup["flags"] & EPHEMERAL
    assert "unknown arm" in followup["content"]
    public = [m for m in h.fake.messages.values() if not m["flags"] & EPHEMERAL]
    assert public == [], "no public message is left behind"


async def test_slow_confirmation_and_click(slow: Harness) -> None:
    h = slow
    observe(h.app, "r1", ["Read"])
    prompt = await h.command("reset", arms="all")
    assert kinds(h, prompt) == [("callback", 5), ("followup", None)]
    message = h.fake.message(h.prompt_id(prompt))
    assert message["components"], "the follow-up carries the buttons"
    click = await h.click(h.prompt_id(prompt), "confirm")
    assert kinds(h, click) == [("callback", 6), ("edit", None)]
    edited = h.fake.message(h.prompt_id(prompt))
    assert "Confirmed by Ada." in edited["embeds"][0]["description"]
    assert all(b["disabled"] for row in edited["components"] for b in row["components"])
    assert posteriors(h.app)["tool:fs:Read"] == (1.0, 1.0, 0)


async def test_an_autocomplete_slower_than_its_budget_offers_nothing(
    fake: FakeDiscord, sqlite_app: App
) -> None:
    """Autocomplete cannot defer: a lookup still running when its budget is spent answers with
    no suggestions (never an error), and the lookup it left behind does no harm."""
    release = threading.Event()

    class StuckBus(CommandBus):
        def dispatch(self, invocation: Invocation) -> Reply:
            release.wait(timeout=120)
            return super().dispatch(invocation)

    observe(sqlite_app, "seen", ["Read"])
    bus = StuckBus(sqlite_app.services, sqlite_app.bus.commands, sqlite_app.bus.settings)
    client = create_client(replace(SETTINGS, autocomplete_budget=0.05), bus)
    await client.login(BOT_TOKEN)
    try:
        h = Harness(fake, client, sqlite_app)
        assert await h.autocomplete("reward", "arm", "Read") == []
    finally:
        release.set()
        await client.close()


async def test_quick_replies_answer_directly(direct: Harness) -> None:
    h = direct
    payload = await h.command("help")
    assert kinds(h, payload) == [("callback", 4)]


# -- the same interaction delivered twice -------------------------------------------------


async def test_the_same_interaction_twice_counts_once(hdb: Harness) -> None:
    h = hdb
    observe(h.app, "r1", ["Read"])
    before = posteriors(h.app)["tool:fs:Read"]
    payload = command_interaction(
        "reward", {"arm": "Read", "reason": "twice"}, user=MEMBER, place=HERE
    )
    await h.deliver(payload)
    await h.deliver(payload)
    after = posteriors(h.app)["tool:fs:Read"]
    assert after == (before[0] + 1, before[1], before[2] + 1)
    statuses = [c.status for c in h.calls(payload) if c.kind == "callback"]
    assert statuses == [200, 400], "one answer; Discord refuses the second"


async def test_the_same_interaction_on_two_replicas_counts_once(
    fake: FakeDiscord, database_url: str
) -> None:
    apps = [make_app(database_url), make_app(database_url)]
    clients: list[LearningClient] = [await logged_in(fake, app, SETTINGS) for app in apps]
    h = Harness(fake, clients[0], apps[0])
    try:
        observe(apps[0], "r1", ["Read"])
        before = posteriors(apps[0])["tool:fs:Read"]
        payload = command_interaction("reward", {"arm": "Read"}, user=MEMBER, place=HERE)
        await asyncio.gather(h.deliver(payload, clients[0]), h.deliver(payload, clients[1]))
        after = posteriors(apps[1])["tool:fs:Read"]
        assert after == (before[0] + 1, before[1], before[2] + 1)
        answered = [c for c in h.calls(payload) if c.kind == "callback" and c.status == 200]
        assert len(answered) == 1
    finally:
        for client in clients:
            await client.close()
        for app in apps:
            app.close()


# -- mentions ----------------------------------------------------------------------------------


async def test_no_message_can_mention_anyone(h: Harness) -> None:
    nasty = (
        "@everyone @here <@1400000000000000002> <@&1300000000000000021> **bold** [x](https://e.x)"
    )
    observe(h.app, "r1", ["Read"])
    await h.command("reward", arm="Read", reason=nasty, public=True)
    await h.command("reward", arm="Read", reason=nasty)
    await h.command("status", arm=nasty)
    await h.command("status", public=True)
    prompt = await h.command("reset", arms="all")
    await h.click(h.prompt_id(prompt), "confirm", user=MEMBER)
    await h.click(h.prompt_id(prompt), "confirm")
    await h.command("reset", arms="all", user=MEMBER)
    payloads = h.fake.message_payloads()
    assert len(payloads) >= 7
    for message in payloads:
        assert message.get("allowed_mentions") == {"parse": []}, message
    texts = [t for m in payloads for t in strings(m)]
    assert any("@\u200beveryone" in t for t in texts), "the reason was shown, escaped"
    assert not any("@everyone" in t or "<@1400" in t for t in texts)
    assert not any(re.search(r"(?<!\\)\[x\]\(https", t) for t in texts), "no links"
    assert not any(re.search(r"(?<!\\)\*\*bold", t) for t in texts), "no formatting"


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


# -- the fake plays by Discord's rules ------------------------------------------------------


def interaction(client: LearningClient, fake: FakeDiscord, payload: dict[str, Any]) -> Any:
    fake.expect(payload)
    return discord.Interaction(data=payload, state=client._connection)  # type: ignore[arg-type]


async def test_the_fake_refuses_what_discord_refuses(direct: Harness) -> None:
    h = direct
    """Without these checks, tests of our limits could not fail."""
    payload = command_interaction("status", user=ADMIN, place=HERE)
    first = interaction(h.client, h.fake, payload)
    with pytest.raises(discord.HTTPException) as too_long:
        await first.response.send_message(embed=discord.Embed(description="x" * 4097))
    assert too_long.value.status == 400
    fields = discord.Embed()
    for i in range(26):
        fields.add_field(name=f"f{i}", value="v")
    with pytest.raises(discord.HTTPException) as too_many:
        await first.response.send_message(embed=fields)
    assert too_many.value.status == 400
    await first.response.send_message("ok")
    again = interaction(h.client, h.fake, payload)
    with pytest.raises(discord.HTTPException) as twice:
        await again.response.send_message("again")
    assert twice.value.code == 40060

    complete = interaction(
        h.client, h.fake, autocomplete_interaction("reward", "arm", "", user=MEMBER, place=HERE)
    )
    with pytest.raises(discord.HTTPException) as choices:
        await complete.response.autocomplete(
            [discord.app_commands.Choice(name=f"c{i}", value=f"c{i}") for i in range(26)]
        )
    assert choices.value.status == 400
    assert len(h.fake.violations) == 4
