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


def selection_bytes(selection: Selection, names: Mapping[str, str] | None) -> bytes:
    """`JsonResponse(selection_json(selection)).body`: with `names` (each arm id's JSON text)
    written here, the fields in `selection_json`'s order, strings, booleans, whole numbers and
    null as the encoder writes them; anything else goes through the encoder."""
    if names is not None:
        baseline, over = selection.is_baseline, selection.over_budget
        budget, used = selection.token_budget, selection.used_tokens
        fallback, guidance = selection.fallback, selection.guidance
        session, why = selection.session, selection.session_reason or None
        if (
            type(baseline) is bool
            and type(over) is bool
            and type(budget) is int
            and type(used) is int
            and (fallback is None or type(fallback) is str)
            and (guidance is None or type(guidance) is str)
            and (session is None or type(session) is str)
            and (why is None or type(why) is str)
        ):
            text = names.__getitem__
            try:
                selected = ",".join(map(text, selection.selected))
                excluded = ",".join(map(text, selection.excluded))
                deferred = ",".join(map(text, selection.deferred))
                added = ",".join(map(text, selection.added))
            except (KeyError, TypeError):  # an id without its text: the encoder's way
                pass
            else:
                return (
                    f'{{"selected":[{selected}],"excluded":[{excluded}],'
                    f'"deferred":[{deferred}],'
                    f'"isBaseline":{"true" if baseline else "false"},'
                    f'"tokenBudget":{int.__repr__(budget)},"usedTokens":{int.__repr__(used)},'
                    f'"overBudget":{"true" if over else "false"},'
                    f'"fallback":{"null" if fallback is None else encode_basestring(fallback)},'
                    f'"guidance":{"null" if guidance is None else encode_basestring(guidance)},'
                    f'"added":[{added}],'
                    f'"session":{"null" if session is None else encode_basestring(session)},'
                    f'"sessionReason":{"null" if why is None else encode_basestring(why)}}}'
                ).encode()
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
            # `sessionKey` names the session as `context.session_key` does (SPEC section 4a)
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
