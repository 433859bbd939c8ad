"""The ASGI application: the API routes, the dashboard, the OpenAPI document, and room for the
chat surfaces' HTTP endpoints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from learning_bot.adapters.http.access import RequestLog
from learning_bot.adapters.http.api import BASE, Api
from learning_bot.adapters.http.docs_page import docs_html
from learning_bot.adapters.http.metrics import CONTENT_TYPE, HttpMetrics
from learning_bot.adapters.http.openapi import openapi_document
from learning_bot.adapters.http.settings import HttpSettings
from learning_bot.bot.bus import CommandBus

READ = ("GET",)
WRITE = ("POST",)


def dashboard_html(refresh_seconds: int = 30) -> str:
    page = (
        resources.files("learning_bot.adapters.http").joinpath("dashboard.html").read_text("utf-8")
    )
    return page.replace("__REFRESH_SECONDS__", str(int(refresh_seconds)))


Endpoint = Callable[[Request], Awaitable[Response]]


class DirectRoutes:
    """The ASGI application `create_app` returns. `POST select` and `POST observe`, which an
    agent runtime calls around every model request, go straight to their handlers (`select`
    to `Api.fast_select`, which writes the ASGI messages itself; `observe` to the endpoint its
    Starlette route uses); every other request goes through Starlette's routing and
    middleware. With CORS origins configured everything goes through Starlette, whose CORS
    middleware adds the headers."""

    def __init__(self, app: ASGIApp, direct: Mapping[str, ASGIApp]) -> None:
        self.app = app
        self.direct = dict(direct)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            app = self.direct.get(scope["path"])
            if app is not None:
                await app(scope, receive, send)
                return
        await self.app(scope, receive, send)


def endpoint_app(endpoint: Endpoint) -> ASGIApp:
    """An endpoint (Request -> Response) as an ASGI application."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await endpoint(Request(scope, receive, send))
        await response(scope, receive, send)

    return app


DASHBOARD_CSP = (
    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'"
)
DOCS_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _page(html: str, headers: Mapping[str, str]) -> Endpoint:
    """An endpoint answering `html` with `headers`."""

    async def page(_: Request) -> Response:
        return HTMLResponse(html, headers=dict(headers))

    return page


def create_app(
    bus: CommandBus, settings: HttpSettings | None = None, extra_routes: Sequence[object] = ()
) -> ASGIApp:
    """The ASGI application serving the learning API under BASE (Starlette, behind
    `DirectRoutes`)."""
    settings = settings or HttpSettings()
    api = Api(bus, settings)
    spec = openapi_document()
    dashboard = _page(
        dashboard_html(settings.refresh_seconds),
        {"Content-Security-Policy": DASHBOARD_CSP, "Cache-Control": "no-store"},
    )
    # The OpenAPI document as a page of our own (no script, nothing from elsewhere).
    docs = _page(docs_html(spec), {"Content-Security-Policy": DOCS_CSP})

    async def openapi(_: Request) -> Response:
        return JSONResponse(spec)

    async def root(_: Request) -> Response:
        return RedirectResponse(f"{BASE}/dashboard")

    metrics = HttpMetrics(lambda: bus.services.get(bus.settings.default_learner, create=False))

    async def prometheus(_: Request) -> Response:
        return Response(await api.call(metrics.exposition), media_type=CONTENT_TYPE)

    select = api.handler(api.select, mutating=True)
    observe = api.handler(api.observe, mutating=True)
    routes: list[BaseRoute] = [
        Route(f"{BASE}/dashboard", dashboard, methods=READ),
        Route(f"{BASE}/openapi.json", openapi, methods=READ),
        Route(f"{BASE}/docs", docs, methods=READ),
        Route(f"{BASE}/summary", api.handler(api.summary), methods=READ),
        Route(f"{BASE}/metrics", api.handler(api.summary), methods=READ),
        Route(f"{BASE}/config", api.handler(api.config), methods=READ),
        Route(f"{BASE}/posteriors", api.handler(api.posteriors), methods=READ),
        Route(f"{BASE}/arms/{{arm_id:path}}", api.handler(api.arm), methods=READ),
        Route(f"{BASE}/traces", api.handler(api.traces), methods=READ),
        Route(f"{BASE}/timeseries", api.handler(api.timeseries), methods=READ),
        Route(f"{BASE}/healthz", api.handler(api.healthz), methods=READ),
        Route(f"{BASE}/learners", api.handler(api.learners), methods=READ),
        Route(f"{BASE}/select", select, methods=WRITE),
        Route(f"{BASE}/observe", observe, methods=WRITE),
        Route(f"{BASE}/reward", api.handler(api.reward, mutating=True), methods=WRITE),
        Route(f"{BASE}/reset", api.handler(api.reset, mutating=True), methods=WRITE),
        Route(f"{BASE}/reset/undo", api.handler(api.undo_reset, mutating=True), methods=WRITE),
        Route(f"{BASE}/phase", api.handler(api.phase_view), methods=READ),
        Route(f"{BASE}/phase", api.handler(api.phase, mutating=True), methods=WRITE),
        Route(f"{BASE}/settings", api.handler(api.learner_settings, mutating=True), methods=WRITE),
        Route(f"{BASE}/command", api.handler(api.command, mutating=True), methods=WRITE),
        Route("/", root, methods=READ),
        Route("/metrics", prometheus, methods=READ),
        Route("/livez", api.handler(api.livez), methods=READ),
        Route("/readyz", api.handler(api.readyz), methods=READ),
        *(route for route in extra_routes if isinstance(route, BaseRoute)),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 405:
            return JSONResponse(
                {"error": f"Method {request.method} not allowed here"},
                status_code=405,
                headers=dict(exc.headers or {}) if isinstance(exc, HTTPException) else None,
            )
        if request.url.path.startswith(BASE):
            return JSONResponse({"error": "Unknown learning API route"}, status_code=404)
        return JSONResponse({"error": "Not found"}, status_code=404)

    middleware = []
    if settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: not_found, 405: not_found},
    )
    direct: dict[str, ASGIApp] = {
        f"{BASE}/select": api.fast_select,
        f"{BASE}/observe": endpoint_app(observe),
    }
    templates = {route.endpoint: route.path for route in routes if isinstance(route, Route)}

    def template(scope: Scope) -> str | None:
        """The matched route's path (a direct route's is its own path)."""
        endpoint = scope.get("endpoint")
        if endpoint is not None:
            return templates.get(endpoint)
        return scope["path"] if scope["path"] in direct else None

    def logged(inner: ASGIApp) -> ASGIApp:
        return RequestLog(inner, metrics, template)

    if settings.cors_origins:
        return logged(app)
    return DirectRoutes(logged(app), {path: logged(each) for path, each in direct.items()})
