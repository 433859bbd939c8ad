"""Socket Mode: Slack delivers commands and clicks over a WebSocket the app opens, so no public
URL is needed (SLACK_APP_TOKEN, an app-level token with `connections:write`)."""

from __future__ import annotations

import asyncio

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp


async def start_socket_mode(app: AsyncApp, app_token: str) -> AsyncSocketModeHandler:
    """Connect (apps.connections.open, then the WebSocket) and return the running handler;
    `await handler.close_async()` stops it."""
    handler = AsyncSocketModeHandler(app, app_token)
    # Ask for the WebSocket URL once here, so a refused app token raises at once (the
    # client's own connect retries every error, a refused token included, forever).
    handler.client.wss_uri = await handler.client.issue_new_wss_url()
    await handler.connect_async()  # type: ignore[no-untyped-call]  # unannotated in bolt
    return handler


async def run_socket_mode(app: AsyncApp, app_token: str) -> None:
    """Serve over Socket Mode until cancelled."""
    handler = await start_socket_mode(app, app_token)
    try:
        await asyncio.Event().wait()
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]  # unannotated in bolt
