"""Request bodies: read within the size limit and the deadline, and decoded as strict JSON
(no NaN, no Infinity, no number too large for a finite float)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

from adapters.http.responses import ApiError


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

    async def body(self, request: Request) -> Any:
        return decode_body(await self.raw_body(request.headers.get("content-length"), request))

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


def decode_body(raw: bytes) -> Any:
    """A request body as JSON ({} when empty); 400 naming the problem when it is not JSON,
    holds NaN or Infinity, or a number too large for a finite float."""
    if not raw or raw.isspace():  # what `not raw.strip()` says, without a copy
        return {}
    text = ""
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        # json.loads(raw, ...) with the decoder built once: loads builds one per call.
        return _DECODER.decode(text)
    except _OutOfRange as exc:
        where = _out_of_range_field(text)
        detail = f"{where}: {exc}" if where else f"the body is not valid JSON: {exc}"
        raise ApiError(400, detail[:300]) from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:120]}") from None


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
