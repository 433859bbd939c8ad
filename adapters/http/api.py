"""The learning layer's HTTP API (SPEC section 9): the original paths and camelCase fields,
plus select/observe for agent runtimes and phase changes."""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import json
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.datastructures import QueryParams
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from bot.bus import CommandBus
from bot.commands import Command, PhaseCommand, ResetCommand, RewardCommand
from bot.errors import error_kind, kind_of_code, user_message
from bot.invocation import Actor, Invocation
from bot.replies import Reply, ReplyKind
from bot.shapes import (
    arm_json,
    bucket_json,
    config_json,
    observe_json,
    reply_json,
    selection_json,
    summary_json,
    trace_json,
)
from engine.bounds import MAX_BATCH, MAX_RESET_ARMS, check_json
from engine.config import Phase
from engine.errors import Ambiguous, InvalidInput, Unavailable
from engine.observation import RunReport
from engine.records import report_from_json
from engine.service import LearningService

if TYPE_CHECKING:
    from engine.selection import ArmSet, Selection

log = logging.getLogger("learning_bot.http")

BASE = "/__openclaw__/api/learning"
API_ACTOR = Actor("api", "api", is_admin=True)
WORKER_THREADS = 40
"""Threads serving storage calls (as many as Starlette's thread pool has)."""


@dataclass(frozen=True)
class HttpSettings:
    api_token: str | None = None
    """Bearer token required on mutating routes; None leaves them open (loopback only)."""
    max_body_bytes: int = 4 * 1024 * 1024
    cors_origins: tuple[str, ...] = ()
    refresh_seconds: int = 30
    body_timeout_seconds: float = 30.0
    """A request body not fully received within this time is answered 408."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names mutating requests may be addressed to (empty: any). Without a token on
    loopback, `serve` sets the loopback names, so a DNS-rebound name cannot write."""


class BodyDeadlines:
    """Cancels the request-body reads that outlive `seconds`: one timer a few times a second
    looks at every read in progress, instead of a timer armed and cancelled for each request
    (which costs a fair share of a small request). Reads on another event loop than the first
    one seen have no deadline here; a server runs one loop."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._every = min(0.25, seconds / 4)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self) -> asyncio.Task[Any] | None:
        """Start the current task's deadline (None: not watched)."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            return None
        task = asyncio.current_task(loop)
        if task is None:
            return None
        self._reading[task] = loop.time() + self.seconds
        if self._timer is None:
            self._timer = loop.call_later(self._every, self._sweep)
        return task

    def expired(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether `task` was cancelled for its deadline (then it no longer counts as
        cancelled)."""
        if task is None or task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def forget(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:
            self._reading.pop(task, None)
            self._expired.discard(task)

    def _sweep(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        late = [task for task, deadline in self._reading.items() if deadline <= now]
        for task in late:
            del self._reading[task]
            self._expired.add(task)
            task.cancel()
        self._timer = self._loop.call_later(self._every, self._sweep) if self._reading else None


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


class JsonResponse(JSONResponse):
    """Starlette's JSONResponse, the same bytes and headers, from one encoder built once
    (json.dumps with options builds an encoder per call)."""

    def __init__(self, content: Any, status_code: int = 200, **options: Any) -> None:
        if options:
            super().__init__(content, status_code, **options)
            return
        # Response.__init__ without the general header handling: the two headers it would set.
        self.status_code = status_code
        self.background = None
        self.body = body = self.render(content)
        self.raw_headers = [(b"content-length", b"%d" % len(body)), _JSON_TYPE]

    def render(self, content: Any) -> bytes:
        return _ENCODER.encode(content).encode("utf-8")


_JSON_TYPE = (b"content-type", b"application/json")


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if headers is None:
        return JsonResponse({"error": message, **extra}, status)
    return JsonResponse({"error": message, **extra}, status, headers=headers)


def failure(exc: Exception, method: str, path: str) -> JSONResponse:
    """The answer to a request whose handler raised `exc`: an ApiError's status and message,
    else the status and wording of the error table (an unexpected error is logged)."""
    if isinstance(exc, ApiError):
        return error(exc.status, str(exc), **exc.extra)
    kind = error_kind(exc)
    if kind.code == "internal":
        log.exception("%s %s failed", method, path)
    extra: dict[str, Any] = {}
    if isinstance(exc, Ambiguous):
        extra["candidates"] = list(exc.candidates)
    if isinstance(exc, Unavailable):  # why, in one line (a full spool, a lost file)
        extra["reason"] = (str(exc).strip().splitlines() or [""])[0][:300]
    return error(kind.http_status, user_message(exc), **extra)


class KnownBody:
    """A select body read before: its bytes, the inventory and context they hold, and (once
    the body comes back) the JSON text of each arm id, for the answer."""

    __slots__ = ("_names", "arms", "context", "raw")

    def __init__(self, raw: bytes, arms: ArmSet, context: dict[str, Any] | None) -> None:
        self.raw = raw
        self.arms = arms
        self.context = context
        self._names: dict[str, str] | None = None

    @property
    def names(self) -> dict[str, str]:
        names = self._names
        if names is None:
            names = self._names = {arm_id: encode_basestring(arm_id) for arm_id in self.arms.ids}
        return names


MAX_KNOWN_BODIES = 8
MAX_KNOWN_BYTES = 16 * 1024 * 1024
TAIL_BYTES = 64


class SelectBodies:
    """The select bodies that were valid lately, by their exact bytes. An agent runtime sends
    the same body before every model request; the same bytes decode to the same values, which
    pass the same checks, so a body seen before is neither decoded nor checked again (at 30
    arms, decoding and checking were about a third of a select's instructions). Bodies are
    compared, not hashed: a few memory comparisons cost less than hashing a new body. One body
    is kept per inventory (the newest), so that a runtime sending a new context each time does
    not fill the list with bodies compared in vain. Safe to share between threads: the list is
    replaced, never changed in place (a body two requests read at once may be kept twice,
    which only takes a place)."""

    def __init__(self, size: int = MAX_KNOWN_BODIES, max_bytes: int = MAX_KNOWN_BYTES) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._known: tuple[KnownBody, ...] = ()

    def find(self, raw: bytes) -> KnownBody | None:
        known = self._known
        size = len(raw)
        tail = raw[-TAIL_BYTES:]
        for entry in known:
            kept = entry.raw
            # The end first: a body that differs from a kept one only in its context (written
            # after the arms) is told apart without reading both to the end.
            if len(kept) == size and kept[-TAIL_BYTES:] == tail and kept == raw:
                if entry is not known[0]:
                    with self._lock:
                        self._known = (entry, *(k for k in self._known if k is not entry))
                return entry
        return None

    def keep(self, raw: bytes, arms: ArmSet, context: dict[str, Any] | None) -> None:
        if len(raw) > self._max_bytes:
            return
        entry = KnownBody(raw, arms, context)
        with self._lock:
            kept = [entry]
            total = len(raw)
            for k in self._known:
                if k.arms is arms:  # one body per inventory: the newest (contexts vary)
                    continue
                if len(kept) >= self._size or total + len(k.raw) > self._max_bytes:
                    continue
                kept.append(k)
                total += len(k.raw)
            self._known = tuple(kept)


def selection_bytes(selection: Selection, names: Mapping[str, str] | None) -> bytes:
    """`JsonResponse(selection_json(selection)).body`: with `names` (each arm id's JSON text)
    written here, the fields in `selection_json`'s order, strings, booleans, whole numbers and
    null as the encoder writes them; anything else goes through the encoder."""
    if names is not None:
        baseline, over = selection.is_baseline, selection.over_budget
        budget, used = selection.token_budget, selection.used_tokens
        fallback, guidance = selection.fallback, selection.guidance
        if (
            type(baseline) is bool
            and type(over) is bool
            and type(budget) is int
            and type(used) is int
            and (fallback is None or type(fallback) is str)
            and (guidance is None or type(guidance) is str)
        ):
            text = names.__getitem__
            try:
                selected = ",".join(map(text, selection.selected))
                excluded = ",".join(map(text, selection.excluded))
            except (KeyError, TypeError):  # an id without its text: the encoder's way
                pass
            else:
                return (
                    f'{{"selected":[{selected}],"excluded":[{excluded}],'
                    f'"isBaseline":{"true" if baseline else "false"},'
                    f'"tokenBudget":{int.__repr__(budget)},"usedTokens":{int.__repr__(used)},'
                    f'"overBudget":{"true" if over else "false"},'
                    f'"fallback":{"null" if fallback is None else encode_basestring(fallback)},'
                    f'"guidance":{"null" if guidance is None else encode_basestring(guidance)}}}'
                ).encode()
    return _ENCODER.encode(selection_json(selection)).encode("utf-8")


class Api:
    """Route handlers bound to the application and its settings."""

    def __init__(self, bus: CommandBus, settings: HttpSettings) -> None:
        self.bus = bus
        self.settings = settings
        self._pool: ThreadPoolExecutor | None = None
        self._deadlines = BodyDeadlines(settings.body_timeout_seconds)
        self._observations = ObserveLine(self.call)
        self._bodies = SelectBodies()

    # -- plumbing ------------------------------------------------------------------------------

    def service(self, request: Request, *, create: bool = False) -> LearningService:
        """The learner the request names (`?learner=`), else the default one. A read of a
        learner that does not exist is NotFound (404) and creates nothing."""
        return self.service_for(request.scope, create=create)

    def service_for(self, scope: Scope, *, create: bool = False) -> LearningService:
        """`service` for a request's ASGI scope (its query string, as `request.query_params`
        reads it)."""
        query = scope.get("query_string")
        named = QueryParams(query).get("learner") if query else None
        return self.bus.services.get(named or self.bus.settings.default_learner, create=create)

    def same_site(self, headers: Mapping[str, str]) -> None:
        """Refuse a mutating request a browser sent from another site: its Origin (or, without
        one, its Referer) must be this server's own or a configured CORS origin, and its body
        must be declared as JSON (a cross-site form or no-cors fetch cannot declare it)."""
        if self.settings.allowed_hosts:
            name = urlsplit("//" + headers.get("host", "")).hostname or ""
            if name not in self.settings.allowed_hosts:
                raise ApiError(403, f"requests addressed to host {name[:100]!r} are refused")
        origin = headers.get("origin")
        source = origin
        if source is None:
            referer = headers.get("referer")
            if referer:
                parts = urlsplit(referer)
                source = f"{parts.scheme}://{parts.netloc}" if parts.netloc else "null"
        if source is not None and not self._allowed_origin(headers, source):
            raise ApiError(
                403,
                f"cross-site request refused: origin {source[:100]!r} is not this server "
                "(set LEARNING_BOT_CORS_ORIGINS to allow it)",
            )
        declared = headers.get("content-type")
        if declared is not None and declared != "application/json":
            media = declared.split(";", 1)[0].strip().lower()
            if media != "application/json" and not media.endswith("+json"):
                raise ApiError(415, "the body must be sent as Content-Type: application/json")

    def _allowed_origin(self, headers: Mapping[str, str], origin: str) -> bool:
        if origin.rstrip("/") in self.settings.cors_origins or "*" in self.settings.cors_origins:
            return True
        host = headers.get("host", "")
        parts = urlsplit(origin)
        return bool(host) and parts.scheme in ("http", "https") and parts.netloc == host

    def authorise(self, headers: Mapping[str, str]) -> None:
        token = self.settings.api_token
        if token is None:
            return
        header = headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            raise ApiError(401, "a valid bearer token is required (Authorization: Bearer ...)")

    async def body(self, request: Request) -> Any:
        return decode_body(await self.raw_body(request.headers.get("content-length"), request))

    async def raw_body(self, declared: str | None, request: Request | Receive) -> bytes:
        """The request body's bytes, with the checks `body` makes before decoding them:
        `declared` is the Content-Length header (None without one); `request` the request or
        the ASGI `receive` callable."""
        limit = self.settings.max_body_bytes
        if declared is not None:
            if not declared.isdigit():
                raise ApiError(400, "Content-Length must be a number")
            if int(declared) > limit:
                raise ApiError(413, f"request body is larger than {limit} bytes")
        deadlines = self._deadlines
        late = f"the request body did not arrive within {deadlines.seconds:g} s"
        task = deadlines.watch()
        receive = request.receive if isinstance(request, Request) else request
        if task is None:
            try:
                async with asyncio.timeout(deadlines.seconds):
                    return await _read_body(receive, limit)
            except TimeoutError:
                raise ApiError(408, late) from None
        try:
            return await _read_body(receive, limit)
        except asyncio.CancelledError:
            if deadlines.expired(task):
                raise ApiError(408, late) from None
            raise
        finally:
            deadlines.forget(task)

    def handler(
        self, fn: Callable[[Request], Awaitable[Any]], *, mutating: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                if mutating:
                    headers = first_headers(request.scope)
                    self.same_site(headers)
                    self.authorise(headers)
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

    async def traces(self, request: Request) -> Any:
        service = self.service(request)
        limit = _int_param(request, "limit", 100, 1, 1000)
        offset = _int_param(request, "offset", 0, 0, 10**12)
        page, total = await self.call(service.traces, limit, offset)
        return {"traces": [trace_json(t) for t in page], "total": total}

    async def timeseries(self, request: Request) -> Any:
        service = self.service(request)
        metric = request.query_params.get("metric", "tokens")
        window = request.query_params.get("window", "1h")
        if metric not in ("tokens", "totalTokens", "convergence"):
            raise ApiError(400, "metric must be tokens, totalTokens or convergence")
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
        spool = spool_health(service)
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

    # -- agent runtimes ------------------------------------------------------------------------

    async def select(self, request: Request) -> Any:
        raw = await self.raw_body(request.headers.get("content-length"), request)
        selection, _ = await self._selection(raw, request.scope)
        return selection_json(selection)

    async def select_asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST select` as an ASGI application: what `handler(select, mutating=True)` answers,
        the same bytes, headers and errors, without Starlette's Request and Response objects
        (which cost a fair share of a small selection)."""
        try:
            headers = first_headers(scope)
            self.same_site(headers)
            self.authorise(headers)
            raw = await self.raw_body(headers.get("content-length"), receive)
            selection, names = await self._selection(raw, scope)
        except Exception as exc:
            response = failure(exc, scope["method"], scope.get("root_path", "") + scope["path"])
            await response(scope, receive, send)
            return
        body = selection_bytes(selection, names)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body)), _JSON_TYPE],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _selection(self, raw: bytes, scope: Scope) -> tuple[Selection, dict[str, str] | None]:
        """The selection a select body asks for, and the JSON of its arm ids when the body was
        seen before (`SelectBodies`)."""
        known = self._bodies.find(raw)
        if known is None:
            data = decode_body(raw)
            service = self.service_for(scope, create=True)
            if service.selects_in_memory and _inline_size(data):
                # Posteriors in memory and an inventory small enough: a selection takes less
                # CPU than the hop to a worker thread would.
                return self._select(service, data, raw), None
            # Storage to read, or a large inventory to read: the event loop stays free.
            return await self.call(self._select, service, data, raw), None
        service = self.service_for(scope, create=True)
        if service.selects_in_memory and len(known.arms) <= INLINE_ARMS:
            return service.select(known.arms, known.context), known.names
        return await self.call(service.select, known.arms, known.context), known.names

    def _select(self, service: LearningService, data: Any, raw: bytes) -> Selection:
        from engine.selection import ArmSet, RepeatedArmIds

        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object with arms")
        repeated: RepeatedArmIds | None = None
        try:
            arms: ArmSet | None = ArmSet.from_json(data.get("arms"))
        except RepeatedArmIds as exc:  # a valid list that selection refuses: after the context
            arms, repeated = None, exc
        if arms is not None and not len(arms):
            raise ApiError(400, "arms (non-empty array) is required")
        context = data.get("context")
        if context is not None and not isinstance(context, dict):
            raise ApiError(400, "context must be an object")
        if context is not None:
            check_json("context", context)
        if repeated is not None:
            raise repeated
        assert arms is not None
        self._bodies.keep(raw, arms, context)
        return service.select(arms, context)

    async def observe(self, request: Request) -> Any:
        data = await self.body(request)
        service = self.service(request, create=True)
        return await self._observations.observe(service, data)

    # -- commands, through the bus -------------------------------------------------------------

    async def _dispatch(self, request: Request, command: Command | str, **kwargs: Any) -> Reply:
        learner = request.query_params.get("learner") or None
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
        data = await self.body(request)
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
        await self.body(request)
        reply = await self._command(request, ResetCommand(undo=True, confirm=True))
        return {
            "learner": reply.data["learner"],
            "reset_count": reply.data["reset_count"],
            "arm_ids": reply.data.get("arm_ids", []),
            "undone": True,
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
        reply = await self._dispatch(
            request,
            command,
            actor=Actor(f"api:{actor_name}", actor_name, is_admin=True),
            conversation=conversation,
            interactive=True,
            wording=wording,
        )
        return reply_json(reply)


_Waiting = tuple[Any, "asyncio.Future[Any]"]
"""A request body waiting for its turn, and where its answer goes."""


@dataclass(frozen=True)
class _Answer:
    """One request's answer, or the error it gets."""

    value: Any = None
    error: BaseException | None = None


def _parse_observe(data: Any) -> tuple[list[RunReport], bool]:
    """An observe body's reports, and whether it was a batch (`{reports: [...]}`)."""
    if isinstance(data, dict) and "reports" in data:
        raw = data["reports"]
        if not isinstance(raw, list) or not raw:
            raise ApiError(400, "reports must be a non-empty array")
        if len(raw) > MAX_BATCH:
            raise ApiError(400, f"reports: at most {MAX_BATCH} per request")
        reports = []
        for i, item in enumerate(raw):
            try:
                reports.append(report_from_json(item))
            except InvalidInput as exc:
                raise ApiError(400, f"reports[{i}]: {exc}") from None
        return reports, True
    return [report_from_json(data)], False


def _observe_answers(service: LearningService, bodies: list[Any]) -> list[_Answer]:
    """Observe the runs of several requests in one `observe_many` (one transaction), and
    answer each as if it had been alone: a body that does not parse gets its own error, and
    when the shared write fails for another reason than storage being unavailable, each
    request is written on its own so that one bad run fails only its request."""
    answers: list[_Answer | None] = []
    parsed: list[tuple[int, list[RunReport], bool]] = []
    for i, data in enumerate(bodies):
        try:
            reports, batch = _parse_observe(data)
        except Exception as exc:
            answers.append(_Answer(error=exc))
            continue
        answers.append(None)
        parsed.append((i, reports, batch))
    try:
        results = service.observe_many([r for _, reports, _ in parsed for r in reports])
        groups = []
        start = 0
        for i, reports, batch in parsed:
            groups.append((i, results[start : start + len(reports)], batch))
            start += len(reports)
    except Unavailable as exc:
        groups = []
        for i, _, _ in parsed:
            answers[i] = _Answer(error=exc)
    except Exception as exc:
        if len(parsed) == 1:
            answers[parsed[0][0]] = _Answer(error=exc)
            groups = []
        else:
            groups = []
            for i, reports, batch in parsed:
                try:
                    groups.append((i, service.observe_many(reports), batch))
                except Exception as single:
                    answers[i] = _Answer(error=single)
    for i, results, batch in groups:
        shaped = [observe_json(r) for r in results]
        answers[i] = _Answer({"results": shaped} if batch else shaped[0])
    return [a if a is not None else _Answer(error=RuntimeError("no answer")) for a in answers]


def _turn(waiting: list[_Waiting]) -> tuple[list[_Waiting], list[_Waiting]]:
    """The requests one turn takes (the oldest first, up to MAX_BATCH runs, at least one
    request) and those left for the next."""
    runs = 0
    for k, (data, _) in enumerate(waiting):
        reports = data.get("reports") if isinstance(data, dict) else None
        runs += len(reports) if isinstance(reports, list) else 1
        if runs > MAX_BATCH and k > 0:
            return waiting[:k], waiting[k:]
    return waiting, []


class ObserveLine:
    """Observe requests recorded together: for each learner a worker takes every request
    waiting and records their runs in one `observe_many` (one transaction); requests arriving
    meanwhile wait for the next turn. Up to TURNS turns of a learner run at once, so that one
    reads and scores its runs while another writes (group commit merges their writes when
    they meet). With a thread per request the threads would contend for the interpreter with
    the event loop, and each would wait to commit."""

    TURNS = 2

    def __init__(self, call: Callable[..., Awaitable[Any]]) -> None:
        self._call = call
        self._waiting: dict[LearningService, list[_Waiting]] = {}
        self._running: dict[LearningService, int] = {}
        self._turns: set[asyncio.Task[None]] = set()

    async def observe(self, service: LearningService, data: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(service, []).append((data, future))
        running = self._running.get(service, 0)
        if running < self.TURNS:
            self._running[service] = running + 1
            turn = asyncio.create_task(self._serve(service))
            self._turns.add(turn)
            turn.add_done_callback(self._turns.discard)
        return await future

    async def _serve(self, service: LearningService) -> None:
        """Record what waits for `service`, turn after turn, until nothing does."""
        try:
            while True:
                waiting = self._waiting.get(service)
                if not waiting:
                    return
                batch, self._waiting[service] = _turn(waiting)
                try:
                    answers = await self._call(_observe_answers, service, [d for d, _ in batch])
                except asyncio.CancelledError:  # the server is stopping: nobody is answered
                    for _, future in batch + self._waiting.pop(service, []):
                        future.cancel()
                    raise
                except Exception as exc:
                    answers = [_Answer(error=exc)] * len(batch)
                for (_, future), answer in zip(batch, answers, strict=True):
                    if future.done():
                        continue
                    if answer.error is not None:
                        future.set_exception(answer.error)
                    else:
                        future.set_result(answer.value)
        finally:
            left = self._running[service] - 1
            if left:
                self._running[service] = left
            else:
                del self._running[service]
                if not self._waiting.get(service):
                    self._waiting.pop(service, None)


def spool_health(service: LearningService) -> dict[str, Any] | None:
    """The spool's state, from the first writer in the service's chain that reports one."""
    writer: Any = service.writer
    for _ in range(8):
        health = getattr(writer, "health", None)
        if callable(health):
            result: dict[str, Any] = health()
            return result
        writer = getattr(writer, "inner", None)
        if writer is None:
            return None
    return None


INLINE_ARMS = 2000
"""A select with at most this many arms runs on the event loop when the service has its
posteriors in memory (about a millisecond of CPU for an inventory it has not seen)."""


def _inline_size(data: Any) -> bool:
    arms = data.get("arms") if type(data) is dict else None
    return type(arms) is list and len(arms) <= INLINE_ARMS


async def _read_body(receive: Receive, limit: int) -> bytes:
    """The whole body (what Request.stream() reads, without an async generator); 413 past
    `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body is larger than {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()


def first_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by (lower-case) name, the first of each name, as Starlette's
    `request.headers.get` reads them; one pass instead of one per lookup."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in reversed(scope["headers"])
    }


def decode_body(raw: bytes) -> Any:
    """A request body as JSON ({} when empty); 400 naming the problem when it is not JSON,
    holds NaN or Infinity, or a number too large for a finite float."""
    if not raw or raw.isspace():  # what `not raw.strip()` says, without a copy
        return {}
    try:
        # json.loads(raw, ...) with the decoder built once: loads builds one per call.
        return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:120]}") from None


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of the range of a finite number")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


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
