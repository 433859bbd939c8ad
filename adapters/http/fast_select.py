"""`POST select`, which an agent runtime calls before every model request, on its fast path:
the bodies seen lately found again by their bytes, the answer written from each arm id's kept
JSON text, and the route as a raw ASGI application."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from learning_bot.adapters.http.body import BodyReader, decode_body
from learning_bot.adapters.http.guards import RequestGuard, first_headers
from learning_bot.adapters.http.responses import ENCODER, JSON_TYPE, ApiError, failure
from learning_bot.bot.shapes import selection_json
from learning_bot.engine.bounds import check_json
from learning_bot.engine.service import LearningService
from learning_bot.engine.wire import runs as wire
from learning_bot.engine.wire.declare import sent_fields

if TYPE_CHECKING:
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.selection import Selection


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


class _NotPlain(Exception):
    """A value the byte writer leaves to the encoder."""


def _ids(value: Any, text: Callable[[str], str]) -> str:
    return "[" + ",".join(map(text, value)) + "]"


def _flag(value: Any, _: Callable[[str], str]) -> str:
    if type(value) is not bool:
        raise _NotPlain
    return "true" if value else "false"


def _whole(value: Any, _: Callable[[str], str]) -> str:
    if type(value) is not int:
        raise _NotPlain
    return int.__repr__(value)


def _string(value: Any, _: Callable[[str], str]) -> str:
    if value is None:
        return "null"
    if type(value) is not str:
        raise _NotPlain
    return encode_basestring(value)


def _string_or_null(value: Any, text: Callable[[str], str]) -> str:
    return _string(value or None, text)


def _other(value: Any, _: Callable[[str], str]) -> str:
    raise _NotPlain


def _writers(cls: type[Any]) -> list[tuple[str, str, Callable[[Any, Callable[[str], str]], str]]]:
    """How `selection_bytes` writes each field of the wire type `cls`: its key's text, its
    Python name and its writer (by its declared type)."""
    kinds: dict[Any, Callable[[Any, Callable[[str], str]], str]] = {
        tuple[str, ...]: _ids,
        bool: _flag,
        int: _whole,
        str | None: _string,
    }
    plan = []
    for i, f in enumerate(sent_fields(cls)):
        write = kinds.get(f.type, _other)  # a type not written here: the encoder's way
        if write is _string and f.spec.empty_is_null:
            write = _string_or_null
        key = ("{" if i == 0 else ",") + encode_basestring(f.json) + ":"
        plan.append((key, f.py, write))
    return plan


_Writer = Callable[[Any, Callable[[str], str]], str]
_INLINE: dict[_Writer, tuple[str, ...]] = {
    _ids: ("    t{i} = '[' + ','.join(map(text, s.{py})) + ']'",),
    _flag: (
        "    v = s.{py}",
        "    if type(v) is not bool:",
        "        raise _NotPlain",
        "    t{i} = 'true' if v else 'false'",
    ),
    _whole: (
        "    v = s.{py}",
        "    if type(v) is not int:",
        "        raise _NotPlain",
        "    t{i} = int.__repr__(v)",
    ),
    _string: (
        "    v = s.{py}",
        "    if v is None:",
        "        t{i} = 'null'",
        "    elif type(v) is str:",
        "        t{i} = encode_basestring(v)",
        "    else:",
        "        raise _NotPlain",
    ),
}
_INLINE[_string_or_null] = ("    v = s.{py} or None", *_INLINE[_string][1:])


def _compiled(cls: type[Any]) -> Callable[[Any, Callable[[str], str]], str]:
    """One function that writes the fields of `cls` as `_writers` plans them, each writer's
    body written out in place (no loop, no getattr, no call a field), as dataclasses writes
    an `__init__`; it raises what the writers raise."""
    lines = ["def write(s, text):"]
    keys: dict[str, Any] = {}
    for i, (key, py, write) in enumerate(_writers(cls)):
        keys[f"k{i}"] = key
        keys[f"w{i}"] = write
        body = _INLINE.get(write, ("    t{i} = w{i}(s.{py}, text)",))
        lines += [line.format(i=i, py=py) for line in body]
    terms = ", ".join(f"k{i}, t{i}" for i in range(len(keys) // 2))
    lines.append(f"    return ''.join(({terms}, '}}'))")
    namespace: dict[str, Any] = {}
    scope = {**keys, "_NotPlain": _NotPlain, "encode_basestring": encode_basestring}
    exec(compile("\n".join(lines), f"<{cls.__name__} writer>", "exec"), scope, namespace)
    written: Callable[[Any, Callable[[str], str]], str] = namespace["write"]
    return written


_SELECTION = _compiled(wire.Selection)


def selection_bytes(selection: Selection, names: Mapping[str, str] | None) -> bytes:
    """`JsonResponse(selection_json(selection)).body`: with `names` (each arm id's JSON text)
    written here, the fields of the wire type `Selection` in their order, strings, booleans,
    whole numbers and null as the encoder writes them; anything else goes through the
    encoder."""
    if names is not None:
        try:
            return _SELECTION(selection, names.__getitem__).encode()
        except (KeyError, TypeError, _NotPlain):  # an id without its text: the encoder's way
            pass
    return ENCODER.encode(selection_json(selection)).encode("utf-8")


class FastSelect:
    """`POST select` for `Api.select` (the Starlette route) and as an ASGI application of its
    own (`DirectRoutes`), over the learner `service_for` finds for a request's scope."""

    def __init__(
        self,
        guard: RequestGuard,
        reader: BodyReader,
        service_for: Callable[[Scope], LearningService],
        call: Callable[..., Awaitable[Any]],
    ) -> None:
        self.guard = guard
        self.reader = reader
        self.service_for = service_for
        self.call = call
        self._bodies = SelectBodies()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST select` as an ASGI application: what `handler(select, mutating=True)` answers,
        the same bytes, headers and errors, without Starlette's Request and Response objects
        (which cost a fair share of a small selection)."""
        try:
            headers = first_headers(scope)
            self.guard.check(headers)
            raw = await self.reader.raw_body(headers.get("content-length"), receive)
            selection, names = await self.selection(raw, scope)
        except Exception as exc:
            response = failure(exc, scope["method"], scope.get("root_path", "") + scope["path"])
            await response(scope, receive, send)
            return
        body = selection_bytes(selection, names)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body)), JSON_TYPE],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def selection(self, raw: bytes, scope: Scope) -> tuple[Selection, dict[str, str] | None]:
        """The selection a select body asks for, and the JSON of its arm ids when the body was
        seen before (`SelectBodies`)."""
        known = self._bodies.find(raw)
        if known is None:
            data = decode_body(raw, "select")
            service = self.service_for(scope)
            if service.selects_in_memory and _inline_size(data):
                # Posteriors in memory and an inventory small enough: a selection takes less
                # CPU than the hop to a worker thread would.
                return self._select(service, data, raw), None
            # Storage to read, or a large inventory to read: the event loop stays free.
            return await self.call(self._select, service, data, raw), None
        service = self.service_for(scope)
        if service.selects_in_memory and len(known.arms) <= INLINE_ARMS:
            return service.select(known.arms, known.context), known.names
        return await self.call(service.select, known.arms, known.context), known.names

    def _select(self, service: LearningService, data: Any, raw: bytes) -> Selection:
        from learning_bot.engine.inventory import ArmSet, RepeatedArmIds

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
        session_key = data.get("sessionKey")
        if session_key is not None:
            # `sessionKey` names the session as `context.session_key` does (docs/sessions.md)
            context = {**(context or {}), "session_key": session_key}
        if repeated is not None:
            raise repeated
        assert arms is not None
        self._bodies.keep(raw, arms, context)
        return service.select(arms, context)


INLINE_ARMS = 2000
"""A select with at most this many arms runs on the event loop when the service has its
posteriors in memory (about a millisecond of CPU for an inventory it has not seen)."""


def _inline_size(data: Any) -> bool:
    arms = data.get("arms") if type(data) is dict else None
    return type(arms) is list and len(arms) <= INLINE_ARMS
