"""`learning-bot dashboard`: print the dashboard's URL, never a guess."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Command, add_json_option

if TYPE_CHECKING:
    from learning_bot.settings import Settings


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_json_option(parser, "{url, docs}")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    url = _dashboard_url(args.url, settings)
    if args.json:
        import json

        docs = url.removesuffix("/dashboard") + "/docs"
        print(json.dumps({"url": url, "docs": docs}))
    else:
        print(url)
    return EXIT_OK


COMMAND = Command(
    name="dashboard",
    help="print the dashboard's URL (of --url, or of LEARNING_BOT_PUBLIC_URL)",
    description=(
        "Print the dashboard's URL: that of the server --url names (after checking it "
        "answers), else that of LEARNING_BOT_PUBLIC_URL."
    ),
    arguments=_arguments,
    run=_run,
    no_url=None,
)


def _dashboard_url(url: str | None, settings: Settings) -> str:
    """The dashboard of the server --url names (once it answers), else that of the public URL
    the settings give; never a guess."""
    from learning_bot.adapters.terminal.commands import api_base

    if url:
        base = api_base(url)
        _check_server(base)
        return f"{base}/dashboard"
    if settings.dashboard_url:
        return settings.dashboard_url
    raise CliError(
        "the dashboard's address is not known: no --url and no LEARNING_BOT_PUBLIC_URL",
        EXIT_USAGE,
        hint="give --url http://HOST:PORT of the running server, or set LEARNING_BOT_PUBLIC_URL",
    )


def _check_server(base: str) -> None:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 503:  # 503: up, but its storage is not (the dashboard still serves)
            raise CliError(f"{base}/healthz answered {exc.code}: is this learning-bot?") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(
            f"cannot reach {base}: {getattr(exc, 'reason', exc)}",
            hint="start it with `learning-bot serve`, or give the --url it listens on",
        ) from None
