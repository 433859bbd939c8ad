"""The command registry: each command declared once, and what is built from it (the names,
the grammar, the help, the stored form of a command) agreeing with the declarations; the
reward words one vocabulary for the chat parser and the service."""

from __future__ import annotations

import pytest

from learning_bot.bot.commands import (
    COMMAND_NAMES,
    GRAMMAR,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    StatusCommand,
    command_from_json,
    command_to_json,
    parse_command,
)
from learning_bot.bot.commands.registry import grammar_lines, named, spec_of, specs, typed
from learning_bot.bot.commands.usage import help_reply, help_text
from learning_bot.bot.render_text import render_text
from learning_bot.engine.config import Phase
from learning_bot.engine.inputs import reward_value
from learning_bot.engine.reward_words import REWARD_WORDS


def test_every_typed_command_has_one_grammar_help_and_parser() -> None:
    names = [spec.name for spec in typed()]
    assert tuple(names) == COMMAND_NAMES
    assert names[0] == "status" and names[-1] == "help"
    for spec in typed():
        assert spec.help.startswith("{cmd} " + spec.name), spec.name
        assert " — " in spec.help, spec.name
        for line in spec.grammar:
            assert line.lstrip("[").startswith(spec.name), line
        assert named(spec.name.upper()) is spec
    assert grammar_lines() == GRAMMAR
    assert GRAMMAR[0] == "/learning [status [top N] [public]]"


def test_the_help_lists_every_command_in_registry_order() -> None:
    reply = help_reply(None, "slack")
    assert [c["name"] for c in reply.data["commands"]] == list(COMMAND_NAMES)
    assert reply.data["grammar"][0].startswith("/learning [status")


def test_a_terminal_s_help_lists_the_commands_it_offers_and_says_where_the_others_are() -> None:
    chat_only = ["subscribe", "unsubscribe", "subscriptions"]
    for surface in ("terminal", "console"):
        reply = help_reply(None, surface)
        names = [c["name"] for c in reply.data["commands"]]
        assert names == [n for n in COMMAND_NAMES if n not in chat_only]
        assert reply.data["grammar"][0].startswith("learning-bot [status")
        assert not any(word in line for line in reply.data["grammar"] for word in chat_only)
        assert "subscribe, unsubscribe, subscriptions: typed in a Slack or Discord channel." in (
            render_text(reply)
        )
    assert help_text("reset", "slack").startswith("/learning reset [all")


def test_a_bare_learning_is_the_compact_status() -> None:
    assert parse_command("") == StatusCommand()
    assert parse_command(None) == StatusCommand()


def test_every_command_object_has_its_declaration() -> None:
    for spec in specs():
        assert spec_of(spec.type.__new__(spec.type)) is spec
    with pytest.raises(ValueError, match="unknown command"):
        spec_of(object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "command",
    [
        StatusCommand(top=3, public=True, arm="Read"),
        RewardCommand("Read", 0.0, "stale", True),
        ResetCommand(("tool:a:B",), False, True),
        ResetCommand(None, True, False),
        PhaseCommand(Phase.ACTIVE, True),
        PhaseCommand(),
    ],
)
def test_a_stored_command_reads_back_as_it_was(command: object) -> None:
    assert command_from_json(command_to_json(command)) == command  # type: ignore[arg-type]


def test_surface_forms_fit_discord() -> None:
    for spec in specs():
        if spec.form is None:
            continue
        assert 1 <= len(spec.form.description) <= 100, spec.name
        for option in spec.form.options:
            assert 1 <= len(option.description) <= 100, (spec.name, option.name)
            assert option.kind in (int, str, bool)


@pytest.mark.parametrize("word", sorted(REWARD_WORDS))
def test_one_reward_vocabulary_for_chat_and_service(word: str) -> None:
    typed_reward = parse_command(f"reward Read {word.upper()}")
    assert typed_reward == RewardCommand(arm="Read", value=REWARD_WORDS[word])
    assert reward_value(word) == REWARD_WORDS[word]
    assert parse_command(f"reward {word}") == RewardCommand(value=REWARD_WORDS[word])
