"""A small local stand-in for Discord's REST API, for discord.py to log in against.

It records interaction callbacks, follow-ups, edits and command syncs, and enforces the rules
Discord enforces and discord.py does not: one initial response per interaction, message and
embed limits, at most 25 autocomplete choices, follow-ups only after an initial response. A
request that breaks a rule gets Discord's 400 and is listed in `violations`.

Interactions enter the client as gateway INTERACTION_CREATE payloads built by
`command_interaction` / `autocomplete_interaction` / `component_interaction`, shaped like
Discord's, so they run through discord.py's own parsing, command tree, checks and views.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord
from aiohttp import web

APPLICATION_ID = 1_200_000_000_000_000_001
BOT_ID = 1_200_000_000_000_000_002
BOT_TOKEN = "fake-bot-token.for-tests"
COMMAND_ID = 1_200_000_000_000_000_003

EPHEMERAL = 1 << 6
LOADING = 1 << 7
PERMISSIONS_MEMBER = (1 << 10) | (1 << 11) | (1 << 31)  # view channel, send messages, use apps
MANAGE_GUILD = 1 << 5

_ids = itertools.count(1)


def snowflake() -> int:
    """A fresh id shaped like Discord's (time in the high bits), unique within the run."""
    return discord.utils.time_snowflake(datetime.now(UTC)) + next(_ids) % 4_000_000


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _json(data: Any, status: int = 200) -> web.Response:
    # discord.py parses a body as JSON only when the content type is exactly this.
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


class Rejected(Exception):
    """A rule Discord would enforce; answered as Discord's 400 Invalid Form Body."""


@dataclass
class Call:
    """One request the client made."""

    method: str
    path: str
    body: dict[str, Any] | list[Any] | None
    status: int
    at: float
    """time.perf_counter() when the request arrived."""
    interaction_id: int | None = None
    kind: str = ""
    """callback | followup | edit | delete | sync | login."""


@dataclass
class InteractionState:
    id: int
    token: str
    type: int
    message_id: int | None = None
    """For component interactions: the message the clicked component is on."""
    responses: list[dict[str, Any]] = field(default_factory=list)
    original_id: int | None = None
    loading: bool = False
    deferred_flags: int = 0

    @property
    def initial(self) -> dict[str, Any] | None:
        return self.responses[0] if self.responses else None


@dataclass
class User:
    id: int
    name: str
    permissions: int = PERMISSIONS_MEMBER
    roles: tuple[int, ...] = ()

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.name.lower(),
            "discriminator": "0",
            "global_name": self.name,
            "avatar": None,
            "public_flags": 0,
        }

    def member(self) -> dict[str, Any]:
        return {
            "user": self.payload(),
            "roles": [str(r) for r in self.roles],
            "joined_at": "2024-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "nick": None,
            "avatar": None,
            "premium_since": None,
            "communication_disabled_until": None,
            "permissions": str(self.permissions),
        }


# -- Discord's limits ------------------------------------------------------------------------


def _embed_errors(embeds: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    if len(embeds) > 10:
        errors.append(f"{len(embeds)} embeds; at most 10")
    total = 0
    for i, embed in enumerate(embeds):
        title = embed.get("title") or ""
        description = embed.get("description") or ""
        fields = embed.get("fields") or []
        footer = (embed.get("footer") or {}).get("text") or ""
        author = (embed.get("author") or {}).get("name") or ""
        for name, value, limit in (
            ("title", title, 256),
            ("description", description, 4096),
            ("footer.text", footer, 2048),
            ("author.name", author, 256),
        ):
            if len(value) > limit:
                errors.append(f"embeds.{i}.{name}: {len(value)} characters; at most {limit}")
        if len(fields) > 25:
            errors.append(f"embeds.{i}.fields: {len(fields)} fields; at most 25")
        for j, f in enumerate(fields):
            name, value = f.get("name") or "", f.get("value") or ""
            if not 1 <= len(name) <= 256:
                errors.append(f"embeds.{i}.fields.{j}.name: {len(name)} characters; 1-256")
            if not 1 <= len(value) <= 1024:
                errors.append(f"embeds.{i}.fields.{j}.value: {len(value)} characters; 1-1024")
            total += len(name) + len(value)
        total += len(title) + len(description) + len(footer) + len(author)
        if not (title or description or fields or footer or author or embed.get("image")):
            errors.append(f"embeds.{i}: an embed needs some content")
    if total > 6000:
        errors.append(f"embeds: {total} characters in all; at most 6000")
    return errors


def _component_errors(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    if len(rows) > 5:
        errors.append(f"{len(rows)} action rows; at most 5")
    for row in rows:
        items = row.get("components") or []
        if row.get("type") != 1 or not 1 <= len(items) <= 5:
            errors.append("an action row holds 1-5 components")
        for item in items:
            custom_id = item.get("custom_id") or ""
            if item.get("type") == 2 and item.get("style") != 5 and not 1 <= len(custom_id) <= 100:
                errors.append(f"custom_id {custom_id[:20]!r}: 1-100 characters")
            if len(item.get("label") or "") > 80:
                errors.append("button label longer than 80 characters")
    return errors


def message_errors(data: Mapping[str, Any], *, edit: bool = False) -> list[str]:
    """What Discord would refuse in a message payload (create or edit)."""
    errors: list[str] = []
    content = data.get("content") or ""
    if len(content) > 2000:
        errors.append(f"content: {len(content)} characters; at most 2000")
    errors.extend(_embed_errors(data.get("embeds") or []))
    errors.extend(_component_errors(data.get("components") or []))
    if (
        not edit
        and not content
        and not data.get("embeds")
        and not data.get("components")
        and not data.get("attachments")
    ):
        errors.append("Cannot send an empty message")
    return errors


def choice_errors(choices: Any) -> list[str]:
    if not isinstance(choices, list):
        return ["choices must be a list"]
    errors = [f"{len(choices)} choices; at most 25"] if len(choices) > 25 else []
    for i, choice in enumerate(choices):
        name, value = choice.get("name", ""), choice.get("value")
        if not 1 <= len(name) <= 100:
            errors.append(f"choices.{i}.name: {len(name)} characters; 1-100")
        if isinstance(value, str) and not 1 <= len(value) <= 100:
            errors.append(f"choices.{i}.value: {len(value)} characters; 1-100")
    return errors


def command_errors(commands: Any) -> list[str]:
    if not isinstance(commands, list):
        return ["a list of commands is expected"]
    errors: list[str] = []

    def check(option: Mapping[str, Any], where: str) -> None:
        name = option.get("name", "")
        if not (1 <= len(name) <= 32 and name == name.lower() and " " not in name):
            errors.append(f"{where}: bad name {name!r}")
        if not 1 <= len(option.get("description", "")) <= 100:
            errors.append(f"{where}: description must be 1-100 characters")
        options = option.get("options") or []
        if len(options) > 25:
            errors.append(f"{where}: more than 25 options")
        if len(option.get("choices") or []) > 25:
            errors.append(f"{where}: more than 25 choices")
        for sub in options:
            check(sub, f"{where}.{sub.get('name')}")

    for command in commands:
        check(command, command.get("name", "?"))
    return errors


# -- the server ------------------------------------------------------------------------------


class FakeDiscord:
    """Discord's REST API on 127.0.0.1, recording what the client sent."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.violations: list[tuple[str, list[str]]] = []
        self.interactions: dict[int, InteractionState] = {}
        self.by_token: dict[str, InteractionState] = {}
        self.messages: dict[int, dict[str, Any]] = {}
        self.synced: dict[int | None, list[dict[str, Any]]] = {}
        self.channel_messages: list[tuple[str, dict[str, Any]]] = []
        """(channel id, body) of each message posted to a channel (the bot speaking first)."""
        self.uploads: list[tuple[str, bytes]] = []
        """(filename, content) of each file attached to a message."""
        self.forbidden_channels: set[str] = set()
        """Channels the bot may not post to: Discord answers 403 Missing Access."""
        self.callback_delay = 0.0
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        app = web.Application()
        api = "/api/v10"
        app.router.add_get(f"{api}/users/@me", self._me)
        app.router.add_get(f"{api}/oauth2/applications/@me", self._application)
        app.router.add_post(f"{api}/interactions/{{id}}/{{token}}/callback", self._callback)
        app.router.add_post(f"{api}/webhooks/{{app}}/{{token}}", self._followup)
        app.router.add_patch(f"{api}/webhooks/{{app}}/{{token}}/messages/{{message}}", self._edit)
        app.router.add_delete(
            f"{api}/webhooks/{{app}}/{{token}}/messages/{{message}}", self._delete
        )
        app.router.add_post(f"{api}/channels/{{channel}}/messages", self._channel_post)
        app.router.add_patch(f"{api}/channels/{{channel}}/messages/{{message}}", self._channel_edit)
        app.router.add_put(f"{api}/applications/{{app}}/commands", self._sync)
        app.router.add_put(f"{api}/applications/{{app}}/guilds/{{guild}}/commands", self._sync)
        self._app = app

    async def start(self) -> str:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.base_url = f"http://127.0.0.1:{port}/api/v10"
        return self.base_url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what tests read -----------------------------------------------------------------

    def calls_for(self, interaction_id: int) -> list[Call]:
        return [c for c in self.calls if c.interaction_id == interaction_id]

    def initial(self, interaction_id: int) -> dict[str, Any]:
        state = self.interactions[interaction_id]
        assert state.initial is not None, f"interaction {interaction_id} got no response"
        return state.initial

    def message(self, message_id: int) -> dict[str, Any]:
        return self.messages[message_id]

    def message_payloads(self) -> list[dict[str, Any]]:
        """Every message the client created or edited (callbacks 4/7, follow-ups, edits)."""
        out: list[dict[str, Any]] = []
        for call in self.calls:
            if call.status >= 300 or not isinstance(call.body, dict):
                continue
            if call.kind == "callback" and call.body.get("type") in (4, 7):
                out.append(call.body.get("data") or {})
            elif call.kind in ("followup", "edit"):
                out.append(call.body)
        return out

    # -- interactions (what the gateway would deliver) ----------------------------------

    def expect(self, payload: Mapping[str, Any]) -> None:
        """Remember an interaction Discord 'issued', so its token is known here."""
        state = InteractionState(
            int(payload["id"]),
            payload["token"],
            int(payload["type"]),
            int(payload["message"]["id"]) if "message" in payload else None,
        )
        if state.id in self.interactions:  # the gateway delivering the same event again
            return
        self.interactions[state.id] = state
        self.by_token[state.token] = state

    # -- handlers ------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> Any:
        if request.content_type == "application/json":
            return await request.json()
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            payload: Any = None
            async for part in reader:
                if getattr(part, "name", None) == "payload_json":
                    payload = json.loads(await part.text())  # type: ignore[union-attr]
                elif getattr(part, "filename", None):
                    data = await part.read()  # type: ignore[union-attr]
                    self.uploads.append((str(part.filename), bytes(data)))  # type: ignore[union-attr]
            return payload
        return None

    def _record(
        self,
        request: web.Request,
        body: Any,
        status: int,
        at: float,
        kind: str,
        state: InteractionState | None = None,
    ) -> None:
        self.calls.append(
            Call(request.method, request.path, body, status, at, state.id if state else None, kind)
        )

    def _reject(self, where: str, errors: list[str]) -> web.Response:
        self.violations.append((where, errors))
        # Discord nests errors by field; here every message sits under one key.
        problems = {"_errors": [{"code": "BASE_TYPE_INVALID", "message": e} for e in errors]}
        return _json(
            {"code": 50035, "message": "Invalid Form Body", "errors": {"payload": problems}}, 400
        )

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {BOT_TOKEN}"

    async def _me(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        if not self._authorised(request):
            self._record(request, None, 401, at, "login")
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        self._record(request, None, 200, at, "login")
        return _json(
            {
                "id": str(BOT_ID),
                "username": "learning-bot",
                "discriminator": "0",
                "global_name": None,
                "avatar": None,
                "bot": True,
                "flags": 0,
                "public_flags": 0,
                "mfa_enabled": False,
                "verified": True,
            }
        )

    async def _application(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        return _json(
            {
                "id": str(APPLICATION_ID),
                "name": "learning-bot",
                "icon": None,
                "description": "",
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "flags": 0,
                "owner": {
                    "id": "1200000000000000009",
                    "username": "owner",
                    "discriminator": "0",
                    "avatar": None,
                },
                "team": None,
                "interactions_endpoint_url": None,
            }
        )

    def _new_message(
        self, data: Mapping[str, Any], *, flags: int, message_id: int | None = None
    ) -> dict[str, Any]:
        new_id = message_id or snowflake()
        message: dict[str, Any] = {
            "id": str(new_id),
            "channel_id": "0",
            "type": 20,
            "content": data.get("content") or "",
            "embeds": list(data.get("embeds") or []),
            "components": list(data.get("components") or []),
            "flags": flags,
            "author": {
                "id": str(BOT_ID),
                "username": "learning-bot",
                "discriminator": "0",
                "avatar": None,
                "bot": True,
            },
            "attachments": [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "webhook_id": str(APPLICATION_ID),
            "application_id": str(APPLICATION_ID),
        }
        self.messages[new_id] = message
        return message

    def _update_message(
        self, message_id: int, data: Mapping[str, Any], *, edit: bool = True
    ) -> dict[str, Any]:
        message = self.messages[message_id]
        for key in ("content", "embeds", "components"):
            if key in data:
                value = data[key]
                message[key] = value if value is not None else ("" if key == "content" else [])
        message["flags"] &= ~LOADING
        if edit:
            message["edited_timestamp"] = _now_iso()
        return message

    async def _callback(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        if self.callback_delay:
            await asyncio.sleep(self.callback_delay)
        body = await self._body(request)
        state = self.interactions.get(int(request.match_info["id"]))
        if state is None or state.token != request.match_info["token"]:
            self._record(request, body, 404, at, "callback")
            return _json({"code": 10062, "message": "Unknown interaction"}, 404)
        if state.responses:
            self._record(request, body, 400, at, "callback", state)
            self.violations.append((request.path, ["already acknowledged"]))
            return _json(
                {"code": 40060, "message": "Interaction has already been acknowledged."}, 400
            )
        kind = int(body.get("type", 0)) if isinstance(body, dict) else 0
        data = (body or {}).get("data") or {}
        allowed = {2: (4, 5, 9), 3: (4, 5, 6, 7, 9), 4: (8,)}[state.type]
        errors = [] if kind in allowed else [f"response type {kind} for interaction {state.type}"]
        if kind in (4, 7):
            errors.extend(message_errors(data, edit=kind == 7))
        if kind == 8:
            errors.extend(choice_errors(data.get("choices")))
        if errors:
            self._record(request, body, 400, at, "callback", state)
            return self._reject(request.path, errors)
        self._record(request, body, 200, at, "callback", state)
        state.responses.append(body)
        flags = int(data.get("flags") or 0)
        response: dict[str, Any] = {
            "interaction": {
                "id": str(state.id),
                "type": state.type,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(flags & EPHEMERAL),
            },
            "resource": {"type": kind},
        }
        if kind in (4, 5):
            message = self._new_message(data, flags=flags | (LOADING if kind == 5 else 0))
            state.original_id = int(message["id"])
            state.loading = kind == 5
            state.deferred_flags = flags
            response["interaction"]["response_message_id"] = message["id"]
            response["resource"]["message"] = message
        elif kind in (6, 7) and state.message_id is not None:
            state.original_id = state.message_id
            if kind == 7 and state.message_id in self.messages:
                message = self._update_message(state.message_id, data)
                response["resource"]["message"] = message
            response["interaction"]["response_message_id"] = str(state.message_id)
        return _json(response)

    def _webhook_state(self, request: web.Request) -> InteractionState | None:
        if int(request.match_info["app"]) != APPLICATION_ID:
            return None
        return self.by_token.get(request.match_info["token"])

    async def _channel_post(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        body = await self._body(request)
        channel = request.match_info["channel"]
        if channel in self.forbidden_channels:
            self._record(request, body, 403, at, "channel", None)
            return _json({"code": 50001, "message": "Missing Access"}, 403)
        errors = message_errors(body or {})
        if errors:
            self._record(request, body, 400, at, "channel", None)
            return self._reject(request.path, errors)
        self._record(request, body, 200, at, "channel", None)
        self.channel_messages.append((channel, body))
        return _json(self._new_message(body, flags=0))

    async def _channel_edit(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        body = await self._body(request)
        message_id = int(request.match_info["message"])
        if message_id not in self.messages:
            self._record(request, body, 404, at, "channel-edit", None)
            return _json({"code": 10008, "message": "Unknown Message"}, 404)
        self._record(request, body, 200, at, "channel-edit", None)
        return _json(self._update_message(message_id, body))

    async def _followup(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        body = await self._body(request)
        state = self._webhook_state(request)
        if state is None or not state.responses:
            self._record(request, body, 404, at, "followup", state)
            return _json({"code": 10015, "message": "Unknown Webhook"}, 404)
        errors = message_errors(body or {})
        if errors:
            self._record(request, body, 400, at, "followup", state)
            return self._reject(request.path, errors)
        self._record(request, body, 200, at, "followup", state)
        if state.loading and state.original_id is not None:
            # The first follow-up after a "thinking..." defer replaces it, keeping its flags.
            state.loading = False
            message = self._update_message(state.original_id, body, edit=False)
        else:
            message = self._new_message(body, flags=int(body.get("flags") or 0))
        return _json(message)

    async def _edit(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        body = await self._body(request)
        state = self._webhook_state(request)
        target = request.match_info["message"]
        if state is None or not state.responses:
            self._record(request, body, 404, at, "edit", state)
            return _json({"code": 10015, "message": "Unknown Webhook"}, 404)
        message_id = state.original_id if target == "@original" else int(target)
        if message_id is None or message_id not in self.messages:
            self._record(request, body, 404, at, "edit", state)
            return _json({"code": 10008, "message": "Unknown Message"}, 404)
        errors = message_errors(body or {}, edit=True)
        if errors:
            self._record(request, body, 400, at, "edit", state)
            return self._reject(request.path, errors)
        self._record(request, body, 200, at, "edit", state)
        if target == "@original":
            state.loading = False
        return _json(self._update_message(message_id, body))

    async def _delete(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        state = self._webhook_state(request)
        target = request.match_info["message"]
        message_id = state.original_id if state and target == "@original" else None
        if target != "@original":
            message_id = int(target)
        if state is None or message_id is None or message_id not in self.messages:
            self._record(request, None, 404, at, "delete", state)
            return _json({"code": 10008, "message": "Unknown Message"}, 404)
        self._record(request, None, 204, at, "delete", state)
        self.messages.pop(message_id)
        if target == "@original":
            state.loading = False
            state.original_id = None
        return web.Response(status=204)

    async def _sync(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        body = await self._body(request)
        if not self._authorised(request):
            self._record(request, body, 401, at, "sync")
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        errors = command_errors(body)
        if errors:
            self._record(request, body, 400, at, "sync")
            return self._reject(request.path, errors)
        self._record(request, body, 200, at, "sync")
        guild = request.match_info.get("guild")
        guild_id = int(guild) if guild else None
        stored = [
            {
                **command,
                "id": str(COMMAND_ID + i),
                "application_id": str(APPLICATION_ID),
                "version": str(snowflake()),
                **({"guild_id": str(guild_id)} if guild_id else {}),
            }
            for i, command in enumerate(body)
        ]
        self.synced[guild_id] = stored
        return _json(stored)


# -- gateway payloads ----------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where an interaction happens: a guild and a channel (or thread) in it."""

    guild_id: int
    channel_id: int
    channel_type: int = 0  # 0 text channel, 11 public thread
    parent_id: int | None = None

    def channel(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.channel_id),
            "type": self.channel_type,
            "guild_id": str(self.guild_id),
            "name": "general" if self.channel_type == 0 else "a-thread",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": str(self.parent_id) if self.parent_id else None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }
        if self.channel_type == 11:
            data["owner_id"] = "1"
            data["thread_metadata"] = {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _now_iso(),
                "locked": False,
            }
            data["message_count"] = 0
            data["member_count"] = 1
        return data


def _base(kind: int, user: User, place: Place | None, interaction_id: int | None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": str(interaction_id or snowflake()),
        "application_id": str(APPLICATION_ID),
        "type": kind,
        "token": "aW50ZXJhY3Rpb246" + secrets.token_urlsafe(48),
        "version": 1,
        "locale": "en-US",
        "app_permissions": str(PERMISSIONS_MEMBER),
        "entitlements": [],
        "authorizing_integration_owners": {"0": str(place.guild_id) if place else "0"},
        "attachment_size_limit": 10 * 1024 * 1024,
    }
    if place is not None:
        payload.update(
            guild_id=str(place.guild_id),
            guild={"id": str(place.guild_id), "locale": "en-US", "features": []},
            guild_locale="en-US",
            channel_id=str(place.channel_id),
            channel=place.channel(),
            member=user.member(),
            context=0,
        )
    else:
        dm = snowflake()
        payload.update(
            channel_id=str(dm),
            channel={"id": str(dm), "type": 1, "last_message_id": None, "flags": 0},
            user=user.payload(),
            context=1,
        )
    return payload


def _option(name: str, value: Any, focused: bool = False) -> dict[str, Any]:
    if isinstance(value, bool):
        kind = 5
    elif isinstance(value, int):
        kind = 4
    else:
        kind = 3
    option: dict[str, Any] = {"name": name, "type": kind, "value": value}
    if focused:
        option["focused"] = True
    return option


def command_interaction(
    sub: str,
    options: Mapping[str, Any] | None = None,
    *,
    user: User,
    place: Place | None,
    interaction_id: int | None = None,
    focused: str | None = None,
    raw_options: Iterable[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """/learning <sub> with options, as INTERACTION_CREATE (type 2; 4 with `focused`)."""
    inner = (
        [dict(o) for o in raw_options]
        if raw_options is not None
        else [_option(k, v, k == focused) for k, v in (options or {}).items()]
    )
    payload = _base(4 if focused else 2, user, place, interaction_id)
    payload["data"] = {
        "id": str(COMMAND_ID),
        "name": "learning",
        "type": 1,
        "options": [{"name": sub, "type": 1, "options": inner}],
    }
    return payload


def autocomplete_interaction(
    sub: str, option: str, typed: str, *, user: User, place: Place, **others: Any
) -> dict[str, Any]:
    return command_interaction(
        sub, {**others, option: typed}, user=user, place=place, focused=option
    )


def component_interaction(
    message: Mapping[str, Any],
    custom_id: str,
    *,
    user: User,
    place: Place,
    interaction_id: int | None = None,
) -> dict[str, Any]:
    """A button click on `message` (a message this server stored), as INTERACTION_CREATE."""
    payload = _base(3, user, place, interaction_id)
    payload["message"] = {**message, "channel_id": str(place.channel_id)}
    payload["data"] = {"custom_id": custom_id, "component_type": 2}
    return payload
