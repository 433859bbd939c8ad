"""The command tree's schema is what the README documents, and `discord sync` sends exactly
that to Discord (to one guild, the configured guilds, or globally)."""

from __future__ import annotations

import argparse
import asyncio
import io
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from learning_bot.adapters.discord import DiscordSettings, command_schema, load_discord_settings
from learning_bot.adapters.discord.cli import add_arguments, sync_from_cli, sync_targets
from learning_bot.app import App
from learning_bot.engine.errors import InvalidConfig

from .conftest import GUILD, OTHER_GUILD, SETTINGS, Harness
from .fake_discord import BOT_TOKEN, FakeDiscord

README = Path(__file__).resolve().parents[3] / "README.md"
TYPES = {3: "string", 4: "integer", 5: "boolean"}


@dataclass(frozen=True)
class Option:
    type: str
    autocomplete: bool
    required: bool
    choices: tuple[str, ...] = ()
    range: tuple[int, int] | None = None
    length: tuple[int, int] | None = None


def discord_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Discord\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def documented() -> dict[tuple[str, str], Option]:
    rows: dict[tuple[str, str], Option] = {}
    table = discord_section().split("| command | option | type | required |", 1)[1]
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        command, option, kind, required, limits = (c.strip() for c in line.strip("|").split("|"))
        sub = re.fullmatch(r"`/learning (\w+)`", command)
        name = re.fullmatch(r"`(\w+)`", option)
        assert sub and name, line
        numbers = re.fullmatch(r"(\d+)–(\d+)( characters)?", limits)
        span = (int(numbers.group(1)), int(numbers.group(2))) if numbers else None
        rows[(sub.group(1), name.group(1))] = Option(
            type=kind.split(",")[0],
            autocomplete="autocomplete" in kind,
            required={"yes": True, "no": False}[required],
            choices=tuple(c.strip() for c in limits.split(",")) if limits and not span else (),
            range=span if numbers and not numbers.group(3) else None,
            length=span if numbers and numbers.group(3) else None,
        )
    return rows


def registered(schema: dict[str, Any]) -> dict[tuple[str, str], Option]:
    rows: dict[tuple[str, str], Option] = {}
    for sub in schema["options"]:
        assert sub["type"] == 1, "every child of /learning is a subcommand"
        for o in sub.get("options", []):
            low, high = o.get("min_value"), o.get("max_value")
            short, long = o.get("min_length"), o.get("max_length")
            rows[(sub["name"], o["name"])] = Option(
                type=TYPES[o["type"]],
                autocomplete=bool(o.get("autocomplete")),
                required=bool(o.get("required")),
                choices=tuple(c["value"] for c in o.get("choices", [])),
                range=(low, high) if low is not None else None,
                length=(short, long) if short is not None else None,
            )
    return rows


def check_against_readme(schema: dict[str, Any]) -> None:
    assert schema["name"] == "learning" and schema["type"] == 1
    assert registered(schema) == documented()
    section = discord_section()
    permissions = re.search(r"default\s+member permissions `(\d+)`", section)
    assert permissions and int(schema["default_member_permissions"]) == int(permissions.group(1))
    contexts = re.search(r"contexts `\[(\d+)\]`", section)
    assert contexts and schema["contexts"] == [int(contexts.group(1))]
    assert schema["integration_types"] == [0], "guild install"
    for sub in schema["options"]:
        assert 1 <= len(sub["description"]) <= 100
        for option in sub.get("options", []):
            assert 1 <= len(option["description"]) <= 100


def test_the_readme_table_is_parsed() -> None:
    rows = documented()
    assert rows[("status", "top")] == Option("integer", False, False, range=(1, 25))
    assert rows[("reward", "value")].choices == ("good", "bad")
    assert rows[("reset", "arms")] == Option("string", True, True, length=(1, 4000))


async def test_the_command_tree_matches_the_readme(h: Harness) -> None:
    check_against_readme(command_schema(h.client))


async def test_sync_to_one_guild_sends_the_documented_schema(
    fake: FakeDiscord, sqlite_app: App
) -> None:
    out = io.StringIO()
    assert await sync_from_cli(SETTINGS, sqlite_app.bus, [GUILD], out=out) == 0
    assert list(fake.synced) == [GUILD], "only that guild; nothing global"
    (sent,) = [c.body for c in fake.calls if c.kind == "sync"]
    assert isinstance(sent, list) and len(sent) == 1
    check_against_readme(sent[0])
    assert f"Synced /learning guild {GUILD}: it shows in that guild at once." in out.getvalue()


async def test_global_sync_and_clearing(fake: FakeDiscord, sqlite_app: App) -> None:
    await sync_from_cli(SETTINGS, sqlite_app.bus, [None], out=io.StringIO())
    assert [c["name"] for c in fake.synced[None]] == ["learning"]
    check_against_readme(fake.synced[None][0])
    await sync_from_cli(SETTINGS, sqlite_app.bus, [GUILD], clear=True, out=io.StringIO())
    assert fake.synced[GUILD] == []
    assert len(fake.synced[None]) == 1, "clearing a guild leaves the global commands"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_sync_targets() -> None:
    configured = replace(SETTINGS, guild_ids=(GUILD, OTHER_GUILD))
    assert sync_targets(parse("sync"), SETTINGS) == [None]
    assert sync_targets(parse("sync"), configured) == [GUILD, OTHER_GUILD]
    assert sync_targets(parse("sync", "--global"), configured) == [None]
    assert sync_targets(parse("sync", "--guild", str(GUILD)), configured) == [GUILD]
    with pytest.raises(SystemExit):
        parse("sync", "--guild", "not-an-id")


def run_cli(argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> int:
    from learning_bot.cli import main

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return main(argv)


async def test_the_command_line_syncs_the_configured_guilds(
    fake: FakeDiscord,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {
        "DISCORD_TOKEN": BOT_TOKEN,
        "DISCORD_GUILD_IDS": f"{GUILD},{OTHER_GUILD}",
        "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/cli.sqlite",
    }
    code = await asyncio.to_thread(run_cli, ["discord", "sync"], env, monkeypatch)
    assert code == 0
    assert set(fake.synced) == {GUILD, OTHER_GUILD}
    for commands in fake.synced.values():
        check_against_readme(commands[0])
    assert capsys.readouterr().out.count("Synced /learning guild") == 2


async def test_a_refused_token_is_one_line(
    fake: FakeDiscord,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {
        "DISCORD_TOKEN": "wrong",
        "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/cli.sqlite",
    }
    assert await asyncio.to_thread(run_cli, ["discord", "sync"], env, monkeypatch) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Discord refused DISCORD_TOKEN" in err
    assert fake.synced == {}


def test_settings_from_the_environment() -> None:
    settings = load_discord_settings(
        {
            "DISCORD_TOKEN": " abc ",
            "DISCORD_GUILD_IDS": f"{GUILD}, {OTHER_GUILD},{GUILD}",
            "DISCORD_ADMIN_ROLE_IDS": "1300000000000000021",
            "DISCORD_DEFER_AFTER": "0.5",
        }
    )
    assert settings == DiscordSettings(
        token="abc",
        guild_ids=(GUILD, OTHER_GUILD),
        admin_role_ids=frozenset({1_300_000_000_000_000_021}),
        defer_after=0.5,
    )
    assert load_discord_settings({}) == DiscordSettings()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DISCORD_GUILD_IDS": "123,abc"}, "DISCORD_GUILD_IDS"),
        ({"DISCORD_ADMIN_ROLE_IDS": "-5"}, "DISCORD_ADMIN_ROLE_IDS"),
        ({"DISCORD_ADMIN_USER_IDS": "9" * 30}, "DISCORD_ADMIN_USER_IDS"),
        ({"DISCORD_DEFER_AFTER": "5"}, "DISCORD_DEFER_AFTER"),
        ({"DISCORD_DEFER_AFTER": "soon"}, "DISCORD_DEFER_AFTER"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        load_discord_settings(env)
    assert raised.value.field == named


def test_a_missing_token_names_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InvalidConfig) as raised:
        DiscordSettings().require_token()
    assert raised.value.field == "DISCORD_TOKEN"
