"""AsyncLearningService: the in-process service for asyncio code (agent frameworks are async).

`LearningService` reads and writes storage synchronously, which must never happen on an event
loop. This face awaits each call in a worker thread (`asyncio.to_thread`, with the caller's
context variables), except a `select` the service can answer from the posteriors it holds in
memory: that is a millisecond of CPU, less than the hop to a thread would cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from learning_bot.engine.service import LearningService

if TYPE_CHECKING:
    from learning_bot.engine.arms import Arm
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.selection import Selection

P = ParamSpec("P")
R = TypeVar("R")

INLINE_ARMS = 2000
"""A select from memory with at most this many arms runs on the event loop."""


def _in_thread(
    method: Callable[Concatenate[LearningService, P], R],
) -> Callable[Concatenate[AsyncLearningService, P], Coroutine[Any, Any, R]]:
    """The awaitable face of a `LearningService` method: the wrapped service's method, called
    in a worker thread with the same arguments."""
    name = method.__name__

    async def call(self: AsyncLearningService, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(getattr(self.service, name), *args, **kwargs)

    call.__name__ = name
    call.__qualname__ = f"AsyncLearningService.{name}"
    call.__doc__ = method.__doc__
    return call


class AsyncLearningService:
    """`await`able select, observe, reward, reset, phase and reads over a `LearningService`
    (`service` is the wrapped one; its synchronous calls remain available)."""

    def __init__(self, service: LearningService) -> None:
        self.service = service

    async def select(
        self,
        arms: Sequence[Arm] | ArmSet,
        context: Mapping[str, Any] | None = None,
        *,
        session_key: str | None = None,
    ) -> Selection:
        """`LearningService.select`: never fails the agent (every arm, with `fallback`, when
        storage is down)."""
        service = self.service
        if service.selects_in_memory and len(arms) <= INLINE_ARMS:
            return service.select(arms, context, session_key=session_key)
        return await asyncio.to_thread(service.select, arms, context, session_key=session_key)

    observe = _in_thread(LearningService.observe)
    observe_many = _in_thread(LearningService.observe_many)
    reward = _in_thread(LearningService.reward)
    reset = _in_thread(LearningService.reset)
    set_phase = _in_thread(LearningService.set_phase)
    posteriors = _in_thread(LearningService.posteriors)
    summary = _in_thread(LearningService.summary)
    status = _in_thread(LearningService.status)


__all__ = ["AsyncLearningService"]
