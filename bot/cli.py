"""The `learning-bot` command line: the terminal surface of the command bus, plus export,
console, simulate and database maintenance."""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from bot.app import App
    from bot.bus import Actor
    from bot.replies import Reply
    from bot.settings import Settings

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A one-line error for stderr, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see `{self.prog} --help`)", EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="learning-bot",
        description="The learning layer for LLM agent prompts, and its chat-ops front end.",
    )
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy URL (else LEARNING_BOT_DATABASE_URL, "
        "else a SQLite file in your data directory)",
    )
    parser.add_argument("--learner", help="learner name (default: default)")
    parser.add_argument("--config", help="a JSON or TOML config file")
    parser.add_argument(
        "--url",
        help="talk to a running server (e.g. http://127.0.0.1:8787) instead of the database",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    for name, help_text in (
        ("status", "phase, settings, traces, savings, best and worst arms"),
        ("reward", "manual feedback: reward [<arm>] [1|0|good|bad] [reason...]"),
        ("reset", "reset [all | <arm ids...>] | reset undo"),
        ("phase", "show or set the phase: phase [passive|active]"),
        ("help", "the /learning commands"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("words", nargs="*", help="the rest of the /learning command")
        if name in ("reset", "phase"):
            p.add_argument("--confirm", action="store_true", help="do it without asking")
        if name == "reward":
            p.add_argument(
                "--conversation",
                default="",
                help="without an arm, reward the latest run of this conversation",
            )

    export = sub.add_parser("export", help="traces and posteriors as JSON or CSV on stdout")
    export.add_argument("--format", choices=("json", "csv"), default="json")
    export.add_argument("--no-traces", action="store_true")
    export.add_argument("--no-posteriors", action="store_true")

    sub.add_parser("console", help="an interactive /learning prompt, as in chat")

    sim = sub.add_parser("simulate", help="run a synthetic agent workload to watch it learn")
    sim.add_argument("--traces", type=int, default=300)
    sim.add_argument("--arms", type=int, default=30)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--force", action="store_true", help="even into a learner with real traces")

    db = sub.add_parser("db", help="database maintenance")
    db.add_argument("action", choices=("upgrade", "verify", "url"))

    serve = sub.add_parser("serve", help="run the HTTP API, the dashboard and the chat surfaces")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    serve.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("LEARNING_BOT_WORKERS", "1") or 1),
        help="processes serving the API (one per core; chat surfaces run in the first)",
    )

    discord = sub.add_parser(
        "discord", help="the Discord surface: sync the /learning commands, or run the bot alone"
    )
    _add_discord_arguments(discord)

    dashboard = sub.add_parser("dashboard", help="print the dashboard's URL")
    dashboard.add_argument("--host", default="127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8787)

    return parser


def _add_discord_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="discord_command", required=True, parser_class=_Parser)
    sync = sub.add_parser("sync", help="register /learning with Discord (on deploy)")
    sync.add_argument("--guild", action="append", metavar="ID", help="only this guild (repeatable)")
    sync.add_argument("--global", dest="global_sync", action="store_true", help="sync globally")
    sync.add_argument("--clear", action="store_true", help="remove the commands instead")
    sub.add_parser("run", help="connect to Discord and answer /learning until stopped")


def _discord(args: argparse.Namespace, settings: Settings) -> int:
    from adapters.discord.cli import run_command
    from adapters.discord.settings import load_discord_settings, parse_snowflakes
    from bot.app import build_app

    discord_settings = load_discord_settings()
    if getattr(args, "guild", None):
        ids: list[int] = []
        for raw in args.guild:
            ids.extend(parse_snowflakes("--guild", raw))
        args.guild = ids
    app = build_app(settings)
    try:
        return run_command(args, app, discord_settings)
    finally:
        app.close()


def _read_only(args: argparse.Namespace) -> bool:
    """Commands that only read: they can skip SQLAlchemy (see bot.app.build_read_app)."""
    if args.command == "status" or args.command == "help":
        return True
    return args.command == "phase" and not args.words and not args.confirm


def _local_actor() -> Actor:
    from bot.bus import Actor

    try:
        user = getpass.getuser()
    except Exception:
        user = "local"
    return Actor(id=f"local:{user}", name=user, is_admin=True)


def _text(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


Send = Callable[[object], "Reply"]


def _local_sender(app: App, conversation: str) -> Send:
    from bot.bus import Invocation

    actor = _local_actor()

    def send(command: object) -> Reply:
        return app.bus.dispatch(
            Invocation("terminal", actor, command, conversation=conversation)  # type: ignore[arg-type]
        )

    return send


def _remote_sender(url: str, learner: str | None, conversation: str) -> Send:
    """Commands sent to a running server's /command route (LEARNING_BOT_API_TOKEN as bearer)."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from bot.commands import CancelCommand, ConfirmCommand
    from bot.replies import Reply

    base = url.rstrip("/")
    if "/__openclaw__/" not in base:
        base += "/__openclaw__/api/learning"
    endpoint = base + "/command"
    if learner:
        endpoint += "?" + urllib.parse.urlencode({"learner": learner})
    token = os.environ.get("LEARNING_BOT_API_TOKEN", "").strip()
    try:
        user = getpass.getuser()
    except Exception:
        user = "cli"

    def send(command: object) -> Reply:
        body: dict[str, str] = {"actor": user, "conversation": conversation}
        if isinstance(command, ConfirmCommand):
            body["confirm"] = command.token
        elif isinstance(command, CancelCommand):
            body["cancel"] = command.token
        else:
            body["text"] = str(command)
        request = urllib.request.Request(
            endpoint,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {token}"} if token else {}),
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return Reply.from_dict(json.loads(response.read()))
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", str(exc))
            except ValueError:
                message = str(exc)
            raise CliError(f"{base}: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise CliError(f"cannot reach {base}: {getattr(exc, 'reason', exc)}") from None

    return send


def _dispatch(send: Send, text: str, *, confirm: bool = False) -> int:
    from bot.commands import CancelCommand, ConfirmCommand, UsageError, parse_command
    from bot.render_text import render_text
    from bot.replies import ReplyKind

    try:
        parse_command(text)
    except UsageError as exc:
        from bot.handlers import usage_reply

        print(render_text(usage_reply(str(exc), exc.command)), file=sys.stderr)
        return EXIT_USAGE
    reply = send(text)
    if reply.kind is ReplyKind.CONFIRM:
        token = reply.actions[0].token
        if confirm:
            reply = send(ConfirmCommand(token))
        elif sys.stdin.isatty():
            print(render_text(reply).rsplit("\n", 1)[0])
            answer = input("Type yes to confirm: ").strip().lower()
            reply = send(ConfirmCommand(token) if answer in ("y", "yes") else CancelCommand(token))
        else:
            send(CancelCommand(token))
            raise CliError(
                f"{reply.summary.split('?')[0]}? — not on a terminal: add --confirm to do it",
                EXIT_USAGE,
            )
    if reply.kind is ReplyKind.ERROR:
        raise CliError(reply.summary)
    print(render_text(reply))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from bot.app import build_app
    from bot.settings import load_settings

    settings = load_settings(
        database_url=args.database_url, learner=args.learner, config_path=args.config
    )
    if args.command == "db":
        return _db(args.action, settings.database_url)
    chat = args.command in ("status", "reward", "reset", "phase", "help")
    if chat and args.url:
        words = list(args.words) + (["confirm"] if getattr(args, "confirm", False) else [])
        sender = _remote_sender(args.url, args.learner, getattr(args, "conversation", ""))
        return _dispatch(
            sender, _text([args.command, *words]), confirm=getattr(args, "confirm", False)
        )
    if args.command == "dashboard":
        print(f"{_server_url(args)}/__openclaw__/api/learning/dashboard")
        return EXIT_OK
    if args.command == "serve":
        return _serve(settings, args.host, args.port, args.workers)
    if args.command == "discord":
        return _discord(args, settings)
    if _read_only(args):
        from bot.app import build_read_app

        lite = build_read_app(settings)
        if lite is not None:
            try:
                return _dispatch(_local_sender(lite, ""), _text([args.command, *args.words]))
            finally:
                lite.close()
    app = build_app(settings)
    try:
        if args.command in ("status", "reward", "reset", "phase", "help"):
            words = list(args.words)
            if getattr(args, "confirm", False):
                words.append("confirm")
            return _dispatch(
                _local_sender(app, getattr(args, "conversation", "")),
                _text([args.command, *words]),
                confirm=getattr(args, "confirm", False),
            )
        if args.command == "export":
            if args.no_traces and args.no_posteriors:
                raise CliError("nothing to export: --no-traces and --no-posteriors", EXIT_USAGE)
            service = app.service()
            for chunk in service.export_chunks(
                args.format, traces=not args.no_traces, posteriors=not args.no_posteriors
            ):
                sys.stdout.write(chunk)
            sys.stdout.flush()
            return EXIT_OK
        if args.command == "console":
            from adapters.console import run_console

            return run_console(app.bus, _local_actor())
        if args.command == "simulate":
            return _simulate(app, args.traces, args.arms, args.seed, args.force)
    finally:
        app.close()
    raise CliError(f"unknown command {args.command}", EXIT_USAGE)


def _simulate(app: App, traces: int, arms: int, seed: int, force: bool) -> int:
    from bot.simulate import progress_bar, simulate

    service = app.service()
    result = simulate(
        service,
        traces=traces,
        arms=arms,
        seed=seed,
        force=force,
        progress=progress_bar(traces),
    )
    if result.switched_to_active:
        print(f"Switched learner '{service.learner}' to the active phase so selection runs.")
    savings = (
        f"; token savings {result.token_savings_percent:.1f}%"
        if result.token_savings_percent is not None
        else ""
    )
    print(
        f"Simulated {result.traces:,} runs of a {result.arms}-arm agent (seed {seed}) into "
        f"learner '{service.learner}': {result.baseline_runs:,} baseline, "
        f"{result.selected_runs:,} selected{savings}."
    )
    print("Next: `learning-bot status` to see the posteriors, `learning-bot console` to chat.")
    return EXIT_OK


def _server_url(args: argparse.Namespace) -> str:
    if args.url:
        return str(args.url).rstrip("/")
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    return f"http://{host}:{args.port}"


def _serve(settings: Settings, host: str, port: int, workers: int = 1) -> int:
    from adapters.http.server import http_settings, is_loopback, serve_workers

    if not 1 <= port <= 65535:
        raise CliError(f"--port must be from 1 to 65535, got {port}", EXIT_USAGE)
    if not 1 <= workers <= 64:
        raise CliError(f"--workers must be from 1 to 64, got {workers}", EXIT_USAGE)
    http = http_settings()
    if http.api_token is None and not is_loopback(host):
        raise CliError(
            f"--host: refusing to listen on {host} without LEARNING_BOT_API_TOKEN: anyone "
            "could reset posteriors; set a token or bind to 127.0.0.1",
            EXIT_USAGE,
        )
    if workers == 1:
        _serve_one(settings, host, port, None, surfaces=True)
        return EXIT_OK

    def worker(index: int, sock: object) -> None:
        _serve_one(settings, host, port, sock, surfaces=index == 0, quiet=index > 0)

    return serve_workers(worker, host=host, port=port, workers=workers)


def _serve_one(
    settings: Settings,
    host: str,
    port: int,
    sock: object,
    *,
    surfaces: bool,
    quiet: bool = False,
) -> None:
    import asyncio

    from adapters.http.server import serve
    from bot.app import build_app
    from bot.surfaces import configured_surfaces

    app = build_app(settings)
    try:
        live, notes = configured_surfaces(app) if surfaces else ([], [])
        for note in notes:
            print(f"learning-bot: {note}")
        announce = (lambda _line: None) if quiet else print
        run = serve(app, host=host, port=port, surfaces=live, announce=announce, sock=sock)  # type: ignore[arg-type]
        try:  # uvloop's event loop when it is installed (it is on Linux and macOS)
            import uvloop

            uvloop.run(run)
        except ImportError:
            asyncio.run(run)
    finally:
        app.close()


def _db(action: str, url: str | None) -> int:
    from storage import default_database_url, make_engine, upgrade
    from storage.database import ensure_schema

    target = url or default_database_url()
    if action == "url":
        print(target)
        return EXIT_OK
    engine = make_engine(target)
    try:
        if action == "upgrade":
            before, after = upgrade(engine)
            if before == after:
                print(f"The schema is already at revision {after}.")
            else:
                print(f"Upgraded the schema from {before or 'empty'} to revision {after}.")
            return EXIT_OK
        ensure_schema(engine, auto_create=False)
    finally:
        engine.dispose()
    from engine.service import LearningService
    from storage import SqlStore

    store = SqlStore(target, auto_create=False)
    failed = False
    try:
        from sqlalchemy import text

        with store.engine.connect() as conn:
            names = [r[0] for r in conn.execute(text("SELECT name FROM learners ORDER BY name"))]
        for name in names:
            report = LearningService(store, learner=name).verify()
            state = "ok" if report.ok else "FAILED"
            print(
                f"{name}: {state} — {report.arms_checked} arms, {report.traces_checked} traces, "
                f"{report.observations_checked} changes in current epochs"
            )
            for problem in report.problems:
                print(f"  {problem.arm_id or '-'}: {problem.message}")
            failed |= not report.ok
    finally:
        store.close()
    return EXIT_ERROR if failed else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    from engine.errors import InvalidInput, LearningError

    try:
        args = _parser().parse_args(argv)
        return _run(args)
    except CliError as exc:
        print(f"learning-bot: {exc}", file=sys.stderr)
        return exc.code
    except InvalidInput as exc:
        print(f"learning-bot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LearningError as exc:
        print(f"learning-bot: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("learning-bot: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("LEARNING_BOT_DEBUG"):
            raise
        print(
            f"learning-bot: unexpected error: {type(exc).__name__}: {exc} "
            "(set LEARNING_BOT_DEBUG=1 for details)",
            file=sys.stderr,
        )
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
