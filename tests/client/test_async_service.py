"""AsyncLearningService: the in-process service awaited from asyncio code, its storage calls
off the event loop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from learning_bot.async_service import AsyncLearningService
from learning_bot.engine import Arm, ArmSet, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore


class ThreadNotingStore(SqlStore):
    """A real SQLite store that notes the thread each run is written from."""

    writers: list[int]

    def record_runs(self, *args: Any, **kwargs: Any) -> Any:
        self.writers.append(threading.get_ident())
        return super().record_runs(*args, **kwargs)


async def test_select_observe_and_reads_awaited(tmp_path: Path) -> None:
    store = ThreadNotingStore(f"sqlite:///{tmp_path / 'a.sqlite'}")
    store.writers = []
    config = LearningConfig(token_budget=200, baseline_rate=0.0, min_pulls=0)
    service = AsyncLearningService(LearningService(store, config, rng=3))
    await service.set_phase("active", actor="test")
    inventory = ArmSet([Arm("tool:fs:Read", 120), Arm("tool:web:WebSearch", 900)])

    first = await service.select(inventory, session_key="s-1")
    again = await service.select(inventory, context={"session_key": "s-1"})
    assert first.selected == again.selected == ("tool:fs:Read",)  # WebSearch cannot fit
    assert first.guidance is not None and "WebSearch" in first.guidance

    result = await service.observe(
        RunReport(
            trace_id="run-1",
            session_key="s-1",
            arms=tuple(ReportedArm(a, a.id in first.selected) for a in inventory.arms),
            assistant_texts=("done",),
            tool_calls=(ToolCall("Read"),),
        )
    )
    assert result.recorded and result.rewards == {"tool:fs:Read": 1.0}
    assert store.writers and threading.get_ident() not in store.writers
    assert (await service.summary()).trace_count == 1
    assert (await service.status()).phase is Phase.ACTIVE
    pulls = {v.arm_id: v.posterior.pulls for v in await service.posteriors()}
    assert pulls == {"tool:fs:Read": 1, "tool:web:WebSearch": 0}
    assert (await service.reward("Read", 0.0, actor="test")).arm_ids == ("tool:fs:Read",)
    store.close()
