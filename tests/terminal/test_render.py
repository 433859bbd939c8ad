"""Replies name commands as their surface types them; colour only on a terminal that wants it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from learning_bot.adapters.terminal.render import render
from learning_bot.adapters.terminal.style import Style, colour_wanted
from learning_bot.app import App, build_app
from learning_bot.bot.bus import Actor, Invocation
from learning_bot.bot.render_text import render_text
from learning_bot.settings import Settings
from learning_bot.simulate import simulate


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    built = build_app(Settings(database_url=f"sqlite:///{tmp_path}/r.sqlite"), spool=False)
    simulate(built.service(), traces=40, arms=8, seed=3)
    try:
        yield built
    finally:
        built.close()


def _ask(app: App, surface: str, text: str) -> str:
    return render_text(app.bus.dispatch(Invocation(surface, Actor("u", is_admin=True), text)))


@pytest.mark.parametrize(
    "text",
    ["phase", "help", "help reset", "reset", "status top 0", "reset all confirm"],
)
def test_every_hint_uses_the_surfaces_prefix(app: App, text: str) -> None:
    for surface, prefix, other in (
        ("terminal", "learning-bot ", "/learning "),
        ("console", "learning-bot ", "/learning "),
        ("slack", "/learning ", "learning-bot "),
        ("discord", "/learning ", "learning-bot "),
    ):
        shown = _ask(app, surface, text)
        assert prefix in shown, (surface, text, shown)
        assert other not in shown.replace("run: learning-bot simulate", ""), (surface, shown)


def test_colour_is_off_unless_a_terminal_wants_it(app: App) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert colour_wanted(Tty(), {"TERM": "xterm"})
    assert not colour_wanted(Tty(), {"TERM": "xterm", "NO_COLOR": "1"})
    assert not colour_wanted(Tty(), {"TERM": "dumb"})
    assert not colour_wanted(io.StringIO(), {"TERM": "xterm"})

    reply = app.bus.dispatch(Invocation("terminal", Actor("u", is_admin=True), "status"))
    assert render(reply, Style(False)) == render_text(reply)
    coloured = render(reply, Style(True))
    assert "\x1b[1;30;42m ACTIVE \x1b[0m" in coloured
    assert "\x1b[1mTop 5 arms by mean\x1b[0m" in coloured
    savings = reply.data["summary"]["baseline"]["tokenSavingsPercent"]
    if savings is not None:  # None when the service drew no baseline run among the 40
        line = f"Tokens per run, selected against baseline runs: {savings:.1f}% fewer"
        assert f"\x1b[2m{line}" in coloured  # a note, not the saving
    # without the escape codes it is the plain text, word for word
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured).replace(" ACTIVE ", "[ACTIVE]") == (
        render_text(reply)
    )
