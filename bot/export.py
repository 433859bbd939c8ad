"""Exports (SPEC section 10): traces and posteriors as JSON, JSON lines or CSV, streamed in
pieces so a large history never sits in memory at once."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from bot.shapes import trace_json
from engine.errors import InvalidInput
from engine.service import LearningService

FORMATS = ("json", "jsonl", "csv")
TRACE_CSV_HEADER = (
    "traceId,runId,sessionId,timestamp,provider,model,channel,isBaseline,totalTokens,"
    "durationMs,aborted"
)
POSTERIOR_CSV_HEADER = "armId,alpha,beta,mean,pulls,lastUpdated"


def _csv_row(values: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


def _posterior_items(service: LearningService) -> list[dict[str, Any]]:
    return [
        {
            "armId": v.arm_id,
            "alpha": v.posterior.alpha,
            "beta": v.posterior.beta,
            "pulls": v.posterior.pulls,
            "lastUpdated": v.posterior.last_updated,
        }
        for v in service.posteriors()
    ]


def export_json(
    service: LearningService, *, traces: bool = True, posteriors: bool = True, indent: bool = True
) -> Iterator[str]:
    """`{traces: [...], posteriors: [...]}`, indented by two spaces unless `indent` is off."""
    if not traces and not posteriors:
        raise InvalidInput("nothing to export: traces and posteriors are both left out")

    def dumps(value: Any, depth: int) -> str:
        if not indent:
            return json.dumps(value)
        return json.dumps(value, indent=2).replace("\n", "\n" + "  " * depth)

    nl, item = ("\n", "    ") if indent else ("", "")
    key = "  " if indent else ""
    yield "{" + nl
    if traces:
        yield f'{key}"traces": ['
        first = True
        for trace in service.iter_traces():
            yield ("" if first else ",") + nl + item + dumps(trace_json(trace), 2)
            first = False
        yield ("" if first else nl + key) + "]"
    if posteriors:
        if traces:
            yield "," + (nl if indent else " ")
        yield f'{key}"posteriors": ' + dumps(_posterior_items(service), 1)
    yield nl + "}\n"


def export_jsonl(service: LearningService) -> Iterator[str]:
    """Traces, one JSON object per line, oldest first (for large learners)."""
    for trace in service.iter_traces():
        yield json.dumps(trace_json(trace)) + "\n"


def export_csv(service: LearningService, table: str) -> Iterator[str]:
    """One table as CSV: `traces` or `posteriors`."""
    if table == "traces":
        yield TRACE_CSV_HEADER + "\r\n"
        for trace in service.iter_traces():
            yield _csv_row(
                [
                    trace.trace_id,
                    trace.run_id,
                    trace.session_id,
                    trace.timestamp,
                    trace.provider,
                    trace.model,
                    trace.channel,
                    str(trace.is_baseline).lower(),
                    trace.usage.total,
                    trace.duration_ms,
                    str(trace.aborted).lower(),
                ]
            )
        return
    if table == "posteriors":
        yield POSTERIOR_CSV_HEADER + "\r\n"
        for v in service.posteriors():
            p = v.posterior
            yield _csv_row(
                [
                    v.arm_id,
                    f"{p.alpha:.4f}",
                    f"{p.beta:.4f}",
                    f"{p.mean:.4f}",
                    p.pulls,
                    "" if p.last_updated is None else p.last_updated,
                ]
            )
        return
    raise InvalidInput(f"--table must be traces or posteriors, got {table!r}")
