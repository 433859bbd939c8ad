"""Idempotency: a surface's retry of the same command (same trigger or interaction id) runs
once and gets the first execution's reply."""

from __future__ import annotations

import json
from dataclasses import replace

from learning_bot.bot.commands.registry import is_mutating
from learning_bot.bot.middleware import Call, Middleware
from learning_bot.bot.ports import CommandBatch
from learning_bot.bot.replies import Reply, ReplyKind, Text
from learning_bot.bot.shapes import reply_from_json, reply_json
from learning_bot.engine.posterior import WallClock, now_ms

IN_FLIGHT = Reply(ReplyKind.INFO, (Text("This request is already being handled."),), "")
"""Answered when the first execution of a key has not finished yet."""

RAN = Reply(
    ReplyKind.OK,
    (
        Text(
            "Done: this request ran once, but its full answer is not available here (the"
            " server running it may have stopped). `/learning status` shows the result."
        ),
    ),
    "Done (this request ran once)",
)
"""Stored as a claim's reply in the transaction of the command's first change (`ran_mark`),
so a retry of a command whose process died before recording its own reply is answered, not
run twice."""

MARKED_AT = "ranOnceMarkedAt"
"""The mark's `data` field: when the command started (ms), so a retry within the lease waits
for the command's own reply (it may still be running) and one past it is answered `RAN`."""


def ran_mark(at: int) -> str:
    """The stored text of `RAN` for a command that started at `at`."""
    return json.dumps(reply_json(replace(RAN, data={MARKED_AT: at})))


def stored_answer(stored: str | None, now: int, lease_ms: int | None) -> Reply | None:
    """What a claim's stored reply answers a retry: None while the first execution may still
    be running (no reply yet, or only the mark of its first change, within the lease)."""
    if stored is None:
        return None
    reply = reply_from_json(json.loads(stored))
    started = reply.data.get(MARKED_AT)
    if started is None:
        return reply
    if lease_ms is None or now - int(started) < lease_ms:
        return None
    return RAN


def scoped_key(call: Call) -> str | None:
    key = call.invocation.idempotency_key
    return f"{call.invocation.surface}:{key}"[:256] if key else None


class Idempotency(Middleware):
    def __init__(self, lease_ms: int | None = None, clock: WallClock = now_ms) -> None:
        self.lease_ms = lease_ms
        self.clock = clock
        """A claim without a reply older than this is taken over (bot.ports.CommandBatch)."""

    def touches_store(self, call: Call) -> bool:
        return scoped_key(call) is not None

    def before(self, call: Call, batch: CommandBatch | None) -> Reply | None:
        key = scoped_key(call)
        if key is None or batch is None:
            return None
        new, stored = batch.claim(key, self.clock(), self.lease_ms)
        if new:
            return None
        answer = stored_answer(stored, self.clock(), self.lease_ms)
        return IN_FLIGHT if answer is None else answer

    def after(self, call: Call, reply: Reply, batch: CommandBatch | None) -> None:
        key = scoped_key(call)
        if key is not None and batch is not None:
            batch.finish(key, json.dumps(reply_json(reply)))


__all__ = [
    "IN_FLIGHT",
    "RAN",
    "Idempotency",
    "is_mutating",
    "ran_mark",
    "scoped_key",
    "stored_answer",
]
