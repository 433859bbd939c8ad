"""A small local stand-in for Slack: the Web API (auth.test, users.info, chat.postMessage,
oauth.v2.access, apps.connections.open), response_url endpoints and a Socket Mode WebSocket.
It records every call so tests can see what the app sent."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web


@dataclass
class ApiCall:
    method: str
    params: dict[str, Any]
    token: str | None


@dataclass
class Posted:
    """One POST to a response_url."""

    path: str
    body: dict[str, Any]


@dataclass
class FakeSlack:
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    users_info_error: str | None = None
    uploads: dict[str, bytes] = field(default_factory=dict)
    """file id -> the bytes uploaded to its files.getUploadURLExternal address."""
    channel_errors: dict[str, str] = field(default_factory=dict)
    """channel id -> the error chat.postMessage answers there (e.g. not_in_channel)."""
    calls: list[ApiCall] = field(default_factory=list)
    posted: list[Posted] = field(default_factory=list)
    socket_replies: list[dict[str, Any]] = field(default_factory=list)
    team_id: str = "T1"
    base: str = ""
    _runner: web.AppRunner | None = None
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _changed: asyncio.Condition | None = None

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def response_url(self, key: str) -> str:
        return f"{self.base}/response/{key}"

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._changed = asyncio.Condition()
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        app.router.add_post("/upload/{file}", self._upload)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base = f"http://{host}:{port}"

    async def stop(self) -> None:
        for ws in self._sockets:
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def wait_until(self, check: Callable[[], bool], timeout: float = 120.0) -> None:
        """Wait until `check()` holds (something arrived), or fail after `timeout` seconds."""
        assert self._changed is not None
        deadline = time.monotonic() + timeout
        async with self._changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out waiting for Slack traffic")
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    continue

    async def next_post(self, key: str, count: int = 1, timeout: float = 120.0) -> Posted:
        """The `count`-th post to the response_url named `key`."""
        await self.wait_until(lambda: len(self.posts(key)) >= count, timeout)
        return self.posts(key)[count - 1]

    def posts(self, key: str) -> list[Posted]:
        return [p for p in self.posted if p.path == f"/response/{key}"]

    def api(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    # -- Web API -------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST":
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(dict(await request.post()))
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        self.calls.append(ApiCall(method, params, token))
        body = self._answer(method, params)
        await self._notify()
        return web.json_response(body)

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://example.slack.com/",
                "team": "Example",
                "user": "learning-bot",
                "team_id": self.team_id,
                "user_id": "U-bot",
                "bot_id": "B-bot",
                "is_enterprise_install": False,
            }
        if method == "users.info":
            if self.users_info_error:
                return {"ok": False, "error": self.users_info_error}
            user = self.users.get(str(params.get("user")))
            if user is None:
                return {"ok": False, "error": "user_not_found"}
            return {"ok": True, "user": user}
        if method in ("chat.postMessage", "chat.update"):
            channel = str(params.get("channel"))
            if channel in self.channel_errors:
                return {"ok": False, "error": self.channel_errors[channel]}
            ts = params.get("ts") if method == "chat.update" else f"{time.time():.6f}"
            return {"ok": True, "channel": channel, "ts": ts}
        if method == "files.getUploadURLExternal":
            file_id = f"F{len(self.uploads) + 1}"
            self.uploads[file_id] = b""
            return {"ok": True, "upload_url": f"{self.base}/upload/{file_id}", "file_id": file_id}
        if method == "files.completeUploadExternal":
            channel = str(params.get("channel_id"))
            if channel in self.channel_errors:
                return {"ok": False, "error": self.channel_errors[channel]}
            files = params.get("files")
            return {"ok": True, "files": json.loads(files) if isinstance(files, str) else files}
        if method == "oauth.v2.access":
            return {
                "ok": True,
                "app_id": "A-app",
                "authed_user": {"id": "U-admin"},
                "scope": "commands,chat:write,users:read",
                "token_type": "bot",
                "access_token": "xoxb-installed",
                "bot_user_id": "U-bot2",
                "team": {"id": "T-new", "name": "New Team"},
                "enterprise": None,
                "is_enterprise_install": False,
            }
        if method == "apps.connections.open":
            return {"ok": True, "url": self.base.replace("http://", "ws://") + "/socket"}
        return {"ok": False, "error": "unknown_method"}

    # -- response_url --------------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        self.uploads[request.match_info["file"]] = await request.read()
        await self._notify()
        return web.Response(text="OK - 1")

    async def _response(self, request: web.Request) -> web.Response:
        self.posted.append(Posted(request.path, await request.json()))
        await self._notify()
        return web.Response(text="ok")

    # -- Socket Mode ---------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json(
            {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A-app"}}
        )
        await self._notify()
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                self.socket_replies.append(json.loads(message.data))
                await self._notify()
        return ws

    async def send_envelope(self, envelope: dict[str, Any]) -> None:
        await self.wait_until(lambda: bool(self._sockets))
        await self._sockets[-1].send_json(envelope)
