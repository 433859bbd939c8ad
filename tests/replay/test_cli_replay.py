"""`learning-bot replay FILE...` as a user runs it: the real executable in a subprocess, on the
documented examples and on a generated log, printing what was read, the projection and the
lines it could not read, and writing nothing anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import inherited
from tests.replay.logs import write_log

EXE = str(Path(sys.executable).with_name("learning-bot"))
FIXTURES = Path(__file__).parent / "fixtures"


def replay(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command with a home, data directory and database of its own, to see it uses none."""
    home.mkdir(exist_ok=True)
    environ = inherited(
        {
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{home}/learning.sqlite",
            **(env or {}),
        }
    )
    return subprocess.run(
        [EXE, "replay", *args], capture_output=True, text=True, env=environ, timeout=300
    )


def test_documented_examples_are_read_and_bad_lines_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    files = sorted(str(p) for p in FIXTURES.glob("*.jsonl"))
    done = replay(home, *files)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Read 23 lines of 4 file(s): 12 model calls in 6 conversations (4 anthropic, "
        "3 openai-responses, 3 openclaw, 2 openai-chat), 7 of them calling tools; "
        "8 tools seen.",
        "2 tool(s) were only seen called, their definitions unknown: sized at an assumed 250 "
        "tokens each (give --tools FILE for their real size).",
        "No projection: only 12 usable runs in 6 sessions so far; a projection needs 100 runs "
        "in 20 sessions recorded with every component (passive phase or baseline sessions)",
        "5 line(s) could not be read and were skipped:",
        "  anthropic.jsonl:4: not JSON (Expecting value: line 1 column 1 (char 0))",
        "  anthropic.jsonl:6: response.content must be a list",
        "  openai_chat.jsonl:3: response.choices[0].message.tool_calls[0].function.name is "
        "missing or not a string",
        "  openai_responses.jsonl:4: request.tools[0].name is missing or not a string",
        "  openclaw-session.jsonl:7: message.usage.input must be a whole number of tokens, got -3",
    ]
    assert sorted(p.name for p in home.rglob("*")) == []  # no database, no data directory
    tools = str(FIXTURES / "openclaw-tools.json")
    with_tools = replay(home, "--tools", tools, "--json", str(FIXTURES / "openclaw-session.jsonl"))
    assert with_tools.returncode == 0, with_tools.stderr
    read = json.loads(with_tools.stdout)["read"]
    assert (read["runs"], read["sessions"], read["tools"], read["assumedTools"]) == (3, 1, 4, [])
    assert read["named"] == [
        {
            "file": "openclaw-session.jsonl",
            "line": 7,
            "reason": "message.usage.input must be a whole number of tokens, got -3",
        }
    ]


def test_projection_of_a_generated_log(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    written = write_log(log, 1_000, seed=1, tools=20, tool_words=120, bad_every=250)
    home = tmp_path / "home"
    env = {"LEARNING_BOT_TOKEN_BUDGET": "2000"}
    text = replay(home, str(log), env=env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        f"Read 1,000 lines of 1 file(s): 996 model calls in {written.conversations} "
        f"conversations (996 anthropic), {written.tool_calls} of them calling tools; "
        "20 tools seen."
    )
    assert lines[1] == (
        f"Going active would have given, over 996 runs in {written.conversations} sessions "
        "(the policy replayed, learning as it goes):"
    )
    current = [line for line in lines if line.endswith("(current)")]
    assert len(current) == 1 and current[0].startswith("  budget   2,000: kept ")
    assert "prompt cost cut by" in current[0]
    assert lines[-5:] == [
        "4 line(s) could not be read and were skipped:",
        *(
            f"  agent.jsonl:{n}: not JSON (Invalid control character at: line 1 column 33 "
            "(char 32))"
            for n in (250, 500, 750, 1000)
        ),
    ]

    out = replay(home, str(log), "--json", "--budget", "1000", "--budget", "7000", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["read"]["runs"] == 996 and data["read"]["badLines"] == 4
    projection = data["projection"]
    assert (projection["runs"], projection["sessions"]) == (996, written.conversations)
    settings = {s["tokenBudget"]: s for s in projection["settings"]}
    assert sorted(settings) == [1000, 2000, 7000] and settings[2000]["current"]
    # all 20 tools (about 330 tokens each) fit in 7,000 tokens: none is left out
    assert settings[7000]["recall"] == 1.0
    assert settings[1000]["recall"] < settings[2000]["recall"] < 1.0
    assert settings[1000]["promptCostSavingsPercent"] > settings[2000]["promptCostSavingsPercent"]
    assert settings[2000]["promptCostSavingsPercent"] > 0
    assert settings[2000]["costLow"] <= settings[2000]["promptCostSavingsPercent"]
    assert settings[2000]["promptCostSavingsPercent"] <= settings[2000]["costHigh"]
    assert sorted(p.name for p in home.rglob("*")) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("missing.jsonl",), "cannot read missing.jsonl"),
        (("--runs", "0", "x.jsonl"), "--runs must be from 1 to 100,000"),
        (("--budget", "0", "x.jsonl"), "--budget must be from 1 to 1,000,000,000,000 tokens"),
        (("--budget", str(10**23), "x.jsonl"), "--budget must be from 1 to"),
        (("--seed", "-1", "x.jsonl"), "--seed must be from 0 to"),
        (("--url", "http://127.0.0.1:1", "x.jsonl"), "--url does not apply to `replay`"),
    ],
)
def test_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "x.jsonl").write_text("")
    done = replay(tmp_path / "home", *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal, stderr shows the bytes read; the projection still goes to stdout."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    log = tmp_path / "agent.jsonl"
    write_log(log, 300, seed=2)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        child = subprocess.Popen(
            [EXE, "replay", str(log)],
            stdin=follower,
            stdout=stdout,
            stderr=follower,
            env=inherited({"HOME": str(tmp_path)}),
        )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert child.wait(timeout=120) == 0
    os.close(leader)
    assert b"reading logs: 100%" in seen
    assert out.read_text().startswith("Read 300 lines of 1 file(s)")


def test_standard_input(tmp_path: Path) -> None:
    """`-` reads standard input (a decompressed or filtered log, piped)."""
    done = subprocess.run(
        [EXE, "replay", "-"],
        input=(FIXTURES / "anthropic.jsonl").read_text(),
        capture_output=True,
        text=True,
        env=inherited({"HOME": str(tmp_path)}),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "Read 6 lines of 1 file(s): 4 model calls in 2 conversations (4 anthropic), "
        "2 of them calling tools; 3 tools seen."
    )
    assert "  stdin:4: not JSON (Expecting value: line 1 column 1 (char 0))" in lines
