"""Builders for run reports used across the storage tests."""

from __future__ import annotations

from collections.abc import Iterable

from learning_bot.engine import Arm, ReportedArm, RunReport, ToolCall

ARMS = (
    Arm("tool:fs:Read", 120),
    Arm("tool:exec:Bash", 200),
    Arm("tool:web:WebSearch", 900),
    Arm("skill:coding:main", 300),
    Arm("file:workspace:README.md", 400),
    Arm("memory:project:deploy", 50, content="Deploys always go through the staging cluster."),
    Arm("section:system:instructions", 80),
)


def report(
    trace_id: str,
    *,
    calls: Iterable[str] = ("Read",),
    text: str = "",
    arms: Iterable[Arm] = ARMS,
    excluded: Iterable[str] = (),
    conversation: str = "C1",
    baseline: bool = False,
    aborted: bool = False,
    error: str | None = None,
    timestamp: int | None = None,
) -> RunReport:
    left_out = set(excluded)
    extra = {} if timestamp is None else {"timestamp": timestamp}
    return RunReport(
        trace_id=trace_id,
        arms=tuple(ReportedArm(a, a.id not in left_out) for a in arms),
        assistant_texts=(text,) if text else (),
        tool_calls=tuple(ToolCall(c) for c in calls),
        channel=conversation,
        is_baseline=baseline,
        aborted=aborted,
        error=error,
        **extra,
    )


def workload_arms(count: int) -> list[Arm]:
    return [Arm(f"tool:bench:T{i:03d}", 100 + i) for i in range(count)]


def workload_report(trace_id: str, arms: list[Arm], used: Iterable[int]) -> RunReport:
    """Every arm included; the tools at the `used` positions are called."""
    names = [arms[i].name for i in used] or ["message"]
    return RunReport(
        trace_id=trace_id,
        arms=tuple(ReportedArm(a) for a in arms),
        tool_calls=tuple(ToolCall(n) for n in names),
        channel="load",
    )
