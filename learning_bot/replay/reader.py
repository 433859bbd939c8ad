"""Log files read into the runs a passive learner would have recorded, one line at a time.

`LogReader(paths).runs()` yields a `RunRecord` per model call, in file order, each with its
conversation's session key, every tool the request offered as an included arm (referenced when
the reply called it), the usage the provider reported and the observation guard the product
applies (a reply without a real tool call is conversational). As it goes, `summary` counts
lines, runs, conversations and formats, keeps the inventory of tools seen (the latest
definition of each, with its token estimate) and names the lines it could not read (line
number and why, the first `MAX_NAMED` of them; all are counted). Nothing of a line is kept once
the next is read, except the state of each open conversation (learning_bot.replay.sessions).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from learning_bot.engine.arms import Arm
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import (
    MAX_ARMS_PER_RUN,
    ReportedArm,
    RunReport,
    ToolCall,
    observation_guard,
    rewards_for_run,
)
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord, record_from_report
from learning_bot.replay.formats import (
    OPENCLAW,
    Exchange,
    FileState,
    LineError,
    parse_line,
    tool_arm,
    tools_of,
)
from learning_bot.replay.sessions import Conversations

MAX_NAMED = 20
"""Unreadable lines named in the summary at most (all are counted)."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longer lines are not decoded: counted as unreadable."""
ASSUMED_TOOL_TOKENS = 250
"""The size given to a tool a transcript called but whose definition no log holds."""
STDIN = "-"
"""The file name that reads standard input."""
LINE_GAP_MS = 1_000
"""A line without a time is taken to come this long after the one before it."""


@dataclass(frozen=True, slots=True)
class BadLine:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ReadSummary:
    """What reading the logs found; filled in as runs are yielded."""

    files: int = 0
    lines: int = 0
    runs: int = 0
    tool_runs: int = 0
    """Runs whose reply called a tool (the others teach nothing)."""
    sessions: int = 0
    formats: Counter[str] = field(default_factory=Counter)
    bad_lines: int = 0
    named: list[BadLine] = field(default_factory=list)
    skipped_runs: int = 0
    """Model calls read but left out: the request offered no tool."""
    inventory: dict[str, Arm] = field(default_factory=dict)
    """Every tool seen, by arm id: its latest definition and token estimate."""
    assumed: set[str] = field(default_factory=set)
    """Tools only ever seen called (transcripts), sized at ASSUMED_TOOL_TOKENS."""

    def bad(self, path: str, line: int, reason: str) -> None:
        self.bad_lines += 1
        if len(self.named) < MAX_NAMED:
            self.named.append(BadLine(path, line, reason))


def load_tools(path: str | os.PathLike[str]) -> tuple[Arm, ...]:
    """Tool definitions from a JSON file: a list in any of the three request shapes, or an
    object holding it under `tools`. Raises InvalidInput naming the file and the field."""
    name = os.fspath(path)
    try:
        data = json.loads(Path(name).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"--tools: cannot read {name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InvalidInput(f"--tools: {name} is not JSON: {exc}") from None
    if isinstance(data, Mapping):
        data = data.get("tools")
    try:
        return tools_of(data if data is not None else [], "tools")
    except LineError as exc:
        raise InvalidInput(f"--tools: {name}: {exc}") from None


class LogReader:
    """Streams log files into run records (see the module's description)."""

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        tools: Sequence[Arm] = (),
        config: LearningConfig | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.paths = [os.fspath(p) for p in paths]
        self.tools = tuple(tools)
        """Tools offered to runs whose log records none (transcripts), from --tools."""
        self.config = config or LearningConfig()
        self.progress = progress
        """Called with the bytes of each line read."""
        self.summary = ReadSummary()
        self._interned: dict[ArmOutcomeRecord, ArmOutcomeRecord] = {}

    def total_bytes(self) -> int | None:
        """The bytes to read, None when one of the files is standard input (`-`)."""
        if STDIN in self.paths:
            return None
        return sum(os.path.getsize(p) for p in self.paths)

    def runs(self) -> Iterator[RunRecord]:
        summary = self.summary
        for tool in self.tools:
            summary.inventory[tool.id] = tool
        # what runs of logs without tool definitions (transcripts) are taken to offer
        undefined = self.tools or tuple(self._called_only().values())
        for arm in undefined:
            summary.inventory.setdefault(arm.id, arm)
        if not self.tools:
            summary.assumed.update(arm.id for arm in undefined)
        conversations = Conversations()
        clock = 0
        for path in self.paths:
            summary.files += 1
            for shown, number, exchange in self._exchanges(path):
                session = exchange.session
                clock = (
                    exchange.timestamp if exchange.timestamp is not None else clock + LINE_GAP_MS
                )
                conversation = conversations.find(
                    exchange, clock, f"openclaw:{session}" if session else ""
                )
                key = conversation.key
                offered = exchange.tools
                if offered is None:
                    offered = undefined
                else:
                    for arm in offered:
                        summary.inventory[arm.id] = arm
                        summary.assumed.discard(arm.id)
                if not offered:
                    summary.skipped_runs += 1
                    continue
                try:
                    record = self._record(
                        exchange, offered[:MAX_ARMS_PER_RUN], key, clock, shown, number
                    )
                except InvalidInput as exc:
                    summary.bad(shown, number, str(exc))
                    continue
                summary.runs += 1
                summary.formats[exchange.format] += 1
                if record.guard is None:
                    summary.tool_runs += 1
                if not conversation.runs:
                    summary.sessions += 1
                conversation.runs += 1
                yield record

    def _exchanges(self, path: str) -> Iterator[tuple[str, int, Exchange]]:
        summary = self.summary
        shown = "stdin" if path == STDIN else os.path.basename(path)
        state = FileState()
        with _open(path) as handle:
            for number, raw in enumerate(handle, 1):
                summary.lines += 1
                if self.progress is not None:
                    self.progress(len(raw))
                if not raw.strip():
                    continue
                if len(raw) > MAX_LINE_BYTES:
                    summary.bad(shown, number, f"longer than {MAX_LINE_BYTES:,} bytes")
                    continue
                try:
                    data = json.loads(raw)
                except (ValueError, RecursionError) as exc:
                    summary.bad(shown, number, f"not JSON ({_short(exc)})")
                    continue
                try:
                    exchange = parse_line(data, state)
                except LineError as exc:
                    summary.bad(shown, number, str(exc))
                    continue
                if exchange is None:
                    continue
                if exchange.format == OPENCLAW:
                    session = state.session or shown
                    exchange = replace(exchange, session=session)
                yield shown, number, exchange

    def _called_only(self) -> dict[str, Arm]:
        """Tools called in transcripts (which hold no definitions), when no --tools was given:
        a first pass over the transcript files only."""
        found: dict[str, Arm] = {}
        for path in self.paths:
            if path == STDIN:
                continue  # read once only: its transcripts' tools need --tools
            with open(path, "rb") as handle:
                first = handle.readline()
                try:
                    head = json.loads(first)
                except ValueError:
                    continue
                if not (isinstance(head, Mapping) and head.get("type") in ("session", "message")):
                    continue
                handle.seek(0)
                for raw in handle:
                    if b'"toolCall"' not in raw:
                        continue
                    try:
                        exchange = parse_line(json.loads(raw), FileState())
                    except (ValueError, RecursionError):
                        continue  # named on the second pass
                    for name in exchange.calls if exchange is not None else ():
                        arm_id = f"tool:agent:{name}"
                        if arm_id not in found:
                            try:
                                arm = tool_arm(name, {"name": name}, "toolCall")
                            except LineError:
                                continue
                            found[arm_id] = Arm(arm.id, ASSUMED_TOOL_TOKENS, name)
        return found

    def _record(
        self,
        exchange: Exchange,
        offered: tuple[Arm, ...],
        key: str,
        timestamp: int,
        shown: str,
        number: int,
    ) -> RunRecord:
        report = RunReport(
            trace_id=f"{shown[:200]}:{number}",
            arms=tuple(ReportedArm(arm) for arm in offered),
            session_key=key[:256],
            timestamp=timestamp,
            provider=exchange.provider,
            model=exchange.model,
            tool_calls=tuple(ToolCall(name[:256]) for name in exchange.calls[:2000]),
            usage=exchange.usage,
            error=exchange.error,
            context={"model": exchange.model} if exchange.model else {},
        )
        config = self.config
        outcome = rewards_for_run(report, config)
        guard = observation_guard(report, config, ignore_phase=True)
        record = record_from_report(report, outcome, Phase.PASSIVE, guard)
        # Requests repeat their tools: share equal arm outcomes between runs.
        interned = self._interned
        if len(interned) > 100_000:
            interned.clear()
        arms = tuple(interned.setdefault(a, a) for a in record.arms)
        return replace(record, arms=arms)


@contextlib.contextmanager
def _open(path: str) -> Iterator[BinaryIO]:
    if path == STDIN:
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as handle:
            yield handle


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def read_all(paths: Sequence[str], **options: Any) -> tuple[list[RunRecord], ReadSummary]:
    """Every run of the logs in a list, with the summary (for small files and tests)."""
    reader = LogReader(paths, **options)
    return list(reader.runs()), reader.summary
