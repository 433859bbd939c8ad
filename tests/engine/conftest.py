"""Shared builders for the engine tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall

ReportFactory = Callable[..., RunReport]


@pytest.fixture
def active_config() -> LearningConfig:
    """Active phase, learning on, the default settings otherwise."""
    return LearningConfig(phase=Phase.ACTIVE)


@pytest.fixture
def make_report() -> ReportFactory:
    """Build a RunReport from included arms, excluded arms, texts and tool calls.

    Tool calls may be given as names (strings) or ToolCall objects.
    """

    def build(
        included: Iterable[Arm] = (),
        excluded: Iterable[Arm] = (),
        texts: Sequence[str] = (),
        calls: Sequence[str | ToolCall] = (),
        **fields: Any,
    ) -> RunReport:
        arms = tuple(ReportedArm(a, True) for a in included) + tuple(
            ReportedArm(a, False) for a in excluded
        )
        tool_calls = tuple(c if isinstance(c, ToolCall) else ToolCall(c) for c in calls)
        fields.setdefault("trace_id", "trace-1")
        return RunReport(
            arms=arms,
            assistant_texts=tuple(texts),
            tool_calls=tool_calls,
            **fields,
        )

    return build
