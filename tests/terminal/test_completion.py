"""`learning-bot completion bash|zsh|fish`: scripts generated from the argument parser; the
bash one, sourced in bash, completes commands, options, their choices and arm ids."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from learning_bot.app import build_app
from learning_bot.cli.general import build_parser
from learning_bot.engine import Arm, ReportedArm, RunReport, ToolCall
from learning_bot.settings import Settings
from tests.processes import inherited

EXE = Path(sys.executable).with_name("learning-bot")


def script(shell: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(EXE), "completion", shell],
        capture_output=True,
        text=True,
        env=env or inherited(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def commands() -> list[str]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('completion')}/c.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        arms = (ReportedArm(Arm("tool:fs:Read", 10)), ReportedArm(Arm("tool:web:WebFetch", 10)))
        app.service(create=True).observe(RunReport("t1", arms, tool_calls=(ToolCall("Read"),)))
    finally:
        app.close()
    return url


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_choices_and_arm_ids(db: str) -> None:
    env = inherited(
        {
            "LEARNING_BOT_DATABASE_URL": db,
            "PATH": f"{EXE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    cases = {
        "learning-bot st": "status",
        "learning-bot ex": "export",
        "learning-bot export --format j": "json jsonl",
        "learning-bot db v": "verify",
        "learning-bot phase --j": "--json",
        "learning-bot --database-url x status a": "arm",
        "learning-bot status arm tool:fs:R": "Read",  # after the last ':' (bash splits there)
        "learning-bot reward Web": "WebFetch",
        "learning-bot help r": "reward reset",
    }
    lines = []
    for line in cases:
        words = line.split(" ")
        lines.append(
            f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
            '_learning_bot; echo "${COMPREPLY[*]}"'
        )
    program = script("bash", env) + "\n" + "\n".join(lines)
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == list(cases.values()), done.stderr


def test_every_shell_script_names_every_command() -> None:
    names = commands()
    assert "completion" in names
    for shell in ("bash", "zsh", "fish"):
        text = script(shell)
        for name in names:
            assert name in text, (shell, name)
    assert "compdef _learning_bot learning-bot" in script("zsh")
    assert "complete -c learning-bot" in script("fish")


def test_a_shell_is_needed() -> None:
    done = subprocess.run(
        [str(EXE), "completion"], capture_output=True, text=True, env=inherited(), timeout=60
    )
    assert done.returncode == 2 and "one of: bash, zsh, fish" in done.stderr
