"""The console typed into through a pseudo-terminal, as a person would: line editing, history
across sessions, Tab completion of commands and of arm labels to arm ids."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from learning_bot.adapters.terminal.console import Completer
from learning_bot.bot.commands import ArmNamesQuery, Command
from learning_bot.bot.replies import Reply, ReplyKind
from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")


def _read_until(fd: int, needle: bytes, timeout: float = 60.0) -> bytes:
    buffer = b""
    deadline = time.monotonic() + timeout
    while needle not in ANSI.sub(b"", buffer):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"did not see {needle!r}; got {buffer[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
    return ANSI.sub(b"", buffer)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    env = inherited(
        {
            "HOME": str(tmp_path),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/console.sqlite",
            "TERM": "xterm",
            "NO_COLOR": "1",
        }
    )
    env.pop("LEARNING_BOT_CONSOLE_HISTORY", None)
    done = subprocess.run(
        [EXE, "simulate", "--traces", "40", "--arms", "10"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return env


def _console(env: dict[str, str]) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execve(EXE, [EXE, "console"], env)
    _read_until(fd, b"learning> ")
    return pid, fd


def _quit(pid: int, fd: int) -> int:
    os.write(fd, b"quit\r")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.WEXITSTATUS(status)


def test_up_recalls_tab_completes_and_history_outlives_the_session(
    home: dict[str, str], tmp_path: Path
) -> None:
    pid, fd = _console(home)
    try:
        os.write(fd, b"sta\t\r")  # Tab: sta -> status
        out = _read_until(fd, b"learning> ")
        assert b"Learning status" in out and b"Traces         40" in out

        os.write(fd, b"phase\r")
        out = _read_until(fd, b"learning> ")
        assert b"Phase: ACTIVE" in out
        assert b"Switch with learning-bot phase passive." in out  # terminal syntax, not chat's

        os.write(fd, b"\x1b[A\r")  # Up: the previous command again
        out = _read_until(fd, b"learning> ")
        assert b"Phase: ACTIVE" in out

        os.write(fd, b"status arm Writ\t\r")  # a label completes to its arm id
        out = _read_until(fd, b"learning> ")
        assert b"tool:fs:Write \n" in out  # what Tab put on the line
        assert b"\ntool:fs:Write\nLabel           Write" in out  # 'Writ' alone names no arm

        os.write(fd, b"help\r")
        out = _read_until(fd, b"learning> ")
        assert b"learning-bot reward [<arm-id-or-label>]" in out
        assert b"/learning" not in out
    finally:
        assert _quit(pid, fd) == 0

    history = tmp_path / "data" / "learning-bot" / "console_history"
    assert "status arm tool:fs:Write" in history.read_text()

    pid, fd = _console(home)  # a new session: Up reaches the last one's commands
    try:
        os.write(fd, b"\x1b[A\x1b[A\r")  # quit, then help... the one before quit is help
        out = _read_until(fd, b"learning> ")
        assert b"learning-bot help <command> explains one command." in out
    finally:
        assert _quit(pid, fd) == 0


def test_colour_on_a_terminal_unless_no_color(home: dict[str, str]) -> None:
    env = {k: v for k, v in home.items() if k != "NO_COLOR"}
    pid, fd = _console(env)
    try:
        os.write(fd, b"status\r")
        pid_out = b""
        deadline = time.monotonic() + 60
        while b"Top 5 arms" not in ANSI.sub(b"", pid_out) and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 5)
            if ready:
                pid_out += os.read(fd, 4096)
        assert b"\x1b[1;30;42m ACTIVE \x1b[0m" in pid_out  # the phase badge
        assert b"\x1b[1mTop 5 arms by mean" in pid_out  # a table header
    finally:
        _quit(pid, fd)


def _fake_send(command: Command | str) -> Reply:
    assert isinstance(command, ArmNamesQuery)
    arms = (("tool:fs:Read", "Read"), ("tool:fs:Write", "Write"), ("skill:review:main", "review"))
    return Reply(ReplyKind.INFO, (), "3 arms", arm_names=arms)


@pytest.mark.parametrize(
    ("line", "text", "expected"),
    [
        ("", "", ["cancel", "confirm", "help", "phase", "quit", "reset", "reward", "status"]),
        ("", "re", ["reset", "reward"]),
        ("phase", "a", ["active"]),
        ("reward", "Wr", ["tool:fs:Write"]),
        ("reward", "tool:fs:", ["tool:fs:Read", "tool:fs:Write"]),
        ("reward Read", "g", ["good"]),
        ("reset", "rev", ["skill:review:main"]),
        ("status", "t", ["top"]),
        ("status arm", "re", ["skill:review:main", "tool:fs:Read"]),
        ("help", "ph", ["phase"]),
        ("learning-bot", "st", ["status"]),
    ],
)
def test_completion_candidates(line: str, text: str, expected: list[str]) -> None:
    assert Completer(_fake_send).candidates(line.split(), text) == expected


def test_the_console_screenshot_is_regenerated_by_its_script(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "console.png"
    done = subprocess.run(
        [sys.executable, str(root / "docs" / "console_screenshot.py"), "--out", str(out)],
        env=inherited(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    from PIL import Image

    with Image.open(out) as image:
        width, height = image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert width > 600 and height > 400
    green_badge = (110, 210, 120)  # the ACTIVE badge's background
    assert any(rgb == green_badge for _, rgb in colours)
    assert "docs/screenshots/console.png" in (root / "README.md").read_text()
    assert "](screenshots/console.png)" in (root / "docs" / "terminal.md").read_text()
    assert "docs/console_screenshot.py" in (root / "Makefile").read_text()


def test_completion_without_arm_names_asks_once() -> None:
    asked: list[object] = []

    def refuses(command: Command | str) -> Reply:
        asked.append(command)
        return Reply(ReplyKind.ERROR, (), "unknown command")

    completer = Completer(refuses)
    assert completer.candidates(["reward"], "g") == ["good"]
    completer.forget_arms()
    assert completer.candidates(["reset"], "a") == ["all"]
    assert len(asked) == 1


def test_a_line_of_control_characters_is_an_empty_line_not_a_status() -> None:
    import io

    from learning_bot.adapters.terminal.console import run_console
    from learning_bot.bot.replies import Reply, ReplyKind, Text

    sent: list[object] = []

    def send(command: object) -> Reply:
        sent.append(command)
        return Reply(ReplyKind.INFO, (Text("ok"),), "ok")

    lines = iter(["\x01\x02", "\x1b", "  \x7f ", "quit"])
    out = io.StringIO()
    assert run_console(send, read=lambda _prompt: next(lines), out=out) == 0
    assert sent == []
