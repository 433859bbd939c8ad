"""The real `learning-bot` executable off a terminal (stdin a pipe): a command that asks for
confirmation checks its arguments first, so an unknown arm or a reset with nothing to undo is
named, locally and against a running server (`--url`); a sound one is refused for want of
`--confirm` and writes nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.launch import environment, served

EXE = str(Path(sys.executable).with_name("learning-bot"))


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, env=env, input="", timeout=300
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = environment(tmp_path, {})
    sim = run(env, "simulate", "--traces", "40", "--arms", "6")
    assert sim.returncode == 0, sim.stderr
    return env


def command_rows(env: dict[str, str]) -> tuple[int, int]:
    """(pending confirmations, audit rows) in the SQLite file `env` names."""
    path = env["LEARNING_BOT_DATABASE_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        confirmations = db.execute("SELECT count(*) FROM confirmations").fetchone()[0]
        audit = db.execute("SELECT count(*) FROM audit_log").fetchone()[0]
    return int(confirmations), int(audit)


REFUSED_FOR_THEIR_ARGUMENTS = [
    (("reset", "foo:bar"), "unknown arm 'foo:bar'"),
    (("reset", "Read", "tool:nope:Gone"), "tool:nope:Gone"),
    (("reset", "undo"), "no reset to undo"),
    (("phase", "bogus"), "bogus"),
]


@pytest.mark.parametrize(("args", "named"), REFUSED_FOR_THEIR_ARGUMENTS)
def test_arguments_are_checked_before_the_confirmation_locally(
    env: dict[str, str], args: tuple[str, ...], named: str
) -> None:
    before = command_rows(env)
    done = run(env, *args)
    assert done.returncode != 0
    assert named in done.stderr, done.stderr
    assert "not on a terminal" not in done.stderr
    assert command_rows(env) == before


def test_a_sound_command_off_a_terminal_asks_for_confirm_and_writes_nothing(
    env: dict[str, str],
) -> None:
    before = command_rows(env)
    for args in (("reset", "Read"), ("reset",), ("phase", "passive")):
        done = run(env, *args)
        assert done.returncode == 2, done.stderr
        assert "— not on a terminal" in done.stderr and "--confirm" in done.stderr
    assert command_rows(env) == before
    # The same words with --confirm act.
    assert run(env, "reset", "Read", "--confirm").returncode == 0
    assert "PASSIVE" not in run(env, "phase").stdout


def test_arguments_are_checked_before_the_confirmation_over_url(env: dict[str, str]) -> None:
    with served({**env, "LEARNING_BOT_SPOOL_DIR": env["HOME"] + "/spool"}) as server:
        for args, named in REFUSED_FOR_THEIR_ARGUMENTS:
            done = run(env, "--url", server.url, *args)
            assert done.returncode != 0
            assert named in done.stderr, (args, done.stderr)
            assert "not on a terminal" not in done.stderr
        sound = run(env, "--url", server.url, "reset", "Read")
        assert sound.returncode == 2 and "— not on a terminal" in sound.stderr
        assert run(env, "--url", server.url, "reset", "Read", "--confirm").returncode == 0
    assert os.path.exists(env["LEARNING_BOT_DATABASE_URL"].removeprefix("sqlite:///"))
