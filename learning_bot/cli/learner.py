"""`learning-bot learner create NAME`: make a learner before anything is written to it;
`learner show NAME` and `learner set NAME KEY=VALUE ...`: its stored settings
(docs/configuration.md: a learner's settings are its own state, changed only by this command
or its equivalents).
`learner set` makes the learner when there is none yet, and with `--url` asks a running server
(its `POST settings` route) instead of opening the database."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from learning_bot.adapters.terminal.commands import EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.engine.service import LearningService
    from learning_bot.settings import Settings


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("create", "show", "set"),
        help="create: make the learner now; show: its settings; set: change them",
    )
    parser.add_argument("name", help="1-64 letters, digits, '.', '_', ':' or '-'")
    parser.add_argument(
        "settings",
        nargs="*",
        metavar="KEY=VALUE",
        help="set: the settings to change, e.g. halfLife=50 policy=seed (values as JSON)",
    )
    parser.add_argument(
        "--recall-target",
        metavar="SHARE",
        help=(
            "set: recallTarget, e.g. 0.97 (each session's set is the least-cost one whose "
            "estimated recall meets it, tokenBudget a cap); 'none' unsets it"
        ),
    )
    parser.add_argument("--json", action="store_true", help="show/set: print JSON")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.app import build_app

    if args.action != "set" and (args.settings or args.recall_target is not None):
        raise CliError(f"learner {args.action} takes no settings to change", EXIT_USAGE)
    if args.action == "set":
        # Checked before anything is opened, made or sent.
        changes = _pairs(args.settings) if args.settings or args.recall_target is None else {}
        if args.recall_target is not None:
            changes["recallTarget"] = _recall_target(args.recall_target)
        _check_name(args.name)
        _check_changes(settings, changes)
        if args.url:
            return _remote_set(args.url, args.name, changes, as_json=args.json)
    elif args.url:
        raise CliError(
            f"--url does not apply to `learner {args.action}`: it works locally",
            EXIT_USAGE,
            hint="`learner set NAME KEY=VALUE --url URL` changes (or makes) a learner remotely",
        )
    app = build_app(settings, one_shot=True)
    try:
        if args.action == "create":
            return _learner_create(app, args.name)
        if args.action == "set":
            service = _opened_or_made(app, args.name, quiet=args.json)
            service.set_settings(changes, actor="command line")
        else:
            service = app.service(args.name)
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


COMMAND = Command(
    name="learner",
    help="create a learner, show or change its stored settings",
    description=(
        "Create a learner (reads never create one), show its settings, or change them. "
        "A learner's settings (policy, halfLife, tokenBudget, baselineRate, ...) are stored "
        "with it: the configuration of the process that creates it gives them, and only "
        "`learner set` changes them afterwards (every replica takes the change)."
    ),
    arguments=_arguments,
    run=_run,
    no_url=None,
)


def _check_name(name: str) -> None:
    from learning_bot.engine.bounds import check_learner_name
    from learning_bot.engine.errors import InvalidInput

    try:
        check_learner_name(name)
    except InvalidInput as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _check_changes(settings: Settings, changes: dict[str, Any]) -> None:
    """The settings are known keys with valid values (as `LearningService.set_settings` and
    the server check them), so a learner is never made for settings that are then refused."""
    from learning_bot.engine.errors import InvalidConfig

    if "phase" in changes:
        raise CliError("phase: change it with `learning-bot phase`", EXIT_USAGE)
    try:
        settings.config.merged(changes)
    except InvalidConfig as exc:
        raise CliError(f"{exc.field}: {exc.detail}", EXIT_USAGE) from None


def _opened_or_made(app: App, name: str, *, quiet: bool) -> LearningService:
    """The learner, made (with this process's configuration, then the settings given) when
    there is none of that name yet."""
    from learning_bot.engine.errors import NotFound

    try:
        return app.service(name)
    except NotFound:
        service = app.service(name, create=True)
        if not quiet:
            print(f"Created learner '{service.learner}' (phase {service.phase().value}).")
        return service


def _remote_set(url: str, name: str, changes: dict[str, Any], *, as_json: bool) -> int:
    """`POST settings?learner=NAME` on a running server (LEARNING_BOT_API_TOKEN as bearer):
    the server makes the learner when there is none, and answers its settings."""
    import urllib.parse

    from learning_bot.adapters.terminal.commands import api_base, post_json

    base = api_base(url)
    answer = post_json(
        base,
        f"{base}/settings?" + urllib.parse.urlencode({"learner": name}),
        {"settings": changes},
    )
    if as_json:
        print(json.dumps(answer, indent=2))
        return EXIT_OK
    changed = answer.get("changed") or []
    print(
        f"Learner '{answer['learner']}' settings"
        + (f" (changed: {', '.join(changed)})" if changed else " (nothing changed)")
        + ":"
    )
    for key, value in sorted(answer["settings"].items()):
        print(f"  {key} = {json.dumps(value)}")
    return EXIT_OK


def _pairs(items: list[str]) -> dict[str, Any]:
    from learning_bot.bot.commands import setting_value

    """KEY=VALUE words as settings: a value is read as JSON, else taken as a string."""
    if not items:
        raise CliError("learner set needs at least one KEY=VALUE (e.g. halfLife=50)", EXIT_USAGE)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CliError(f"expected KEY=VALUE, got {item!r}", EXIT_USAGE)
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
            f"--recall-target must be a number such as 0.97 or none, got {raw!r}", EXIT_USAGE
        ) from None


def _learner_create(app: App, name: str) -> int:
    from learning_bot.engine.errors import NotFound

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
