"""Request bodies: read within the size limit and the deadline, decoded as strict JSON (no
NaN, no Infinity, no number too large for a finite float, nothing a backend cannot store:
engine.bounds), and held to their route's fields, those of the route's wire type (BODY_FIELDS,
from engine.wire: an unknown field is a 400 naming it, but for the few the original clients
send, TOLERATED). Every route with a body, the learning API's and the `/v1` routes, reads it
here."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, NoReturn

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

from learning_bot.adapters.http.responses import ApiError
from learning_bot.engine.bounds import check_json_text
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.wire import gateway, operator, runs
from learning_bot.engine.wire.declare import body_names, nested_types, tolerated


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


class BodyReader:
    """Reads request bodies: at most `limit` bytes (413), within `seconds` (408)."""

    def __init__(self, limit: int, seconds: float) -> None:
        self.limit = limit
        self._deadlines = BodyDeadlines(seconds)

    async def body(self, request: Request, route: str | None = None) -> Any:
        """The body as JSON, held to the fields of `route` (a BODY_FIELDS name) when given."""
        raw = await self.raw_body(request.headers.get("content-length"), request)
        return decode_body(raw, route)

    async def arguments(self, request: Request, route: str) -> dict[str, Any]:
        """A body that must be a JSON object (a tool's arguments, as the `/v1` routes take
        them), held to the fields of `route`."""
        data = await self.body(request, route)
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object of the tool's arguments")
        return data

    async def raw_body(self, declared: str | None, request: Request | Receive) -> bytes:
        """The request body's bytes, with the checks `body` makes before decoding them:
        `declared` is the Content-Length header (None without one); `request` the request or
        the ASGI `receive` callable."""
        limit = self.limit
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


def decode_body(raw: bytes, route: str | None = None) -> Any:
    """A request body as JSON ({} when empty); 400 naming the problem when it is not JSON,
    holds NaN or Infinity, or a number too large for a finite float, anywhere a value no
    backend stores (a lone surrogate or NUL in any string or key, an integer past 64 bits:
    engine.bounds, naming the field), or (with `route`, a BODY_FIELDS name) a field the
    route does not know."""
    if not raw or raw.isspace():  # what `not raw.strip()` says, without a copy
        return {}
    text = ""
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        # json.loads(raw, ...) with the decoder built once: loads builds one per call.
        data = _DECODER.decode(text)
    except _OutOfRange as exc:
        where = _out_of_range_field(text)
        detail = f"{where}: {exc}" if where else f"the body is not valid JSON: {exc}"
        raise ApiError(400, detail[:300]) from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:120]}") from None
    try:
        check_json_text(text, data)
    except InvalidInput as exc:
        raise ApiError(400, str(exc)[:300]) from None
    if route is not None:
        BODY_FIELDS[route].check(data)
    return data


class _OutOfRange(ValueError):
    """A JSON number too large for a finite float."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange(f"{text[:40]} is out of the range of a finite number")
    return value


class _Huge(str):
    """Where a number too large for a float stood (`_out_of_range_field`)."""


_MARKING = json.JSONDecoder(parse_float=lambda t: _Huge(t) if math.isinf(float(t)) else 0.0)


def _out_of_range_field(text: str) -> str:
    """The field (`candidates[0].metadata.size`) of the first number too large for a float in
    a body the strict decoder refused for it; read again only on that error path."""
    try:
        data = _MARKING.decode(text)
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Huge):
            return path or "the body"
        if isinstance(value, dict):
            items = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return ""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


# -- strict fields -------------------------------------------------------------------------------

STRICT_FIELDS_VERSION = 1
"""The version of the field lists below and of their exceptions (TOLERATED): a field leaves
TOLERATED only with a new version, announced in the README's HTTP section."""


class Fields:
    """The fields a JSON object of a request body may hold: each known field, with the Fields
    its value is checked against when it is an object or an array of objects (None: not
    looked into, e.g. a free-form `context`), and the tolerated ones (TOLERATED: sent by the
    original clients, accepted and ignored). Any other field is refused with 400 naming it,
    and the closest known field when one is close: a typo never silently changes what is
    recorded."""

    __slots__ = ("elsewhere", "inner", "known", "names", "tolerated")

    def __init__(
        self,
        known: dict[str, Fields | None],
        tolerated: frozenset[str] = frozenset(),
        elsewhere: dict[str, str] | None = None,
    ) -> None:
        """`elsewhere`: fields that belong in another part of the request, with where."""
        self.inner = {name: spec for name, spec in known.items() if spec is not None}
        self.known = frozenset(known)
        self.names = self.known | tolerated
        self.tolerated = tolerated
        self.elsewhere = elsewhere or {}

    @classmethod
    def of(cls, wire_type: type[Any], elsewhere: dict[str, str] | None = None) -> Fields:
        """The fields of a wire type's JSON object (engine.wire): each name a body may give
        them, the wire types of the objects they hold checked in turn, its tolerated fields."""
        nested = nested_types(wire_type)
        known = {
            name: cls.of(nested[name]) if name in nested else _OPEN
            for name in body_names(wire_type)
        }
        return cls(known, tolerated(wire_type), elsewhere)

    def check(self, data: Any, where: str = "") -> None:
        """Refuse (ApiError 400) the first unknown field of `data` and of the objects it
        holds; values that are not objects are left to the route's own checks."""
        if type(data) is not dict:
            return
        if not self.names.issuperset(data):
            self._refuse(data, where)
        for name, spec in self.inner.items():
            value = data.get(name)
            if type(value) is dict:
                spec.check(value, f"{where}{name}.")
            elif type(value) is list:
                spec.check_items(value, f"{where}{name}")

    def check_items(self, items: list[Any], where: str) -> None:
        """`check` each object of an array (the path of one is built only to name it)."""
        if self.inner:
            for i, item in enumerate(items):
                self.check(item, f"{where}[{i}].")
            return
        names = self.names
        try:  # every item an object of known fields, checked without a Python loop
            if all(map(names.issuperset, items)):
                return
        except TypeError:  # an item that is no collection: the loop below skips it
            pass
        for i, item in enumerate(items):
            if type(item) is dict and not names.issuperset(item):
                self._refuse(item, f"{where}[{i}].")

    def _refuse(self, data: dict[str, Any], where: str) -> NoReturn:
        name = next(name for name in data if name not in self.names)
        path = json.dumps(f"{where}{name}", ensure_ascii=False)[:200]
        if name in self.elsewhere:
            raise ApiError(400, f"unknown field {path}: {self.elsewhere[name]}")
        raise ApiError(400, unknown_field(path, name, self.known))


class EitherFields:
    """A body of one of two shapes: `batch` when it has the field `key` (e.g. observe's
    `{reports: [...]}`), else `single`."""

    __slots__ = ("batch", "key", "single")

    def __init__(self, key: str, batch: Fields, single: Fields) -> None:
        self.key, self.batch, self.single = key, batch, single

    def check(self, data: Any, where: str = "") -> None:
        shape = self.batch if type(data) is dict and self.key in data else self.single
        shape.check(data, where)


def unknown_field(path: str, name: str, known: frozenset[str]) -> str:
    """`unknown field "arms[0].includd"; did you mean "included"?` (`path` quoted; the hint
    only when a known field is close)."""
    import difflib

    message = f"unknown field {path}"
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if close:
        return f'{message}; did you mean "{close[0]}"?'
    if not known:
        return f"{message}; this body takes no fields"
    return f"{message}; known fields: {', '.join(sorted(known))}"[:600]


TOLERATED: dict[str, frozenset[str]] = {
    "arm": tolerated(runs.ArmSpec),
    "reset": tolerated(operator.ResetRequest),
}
"""Fields outside the declared ones that the original clients send (OpenClaw's gateway and
its learning layer's types, and clients of this API's first version), accepted and ignored
(STRICT_FIELDS_VERSION 1): each wire type declares its own (engine.wire)."""

_OPEN = None  # a free-form object (context, metadata): not looked into

QUERY = {"learner": "the learning API names the learner in the query (?learner=NAME)"}
"""What a learning API body may not hold: it goes in the query string."""

BODY_FIELDS: dict[str, Fields | EitherFields] = {
    # the learning API (/__openclaw__/api/learning/...)
    "select": Fields.of(runs.SelectRequest, QUERY),
    "observe": EitherFields(
        "reports", Fields.of(runs.ObserveBatch, QUERY), Fields.of(runs.RunReport, QUERY)
    ),
    "reward": Fields.of(operator.RewardRequest, QUERY),
    "reset": Fields.of(operator.ResetRequest, QUERY),
    "reset/undo": Fields.of(operator.UndoRequest, QUERY),
    "phase": Fields.of(operator.PhaseRequest, QUERY),
    "command": Fields.of(operator.CommandRequest, QUERY),
    # the /v1 routes OpenClaw's gateway calls (each body: the MCP tool's arguments)
    "v1/select": Fields.of(gateway.GatewaySelect),
    "v1/observe": Fields.of(gateway.GatewayObserve),
    "v1/reset": Fields.of(gateway.GatewayReset),
    "v1/sessions/start": Fields.of(gateway.GatewaySessionStart),
    "v1/sessions/end": Fields.of(gateway.GatewaySessionEnd),
}
"""Each route's body fields, by route name (`decode_body`'s `route`), from the wire types
declared in engine.wire."""
