"""The learning layer's HTTP API (SPEC section 9): the original paths and camelCase fields,
plus select/observe for agent runtimes and phase changes."""

from __future__ import annotations

import hmac
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.app import App
from bot.bus import Actor, Invocation
from bot.commands import PhaseCommand, ResetCommand
from bot.replies import Reply, ReplyKind
from engine.config import Phase
from engine.errors import (
    Ambiguous,
    Forbidden,
    InvalidInput,
    LearningError,
    NotFound,
    Unavailable,
)
from engine.service import LearningService
from engine.wire import arms_from_list, report_from_dict, trace_to_dict

BASE = "/__openclaw__/api/learning"
API_ACTOR = Actor("api", "api", is_admin=True)
MAX_BATCH = 1000


@dataclass(frozen=True)
class HttpSettings:
    api_token: str | None = None
    """Bearer token required on mutating routes; None leaves them open (loopback only)."""
    max_body_bytes: int = 4 * 1024 * 1024
    cors_origins: tuple[str, ...] = ()
    refresh_seconds: int = 30


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


class Api:
    """Route handlers bound to the application and its settings."""

    def __init__(self, app: App, settings: HttpSettings) -> None:
        self.app = app
        self.settings = settings

    # -- plumbing ------------------------------------------------------------------------------

    def service(self, request: Request) -> LearningService:
        learner = request.query_params.get("learner") or self.app.settings.learner
        if len(learner) > 128:
            raise ApiError(400, "learner must be at most 128 characters")
        return self.app.service(learner)

    def authorise(self, request: Request) -> None:
        token = self.settings.api_token
        if token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            raise ApiError(401, "a valid bearer token is required (Authorization: Bearer ...)")

    async def body(self, request: Request) -> Any:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise ApiError(400, "Content-Length must be a number")
            if int(declared) > limit:
                raise ApiError(413, f"request body is larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body is larger than {limit} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            return json.loads(raw, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, f"the body is not valid JSON: {str(exc)[:120]}") from None

    def handler(
        self, fn: Callable[[Request], Awaitable[Any]], *, mutating: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                if mutating:
                    self.authorise(request)
                result = await fn(request)
            except ApiError as exc:
                return error(exc.status, str(exc), **exc.extra)
            except Unavailable as exc:
                return error(503, f"storage is unavailable; try again shortly ({exc})")
            except Ambiguous as exc:
                return error(400, str(exc), candidates=list(exc.candidates))
            except NotFound as exc:
                return error(404, str(exc))
            except Forbidden as exc:
                return error(403, str(exc))
            except InvalidInput as exc:
                return error(400, str(exc))
            except LearningError as exc:
                return error(409, str(exc))
            if isinstance(result, Response):
                return result
            return JSONResponse(result)

        return endpoint

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await run_in_threadpool(fn, *args, **kwargs)

    # -- reading -------------------------------------------------------------------------------

    async def summary(self, request: Request) -> Any:
        service = self.service(request)
        return (await self.call(service.summary)).to_dict()

    async def config(self, request: Request) -> Any:
        service = self.service(request)
        await self.call(service.refresh)
        data = service.config.to_dict()
        data.pop("metaTools", None)
        return data

    async def posteriors(self, request: Request) -> Any:
        service = self.service(request)
        views = await self.call(service.posteriors)
        return [v.to_dict() for v in views]

    async def traces(self, request: Request) -> Any:
        service = self.service(request)
        limit = _int_param(request, "limit", 100, 1, 1000)
        offset = _int_param(request, "offset", 0, 0, 10**12)
        page, total = await self.call(service.traces, limit, offset)
        return {"traces": [trace_to_dict(t) for t in page], "total": total}

    async def timeseries(self, request: Request) -> Any:
        service = self.service(request)
        metric = request.query_params.get("metric", "tokens")
        window = request.query_params.get("window", "1h")
        if metric not in ("tokens", "convergence"):
            raise ApiError(400, "metric must be tokens or convergence")
        if window not in ("1h", "1d"):
            raise ApiError(400, "window must be 1h or 1d")
        buckets = await self.call(service.timeseries, metric, window)
        out = []
        for b in buckets:
            item: dict[str, Any] = {"t": b.t, "value": b.value}
            if b.arm_id is not None:
                item["armId"] = b.arm_id
            out.append(item)
        return {"buckets": out}

    async def healthz(self, request: Request) -> Any:
        service = self.service(request)
        try:
            await self.call(service.refresh, True)
        except Unavailable as exc:
            return JSONResponse({"ok": False, "database": str(exc)}, status_code=503)
        return {"ok": True, "database": "reachable", "learner": service.learner}

    # -- agent runtimes ------------------------------------------------------------------------

    async def select(self, request: Request) -> Any:
        data = await self.body(request)
        service = self.service(request)
        # Parsing and selecting both run in the worker thread: the event loop stays free.
        return await self.call(self._select, service, data)

    @staticmethod
    def _select(service: LearningService, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object with arms")
        arms = arms_from_list(data.get("arms"))
        if not arms:
            raise ApiError(400, "arms (non-empty array) is required")
        context = data.get("context")
        if context is not None and not isinstance(context, dict):
            raise ApiError(400, "context must be an object")
        return service.select(arms, context).to_dict()

    async def observe(self, request: Request) -> Any:
        data = await self.body(request)
        service = self.service(request)
        return await self.call(self._observe, service, data)

    @staticmethod
    def _observe(service: LearningService, data: Any) -> Any:
        if isinstance(data, dict) and "reports" in data:
            raw = data["reports"]
            if not isinstance(raw, list) or not raw:
                raise ApiError(400, "reports must be a non-empty array")
            if len(raw) > MAX_BATCH:
                raise ApiError(400, f"reports: at most {MAX_BATCH} per request")
            reports = []
            for i, item in enumerate(raw):
                try:
                    reports.append(report_from_dict(item))
                except InvalidInput as exc:
                    raise ApiError(400, f"reports[{i}]: {exc}") from None
            return {"results": [r.to_dict() for r in service.observe_many(reports)]}
        return service.observe(report_from_dict(data)).to_dict()

    # -- chat-equivalent commands --------------------------------------------------------------

    async def reward(self, request: Request) -> Any:
        data = await self.body(request)
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        arm = data.get("arm_id", data.get("armId"))
        if not isinstance(arm, str) or not arm.strip():
            raise ApiError(400, "arm_id (string) is required")
        outcome = data.get("outcome", "accepted")
        if outcome not in ("accepted", "rejected"):
            raise ApiError(400, "outcome must be accepted or rejected")
        value = data.get("reward", 1.0 if outcome == "accepted" else 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ApiError(400, "reward must be a number in [0, 1]")
        if not math.isfinite(value) or not 0 <= value <= 1:
            raise ApiError(400, "reward must be a number in [0, 1]")
        reason = data.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise ApiError(400, "reason must be a string")
        actor = data.get("actor", "api")
        if not isinstance(actor, str):
            raise ApiError(400, "actor must be a string")
        service = self.service(request)
        result = await self.call(
            service.reward, arm, float(value), actor=actor or "api", reason=reason
        )
        return {"ok": True, "arm_id": result.arm_ids[0], "reward": result.value, "lagged": True}

    async def _through_bus(self, request: Request, command: Any) -> Reply:
        learner = request.query_params.get("learner") or None
        invocation = Invocation("api", API_ACTOR, command, learner=learner)
        reply: Reply = await run_in_threadpool(self.app.bus.dispatch, invocation)
        return reply

    async def reset(self, request: Request) -> Any:
        data = await self.body(request)
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        raw = data.get("arm_ids", data.get("armIds"))
        if raw is not None and (
            not isinstance(raw, list) or not raw or not all(isinstance(a, str) for a in raw)
        ):
            raise ApiError(400, "arm_ids must be a non-empty array of strings")
        confirm = data.get("confirm", False)
        if not isinstance(confirm, bool):
            raise ApiError(400, "confirm must be true or false")
        command = ResetCommand(arms=tuple(raw) if raw else None, confirm=confirm)
        reply = await self._through_bus(request, command)
        if reply.kind is ReplyKind.CONFIRM:
            await self._cancel(request, reply)
            raise ApiError(
                409,
                'reset needs "confirm": true',
                wouldReset=reply.data.get("armCount"),
                detail=reply.summary,
            )
        _raise_for(reply)
        return {
            "learner": reply.data["learner"],
            "reset_count": reply.data["reset_count"],
            "arm_ids": reply.data["arm_ids"],
        }

    async def phase(self, request: Request) -> Any:
        data = await self.body(request)
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        raw = data.get("phase")
        if raw not in ("passive", "active"):
            raise ApiError(400, "phase must be passive or active")
        confirm = data.get("confirm", False)
        if not isinstance(confirm, bool):
            raise ApiError(400, "confirm must be true or false")
        reply = await self._through_bus(request, PhaseCommand(Phase(raw), confirm=confirm))
        if reply.kind is ReplyKind.CONFIRM:
            await self._cancel(request, reply)
            raise ApiError(409, 'changing the phase needs "confirm": true', detail=reply.summary)
        _raise_for(reply)
        return {
            "phase": reply.data.get("phase", raw),
            "previous": reply.data.get("previous", raw),
            "changed": "previous" in reply.data,
            "warning": reply.data.get("warning"),
            "bootstrappedTraces": reply.data.get("bootstrappedTraces", 0),
        }

    async def command(self, request: Request) -> Any:
        """Any /learning command through the bus; the reply comes back as data (the CLI's
        --url mode and scripts use it)."""
        from bot.commands import CancelCommand, ConfirmCommand

        data = await self.body(request)
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        actor_name = data.get("actor", "api")
        if not isinstance(actor_name, str) or not actor_name or len(actor_name) > 128:
            raise ApiError(400, "actor must be a string of 1-128 characters")
        command: Any
        if "confirm" in data or "cancel" in data:
            token = data.get("confirm", data.get("cancel"))
            if not isinstance(token, str) or not token or len(token) > 64:
                raise ApiError(400, "confirm/cancel must be a confirmation token")
            command = ConfirmCommand(token) if "confirm" in data else CancelCommand(token)
        else:
            text = data.get("text", "")
            if not isinstance(text, str):
                raise ApiError(400, "text (string) is required")
            command = text
        conversation = data.get("conversation", "")
        if not isinstance(conversation, str) or len(conversation) > 256:
            raise ApiError(400, "conversation must be a string of at most 256 characters")
        learner = request.query_params.get("learner") or None
        actor = Actor(f"api:{actor_name}", actor_name, is_admin=True)
        invocation = Invocation("api", actor, command, conversation=conversation, learner=learner)
        reply: Reply = await run_in_threadpool(self.app.bus.dispatch, invocation)
        return reply.to_dict()

    async def _cancel(self, request: Request, reply: Reply) -> None:
        from bot.commands import CancelCommand

        for action in reply.actions:
            if action.command == "cancel":
                await self._through_bus(request, CancelCommand(action.token))
                return


def _raise_for(reply: Reply) -> None:
    if reply.kind is ReplyKind.ERROR:
        message = reply.summary
        if reply.data.get("forbidden"):
            raise ApiError(403, message)
        lowered = message.lower()
        if lowered.startswith("unknown arm") or "no reset to undo" in lowered:
            raise ApiError(404 if lowered.startswith("unknown arm") else 409, message)
        if lowered.startswith("storage is unavailable"):
            raise ApiError(503, message)
        raise ApiError(400, message)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be a whole number from {low} to {high}")
    return value
