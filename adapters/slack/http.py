"""HTTP mode: the Starlette routes Slack posts to, for mounting on the project's ASGI server
(or serving on their own with `create_asgi_app`)."""

from __future__ import annotations

import json

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

EVENTS_PATH = "/slack/events"


def slack_routes(app: AsyncApp, path: str = EVENTS_PATH, *, events: bool = True) -> list[BaseRoute]:
    """POST `path` for slash commands and button clicks (the Request URL and the
    Interactivity URL of the Slack app), plus the install and redirect pages of the OAuth flow
    when it is on. Slack's signature is checked by the app (401 when it does not match, or
    when the timestamp is not a number); a body that does not parse as Slack's JSON or form is
    a 400.
    `events=False` leaves out POST `path` (Socket Mode delivers those over its WebSocket)."""
    handler = AsyncSlackRequestHandler(app)

    async def endpoint(request: Request) -> Response:
        stamp = request.headers.get("x-slack-request-timestamp")
        if stamp is not None and not (stamp.isascii() and stamp.strip().isdigit()):
            return Response("invalid request timestamp", status_code=401)
        try:
            return await handler.handle(request)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return Response("the request body is not what Slack sends", status_code=400)

    routes: list[BaseRoute] = []
    if events:
        routes.append(Route(path, endpoint, methods=["POST"], name="slack_events"))
    flow = app.oauth_flow
    if flow is not None:
        routes.append(Route(flow.install_path, endpoint, methods=["GET"], name="slack_install"))
        routes.append(
            Route(flow.redirect_uri_path, endpoint, methods=["GET"], name="slack_oauth_redirect")
        )
    return routes


def create_asgi_app(app: AsyncApp, path: str = EVENTS_PATH) -> Starlette:
    """A Starlette application serving only the Slack routes."""
    return Starlette(routes=slack_routes(app, path))
