"""`learning-bot learner create NAME`: make a learner before anything is written to it;
`learner show NAME` and `learner set NAME KEY=VALUE ...`: its stored settings (SPEC section
4a: a learner's settings are its own state, changed only by this command or its equivalents)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from adapters.terminal.commands import EXIT_OK, CliError
from learning_bot.cli.parser import Commands

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.settings import Settings


def register(sub: Commands) -> None:
    learner = sub.add_parser(
        "learner",
        help="create a learner, show or change its stored settings",
        description=(
            "Create a learner (reads never create one), show its settings, or change them. "
            "A learner's settings (policy, halfLife, tokenBudget, baselineRate, ...) are stored "
            "with it: the configuration of the process that creates it gives them, and only "
            "`learner set` changes them afterwards (every replica takes the change)."
        ),
    )
    learner.add_argument(
        "action",
        choices=("create", "show", "set"),
        help="create: make the learner now; show: its settings; set: change them",
    )
    learner.add_argument("name", help="1-64 letters, digits, '.', '_', ':' or '-'")
    learner.add_argument(
        "settings",
        nargs="*",
        metavar="KEY=VALUE",
        help="set: the settings to change, e.g. halfLife=50 policy=seed (values as JSON)",
    )
    learner.add_argument(
        "--recall-target",
        metavar="SHARE",
        help=(
            "set: recallTarget, e.g. 0.97 (each session's set is the least-cost one whose "
            "estimated recall meets it, tokenBudget a cap); 'none' unsets it"
        ),
    )
    learner.add_argument("--json", action="store_true", help="show/set: print JSON")
    learner.set_defaults(run=_run, no_url="it works locally")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.app import build_app

    if args.action != "set" and (args.settings or args.recall_target is not None):
        raise CliError(f"learner {args.action} takes no settings to change")
    changes: dict[str, Any] = {}
    if args.action == "set":
        changes = _pairs(args.settings) if args.settings or args.recall_target is None else {}
    if args.recall_target is not None:
        changes["recallTarget"] = _recall_target(args.recall_target)
    app = build_app(settings, one_shot=True)
    try:
        if args.action == "create":
            return _learner_create(app, args.name)
        service = app.service(args.name)
        if args.action == "set":
            service.set_settings(changes, actor="command line")
        stored = service.config.learner_settings()
        if args.json:
            print(json.dumps({"learner": service.learner, "settings": stored}, indent=2))
        else:
            print(f"Learner '{service.learner}' settings:")
            for key, value in sorted(service.config.to_dict(complete=True).items()):
                if key != "phase":
                    print(f"  {key} = {json.dumps(value)}")
        return EXIT_OK
    finally:
        app.close()


def _pairs(items: list[str]) -> dict[str, Any]:
    from bot.commands import setting_value

    """KEY=VALUE words as settings: a value is read as JSON, else taken as a string."""
    if not items:
        raise CliError("learner set needs at least one KEY=VALUE (e.g. halfLife=50)")
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CliError(f"expected KEY=VALUE, got {item!r}")
        out[key] = setting_value(raw)
    return out


def _recall_target(raw: str) -> float | None:
    """--recall-target: a share in (0, 1] (the learner's settings check its range), or none."""
    if raw.strip().lower() in ("none", "null", "off"):
        return None
    try:
        return float(raw)
    except ValueError:
        raise CliError(
            f"--recall-target must be a number such as 0.97 or none, got {raw!r}"
        ) from None


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
