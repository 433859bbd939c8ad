"""`learning-bot learner create NAME`: make a learner before anything is written to it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from adapters.terminal.commands import EXIT_OK
from learning_bot.cli.parser import Commands

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.settings import Settings


def register(sub: Commands) -> None:
    learner = sub.add_parser(
        "learner",
        help="create a learner before anything is written to it",
        description="Create a learner (reads never create one).",
    )
    learner.add_argument("action", choices=("create",), help="create: make the learner now")
    learner.add_argument("name", help="1-64 letters, digits, '.', '_', ':' or '-'")
    learner.set_defaults(run=_run, no_url="it works locally")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.app import build_app

    app = build_app(settings)
    try:
        return _learner_create(app, args.name)
    finally:
        app.close()


def _learner_create(app: App, name: str) -> int:
    from engine.errors import NotFound

    try:
        service = app.service(name)
        existed = True
    except NotFound:
        service = app.service(name, create=True)
        existed = False
    if existed:
        print(f"Learner '{service.learner}' already exists.")
    else:
        print(f"Created learner '{service.learner}' (phase {service.phase().value}).")
    return EXIT_OK
