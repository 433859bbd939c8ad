"""The console: an interactive prompt where the commands behave exactly as in chat, with line
editing, a history kept across sessions in the data directory, and Tab completion of the
commands, their words and the learner's arm ids and labels."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from learning_bot.adapters.terminal.style import Style
from learning_bot.bot.commands import (
    ArmNamesQuery,
    CancelCommand,
    Command,
    ConfirmCommand,
    clean_input,
)
from learning_bot.bot.replies import Reply, ReplyKind

BANNER = (
    "learning-bot console — type the commands as after `learning-bot`; `help` lists them.\n"
    "Tab completes, Up recalls, `quit` leaves; `confirm` or `cancel` answers a confirmation."
)
PROMPT = "learning> "
HISTORY_ENV = "LEARNING_BOT_CONSOLE_HISTORY"
HISTORY_LENGTH = 1000

COMMANDS = ("status", "reward", "reset", "phase", "help", "confirm", "cancel", "quit")
QUIT_WORDS = frozenset({"quit", "exit", "/quit", "/exit"})
# words that may follow each command (beside arm ids and labels where `ARM_COMMANDS` says so)
WORDS: dict[str, tuple[str, ...]] = {
    "status": ("top", "arm", "public"),
    "reward": ("good", "bad", "1", "0", "public"),
    "reset": ("all", "undo", "confirm"),
    "phase": ("passive", "active", "confirm"),
    "help": ("status", "reward", "reset", "phase", "help"),
}
ARM_COMMANDS = frozenset({"reward", "reset"})

Send = Callable[[Command | str], Reply]


def history_path() -> Path:
    """LEARNING_BOT_CONSOLE_HISTORY, else `console_history` in the user's data directory (the
    folder of the default SQLite database)."""
    override = os.environ.get(HISTORY_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("learning-bot", appauthor=False)) / "console_history"


class Completer:
    """Candidates for the word under the cursor, from the words before it. Arm names come from
    the bus (`ArmNamesQuery`) on first use and again after every command."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self._arms: list[tuple[str, str]] | None = None
        self._unanswered = False

    def forget_arms(self) -> None:
        self._arms = None

    def arms(self) -> list[tuple[str, str]]:
        if self._arms is None and self._unanswered:
            self._arms = []
        if self._arms is None:
            try:
                reply = self.send(ArmNamesQuery())
            except Exception:  # a server that cannot answer: complete without arm names
                reply = None
            names = reply.arm_names if reply is not None and reply.ok else None
            # A server that does not know the query is not asked again this session.
            self._unanswered = names is None
            self._arms = list(names or ())
        return self._arms

    def candidates(self, before: Sequence[str], text: str) -> list[str]:
        words = [w.lower() for w in before]
        if words and words[0] in ("learning-bot", "/learning"):
            words = words[1:]
        if not words:
            return sorted(c for c in COMMANDS if c.startswith(text.lower()))
        command = words[0]
        options = list(WORDS.get(command, ()))
        wants_arm = command in ARM_COMMANDS or (command == "status" and words[-1:] == ["arm"])
        if command == "status" and words[-1:] == ["arm"]:
            options = []
        if command == "reward" and len(words) > 1:
            wants_arm = False  # reward takes one arm, first
        found = [o for o in options if o.startswith(text.lower())]
        if wants_arm:
            found.extend(self._arm_matches(text))
        return sorted(dict.fromkeys(found))

    def _arm_matches(self, text: str) -> list[str]:
        """Arm ids starting with `text`, and the ids of arms whose label starts with it (so a
        label completes to its arm id)."""
        lowered = text.lower()
        return [
            arm_id
            for arm_id, label in self.arms()
            if arm_id.lower().startswith(lowered) or label.lower().startswith(lowered)
        ]


def _enable_line_editing(completer: Completer, history: Path | None) -> Callable[[str], None]:
    """Turn on readline (line editing, history, Tab); returns how to record one line."""
    import readline

    readline.set_completer_delims(" \t\n")
    if "libedit" in (readline.__doc__ or ""):
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
    matches: list[str] = []

    def complete(text: str, state: int) -> str | None:
        if state == 0:
            line = readline.get_line_buffer()[: readline.get_begidx()]
            matches[:] = completer.candidates(line.split(), text)
        return matches[state] + " " if state < len(matches) else None

    readline.set_completer(complete)
    if history is None:
        return lambda _line: None
    readline.set_history_length(HISTORY_LENGTH)
    with contextlib.suppress(OSError):  # no history yet, or an unreadable one
        readline.read_history_file(history)

    def record(_line: str) -> None:
        try:
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)
        except OSError:
            pass  # a read-only home: the session still has its in-memory history

    return record


def run_console(
    send: Send,
    *,
    read: Callable[[str], str] | None = None,
    out: TextIO = sys.stdout,
    history: Path | None = None,
    style: Style | None = None,
) -> int:
    """Read commands until EOF or `quit`; returns the exit code. Without `read`, lines come
    from the terminal with readline's editing, Tab completion and the history file."""
    from learning_bot.adapters.terminal.render import render

    style = style or Style.for_stream(out)
    completer = Completer(send)
    record: Callable[[str], None] = lambda _line: None  # noqa: E731
    if read is None:
        read = input
        if sys.stdin.isatty():
            record = _enable_line_editing(completer, history or history_path())
    print(BANNER, file=out, flush=True)
    pending: str | None = None
    while True:
        try:
            line = clean_input(read(PROMPT)).strip()  # control characters are spaces
        except EOFError:
            print(file=out)
            return 0
        except KeyboardInterrupt:
            print(file=out)
            return 130
        if not line:
            continue
        record(line)
        word = line.lower()
        if word in QUIT_WORDS:
            return 0
        if word in ("confirm", "cancel", "yes", "no"):
            if pending is None:
                print("Nothing to confirm.", file=out, flush=True)
                continue
            command: Command | str = (
                ConfirmCommand(pending) if word in ("confirm", "yes") else CancelCommand(pending)
            )
            pending = None
        else:
            first = line.split()[0]
            if first.lower() == "learning-bot":
                line = line[len(first) :].strip() or "help"
            elif first.startswith("/") and first.lower() != "/learning":
                print(f"Unknown command {first!r}; try help.", file=out, flush=True)
                continue
            command = line
        reply = send(command)
        if isinstance(command, str):
            tokens = [a.token for a in reply.actions if a.command == "confirm"]
            pending = tokens[0] if tokens else pending
        completer.forget_arms()
        text = render(reply, style)
        if reply.kind is ReplyKind.ERROR:
            text = style.error(text)
        print(text, file=out, flush=True)
