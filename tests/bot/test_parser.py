"""The /learning grammar: every valid form, and malformed input refused with a clear reply."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from learning_bot.bot.commands import (
    HelpCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    StatusCommand,
    UsageError,
    parse_command,
)
from learning_bot.engine import Phase

VALID = [
    ("", StatusCommand()),
    ("   ", StatusCommand()),
    ("status", StatusCommand()),
    ("STATUS", StatusCommand()),
    ("status top 10", StatusCommand(top=10)),
    ("status public", StatusCommand(public=True)),
    ("status top 3 public", StatusCommand(top=3, public=True)),
    ("status public top 3", StatusCommand(top=3, public=True)),
    ("status arm tool:fs:Read", StatusCommand(arm="tool:fs:Read")),
    ('status arm "Web Search"', StatusCommand(arm="Web Search")),
    ("status arm Read public", StatusCommand(arm="Read", public=True)),
    ("/learning status", StatusCommand()),
    ("reward", RewardCommand()),
    ("reward good", RewardCommand(value=1.0)),
    ("reward bad", RewardCommand(value=0.0)),
    ("reward 1", RewardCommand(value=1.0)),
    ("reward 0", RewardCommand(value=0.0)),
    ("reward GOOD", RewardCommand(value=1.0)),
    ("reward Read", RewardCommand(arm="Read")),
    ("reward tool:fs:Read bad", RewardCommand(arm="tool:fs:Read", value=0.0)),
    (
        "reward WebSearch bad it sent me to a stale page",
        RewardCommand(arm="WebSearch", value=0.0, reason="it sent me to a stale page"),
    ),
    ('reward "Web Search" good', RewardCommand(arm="Web Search", value=1.0)),
    ("reward good great answer", RewardCommand(value=1.0, reason="great answer")),
    ("reward Read good public", RewardCommand(arm="Read", public=True)),
    ("reward file:workspace:C:/x 1", RewardCommand(arm="file:workspace:C:/x")),
    ("reset", ResetCommand()),
    ("reset all", ResetCommand()),
    ("reset all confirm", ResetCommand(confirm=True)),
    ("reset CONFIRM", ResetCommand(confirm=True)),
    ("reset tool:a:B", ResetCommand(arms=("tool:a:B",))),
    (
        "reset tool:a:B skill:x:main confirm",
        ResetCommand(arms=("tool:a:B", "skill:x:main"), confirm=True),
    ),
    ("reset undo", ResetCommand(undo=True)),
    ("reset undo confirm", ResetCommand(undo=True, confirm=True)),
    ("phase", PhaseCommand()),
    ("phase active", PhaseCommand(Phase.ACTIVE)),
    ("phase PASSIVE", PhaseCommand(Phase.PASSIVE)),
    ("phase active confirm", PhaseCommand(Phase.ACTIVE, confirm=True)),
    ("help", HelpCommand()),
    ("help reward", HelpCommand("reward")),
    ("HELP Reset", HelpCommand("reset")),
    (
        "status arm \u00e9t\u00e9-r\u00e9sum\u00e9",
        StatusCommand(arm="\u00e9t\u00e9-r\u00e9sum\u00e9"),
    ),
    ("reward <!channel> good", RewardCommand(arm="<!channel>")),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_forms(text: str, expected: object) -> None:
    assert parse_command(text) == expected


MALFORMED = [
    ("foo", "unknown command 'foo'"),
    ("stats", "unknown command 'stats'"),
    ("rewad Read", "unknown command 'rewad'"),
    ("reward 2", "'2' is not 1, 0, good or bad"),
    ("reward Read 2", "'2' is not 1, 0, good or bad"),
    ("reward -1", "'-1' is not"),
    ("reward 0.5", "'0.5' is not"),
    ("reward nan", "'nan' is not"),
    ("reward Read inf", "'inf' is not"),
    ("status top", "'top' needs a number"),
    ("status top x", "top must be a whole number"),
    ("status top 0", "top must be a whole number"),
    ("status top 26", "top must be a whole number"),
    ("status top -3", "top must be a whole number"),
    ("status everything", "unexpected 'everything' after status"),
    ("status arm", "'arm' needs one arm id or label"),
    ("status arm a arm b", "'arm' needs one"),
    ("phase turbo", "unknown phase 'turbo'"),
    ("phase active passive", "unexpected 'passive'"),
    ("phase confirm", "'confirm' needs a phase"),
    ("reset undo tool:a:b", "unexpected 'tool:a:b' after reset undo"),
    ("reset all tool:a:b", "use 'reset all', 'reset undo'"),
    ("help me", "no help for 'me'"),
    ("help status reward", "unexpected 'reward' after help"),
    ('""', 'empty quotes ("")'),
    ('reward "" good', 'empty quotes ("")'),
    ('reward "unterminated', "unbalanced quotes"),
    ("x" * 10_000, "10000 characters long"),
    ("`rm -rf /`", "unknown command '`rm'"),
    ("<!channel> hi", "unknown command '<!channel>'"),
    ("@everyone", "unknown command '@everyone'"),
    ("reset undo undo", "unexpected 'undo' after reset undo"),
    ("\u0441tatus", "unknown command '\u0441tatus'"),  # Cyrillic es: a confusable
    ("reward Read good " + "y" * 600, "longer than 500 characters"),
    ("reset " + " ".join(f"tool:a:T{i}" for i in range(51)), "at most 50 arms"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_input_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_command(text)
    assert message in str(info.value)


def test_control_characters_are_text() -> None:
    assert parse_command("status\x00 top\x1b 3") == StatusCommand(top=3)
    assert parse_command("\u202estatus") == StatusCommand()
    assert parse_command("reward Read good line\nbreak") == RewardCommand(
        arm="Read", reason="line break"
    )


@given(st.text(max_size=300))
def test_parser_never_raises_anything_but_usage_errors(text: str) -> None:
    try:
        parse_command(text)
    except UsageError as exc:
        assert str(exc)
