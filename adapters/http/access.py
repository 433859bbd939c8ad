"""One access-log line and one metrics sample per HTTP request, by route template (Starlette's
matched route, not the raw path, so ids in paths do not multiply the series)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from learning_bot.adapters.http.metrics import HttpMetrics

log = logging.getLogger("learning_bot.access")

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404)."""


class RequestLog:
    """ASGI middleware around the whole application: times each HTTP request, then logs it on
    `learning_bot.access` (INFO: method, path, status, ms) and counts it in `metrics`."""

    def __init__(
        self, app: ASGIApp, metrics: HttpMetrics, template: Callable[[Scope], str | None]
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.template = template

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = self.template(scope) or UNMATCHED
            method, path = scope["method"], scope["path"]
            self.metrics.record(route, method, status, seconds)
            if log.isEnabledFor(logging.INFO):
                ms = round(seconds * 1000, 2)
                log.info(
                    "%s %s %d %.2fms",
                    method,
                    path,
                    status,
                    ms,
                    extra={"method": method, "path": path, "status": status, "ms": ms},
                )
