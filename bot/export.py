"""Exports (docs/cli.md, "Exports"): traces and posteriors as JSON, JSON lines or CSV, streamed in
pieces so a large history never sits in memory at once."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

from learning_bot.bot.shapes import trace_json
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.service import LearningService

FORMATS = ("json", "jsonl", "csv")
TRACE_CSV_HEADER = (
    "traceId,runId,sessionId,timestamp,provider,model,channel,isBaseline,totalTokens,"
    "durationMs,aborted"
)
POSTERIOR_CSV_HEADER = "armId,alpha,beta,mean,pulls,lastUpdated"
ARM_CSV_HEADER = "traceId,armId,label,included,referenced,tokenCost,reward"
CSV_TABLES = ("traces", "arms", "posteriors")

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet may take a cell for a formula by when it begins with it (OWASP's list
for CSV injection)."""

CsvValue = str | int | float | bool | None


def csv_text(value: str) -> str:
    """A text cell as every CSV the product writes holds it: one beginning like a formula is
    prefixed with a single quote (OWASP's advice), so a spreadsheet shows it as text instead of
    evaluating it. Applies to every text from outside (trace ids, providers, models, channels,
    session keys, labels), also one that looks like a number."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_cell(value: CsvValue) -> str:
    """One cell: text through `csv_text`; numbers written by us as numbers (floats with 4
    decimals), never prefixed: a cell holding only a number is read as that number, not as a
    formula, and the bounds keep every number exported non-negative anyway; booleans as
    true/false; None empty."""
    if isinstance(value, str):
        return csv_text(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _csv_row(values: Sequence[CsvValue]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow([csv_cell(v) for v in values])
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


def _trace_rows(service: LearningService) -> Iterator[Sequence[CsvValue]]:
    for trace in service.iter_traces(with_arms=False):
        yield [
            trace.trace_id,
            trace.run_id,
            trace.session_id,
            trace.timestamp,
            trace.provider,
            trace.model,
            trace.channel,
            trace.is_baseline,
            trace.usage.total,
            trace.duration_ms,
            trace.aborted,
        ]


def _arm_rows(service: LearningService) -> Iterator[Sequence[CsvValue]]:
    for trace in service.iter_traces():
        for arm in trace.arms:
            yield [
                trace.trace_id,
                arm.arm_id,
                arm.label,
                arm.included,
                arm.referenced,
                arm.token_cost,
                arm.reward,
            ]


def _posterior_rows(service: LearningService) -> Iterator[Sequence[CsvValue]]:
    for v in service.posteriors():
        p = v.posterior
        yield [v.arm_id, p.alpha, p.beta, p.mean, p.pulls, p.last_updated]


_CSV_ROWS = {
    "traces": (TRACE_CSV_HEADER, _trace_rows),
    "arms": (ARM_CSV_HEADER, _arm_rows),
    "posteriors": (POSTERIOR_CSV_HEADER, _posterior_rows),
}
"""Each CSV table's header and rows."""


def export_csv(service: LearningService, table: str) -> Iterator[str]:
    """One table as CSV: `traces` (one row per run, as docs/cli.md lists), `arms` (one row
    per arm of each run: what it was offered, kept and used) or `posteriors`."""
    if table not in _CSV_ROWS:
        raise InvalidInput(f"--table must be one of {', '.join(CSV_TABLES)}, got {table!r}")
    header, rows = _CSV_ROWS[table]
    yield header + "\r\n"
    for row in rows(service):
        yield _csv_row(row)
