"""The Slack app under test: the real slack-bolt AsyncApp behind its real Starlette adapter,
fed signed requests shaped like Slack's, talking to a local fake Web API."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    ConfirmObject,
    RawTextObject,
    TableBlockColumnSettings,
)
from slack_sdk.signature import SignatureVerifier

from learning_bot.adapters.slack import SlackSettings, create_app, create_asgi_app
from learning_bot.adapters.slack.app import FOLLOW_UP_TASK
from learning_bot.app import App, build_app
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.settings import Settings

from .fake_slack import FakeSlack

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
DASHBOARD = "https://learning.example.com/dashboard"
ARMS = (
    *(Arm(f"tool:t:T{i}", 100) for i in range(8)),
    Arm("tool:web:WebSearch", 300),
    Arm("tool:web:WebFetch", 300),
)
USERS: dict[str, dict[str, Any]] = {
    "U-admin": {"id": "U-admin", "name": "ada", "is_admin": True, "profile": {"real_name": "Ada"}},
    "U-owner": {"id": "U-owner", "name": "olga", "is_owner": True, "profile": {}},
    "U-member": {"id": "U-member", "name": "max", "profile": {"display_name": "Max"}},
    "U-guest": {"id": "U-guest", "name": "gus", "is_restricted": True, "profile": {}},
    "U-listed": {"id": "U-listed", "name": "lisa", "profile": {"real_name": "Lisa"}},
}


def observe(app: App, trace: str, used: list[str], channel: str = "C1", **kw: Any) -> None:
    """One agent run in `channel` that included every arm and called the `used` tools."""
    app.service().observe(
        RunReport(
            trace,
            tuple(ReportedArm(a) for a in ARMS),
            tool_calls=tuple(ToolCall(n) for n in used),
            channel=channel,
            **kw,
        )
    )


def pulls(app: App) -> dict[str, int]:
    service = app.service()
    service.refresh(force=True)
    return {v.arm_id: v.posterior.pulls for v in service.posteriors()}


# -- Block Kit validation ------------------------------------------------------------------


def validate_message(message: dict[str, Any]) -> None:
    """Check a message the app sent against slack_sdk's block models and Slack's limits."""
    assert isinstance(message.get("text"), str)
    assert message["text"].strip(), "every message carries a text fallback"
    blocks = message.get("blocks")
    assert isinstance(blocks, list)
    assert 1 <= len(blocks) <= 50
    assert sum(1 for b in blocks if b["type"] == "table") <= 1, "one table block per message"
    for raw in blocks:
        parsed = Block.parse(raw)
        assert parsed is not None, f"slack_sdk does not know {raw}"
        assert parsed.to_dict() == raw, f"slack_sdk changed {raw}"  # to_dict() validates
        kind = raw["type"]
        if kind == "section":
            for f in raw.get("fields", []):
                assert len(f["text"]) <= 2000
            if "text" in raw:
                assert 1 <= len(raw["text"]["text"]) <= 3000
        elif kind == "header":
            assert len(raw["text"]["text"]) <= 150
            assert raw["text"]["type"] == "plain_text"
        elif kind == "context":
            assert 1 <= len(raw["elements"]) <= 10
        elif kind == "table":
            rows = raw["rows"]
            assert 1 <= len(rows) <= 100
            width = len(rows[0])
            assert 1 <= width <= 20
            for row in rows:
                assert len(row) == width
                for cell in row:
                    assert RawTextObject(**{k: v for k, v in cell.items() if k != "type"}).to_dict()
                    assert cell == {"type": "raw_text", "text": cell["text"]}
            for setting in raw.get("column_settings", []):
                assert TableBlockColumnSettings(**setting).to_dict() == setting
        elif kind == "actions":
            for element in raw["elements"]:
                button = ButtonElement(**{k: v for k, v in element.items() if k != "type"})
                assert button.to_dict() == element
                if "confirm" in element:
                    ConfirmObject.parse(element["confirm"]).to_dict()


# -- requests shaped like Slack's ----------------------------------------------------------


def signed_headers(body: str, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }


_ids = itertools.count(1)


@dataclass
class SlackDriver:
    """Sends signed slash commands and button clicks through the ASGI app, and keeps every
    message the app produced (acknowledgements, response_url posts, chat.postMessage)."""

    http: httpx.AsyncClient
    fake: FakeSlack
    acks: list[dict[str, Any]] = field(default_factory=list)

    async def command(
        self,
        text: str,
        *,
        user: str = "U-admin",
        team: str = "T1",
        channel: str = "C1",
        trigger: str | None = None,
        secret: str = SECRET,
        timestamp: int | None = None,
    ) -> tuple[httpx.Response, str]:
        """POST /learning `text` as Slack would; returns the response and the response_url key."""
        n = next(_ids)
        key = f"cmd-{n}"
        body = urlencode(
            {
                "token": "gIkuvaNzQIHg97ATvDxqgjtO",
                "team_id": team,
                "team_domain": "example",
                "channel_id": channel,
                "channel_name": "general",
                "user_id": user,
                "user_name": USERS.get(user, {}).get("name", user),
                "command": "/learning",
                "text": text,
                "api_app_id": "A-app",
                "is_enterprise_install": "false",
                "response_url": self.fake.response_url(key),
                "trigger_id": trigger or f"{n}.13345224609.8088930838d88f008e0",
            }
        )
        response = await self.http.post(
            "/slack/events", content=body, headers=signed_headers(body, secret, timestamp)
        )
        if response.status_code == 200 and response.content:
            self.acks.append(response.json())
        return response, key

    async def click(
        self,
        button: dict[str, Any],
        *,
        user: str = "U-admin",
        team: str = "T1",
        channel: str = "C1",
        trigger: str | None = None,
    ) -> tuple[httpx.Response, str]:
        """A block_actions payload for a click on `button` (as rendered by the app) in an
        ephemeral message."""
        n = next(_ids)
        key = f"act-{n}"
        payload = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": USERS.get(user, {}).get("name", user),
                "name": USERS.get(user, {}).get("name", user),
                "team_id": team,
            },
            "api_app_id": "A-app",
            "token": "gIkuvaNzQIHg97ATvDxqgjtO",
            "container": {
                "type": "message",
                "message_ts": "1700000000.000100",
                "channel_id": channel,
                "is_ephemeral": True,
            },
            "trigger_id": trigger or f"{n}.13345224609.a88930838d88f008e0",
            "team": {"id": team, "domain": "example"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": "general"},
            "state": {"values": {}},
            "response_url": self.fake.response_url(key),
            "actions": [
                {
                    "action_id": button["action_id"],
                    "block_id": "b1",
                    "text": button["text"],
                    "value": button["value"],
                    **({"style": button["style"]} if "style" in button else {}),
                    "type": "button",
                    "action_ts": f"1700000001.{n:06d}",
                }
            ],
        }
        body = urlencode({"payload": json.dumps(payload)})
        response = await self.http.post("/slack/events", content=body, headers=signed_headers(body))
        return response, key

    def every_message(self) -> list[dict[str, Any]]:
        posts = [p.body for p in self.fake.posted]
        chats = [c.params for c in self.fake.api("chat.postMessage")]
        return [*self.acks, *posts, *chats]


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The buttons of a message by action id."""
    return {
        e["action_id"]: e
        for b in message.get("blocks", [])
        if b["type"] == "actions"
        for e in b["elements"]
    }


def texts(message: dict[str, Any]) -> str:
    """Every visible string of a message's blocks, joined (for assertions on wording)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") in ("plain_text", "mrkdwn", "raw_text"):
                out.append(value["text"])
            else:
                for v in value.values():
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(message.get("blocks", []))
    return "\n".join(out)


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack(users={k: dict(v) for k, v in USERS.items()})
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
def core(database_url: str) -> Iterator[App]:
    app = build_app(
        Settings(
            database_url=database_url,
            config=LearningConfig(phase=Phase.ACTIVE),
            admins=frozenset({"U-listed"}),
            dashboard_url=DASHBOARD,
            cache_ttl=0,
        )
    )
    yield app
    app.close()


def slack_settings(fake: FakeSlack, **changes: Any) -> SlackSettings:
    base = SlackSettings(bot_token="xoxb-test", signing_secret=SECRET, api_url=fake.api_url)
    return replace(base, **changes)


DriverFactory = Callable[..., Awaitable[SlackDriver]]


@pytest.fixture
async def make_driver(core: App, fake_slack: FakeSlack) -> AsyncIterator[DriverFactory]:
    """Builds a Slack app with SlackSettings changes and a driver for it; every message any of
    them produced is validated at the end of the test."""
    stack = contextlib.AsyncExitStack()
    drivers: list[SlackDriver] = []

    async def make(**changes: Any) -> SlackDriver:
        settings = slack_settings(fake_slack, **changes)
        engine = core.engine
        app = create_app(settings, core.bus, engine=engine)
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_asgi_app(app)),
                base_url="https://learning.example.com",
            )
        )
        driver = SlackDriver(http, fake_slack)
        drivers.append(driver)
        return driver

    yield make
    # Let listeners that are still answering through response_url finish first.
    follow_ups = [t for t in asyncio.all_tasks() if t.get_name() == FOLLOW_UP_TASK]
    if follow_ups:
        await asyncio.wait(follow_ups, timeout=120)
    await stack.aclose()
    for driver in drivers:
        for message in driver.every_message():
            validate_message(message)


@pytest.fixture
async def slack(make_driver: DriverFactory) -> SlackDriver:
    return await make_driver()
