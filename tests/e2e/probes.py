"""One real request per surface, sent the way the service would send it, and the answer the
user would end up seeing: an HTTP GET, a signed Slack slash command (HTTP mode), a slash command
envelope over Socket Mode, a Discord INTERACTION_CREATE through the gateway."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx

from tests import processes
from tests.adapters.discord.fake_discord import (
    MANAGE_GUILD,
    PERMISSIONS_MEMBER,
    FakeDiscord,
    Place,
    User,
    command_interaction,
)
from tests.adapters.slack.fake_slack import FakeSlack

from .fake_gateway import FakeGateway

SUMMARY_PATH = "/__openclaw__/api/learning/summary"
SLACK_EVENTS_PATH = "/slack/events"
SLACK_SECRET = "e2e-signing-secret-0123456789abcdef"
SLACK_BOT_TOKEN = "xoxb-e2e-bot-token"
SLACK_APP_TOKEN = "xapp-1-e2e-app-token"
STATUS_HEADING = "Learning status"
"""How every surface's answer to `/learning status` begins."""

DISCORD_PLACE = Place(1_300_000_000_000_000_001, 1_300_000_000_000_000_011)
DISCORD_USER = User(1_400_000_000_000_000_001, "Ada", permissions=PERMISSIONS_MEMBER | MANAGE_GUILD)

ANSWER_SECONDS = 90.0
"""How long any surface may take to answer (bounded, far above what a reply needs)."""

_keys = itertools.count(1)


async def eventually(what: str, check: Callable[[], Any], timeout: float = ANSWER_SECONDS) -> Any:
    """Poll `check()` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: nothing within {timeout:.0f} s")
        await asyncio.sleep(0.05)


# -- HTTP ----------------------------------------------------------------------------------


async def http_answers(base: str) -> bool:
    """Whether the learning API answers its summary (used to wait for start-up)."""
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            response = await http.get(SUMMARY_PATH)
    except httpx.TransportError:
        return False
    return response.status_code == 200


async def port_answers(base: str) -> bool:
    """Whether anything answers HTTP on `base` (a Slack-only server has no summary)."""
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            await http.get("/")
    except httpx.TransportError:
        return False
    return True


async def check_http(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=ANSWER_SECONDS) as http:
        response = await http.get(SUMMARY_PATH)
    assert response.status_code == 200, f"GET {SUMMARY_PATH}: {response.status_code}"
    body = response.json()
    assert body["traceCount"] == 0 and "armCount" in body, f"GET {SUMMARY_PATH}: {body}"


# -- Slack ---------------------------------------------------------------------------------


def slack_texts(message: dict[str, Any]) -> str:
    """Everything a Slack message shows, as one string (its fallback text and its blocks)."""
    parts = [str(message.get("text") or "")]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    parts.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    return "\n".join(parts)


def slash_command(fake: FakeSlack, text: str) -> tuple[dict[str, str], str]:
    """A /learning slash command as Slack posts it, and the key of its response_url."""
    n = next(_keys)
    key = f"e2e-{n}"
    form = {
        "token": "legacy-verification-token",
        "team_id": fake.team_id,
        "team_domain": "example",
        "channel_id": "C-e2e",
        "channel_name": "general",
        "user_id": "U-e2e",
        "user_name": "ada",
        "command": "/learning",
        "text": text,
        "api_app_id": "A-app",
        "is_enterprise_install": "false",
        "response_url": fake.response_url(key),
        "trigger_id": f"{n}.{time.time_ns()}.e2e",
    }
    return form, key


def slack_signature(secret: str, timestamp: str, body: str) -> str:
    """Slack's v0 signature: HMAC-SHA256 of `v0:{timestamp}:{body}` under the signing secret."""
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256)
    return "v0=" + digest.hexdigest()


async def _slack_answer(fake: FakeSlack, ack: dict[str, Any], key: str) -> dict[str, Any]:
    """The answer the user sees: the acknowledgement itself when it carries one, else the
    first message posted to the command's response_url."""
    if ack.get("blocks"):
        return ack
    post = await fake.next_post(key, timeout=ANSWER_SECONDS)
    return post.body


async def check_slack_http(base: str, fake: FakeSlack, secret: str = SLACK_SECRET) -> None:
    """A signed `/learning status` posted to /slack/events is answered; a request signed with
    another secret gets 401."""
    form, key = slash_command(fake, "status")
    body = urlencode(form)
    async with httpx.AsyncClient(base_url=base, timeout=ANSWER_SECONDS) as http:

        async def post(signing_secret: str) -> httpx.Response:
            timestamp = str(processes.now_ms() // 1000)  # the server's clock
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": timestamp,
                "X-Slack-Signature": slack_signature(signing_secret, timestamp, body),
            }
            return await http.post(SLACK_EVENTS_PATH, content=body, headers=headers)

        forged = await post("not-the-signing-secret")
        assert forged.status_code == 401, f"a forged signature got {forged.status_code}"
        response = await post(secret)
    assert response.status_code == 200, (
        f"POST {SLACK_EVENTS_PATH}: {response.status_code} {response.text[:300]}"
    )
    answer = await _slack_answer(fake, response.json(), key)
    assert STATUS_HEADING in slack_texts(answer), f"Slack answered {answer}"


async def check_slack_socket_mode(fake: FakeSlack) -> None:
    """A `/learning status` envelope sent over the Socket Mode WebSocket is acknowledged
    (same envelope id) and answered."""
    form, key = slash_command(fake, "status")
    envelope_id = f"envelope-{key}"
    await fake.send_envelope(
        {
            "envelope_id": envelope_id,
            "type": "slash_commands",
            "accepts_response_payload": True,
            "payload": form,
        }
    )
    await fake.wait_until(
        lambda: any(r.get("envelope_id") == envelope_id for r in fake.socket_replies),
        timeout=ANSWER_SECONDS,
    )
    ack = next(r for r in fake.socket_replies if r.get("envelope_id") == envelope_id)
    answer = await _slack_answer(fake, ack.get("payload") or {}, key)
    assert STATUS_HEADING in slack_texts(answer), f"Slack answered {answer}"


# -- Discord -------------------------------------------------------------------------------


def _discord_answer(fake: FakeDiscord, interaction_id: int) -> dict[str, Any] | None:
    """The message the user ends up seeing: the callback's, or after a defer the follow-up
    or edit that completed it; None while there is none yet."""
    answered = [
        c
        for c in fake.calls_for(interaction_id)
        if c.status < 300 and c.kind in ("callback", "followup", "edit")
    ]
    if not answered or not isinstance(answered[0].body, dict):
        return None
    first = answered[0].body
    if first.get("type") in (4, 7):
        data: dict[str, Any] = first.get("data") or {}
        return data
    last = answered[-1]
    if last.kind != "callback" and isinstance(last.body, dict):
        return last.body
    return None


def discord_texts(message: dict[str, Any]) -> str:
    parts = [str(message.get("content") or "")]
    for embed in message.get("embeds") or []:
        parts.extend(str(embed.get(k) or "") for k in ("title", "description"))
        parts.extend(f"{f.get('name')}\n{f.get('value')}" for f in embed.get("fields") or [])
    return "\n".join(parts)


async def check_discord(fake: FakeDiscord, gateway: FakeGateway) -> None:
    """`/learning status` as an INTERACTION_CREATE through the gateway is answered through
    the REST API, within Discord's rules."""
    payload = command_interaction("status", {}, user=DISCORD_USER, place=DISCORD_PLACE)
    fake.expect(payload)
    await gateway.dispatch("INTERACTION_CREATE", payload)
    answer: dict[str, Any] = await eventually(
        "the Discord interaction's answer", lambda: _discord_answer(fake, int(payload["id"]))
    )
    assert not fake.violations, f"requests Discord would refuse: {fake.violations}"
    assert STATUS_HEADING in discord_texts(answer), f"Discord answered {answer}"
