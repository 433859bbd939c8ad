"""AsyncLearningService: the in-process service for asyncio code (agent frameworks are async).

`LearningService` reads and writes storage synchronously, which must never happen on an event
loop. This face awaits each call in a worker thread (`asyncio.to_thread`, with the caller's
context variables), except a `select` the service can answer from the posteriors it holds in
memory: that is a millisecond of CPU, less than the hop to a thread would cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from learning_bot.engine.config import Phase
from learning_bot.engine.observation import RunReport
from learning_bot.engine.service import LearningService
from learning_bot.engine.views import (
    ArmView,
    ObserveResult,
    PhaseChange,
    ResetResult,
    RewardResult,
    Summary,
)

if TYPE_CHECKING:
    from learning_bot.engine.arms import Arm
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.selection import Selection
    from learning_bot.engine.views import Status

INLINE_ARMS = 2000
"""A select from memory with at most this many arms runs on the event loop."""


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

    async def observe(self, report: RunReport) -> ObserveResult:
        return await asyncio.to_thread(self.service.observe, report)

    async def observe_many(self, reports: Sequence[RunReport]) -> list[ObserveResult]:
        return await asyncio.to_thread(self.service.observe_many, reports)

    async def reward(
        self,
        arm: str | None = None,
        value: float | str = 1.0,
        actor: str = "unknown",
        reason: str | None = None,
        conversation: str | None = None,
    ) -> RewardResult:
        return await asyncio.to_thread(self.service.reward, arm, value, actor, reason, conversation)

    async def reset(
        self, arm_ids: Iterable[str] | None = None, actor: str = "unknown"
    ) -> ResetResult:
        return await asyncio.to_thread(self.service.reset, arm_ids, actor)

    async def set_phase(
        self, phase: Phase | str, actor: str = "unknown", bootstrap: bool = True
    ) -> PhaseChange:
        return await asyncio.to_thread(self.service.set_phase, phase, actor, bootstrap)

    async def posteriors(self) -> list[ArmView]:
        return await asyncio.to_thread(self.service.posteriors)

    async def summary(self) -> Summary:
        return await asyncio.to_thread(self.service.summary)

    async def status(self, top: int = 5) -> Status:
        return await asyncio.to_thread(self.service.status, top)


__all__ = ["AsyncLearningService"]
