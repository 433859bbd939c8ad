"""The command line of `learning-bot status`: what argparse would read, the settings as
learning_bot.settings reads them, and the answer (or None, for the general path).

With --url, .reply (which builds the reply from a file, and what it reads the file with) is
not imported."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

from adapters.terminal.style import colour_wanted
from learning_bot.status.terminal import render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from learning_bot.status.reply import Reply, Settings

MAX_TOP = 25
"""bot.commands.MAX_TOP"""
ENV = "LEARNING_BOT_"
READ_ENV = frozenset({"DATABASE_URL", "LEARNER"})
"""The settings this module reads itself, as learning_bot.settings reads them."""
UNREAD_ENV = frozenset(
    {
        "API_TOKEN",
        "ARTIFACTS",
        "CONSOLE_HISTORY",
        "CORS_ORIGINS",
        "DEBUG",
        "LOG_LEVEL",
        "MAX_BODY_BYTES",
        "QORTEX",
        "QORTEX_PYTHON",
        "REQUIRE_TESTS",
        "SPOOL_DIR",
        "TEST_CACHE",
        "TEST_DATABASE_URL",
        "WORKERS",
    }
)
"""LEARNING_BOT_* variables that learning_bot.settings does not read (the server's, the spool's,
the tests'). Any other one, or --config, has the settings read by learning_bot.settings."""


def own_settings(config_path: str | None, env: Mapping[str, str]) -> bool:
    """Whether this module reads the settings itself (nothing there can be refused), rather
    than learning_bot.settings."""
    names = {key[len(ENV) :] for key in env if key.startswith(ENV)}
    return config_path is None and names <= READ_ENV | UNREAD_ENV


def read_settings(
    database_url: str | None,
    learner: str | None,
    config_path: str | None,
    env: Mapping[str, str],
) -> Settings:
    """The settings as learning_bot.settings.load_settings reads them (and refuses them)."""
    from learning_bot.status.reply import Settings

    if own_settings(config_path, env):
        return Settings(
            database_url or env.get(f"{ENV}DATABASE_URL") or None,
            learner or env.get(f"{ENV}LEARNER") or "default",
        )
    from learning_bot.settings import load_settings

    loaded = load_settings(env, database_url=database_url, learner=learner, config_path=config_path)
    config = loaded.config
    return Settings(
        loaded.database_url,
        loaded.learner,
        token_budget=config.token_budget,
        baseline_rate=config.baseline_rate,
        min_pulls=config.min_pulls,
        seed_arm_ids=config.seed_arm_ids,
        dashboard_url=loaded.dashboard_url,
        learners=loaded.learners,
    )


class Request:
    """`learning-bot [options] status [words] [--json]`, parsed."""

    __slots__ = (
        "arm",
        "as_json",
        "config",
        "database_url",
        "learner",
        "public",
        "top",
        "url",
        "words",
    )

    def __init__(self) -> None:
        self.database_url: str | None = None
        self.learner: str | None = None
        self.config: str | None = None
        self.url: str | None = None
        self.words: list[str] = []
        self.top: int | None = None
        self.arm: str | None = None
        self.public = False
        self.as_json = False

    @property
    def text(self) -> str:
        """The command as the terminal surface sends it to the bus."""
        return " ".join(["status", *self.words])


_OPTIONS = {"--database-url": "database_url", "--learner": "learner", "--config": "config"}
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def _plain_word(word: str) -> bool:
    """A word that argparse takes as a word and shlex (quoting it, then splitting it again
    for bot.commands) leaves as it is."""
    return 0 < len(word) <= 200 and not word.startswith("-") and _SAFE.issuperset(word)


def parse(argv: Sequence[str]) -> Request | None:
    """The request, when argv is a status this module serves and argparse reads alike."""
    request = Request()
    i = 0
    while i < len(argv) and argv[i] != "status":
        option, eq, value = argv[i].partition("=")
        if option not in (*_OPTIONS, "--url"):
            return None
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None
            value = argv[i + 1]
            i += 1
        setattr(request, _OPTIONS.get(option, "url"), value)
        i += 1
    rest = list(argv[i + 1 :]) if i < len(argv) else None
    if rest is None:
        return None
    while rest and rest[0] == "--json":
        request.as_json = True
        rest.pop(0)
    while rest and rest[-1] == "--json":
        request.as_json = True
        rest.pop()
    if len(rest) > 8 or not all(_plain_word(word) for word in rest):
        return None
    request.words = rest
    # bot.commands' grammar for status, where it finds no mistake
    words = list(rest)
    while words:
        word = words.pop(0).lower()
        if word == "top" and words and words[0].isdigit() and 1 <= int(words[0]) <= MAX_TOP:
            request.top = int(words.pop(0))
        elif word == "public":
            request.public = True
        elif word == "arm" and words and request.arm is None:
            request.arm = words.pop(0)
        else:
            return None
    return request


def quick_status(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int | None:
    """Answer `learning-bot status` and return its exit code; None when the general command
    line must answer it."""
    request = parse(argv)
    if request is None:
        return None
    env = os.environ if env is None else env
    if request.url:
        from learning_bot.status.remote import fetch, plain_reply

        # read (and refused) first, as the general path does; they are the server's to use
        if not own_settings(request.config, env):
            read_settings(request.database_url, request.learner, request.config, env)
        reply = fetch(request.url, request.learner, request.text, env)
        if reply is None:
            return None
        if not plain_reply(reply):
            return _general(reply, request)
    else:
        from learning_bot.status.reply import read_arm, read_status

        settings = read_settings(request.database_url, request.learner, request.config, env)
        if "terminal:" in settings.learners:
            return None
        if request.arm is not None:
            reply = read_arm(settings, request.arm, public=request.public)
        else:
            reply = read_status(settings, request.top, public=request.public)
        if reply is None:
            return None
    if request.as_json:
        print(json.dumps(dict(reply.get("data") or {}), indent=2, ensure_ascii=False))
    else:
        print(render(reply, colour_wanted(sys.stdout, env)))
    return 0


def _general(reply: Reply, request: Request) -> int:
    """A reply this module does not print (an error, or one of another shape): printed, or
    raised as the command's error, by the terminal surface, as the general path would."""
    from adapters.terminal.commands import run_chat_command
    from bot.replies import Reply as Parsed

    return run_chat_command(
        lambda _command: Parsed.from_dict(reply), request.text, as_json=request.as_json
    )
