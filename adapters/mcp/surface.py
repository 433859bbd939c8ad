"""The MCP surface in `learning-bot serve`: MCP over Streamable HTTP at `/mcp` (stateless, so
an idle client or a server restart never strands a session) and the `/v1` REST routes, both
behind the guard of the server's writes (Host, Origin, content type, bearer token), which the
composition root hands in; and `serve_stdio` for `learning-bot mcp`.

`run()` holds the SDK's session manager open for as long as the server runs (a route inside
another Starlette app never gets its own lifespan), and `/mcp` requests wait until it is.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from learning_bot.adapters.mcp.rest import Guard, ReadArguments, rest_routes
from learning_bot.adapters.mcp.tools import LearningTools

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

MCP_PATH = "/mcp"
READY_SECONDS = 10.0


class _McpEndpoint:
    """The `/mcp` ASGI endpoint: the guard, then the SDK's Streamable HTTP app once `run()`
    has started its session manager."""

    def __init__(self, surface: McpSurface) -> None:
        self.surface = surface

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        surface = self.surface
        if scope["method"] == "GET":
            # The stream a GET opens carries what a server sends unasked; a stateless server
            # never does, so the MCP spec's other answer: 405 (no stream held open).
            await JSONResponse(
                {"error": "GET /mcp opens no stream here: this server is stateless; POST calls"},
                status_code=405,
                headers={"Allow": "POST, DELETE"},
            )(scope, receive, send)
            return
        refused = surface.guard(Request(scope, receive))
        if refused is not None:
            await refused(scope, receive, send)
            return
        try:
            await asyncio.wait_for(surface.ready.wait(), READY_SECONDS)
        except TimeoutError:
            await JSONResponse({"error": "the MCP endpoint is not running"}, status_code=503)(
                scope, receive, send
            )
            return
        await surface.mcp_app(scope, receive, send)


class McpSurface:
    """`/mcp` and `/v1/...` in `learning-bot serve` (a `bot.surface.Surface`)."""

    name = "mcp"

    def __init__(
        self,
        tools: LearningTools,
        *,
        guard: Guard,
        read_arguments: ReadArguments,
        max_body_bytes: int = 4 * 1024 * 1024,
        version: str = "",
    ) -> None:
        # The SDK (about half a second of imports) is loaded in run(), after the server has
        # installed its signal handlers; /mcp requests wait until it is ready.
        self._tools = tools
        self._version = version
        self._max_body_bytes = max_body_bytes
        self.mcp_app: Any = None
        self.guard = guard
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._routes: list[BaseRoute] = [
            Route(MCP_PATH, _McpEndpoint(self), methods=["GET", "POST", "DELETE"]),
            *rest_routes(tools, self.guard, read_arguments),
        ]

    @property
    def routes(self) -> Sequence[object]:
        return self._routes

    def _build(self) -> MCPServer:
        from mcp.server.transport_security import TransportSecuritySettings

        from learning_bot.adapters.mcp.server import build_server

        server = build_server(self._tools, version=self._version)
        self.mcp_app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=self._max_body_bytes,
            # Host and Origin are checked by `guard` with the rest of the API's rules.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return server

    async def run(self) -> None:
        server = await anyio.to_thread.run_sync(self._build)  # imports off the event loop
        async with server.session_manager.run():
            self.ready.set()
            try:
                await self._stop.wait()
            finally:
                self.ready.clear()

    async def stop(self) -> None:
        self._stop.set()


async def serve_stdio(server: MCPServer, shutdown: Callable[[], None]) -> None:
    """Serve MCP over stdin/stdout until stdin closes, SIGTERM or SIGINT. Every answered call
    has committed already; `shutdown` closes storage (flushing any batched write).

    On a signal the process ends right after `shutdown`: the SDK reads stdin in a worker
    thread that no cancellation can interrupt, so waiting for it would wait for the client to
    close stdin, which a client sending SIGTERM does not do."""
    async with anyio.create_task_group() as group:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    try:
                        shutdown()
                    finally:
                        os._exit(0)

        group.start_soon(on_signal)
        await server.run_stdio_async()
        group.cancel_scope.cancel()
