"""A small local stand-in for Discord's gateway WebSocket, beside the fake REST API the Discord
tests use (`tests.adapters.discord.fake_discord.FakeDiscord`).

It speaks the part of the protocol a bot needs: HELLO, IDENTIFY (token checked), READY with no
guilds, heartbeats acknowledged, and DISPATCH events the test sends (INTERACTION_CREATE) in plain
JSON text frames, which discord.py reads whatever compression it asked for.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

from aiohttp import WSMsgType, web

from tests.adapters.discord.fake_discord import APPLICATION_ID, BOT_ID, BOT_TOKEN

HELLO, IDENTIFY, HEARTBEAT, HEARTBEAT_ACK, DISPATCH = 10, 2, 1, 11, 0
AUTHENTICATION_FAILED = 4004


class FakeGateway:
    """One bot connection at a time; `identified` is set once READY went out."""

    def __init__(self) -> None:
        self.url = ""
        self.identified = asyncio.Event()
        self.identify: dict[str, Any] | None = None
        self.close_codes: list[int | None] = []
        self._socket: web.WebSocketResponse | None = None
        self._sequence = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/", self._connect)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"ws://{host}:{port}/"
        return self.url

    async def close(self) -> None:
        if self._socket is not None and not self._socket.closed:
            await self._socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send one DISPATCH event to the identified bot."""
        await asyncio.wait_for(self.identified.wait(), 120)
        assert self._socket is not None and not self._socket.closed, "the bot disconnected"
        await self._send(self._socket, DISPATCH, data, event)

    async def _send(
        self, ws: web.WebSocketResponse, op: int, data: Any, event: str | None = None
    ) -> None:
        sequence = None
        if op == DISPATCH:
            self._sequence += 1
            sequence = self._sequence
        await ws.send_str(json.dumps({"op": op, "d": data, "s": sequence, "t": event}))

    async def _connect(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await self._send(ws, HELLO, {"heartbeat_interval": 41_250})
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            if frame.get("op") == HEARTBEAT:
                await self._send(ws, HEARTBEAT_ACK, None)
            elif frame.get("op") == IDENTIFY:
                self.identify = frame.get("d") or {}
                if self.identify.get("token") != BOT_TOKEN:
                    await ws.close(code=AUTHENTICATION_FAILED, message=b"Authentication failed.")
                    break
                self._socket = ws
                await self._send(ws, DISPATCH, self._ready(), "READY")
                self.identified.set()
        self.close_codes.append(ws.close_code)
        return ws

    def _ready(self) -> dict[str, Any]:
        return {
            "v": 10,
            "user": {
                "id": str(BOT_ID),
                "username": "learning-bot",
                "discriminator": "0",
                "global_name": None,
                "avatar": None,
                "bot": True,
                "flags": 0,
                "verified": True,
                "mfa_enabled": False,
            },
            "guilds": [],
            "session_id": secrets.token_hex(16),
            "resume_gateway_url": self.url,
            "application": {"id": str(APPLICATION_ID), "flags": 0},
            "shard": [0, 1],
        }
