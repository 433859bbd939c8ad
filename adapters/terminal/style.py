"""Colour for the terminal: on when the stream is a terminal, off when it is not, when
`NO_COLOR` is set (https://no-color.org) or when TERM is `dumb`.

This module imports only `os`: `learning-bot status` prints with its colours, and a dataclass
or `typing` here would cost that command more than its own work (dataclasses imports
inspect)."""

from __future__ import annotations

import os
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

RESET = "\033[0m"
CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
    "badge_active": "1;30;42",
    "badge_passive": "1;30;43",
}


def colour_wanted(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    if "NO_COLOR" in env and env["NO_COLOR"] != "":
        return False
    if env.get("TERM", "") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Style:
    """Whether to paint, and how: immutable, compared and hashed by `enabled`."""

    __slots__ = ("enabled",)
    __match_args__ = ("enabled",)
    enabled: bool

    def __init__(self, enabled: bool = False) -> None:
        object.__setattr__(self, "enabled", enabled)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Style) or other.__class__ is not self.__class__:
            return NotImplemented
        return self.enabled == other.enabled

    def __hash__(self) -> int:
        return hash((self.enabled,))

    def __repr__(self) -> str:
        return f"Style(enabled={self.enabled!r})"

    @classmethod
    def for_stream(cls, stream: TextIO, env: Mapping[str, str] | None = None) -> Style:
        return cls(colour_wanted(stream, env))

    def paint(self, text: str, *names: str) -> str:
        if not self.enabled or not text:
            return text
        codes = ";".join(CODES[n] for n in names)
        return f"\033[{codes}m{text}{RESET}"

    def bold(self, text: str) -> str:
        return self.paint(text, "bold")

    def dim(self, text: str) -> str:
        return self.paint(text, "dim")

    def error(self, text: str) -> str:
        return self.paint(text, "red")

    def badge(self, word: str) -> str:
        """The phase badge: ACTIVE on green, PASSIVE on yellow, anything else bold."""
        key = f"badge_{word.strip().lower()}"
        return self.paint(f" {word} ", key) if key in CODES and self.enabled else f"[{word}]"

    def signed(self, text: str, value: float) -> str:
        """A number whose sign matters (savings): green when positive, red when negative."""
        if value > 0:
            return self.paint(text, "green")
        if value < 0:
            return self.paint(text, "red")
        return text
