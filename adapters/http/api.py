"""The learning API's handlers (docs/http-api.md): the original paths and camelCase fields,
plus select/observe for agent runtimes and phase changes."""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from learning_bot.adapters.http.body import BodyReader
from learning_bot.adapters.http.fast_select import FastSelect
from learning_bot.adapters.http.guards import RequestGuard, first_headers
from learning_bot.adapters.http.observe_line import ObserveLine
from learning_bot.adapters.http.responses import ENCODER, ApiError, JsonResponse, failure
from learning_bot.adapters.http.settings import HttpSettings
from learning_bot.adapters.http.streams import SlotStream, StreamSlots
from learning_bot.bot.bus import CommandBus
from learning_bot.bot.commands import (
    Command,
    ConfigCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
)
from learning_bot.bot.errors import kind_of_code
from learning_bot.bot.invocation import Actor, Invocation
from learning_bot.bot.replies import Reply, ReplyKind
from learning_bot.bot.shapes import (
    arm_detail_json,
    arm_json,
    bucket_json,
    config_json,
    reply_json,
    selection_json,
    summary_json,
    trace_json,
)
from learning_bot.engine.bounds import MAX_RESET_ARMS
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import InvalidInput, Unavailable
from learning_bot.engine.records import RunRecord
from learning_bot.engine.service import TIMESERIES_METRICS, LearningService

BASE = "/__openclaw__/api/learning"
API_ACTOR = Actor("api", "api", is_admin=True)
WORKER_THREADS = 40
"""Threads serving storage calls (as many as Starlette's thread pool has)."""


def learner_param(scope: Scope) -> str | None:
    """The learner a request's `?learner=` names, None when it names none; an empty name is
    refused (400), not taken for the default learner."""
    query = scope.get("query_string")
    if not query:
        return None
    named = QueryParams(query).get("learner")
    if named is not None and not named.strip():
        raise InvalidInput(
            "learner: the ?learner= parameter is empty; leave it out for the default learner"
        )
    return named


class Api:
    """Route handlers bound to the application and its settings."""

    def __init__(self, bus: CommandBus, settings: HttpSettings) -> None:
        self.bus = bus
        self.settings = settings
        self.guard = RequestGuard(settings)
        self.reader = BodyReader(settings.max_body_bytes, settings.body_timeout_seconds)
        self.streams = StreamSlots(settings.max_streams)
        self._pool: ThreadPoolExecutor | None = None
        self._observations = ObserveLine(self.call)
        self.fast_select = FastSelect(
            self.guard, self.reader, lambda scope: self.service_for(scope, create=True), self.call
        )

    # -- plumbing ------------------------------------------------------------------------------

    def service(self, request: Request, *, create: bool = False) -> LearningService:
        """The learner the request names (`?learner=`), else the default one. A read of a
        learner that does not exist is NotFound (404) and creates nothing."""
        return self.service_for(request.scope, create=create)

    def service_for(self, scope: Scope, *, create: bool = False) -> LearningService:
        """`service` for a request's ASGI scope (its query string, as `request.query_params`
        reads it)."""
        named = learner_param(scope)
        return self.bus.services.get(named or self.bus.settings.default_learner, create=create)

    def handler(
        self, fn: Callable[[Request], Awaitable[Any]], *, mutating: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                if mutating:
                    self.guard.check(first_headers(request.scope))
                result = await fn(request)
            except Exception as exc:
                return failure(exc, request.method, request.url.path)
            if isinstance(result, Response):
                return result
            return JsonResponse(result)

        return endpoint

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a worker thread (storage must never block the event loop), with the
        caller's context variables. A plain executor: the hop costs about half of what
        Starlette's `run_in_threadpool` (through anyio) does."""
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(WORKER_THREADS, "learning-api")
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(pool, context.run, fn, *args)

    # -- reading -------------------------------------------------------------------------------

    async def summary(self, request: Request) -> Any:
        service = self.service(request)
        return summary_json(await self.call(service.summary))

    async def config(self, request: Request) -> Any:
        service = self.service(request)
        await self.call(service.refresh)
        return config_json(service.config)

    async def posteriors(self, request: Request) -> Any:
        service = self.service(request)
        views = await self.call(service.posteriors)
        return [arm_json(v) for v in views]

    async def arm(self, request: Request) -> Any:
        """One arm (by id, or by a label `status arm` resolves): its posterior and what its
        usefulness depends on (`status arm`'s explanation, as data and in its words)."""
        service = self.service(request)
        return await self.call(_arm_detail, service, request.path_params["arm_id"])

    async def traces(self, request: Request) -> Any:
        """The page, read and sent in pieces bounded by their size in memory (not by their
        number of traces), holding one of the streamed answers' slots while it is sent; a
        page that fits one piece is answered at once. Every slot taken: 503, Retry-After."""
        service = self.service(request)
        limit = _int_param(request, "limit", 100, 1, 1000)
        offset = _int_param(request, "offset", 0, 0, 10**12)
        if not self.streams.take():
            return self.streams.busy()
        try:
            pieces, total = await self.call(service.trace_pieces, limit, offset)
            first = await self.call(_encoded_piece, pieces)
            second = None if first is None else await self.call(_encoded_piece, pieces)
        except BaseException:
            self.streams.give_back()
            raise
        tail = b'],"total":%d}' % total
        if second is None:
            self.streams.give_back()
            body = b'{"traces":[' + (first or b"") + tail
            return Response(body, media_type="application/json")

        async def body_pieces() -> AsyncIterator[bytes]:
            yield b'{"traces":[' + (first or b"")
            piece: bytes | None = second
            while piece is not None:
                yield b"," + piece
                piece = await self.call(_encoded_piece, pieces)
            yield tail

        return SlotStream(body_pieces(), self.streams.give_back)

    async def timeseries(self, request: Request) -> Any:
        service = self.service(request)
        metric = request.query_params.get("metric", "tokens")
        window = request.query_params.get("window", "1h")
        if metric not in TIMESERIES_METRICS:
            raise ApiError(400, f"metric must be one of {', '.join(TIMESERIES_METRICS)}")
        if window not in ("1h", "1d"):
            raise ApiError(400, "window must be 1h or 1d")
        buckets = await self.call(service.timeseries, metric, window)
        return {"buckets": [bucket_json(b) for b in buckets]}

    async def learners(self, request: Request) -> Any:
        """The names of the learners that exist (reads of others answer 404)."""
        names = await self.call(self.bus.services.names)
        return {"learners": names}

    async def healthz(self, request: Request) -> Any:
        service = self.service(request)
        spool = service.spool_health()
        try:
            await self.call(service.refresh, True)
        except Unavailable as exc:
            raise ApiError(
                503, "storage is unavailable", ok=False, database=str(exc)[:200], spool=spool
            ) from None
        if spool is not None and spool["full"]:
            raise ApiError(503, "the spool is full", ok=False, database="reachable", spool=spool)
        out = {"ok": True, "database": "reachable", "learner": service.learner}
        if spool is not None:
            out["spool"] = spool
        return out

    async def livez(self, _: Request) -> Any:
        """The process answers (touches nothing)."""
        return {"status": "ok"}

    async def readyz(self, request: Request) -> Any:
        """Storage answers and its schema is the one this code needs: one learner-state read,
        no posterior reload (503 with the reason otherwise)."""
        try:
            service = self.service(request)
            await self.call(service.check_ready)
        except Exception as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            return JsonResponse({"status": "unavailable", "reason": reason}, status_code=503)
        return {"status": "ready", "learner": service.learner}

    # -- agent runtimes ------------------------------------------------------------------------

    async def select(self, request: Request) -> Any:
        raw = await self.reader.raw_body(request.headers.get("content-length"), request)
        selection, _ = await self.fast_select.selection(raw, request.scope)
        return selection_json(selection)

    async def observe(self, request: Request) -> Any:
        data = await self.reader.body(request, "observe")
        service = self.service(request, create=True)
        return await self._observations.observe(service, data)

    # -- commands, through the bus -------------------------------------------------------------

    async def _dispatch(self, request: Request, command: Command | str, **kwargs: Any) -> Reply:
        learner = learner_param(request.scope)
        kwargs.setdefault("actor", API_ACTOR)
        kwargs.setdefault("interactive", False)
        invocation = Invocation("api", command=command, learner=learner, **kwargs)
        reply: Reply = await self.call(self.bus.dispatch, invocation)
        return reply

    async def _command(self, request: Request, command: Command, **kwargs: Any) -> Reply:
        """Dispatch and turn an error reply into its status from the error table."""
        reply = await self._dispatch(request, command, **kwargs)
        if reply.kind is ReplyKind.ERROR:
            raise ApiError(kind_of_code(reply.error_code).http_status, reply.summary)
        return reply

    async def reward(self, request: Request) -> Any:
        data = await self.reader.body(request, "reward")
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
        if not isinstance(actor, str) or not actor or len(actor) > 128:
            raise ApiError(400, "actor must be a string of 1-128 characters")
        reply = await self._command(
            request,
            RewardCommand(arm=arm, value=float(value), reason=reason),
            actor=Actor(f"api:{actor}", actor, is_admin=True),
        )
        (arm_view,) = reply.data["arms"][:1] or [None]
        out: dict[str, Any] = {
            "ok": True,
            "arm_id": reply.data["armIds"][0],
            "reward": reply.data["value"],
            "lagged": True,
        }
        if arm_view is not None:
            out.update(
                alpha=arm_view["alpha"],
                beta=arm_view["beta"],
                mean=arm_view["mean"],
                pulls=arm_view["pulls"],
            )
        return out

    async def reset(self, request: Request) -> Any:
        """Reset every arm (`{}`) or the listed ones, at once: the calling client confirms
        on its own side, as the original learning layer's clients do."""
        data = await self.reader.body(request, "reset")
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        raw = data.get("arm_ids", data.get("armIds"))
        if raw is not None and (
            not isinstance(raw, list) or not raw or not all(isinstance(a, str) for a in raw)
        ):
            raise ApiError(400, "arm_ids must be a non-empty array of strings")
        if raw is not None and len(raw) > MAX_RESET_ARMS:
            raise ApiError(400, f"arm_ids: at most {MAX_RESET_ARMS} arms per reset")
        reply = await self._command(
            request, ResetCommand(arms=tuple(raw) if raw else None, confirm=True)
        )
        return {
            "learner": reply.data["learner"],
            "reset_count": reply.data["reset_count"],
            "arm_ids": reply.data["arm_ids"],
        }

    async def undo_reset(self, request: Request) -> Any:
        """Undo the last reset (what the dashboard's Undo button calls)."""
        if not isinstance(await self.reader.body(request, "reset/undo"), dict):
            raise ApiError(400, "the body must be a JSON object (or empty)")
        reply = await self._command(request, ResetCommand(undo=True, confirm=True))
        return {
            "learner": reply.data["learner"],
            "reset_count": reply.data["reset_count"],
            "arm_ids": reply.data.get("arm_ids", []),
            "undone": True,
        }

    async def phase_view(self, request: Request) -> Any:
        """The phase, and the projection of going active from the learner's latest runs
        (engine.projection), or the `reason` there is none: what `/learning phase` shows."""
        reply = await self._command(request, PhaseCommand())
        out = {"phase": reply.data["phase"]}
        for key in ("projection", "reason", "projectedAtSwitch"):
            if key in reply.data:
                out[key] = reply.data[key]
        return out

    async def phase(self, request: Request) -> Any:
        data = await self.reader.body(request, "phase")
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        raw = data.get("phase")
        if raw not in ("passive", "active"):
            raise ApiError(400, "phase must be passive or active")
        confirm = data.get("confirm", False)
        if not isinstance(confirm, bool):
            raise ApiError(400, "confirm must be true or false")
        reply = await self._command(request, PhaseCommand(Phase(raw), confirm=confirm))
        if reply.kind is ReplyKind.CONFIRM:
            raise ApiError(409, 'changing the phase needs "confirm": true', detail=reply.summary)
        return {
            "phase": reply.data.get("phase", raw),
            "previous": reply.data.get("previous", raw),
            "changed": "previous" in reply.data,
            "warning": reply.data.get("warning"),
            "bootstrappedTraces": reply.data.get("bootstrappedTraces", 0),
        }

    async def learner_settings(self, request: Request) -> Any:
        """Change the learner's stored settings (`{"settings": {"halfLife": 50}}`): the same
        command as `/learning config` and `learning-bot learner set`, audited; setting what is
        stored changes nothing (`changed` is empty)."""
        data = await self.reader.body(request)
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        changes = data.get("settings")
        if not isinstance(changes, dict) or not changes:
            raise ApiError(400, 'settings must be a non-empty object, e.g. {"halfLife": 50}')
        unknown = sorted(set(data) - {"settings"})
        if unknown:
            raise ApiError(400, f'unexpected field {unknown[0]!r}; send {{"settings": {{...}}}}')
        reply = await self._command(request, ConfigCommand(tuple(changes.items())))
        return {
            "learner": reply.data["learner"],
            "settings": reply.data["settings"],
            "changed": reply.data.get("changed", []),
        }

    async def command(self, request: Request) -> Any:
        """Any /learning command through the bus; the reply comes back as data (the CLI's
        --url mode and scripts use it)."""
        from learning_bot.bot.commands import CancelCommand, ConfirmCommand

        data = await self.reader.body(request, "command")
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object")
        actor_name = data.get("actor", "api")
        if not isinstance(actor_name, str) or not actor_name or len(actor_name) > 128:
            raise ApiError(400, "actor must be a string of 1-128 characters")
        command: Command | str
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
        # A terminal talking to the server (`learning-bot --url ...`) asks for replies worded
        # for a terminal; the command still counts as the API's.
        wording = data.get("wording", "api")
        if wording not in ("api", "terminal"):
            raise ApiError(400, "wording must be api or terminal")
        # A client's retry of the same command (same Idempotency-Key, on any replica) runs
        # once and answers the first reply.
        key = request.headers.get("idempotency-key")
        if key is not None and (not key or len(key) > 200 or not key.isprintable()):
            raise ApiError(400, "Idempotency-Key must be 1-200 printable characters")
        reply = await self._dispatch(
            request,
            command,
            actor=Actor(f"api:{actor_name}", actor_name, is_admin=True),
            conversation=conversation,
            interactive=True,
            wording=wording,
            idempotency_key=key,
        )
        return reply_json(reply)


def _arm_detail(service: LearningService, query: str) -> dict[str, Any]:
    arm_id = service.resolve_arm(query)
    return arm_detail_json(service.view(arm_id), service.context_explanation(arm_id))


def _encoded_piece(pieces: Iterator[list[RunRecord]]) -> bytes | None:
    """The next piece of traces as the JSON array items `GET traces` sends (in a worker
    thread: reading and encoding), or None after the last."""
    piece = next(pieces, None)
    if piece is None:
        return None
    return ",".join(ENCODER.encode(trace_json(t)) for t in piece).encode("utf-8")


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
