"""The `traces` row of a run record: the columns the store writes and the row codec.

The record itself (`engine.records.RunRecord`) is the domain's; how it lies in the `traces`
table is storage's: `TRACE_COLUMNS` and `record_row` for the inserts (`storage.hotpath`), and
`record_from_row` for the reads (`storage.reads`). The record's arms are rows of their own,
read and written beside it.
"""

from __future__ import annotations

import json
from typing import Any

from learning_bot.engine.config import Phase
from learning_bot.engine.observation import SkipReason
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord
from learning_bot.engine.usage import Usage

TRACE_COLUMNS = (
    "learner_id",
    "trace_id",
    "run_id",
    "session_id",
    "session_key",
    "channel",
    "conversation",
    "timestamp",
    "provider",
    "model",
    "is_baseline",
    "phase",
    "guard",
    "usage_input",
    "usage_output",
    "usage_cache_read",
    "usage_cache_write",
    "usage_total",
    "duration_ms",
    "system_prompt_chars",
    "aborted",
    "error",
    "context",
    "stats_epoch",
    "bootstrapped",
)
"""The `traces` columns `record_row` fills, in its order."""


def record_row(learner_id: int, record: RunRecord, stats_epoch: int) -> tuple[Any, ...]:
    """The `traces` row of a record, in TRACE_COLUMNS order (a new row: not bootstrapped)."""
    usage = record.usage
    context = record.context
    return (
        learner_id,
        record.trace_id,
        record.run_id,
        record.session_id,
        record.session_key,
        record.channel,
        record.conversation,
        record.timestamp,
        record.provider,
        record.model,
        record.is_baseline,
        record.phase.value,
        record.guard.value if record.guard is not None else None,
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write,
        usage.total,
        record.duration_ms,
        record.system_prompt_chars,
        record.aborted,
        record.error,
        json.dumps(dict(context), separators=(",", ":"), allow_nan=False) if context else "{}",
        stats_epoch,
        False,
    )


def record_from_row(row: Any, arms: tuple[ArmOutcomeRecord, ...]) -> RunRecord:
    """A record from a `traces` row (attribute access by column name) and its arms."""
    try:
        context = json.loads(row.context) if row.context else {}
    except ValueError:
        context = {}
    return RunRecord(
        trace_id=row.trace_id,
        run_id=row.run_id,
        session_id=row.session_id,
        session_key=row.session_key,
        channel=row.channel,
        conversation=row.conversation,
        timestamp=int(row.timestamp),
        provider=row.provider,
        model=row.model,
        is_baseline=bool(row.is_baseline),
        phase=Phase(row.phase),
        guard=SkipReason(row.guard) if row.guard else None,
        usage=Usage(
            int(row.usage_input),
            int(row.usage_output),
            int(row.usage_cache_read),
            int(row.usage_total),
            int(row.usage_cache_write),
        ),
        duration_ms=int(row.duration_ms),
        system_prompt_chars=int(row.system_prompt_chars),
        aborted=bool(row.aborted),
        error=row.error,
        context=context,
        arms=arms,
    )
