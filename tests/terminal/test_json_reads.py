"""Every read command of the command line answers `--json` with one JSON document in the
shape docs/cli-json.md gives."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from learning_bot.app import build_app
from learning_bot.cli import main
from learning_bot.cli.general import build_parser
from learning_bot.settings import Settings
from learning_bot.simulate import simulate

READS: list[tuple[str, ...]] = [
    ("status",),
    ("status", "top", "2"),
    ("status", "arm", "tool:fs:Read"),
    ("phase",),
    ("help",),
    ("help", "reset"),
    ("db", "verify"),
    ("db", "url"),
    ("db", "upgrade"),
    ("learner", "show", "default"),
    ("dashboard",),
]
"""Each read command (and its forms); `export` has its own formats."""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('json')}/j.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        simulate(app.service(create=True), traces=20, arms=6, seed=3)
    finally:
        app.close()
    return url


def answer(db: str, command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["--database-url", db, *command, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, (command, err)
    data = json.loads(out)
    assert isinstance(data, dict), out
    return data


def test_every_read_command_takes_json() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name in {command[0] for command in READS}:
        options = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert "--json" in options, name


def test_each_read_command_prints_its_json(
    db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEARNING_BOT_PUBLIC_URL", "https://learning.example.com")
    got = {command: answer(db, command, capsys) for command in READS}
    status = got[("status",)]
    assert status["summary"]["traceCount"] == 20 and status["phase"] == "active"
    assert len(got[("status", "top", "2")]["top"]) == 2
    assert got[("status", "arm", "tool:fs:Read")]["arm"]["armId"] == "tool:fs:Read"
    explanation = got[("status", "arm", "tool:fs:Read")]["explanation"]
    assert {"dependsOn", "deferred", "loaded", "deferredText"} <= set(explanation)
    phase = got[("phase",)]
    assert (phase["phase"], phase["learner"]) == ("active", "default")
    assert "usable runs" in phase["reason"]  # 20 runs: too few to project from
    listed = got[("help",)]
    names = [c["name"] for c in listed["commands"]]
    assert names[:4] == ["status", "reward", "reset", "phase"] and names[-1] == "help"
    assert not {"subscribe", "unsubscribe", "subscriptions"} & set(names)  # typed in a channel
    cli = {c["name"] for c in listed["cliCommands"]}
    assert {"status", "export", "serve", "db", "completion"} <= cli
    assert got[("help", "reset")]["command"]["usage"].startswith("learning-bot reset")
    verify = got[("db", "verify")]
    assert verify["ok"] is True and verify["learners"][0]["learner"] == "default"
    assert verify["learners"][0]["tracesChecked"] == 20 and verify["spool"]["deadLetters"] == 0
    assert got[("db", "url")] == {"url": db}
    assert got[("db", "upgrade")]["upgraded"] is False
    assert got[("learner", "show", "default")]["learner"] == "default"
    dashboard = got[("dashboard",)]
    assert dashboard["url"].endswith("/__openclaw__/api/learning/dashboard")
    assert dashboard["docs"].endswith("/__openclaw__/api/learning/docs")


def test_the_schema_document_names_every_read_command() -> None:
    text = (Path(__file__).parents[2] / "docs" / "cli-json.md").read_text("utf-8")
    for command in READS:
        assert f"learning-bot {command[0]}" in text, command
