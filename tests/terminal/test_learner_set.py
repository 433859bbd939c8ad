"""`learning-bot learner set`: against the database it makes the learner when there is none
(with the settings given, checked before anything is made), and with `--url` it asks a real
running `serve` (its `POST settings` route, with the API token) to do the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.launch import environment, served

EXE = str(Path(sys.executable).with_name("learning-bot"))
TOKEN = "test-token-0123456789abcdef"


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, env=env, input="", timeout=300
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return environment(tmp_path, {})


def shown(env: dict[str, str], name: str) -> dict[str, object]:
    show = run(env, "learner", "show", name, "--json")
    assert show.returncode == 0, show.stderr
    settings: dict[str, object] = json.loads(show.stdout)["settings"]
    return settings


def test_set_makes_the_learner_with_its_settings_in_the_database(env: dict[str, str]) -> None:
    made = run(env, "learner", "set", "fresh", "halfLife=50", "tokenBudget=4000")
    assert made.returncode == 0, made.stderr
    assert "Created learner 'fresh'" in made.stdout
    assert "halfLife = 50" in made.stdout and "tokenBudget = 4000" in made.stdout
    assert shown(env, "fresh")["tokenBudget"] == 4000
    again = run(env, "learner", "set", "fresh", "minPulls=9", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["settings"]["minPulls"] == 9
    assert shown(env, "fresh")["tokenBudget"] == 4000
    assert "halfLife = 50" in run(env, "learner", "show", "fresh").stdout

    # A bad setting is refused naming it, and no learner is made for it.
    for words, named in (
        (("halfLife=-3",), "half"),
        (("frobnicate=1",), "frobnicate"),
        (("phase=active",), "phase"),
        (("tokenBudget",), "KEY=VALUE"),
    ):
        refused = run(env, "learner", "set", "other", *words)
        assert refused.returncode == 2  # bad usage, as docs/terminal.md says
        assert named in refused.stderr, refused.stderr
    for words in (("set", "other"), ("create", "x", "halfLife=1")):
        refused = run(env, "learner", *words)
        assert refused.returncode == 2, refused.stderr
    refused = run(env, "learner", "set", "other", "--recall-target", "abc")
    assert refused.returncode == 2 and "--recall-target must be a number" in refused.stderr
    missing = run(env, "learner", "show", "other")
    assert missing.returncode != 0 and "unknown learner 'other'" in missing.stderr


def test_set_over_url_changes_or_makes_a_learner_on_a_running_server(
    env: dict[str, str],
) -> None:
    with served({**env, "LEARNING_BOT_API_TOKEN": TOKEN}) as server:
        url = server.url
        # Without the token the server refuses, and says so.
        refused = run(env, "--url", url, "learner", "set", "remote", "halfLife=30")
        assert refused.returncode != 0 and url in refused.stderr, refused.stderr
        with_token = {**env, "LEARNING_BOT_API_TOKEN": TOKEN}
        made = run(with_token, "--url", url, "learner", "set", "remote", "halfLife=30", "--json")
        assert made.returncode == 0, made.stderr
        answer = json.loads(made.stdout)
        assert answer["learner"] == "remote" and answer["settings"]["halfLife"] == 30
        assert "halfLife" in answer["changed"]
        text = run(with_token, "--url", url, "learner", "set", "remote", "tokenBudget=1234")
        assert text.returncode == 0, text.stderr
        assert "changed: tokenBudget" in text.stdout and "tokenBudget = 1234" in text.stdout
        # Checked before anything is sent; show and create work locally only.
        bad = run(with_token, "--url", url, "learner", "set", "remote", "halfLife=soon")
        assert bad.returncode != 0 and "half" in bad.stderr
        local_only = run(with_token, "--url", url, "learner", "show", "remote")
        assert local_only.returncode == 2 and "works locally" in local_only.stderr
    # What the server stored is in the database it serves.
    assert shown(env, "remote")["tokenBudget"] == 1234
    assert "halfLife = 30" in run(env, "learner", "show", "remote").stdout
