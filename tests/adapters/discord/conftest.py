"""The Discord surface under test: a real discord.py client, logged in against a local fake of
Discord's REST API, fed gateway INTERACTION_CREATE payloads through its own parser."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import discord
import pytest

from learning_bot.adapters.discord import DiscordSettings, LearningClient, create_client
from learning_bot.app import App, build_app
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.settings import Settings

from .fake_discord import (
    BOT_TOKEN,
    MANAGE_GUILD,
    PERMISSIONS_MEMBER,
    Call,
    FakeDiscord,
    Place,
    User,
    autocomplete_interaction,
    command_interaction,
    component_interaction,
)

GUILD = 1_300_000_000_000_000_001
OTHER_GUILD = 1_300_000_000_000_000_002
CHANNEL = 1_300_000_000_000_000_011
THREAD = 1_300_000_000_000_000_012
ADMIN_ROLE = 1_300_000_000_000_000_021

HERE = Place(GUILD, CHANNEL)
IN_THREAD = Place(GUILD, THREAD, channel_type=11, parent_id=CHANNEL)
ELSEWHERE = Place(OTHER_GUILD, 1_300_000_000_000_000_031)

ADMIN = User(1_400_000_000_000_000_001, "Ada", permissions=PERMISSIONS_MEMBER | MANAGE_GUILD)
MEMBER = User(1_400_000_000_000_000_002, "Max")
ROLE_ADMIN = User(1_400_000_000_000_000_003, "Rolf", roles=(ADMIN_ROLE,))
LISTED = User(1_400_000_000_000_000_004, "Lisa")
LISTED_HERE = User(1_400_000_000_000_000_005, "Dora")

ARMS = (
    Arm("tool:fs:Read", 120),
    Arm("tool:fs:Write", 140),
    Arm("tool:web:WebSearch", 300),
    Arm("tool:web:WebFetch", 300),
    Arm("skill:deploy:main", 500),
    Arm("memory:project:staging", 40, content="Deploys go through the staging cluster first."),
    *(Arm(f"tool:t:Tool{i}", 100) for i in range(6)),
)


def observe(
    app: App,
    trace: str,
    used: list[str],
    *,
    conversation: str = str(CHANNEL),
    arms: tuple[Arm, ...] = ARMS,
    learner: str | None = None,
) -> None:
    """One agent run in `conversation` that included `arms` and called the `used` tools."""
    app.service(learner).observe(
        RunReport(
            trace,
            tuple(ReportedArm(a) for a in arms),
            tool_calls=tuple(ToolCall(n) for n in used),
            channel=conversation,
        )
    )


def posteriors(app: App, learner: str | None = None) -> dict[str, tuple[float, float, int]]:
    service = app.service(learner)
    service.refresh(force=True)
    return {
        v.arm_id: (v.posterior.alpha, v.posterior.beta, v.posterior.pulls)
        for v in service.posteriors()
    }


def make_app(database_url: str, **changes: Any) -> App:
    """The app one process would run: a store, learner services and the command bus. Two
    apps on one database play two replicas."""
    settings = Settings(
        database_url=database_url,
        config=LearningConfig.for_policy("seed", phase=Phase.ACTIVE),
        admins=frozenset({f"discord:{LISTED.id}", str(LISTED_HERE.id)}),
        learners={f"discord:{OTHER_GUILD}": "other"},
        cache_ttl=0.0,
    )
    return build_app(replace(settings, **changes), spool=False)


@dataclass
class Harness:
    """The client, the fake Discord behind it, and the app whose bus it drives."""

    fake: FakeDiscord
    client: LearningClient
    app: App

    async def deliver(self, payload: dict[str, Any], client: LearningClient | None = None) -> None:
        """Hand a gateway event to the client's own parser and wait for everything it
        started (command tree invocation, view dispatch, event listeners) to finish."""
        target = client or self.client
        self.fake.expect(payload)
        before = asyncio.all_tasks()
        target._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        started = asyncio.all_tasks() - before
        assert started, "the client started nothing for this interaction"
        await asyncio.wait_for(asyncio.gather(*started), timeout=90)

    async def command(
        self,
        sub: str,
        user: User = ADMIN,
        place: Place = HERE,
        *,
        interaction_id: int | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Run /learning <sub>; returns the interaction payload (its id names the calls)."""
        payload = command_interaction(
            sub, options, user=user, place=place, interaction_id=interaction_id
        )
        await self.deliver(payload)
        return payload

    async def autocomplete(
        self, sub: str, option: str, typed: str, user: User = MEMBER, **others: Any
    ) -> list[dict[str, Any]]:
        payload = autocomplete_interaction(sub, option, typed, user=user, place=HERE, **others)
        await self.deliver(payload)
        response = self.initial(payload)
        assert response["type"] == 8
        choices: list[dict[str, Any]] = response["data"]["choices"]
        return choices

    async def click(
        self,
        message_id: int,
        action: str,
        user: User = ADMIN,
        place: Place = HERE,
        client: LearningClient | None = None,
    ) -> dict[str, Any]:
        message = self.fake.message(message_id)
        custom_id = next(
            c["custom_id"]
            for row in message["components"]
            for c in row["components"]
            if c["custom_id"].startswith(f"learning:{action}:")
        )
        payload = component_interaction(message, custom_id, user=user, place=place)
        await self.deliver(payload, client)
        return payload

    def initial(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The interaction's initial response (callback body) as the fake received it."""
        return self.fake.initial(int(payload["id"]))

    def reply(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The answer as the user ends up seeing it, shaped like an initial response: the
        callback itself, or (when the interaction was deferred because the machine was busy)
        the follow-up (type 4) or edit (type 7) that completed it."""
        answered = [
            c
            for c in self.calls(payload)
            if c.status < 300 and c.kind in ("callback", "followup", "edit")
        ]
        assert answered, f"interaction {payload['id']} got no answer"
        first = answered[0].body
        assert isinstance(first, dict)
        if first["type"] not in (5, 6):
            return first
        last = answered[-1]
        assert last.kind != "callback" and isinstance(last.body, dict), "a defer, then nothing"
        return {"type": 4 if last.kind == "followup" else 7, "data": last.body}

    def calls(self, payload: dict[str, Any]) -> list[Call]:
        return self.fake.calls_for(int(payload["id"]))

    def prompt_id(self, payload: dict[str, Any]) -> int:
        """The message id of the response to `payload` (e.g. a confirmation prompt)."""
        state = self.fake.interactions[int(payload["id"])]
        assert state.original_id is not None
        return state.original_id


SETTINGS = DiscordSettings(
    token=BOT_TOKEN,
    admin_role_ids=frozenset({ADMIN_ROLE}),
    defer_after=2.5,
    # a busy machine can take longer than Discord's budget for the first lookup
    autocomplete_budget=90.0,
)


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    server = FakeDiscord()
    monkeypatch.setattr(discord.http.Route, "BASE", await server.start())
    yield server
    await server.close()


async def logged_in(fake: FakeDiscord, app: App, settings: DiscordSettings) -> LearningClient:
    client = create_client(settings, app.bus)
    await client.login(BOT_TOKEN)
    return client


@pytest.fixture
def sqlite_app(sqlite_url: str) -> Iterator[App]:
    app = make_app(sqlite_url)
    yield app
    app.close()


@pytest.fixture
def any_app(database_url: str) -> Iterator[App]:
    """Runs the test on SQLite and on PostgreSQL."""
    app = make_app(database_url)
    yield app
    app.close()


async def _harness(
    fake: FakeDiscord, app: App, settings: DiscordSettings = SETTINGS
) -> AsyncIterator[Harness]:
    client = await logged_in(fake, app, settings)
    try:
        yield Harness(fake, client, app)
    finally:
        await client.close()


@pytest.fixture(params=["direct", "deferred"])
async def h(
    request: pytest.FixtureRequest, fake: FakeDiscord, sqlite_app: App
) -> AsyncIterator[Harness]:
    """A harness on a SQLite file, run twice: answers ready at once are the initial
    response; with defer_after 0 every command and click is deferred and followed up (or
    edited), as on a busy machine. Tests read answers with `Harness.reply` either way."""
    settings = SETTINGS if request.param == "direct" else replace(SETTINGS, defer_after=0.0)
    async for harness in _harness(fake, sqlite_app, settings):
        yield harness


@pytest.fixture
async def direct(fake: FakeDiscord, sqlite_app: App) -> AsyncIterator[Harness]:
    """A harness on a SQLite file whose quick answers are never deferred."""
    async for harness in _harness(fake, sqlite_app):
        yield harness


@pytest.fixture
async def hdb(fake: FakeDiscord, any_app: App) -> AsyncIterator[Harness]:
    """A harness on SQLite and on PostgreSQL."""
    async for harness in _harness(fake, any_app):
        yield harness
