"""`GET traces` sent in pieces as they are read, and the bound on streamed answers sent at once:
beyond LEARNING_BOT_MAX_STREAMS a request is answered 503 with Retry-After, and the slot comes
back when a stream ends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from learning_bot.adapters.http import HttpSettings, create_app
from learning_bot.adapters.http.responses import ENCODER
from learning_bot.adapters.http.settings import http_settings
from learning_bot.app import build_app
from learning_bot.bot.shapes import trace_json
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.errors import InvalidConfig
from learning_bot.settings import Settings
from learning_bot.storage.reads import BYTES_PER_ARM, BYTES_PER_TRACE

BASE = "/__openclaw__/api/learning"
ARMS = [Arm(f"tool:s:T{i}", 10) for i in range(20)]


def scope(query: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"{BASE}/traces",
        "raw_path": f"{BASE}/traces".encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"127.0.0.1:8787")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8787),
    }


class Exchange:
    """One request through the ASGI app; with `hold`, its first body piece waits for it."""

    def __init__(self, hold: asyncio.Event | None = None) -> None:
        self.hold = hold
        self.status = 0
        self.headers: dict[str, str] = {}
        self.pieces: list[bytes] = []
        self.sending = asyncio.Event()

    async def run(self, app: Any, query: str) -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
                return
            if message.get("body"):
                self.pieces.append(message["body"])
            self.sending.set()
            if self.hold is not None:
                await self.hold.wait()

        await app(scope(query), receive, send)

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)


def test_traces_stream_in_pieces_and_streams_beyond_the_limit_wait(tmp_path: Path) -> None:
    app = build_app(
        Settings(
            database_url=f"sqlite:///{tmp_path}/s.sqlite",
            config=LearningConfig(phase=Phase.ACTIVE),
            cache_ttl=0.0,
        )
    )
    try:
        service = app.service(create=True)
        for i in range(12):
            service.observe(
                RunReport(
                    trace_id=f"=HYPERLINK(t{i})",
                    arms=tuple(ReportedArm(a) for a in ARMS),
                    tool_calls=(ToolCall("T1"),),
                    channel="C",
                )
            )
        # about three traces to a piece
        app.store.piece_bytes = 3 * (BYTES_PER_TRACE + len(ARMS) * BYTES_PER_ARM) + 100  # type: ignore[attr-defined]
        asgi = create_app(app.bus, HttpSettings(max_streams=1))
        page, total = service.traces(limit=1000)
        whole = ENCODER.encode({"traces": [trace_json(t) for t in page], "total": total})

        async def scenario() -> tuple[Exchange, Exchange, Exchange, Exchange]:
            hold = asyncio.Event()
            first = Exchange(hold)
            task = asyncio.create_task(first.run(asgi, "limit=1000"))
            await asyncio.wait_for(first.sending.wait(), 120)
            refused = Exchange()
            await refused.run(asgi, "limit=5")
            hold.set()
            await asyncio.wait_for(task, 120)
            again, small = Exchange(), Exchange()
            await again.run(asgi, "limit=1000")
            await small.run(asgi, "limit=2&offset=1")
            return first, refused, again, small

        first, refused, again, small = asyncio.run(scenario())
        assert first.status == 200 and first.headers["content-type"] == "application/json"
        assert len(first.pieces) >= 5  # the head, four pieces of traces, the tail
        assert first.body == whole.encode()
        assert refused.status == 503 and refused.headers["retry-after"] == "1"
        assert "retry" in refused.body.decode()
        assert again.status == 200 and again.body == first.body  # the slot came back
        # a page that fits one piece is answered whole, with its length
        assert small.status == 200 and "content-length" in small.headers
        expected = ENCODER.encode({"traces": [trace_json(t) for t in page[1:3]], "total": 12})
        assert small.body == expected.encode()
    finally:
        app.close()


def test_the_limit_is_a_setting() -> None:
    assert http_settings({}).max_streams == 8
    assert http_settings({"LEARNING_BOT_MAX_STREAMS": "3"}).max_streams == 3
    for bad in ("0", "x", "1001"):
        with pytest.raises(InvalidConfig, match="LEARNING_BOT_MAX_STREAMS"):
            http_settings({"LEARNING_BOT_MAX_STREAMS": bad})
