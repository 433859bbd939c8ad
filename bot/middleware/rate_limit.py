"""Rate limit: at most N changes a minute per actor and surface, counted in the database so
every replica shares the count."""

from __future__ import annotations

from learning_bot.bot.commands import CancelCommand, ConfirmCommand, is_mutating
from learning_bot.bot.errors import RATE_LIMITED
from learning_bot.bot.middleware import Call, Middleware
from learning_bot.bot.ports import CommandBatch
from learning_bot.bot.replies import Reply, error_reply
from learning_bot.engine.posterior import WallClock, now_ms

RATE_WINDOW_MS = 60_000


class RateLimit(Middleware):
    def __init__(self, per_minute: int, clock: WallClock = now_ms) -> None:
        self.per_minute = per_minute
        self.clock = clock

    def touches_store(self, call: Call) -> bool:
        command = call.command
        return (
            self.per_minute > 0
            and is_mutating(command)
            and not isinstance(command, ConfirmCommand | CancelCommand)
        )

    def before(self, call: Call, batch: CommandBatch | None) -> Reply | None:
        if batch is None or not self.touches_store(call):
            return None
        key = f"{call.invocation.surface}:{call.invocation.actor.id}"
        now = self.clock()
        count = batch.hit_rate_limit(key, RATE_WINDOW_MS, now)
        if count <= self.per_minute:
            return None
        wait = (RATE_WINDOW_MS - now % RATE_WINDOW_MS) // 1000 + 1
        return error_reply(
            f"That is more than {self.per_minute} changes in a minute; try again in {wait} s.",
            code=RATE_LIMITED.code,
            retryAfter=wait,
        )
