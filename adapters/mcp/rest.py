"""The `/v1` REST routes OpenClaw's gateway calls when its learning backend is reached over
HTTP (`learning.qortex.transport: "http"`): each POST body is the tool's arguments as JSON,
each answer the tool's result as JSON, a failure a non-2xx `{error}`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from learning_bot.adapters.mcp.tools import LearningTools, ToolFailed, strict_json
from learning_bot.bot.errors import error_kind, user_message
from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.errors import InvalidInput

Guard = Callable[[Request], Response | None]
"""Refuses a request (a JSON error response) or lets it through (None)."""


ReadArguments = Callable[[Request, str], Awaitable[dict[str, Any]]]
"""Reads a POST body as the tool's arguments for a route name (`v1/select`, ...): a JSON
object held to that route's fields, or an exception whose `status` (a 4xx int) and message
are the answer. The composition root gives the learning API's body reader, so both APIs
read bodies alike: the same size limit, deadline, JSON rules and unknown-field refusals."""


def _arm_ids(request: Request) -> list[str] | None:
    """`?arm_ids=`, repeated (`arm_ids=a&arm_ids=b`, or `arm_ids[]=a&arm_ids[]=b` as query
    string libraries write an array), comma-separated (`arm_ids=a,b`, as a JavaScript client
    turns an array into a string) or a JSON array (`arm_ids=["a","b"]`); None (every arm)
    when absent. A value is read as a list only when each of its comma-separated parts is an
    arm id, since an arm id's name may itself contain a comma."""
    query = request.query_params
    values = query.getlist("arm_ids") + query.getlist("arm_ids[]")
    if not values:
        return None
    ids: list[str] = []
    for value in values:
        listed = _json_list(value)
        if listed is not None:
            ids.extend(listed)
            continue
        parts = value.split(",")
        ids.extend(parts if len(parts) > 1 and all(map(_is_arm_id, parts)) else [value])
    return ids


def _json_list(value: str) -> list[str] | None:
    """The strings of a JSON array of strings, or None when `value` is not one."""
    if not value.startswith("["):
        return None
    try:
        items = json.loads(value)
    except ValueError:
        return None
    if isinstance(items, list) and all(isinstance(item, str) for item in items):
        return items
    return None


def _is_arm_id(text: str) -> bool:
    try:
        parse_arm_id(text)
    except InvalidInput:
        return False
    return True


def rest_routes(tools: LearningTools, guard: Guard, read: ReadArguments) -> list[BaseRoute]:
    """GET /v1/health and the learning routes; the POSTs (they write) go through `guard`
    (the learning API's rules for writes) and `read_body` (its body rules), the reads are
    open like the learning API's. Answers are strict JSON (`strict_json`)."""

    def endpoint(
        work: Callable[[Request, dict[str, Any]], Any], *, body: str = "", guarded: bool = True
    ) -> Callable[[Request], Awaitable[Response]]:
        """`body`: the route's name for `read` (empty: the route takes no body)."""

        async def handle(request: Request) -> Response:
            if guarded:
                refused = guard(request)
                if refused is not None:
                    return refused
            try:
                data = await read(request, body) if body else {}
            except Exception as exc:
                status = getattr(exc, "status", None)
                if not isinstance(status, int) or not 400 <= status < 500:
                    raise
                return JSONResponse({"error": str(exc)}, status_code=status)
            try:
                result = await anyio.to_thread.run_sync(work, request, data)
            except ToolFailed as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status)
            except Exception as exc:
                kind = error_kind(exc)
                if kind.code == "internal":
                    raise
                return JSONResponse({"error": user_message(exc)}, status_code=kind.http_status)
            return JSONResponse(strict_json(result))

        return handle

    def health(_: Request, __: dict[str, Any]) -> Any:
        return {"status": "ok"}

    def select(_: Request, d: dict[str, Any]) -> Any:
        return tools.select(
            d.get("learner"),
            d.get("candidates"),
            d.get("context"),
            d.get("k", 0),
            d.get("token_budget", 0),
            d.get("min_pulls", 0),
            d.get("seed_arms"),
            d.get("seed_boost"),
        )

    def observe(_: Request, d: dict[str, Any]) -> Any:
        outcome = d.get("outcome", "")
        return tools.observe(
            d.get("learner"),
            d.get("arm_id"),
            outcome,
            d.get("reward"),
            d.get("context"),
            d.get("loaded"),
        )

    def posteriors(request: Request, _: dict[str, Any]) -> Any:
        return tools.posteriors(request.path_params["learner"], None, _arm_ids(request))

    def metrics(request: Request, _: dict[str, Any]) -> Any:
        raw = request.query_params.get("window")
        window: Any = None
        if raw not in (None, "", "null"):
            try:
                window = int(str(raw))
            except ValueError:
                window = raw
        return tools.metrics(request.path_params["learner"], window)

    def reset(_: Request, d: dict[str, Any]) -> Any:
        return tools.reset(d.get("learner"), d.get("arm_ids"), d.get("context"))

    def start(_: Request, d: dict[str, Any]) -> Any:
        return tools.session_start(d.get("learner"), d.get("session_name"))

    def end(_: Request, d: dict[str, Any]) -> Any:
        return tools.session_end(d.get("session_id"))

    get, post = ("GET",), ("POST",)
    return [
        Route("/v1/health", endpoint(health, guarded=False), methods=get),
        Route("/v1/learning/select", endpoint(select, body="v1/select"), methods=post),
        Route("/v1/learning/observe", endpoint(observe, body="v1/observe"), methods=post),
        Route("/v1/learning/reset", endpoint(reset, body="v1/reset"), methods=post),
        Route(
            "/v1/learning/sessions/start",
            endpoint(start, body="v1/sessions/start"),
            methods=post,
        ),
        Route("/v1/learning/sessions/end", endpoint(end, body="v1/sessions/end"), methods=post),
        Route(
            "/v1/learning/{learner}/posteriors",
            endpoint(posteriors, guarded=False),
            methods=get,
        ),
        Route(
            "/v1/learning/{learner}/metrics",
            endpoint(metrics, guarded=False),
            methods=get,
        ),
    ]
