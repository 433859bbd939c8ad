"""Audit: every change (and every refused attempt at one) is recorded with who, where and
what came of it, in the learner's audit log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from learning_bot.bot.commands.registry import command_to_json, is_mutating
from learning_bot.bot.middleware import Middleware
from learning_bot.engine.posterior import now_ms

if TYPE_CHECKING:
    from learning_bot.bot.middleware import Call
    from learning_bot.bot.ports import CommandBatch
    from learning_bot.bot.replies import Reply
    from learning_bot.engine.posterior import WallClock


class Audit(Middleware):
    def __init__(self, clock: WallClock = now_ms) -> None:
        self.clock = clock

    def touches_store(self, call: Call) -> bool:
        return is_mutating(call.command)

    def after(self, call: Call, reply: Reply, batch: CommandBatch | None) -> None:
        if batch is None or not is_mutating(call.command):
            return
        from learning_bot.engine.store_records import AuditEntry

        invocation = call.invocation
        entry = AuditEntry(
            kind="command",
            actor=invocation.actor.id,
            surface=invocation.surface,
            detail={
                "command": command_to_json(call.command),
                "actor_name": invocation.actor.name,
                "scope": invocation.scope,
                "conversation": invocation.conversation,
            },
            result=f"{reply.kind.value}: {reply.summary}"[:2000],
            at=self.clock(),
        )
        batch.audit(call.learner, entry)
