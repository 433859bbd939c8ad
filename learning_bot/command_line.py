"""The `learning-bot` command line: the terminal surface's commands, the server, the Slack and
Discord surfaces on their own, export, console, simulate and database maintenance.

learning_bot.cli, the entry point, sends every command here."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from adapters.terminal.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.settings import Settings

CHAT_COMMANDS = ("status", "reward", "reset", "phase", "help")


WORDS_HELP = {
    "status": (
        "status — phase, settings, traces, token savings, the best arms and the candidates "
        "for exclusion",
        "[top N] [public] | arm <id-or-label>: 'top N' lists N arms (1-25) in each table; "
        "'arm Read' shows one arm by id or label; 'public' matters only in chat",
    ),
    "reward": (
        "reward — manual (lagged) feedback for an arm, or for the arms of a conversation's "
        "latest run",
        "[<arm>] [1|0|good|bad] [reason...]: the arm by id (tool:fs:Read) or label (Read); "
        "without an arm, --conversation names the run; then the value (default good) and an "
        "optional reason",
    ),
    "reset": (
        "reset — put arms back to Beta(1,1) with 0 pulls (nothing is deleted; `reset undo` "
        "restores them)",
        "[all | <arm ids or labels...>] | undo: which arms (default all), or undo the last reset",
    ),
    "phase": (
        "phase — show the phase, or set it: passive records only, active selects arms",
        "[passive|active]: the phase to switch to; without it, the current phase is shown",
    ),
    "help": (
        "help — the commands, or one command explained",
        "[status|reward|reset|phase|help]: the command to explain",
    ),
}


def _close(word: str, choices: Sequence[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line saying what is wrong, and one hint: the closest command or option when
        there is one, else where the help is."""
        import re

        hint = f"see `{self.prog} --help`"
        choice = re.match(
            r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message
        )
        if choice:
            argument, word, options = choice.groups()
            names = re.findall(r"'([^']*)'", options)
            what = "command" if argument.strip("<>") in ("command", "discord_command") else argument
            message = f"unknown {what} {word!r}"
            close = _close(word, names)
            if close is None:
                hint = f"one of: {', '.join(names)}"
            elif argument.startswith("-"):
                hint = f"did you mean {argument} {close}?"
            else:
                hint = f"did you mean `{self.prog} {close}`?"
        unknown = re.match(r"unrecognized arguments: (.*)$", message)
        if unknown:
            word = unknown.group(1).split()[0]
            if word.startswith("-"):
                message = f"unknown option {word!r}"
                close = _close(word, _option_strings(self))
                if close:
                    hint = f"did you mean {close}? (see `{self.prog} <command> --help`)"
            else:
                message = f"unexpected argument {word!r}"
        raise CliError(message, EXIT_USAGE, hint=hint)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of `parser` and of its subcommands."""
    found: list[str] = []
    for action in parser._actions:
        found.extend(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_option_strings(child))
    return sorted(set(found))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("learning-bot")
    except PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="learning-bot",
        description="The learning layer for LLM agent prompts, and its chat-ops front end.",
        epilog=(
            "Start with `learning-bot simulate`, then `learning-bot status`. "
            "`learning-bot <command> --help` explains a command."
        ),
    )
    parser.add_argument("--version", action="version", version=f"learning-bot {_version()}")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="SQLAlchemy URL (else LEARNING_BOT_DATABASE_URL, "
        "else a SQLite file in your data directory)",
    )
    parser.add_argument(
        "--learner", metavar="NAME", help="learner name (default: LEARNING_BOT_LEARNER or default)"
    )
    parser.add_argument("--config", metavar="FILE", help="a JSON or TOML config file")
    parser.add_argument(
        "--url",
        help="talk to a running server (e.g. http://127.0.0.1:8787) instead of the database: "
        "status, reward, reset, phase, help, console and dashboard",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="<command>"
    )

    for name, (summary, words) in WORDS_HELP.items():
        p = sub.add_parser(name, help=summary.split(" — ", 1)[1], description=summary)
        p.add_argument("words", nargs="*", metavar="WORD", help=words)
        if name == "status":
            p.add_argument(
                "--json", action="store_true", help="print the status data as JSON (for scripts)"
            )
        if name in ("reset", "phase"):
            p.add_argument("--confirm", action="store_true", help="do it without asking")
        if name == "reward":
            p.add_argument(
                "--conversation",
                default="",
                metavar="ID",
                help="without an arm, reward the latest run of this conversation",
            )

    export = sub.add_parser(
        "export",
        help="traces and posteriors as JSON, JSON lines or CSV (on stdout)",
        description="Write the learner's traces and posteriors to stdout.",
    )
    export.add_argument(
        "--format",
        choices=("json", "jsonl", "csv"),
        default="json",
        help="json: one document (default); jsonl: one trace per line, for large learners; "
        "csv: one table, chosen with --table",
    )
    export.add_argument(
        "--table", choices=("traces", "posteriors"), help="csv: the one table to write"
    )
    export.add_argument("--no-traces", action="store_true", help="json: leave the traces out")
    export.add_argument(
        "--no-posteriors", action="store_true", help="json: leave the posteriors out"
    )
    export.add_argument("--compact", action="store_true", help="json: one line, no indentation")

    sub.add_parser(
        "console",
        help="an interactive prompt for the commands, with history and Tab completion",
        description=(
            "An interactive prompt: type status, reward, reset, phase or help as after "
            "`learning-bot`. Up and Down walk the history (kept in the data directory), Tab "
            "completes commands and arm ids or labels, `quit` leaves."
        ),
    )

    sim = sub.add_parser(
        "simulate",
        help="run a synthetic agent workload to watch it learn",
        description=(
            "Record synthetic runs of an agent whose arms help with hidden probabilities, so "
            "status and the dashboard have something to show. Refuses a learner with real "
            "traces unless --force."
        ),
    )
    sim.add_argument(
        "--traces", type=int, default=300, metavar="N", help="runs to simulate (default 300)"
    )
    sim.add_argument(
        "--arms", type=int, default=40, metavar="N", help="arms in the inventory (default 40)"
    )
    sim.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="random seed, for repeatable runs (default 0)",
    )
    sim.add_argument(
        "--force", action="store_true", help="simulate even into a learner with real traces"
    )

    learner = sub.add_parser(
        "learner",
        help="create a learner before anything is written to it",
        description="Create a learner (reads never create one).",
    )
    learner.add_argument("action", choices=("create",), help="create: make the learner now")
    learner.add_argument("name", help="1-64 letters, digits, '.', '_', ':' or '-'")

    db = sub.add_parser("db", help="database maintenance", description="Database maintenance.")
    db.add_argument(
        "action",
        choices=("upgrade", "verify", "url"),
        help="upgrade: migrate the schema; verify: recompute every posterior from its "
        "observations; url: print the database URL in use",
    )

    serve = sub.add_parser(
        "serve",
        help="run the HTTP API, the dashboard and the chat surfaces",
        description=(
            "Serve the learning API and the dashboard, plus Slack and Discord when their "
            "settings are present. Runs until SIGINT or SIGTERM."
        ),
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; another needs LEARNING_BOT_API_TOKEN)",
    )
    serve.add_argument("--port", type=int, default=8787, help="port to listen on (default 8787)")
    serve.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=int(os.environ.get("LEARNING_BOT_WORKERS", "1") or 1),
        help="processes serving the API, 1-64 (default LEARNING_BOT_WORKERS or 1; one per "
        "core; chat surfaces run in the first)",
    )

    slack = sub.add_parser(
        "slack",
        help="serve /learning in Slack on its own (Socket Mode or HTTP mode)",
        description=(
            "Slack on its own: Socket Mode when SLACK_APP_TOKEN is set (no port is opened), "
            "else HTTP mode with Slack posting to /slack/events on --host:--port."
        ),
    )
    slack.add_argument("--host", default="127.0.0.1", help="HTTP mode: address to listen on")
    slack.add_argument("--port", type=int, default=3000, help="HTTP mode: port (default 3000)")

    from adapters.discord.arguments import add_arguments

    discord = sub.add_parser(
        "discord",
        help="the Discord surface: sync the /learning commands, or run the bot alone",
        description="sync: register /learning with Discord; run: serve it without the API.",
    )
    add_arguments(discord)

    sub.add_parser(
        "mcp",
        help="serve the MCP tools over stdio (OpenClaw's learning backend; "
        "also: python -m learning_bot mcp --database-url=...)",
    )

    sub.add_parser(
        "dashboard",
        help="print the dashboard's URL (of --url, or of LEARNING_BOT_PUBLIC_URL)",
        description=(
            "Print the dashboard's URL: that of the server --url names (after checking it "
            "answers), else that of LEARNING_BOT_PUBLIC_URL."
        ),
    )

    _accept_after(sub, [a for a in parser._actions if a.dest in _GLOBAL])
    return parser


_GLOBAL = ("database_url", "learner", "config", "url")
"""The options that come before the command, and are taken after it as well."""


def _accept_after(sub: argparse._SubParsersAction[Any], options: list[argparse.Action]) -> None:
    """Let every command (and Discord's own `sync` and `run`) take the global options after
    its name too: `learning-bot status --database-url=...` reads as `learning-bot
    --database-url=... status`, and OpenClaw's gateway spawns `<python> -m learning_bot mcp
    --database-url=...`. Given there, an option overrides the one given before the command;
    not given, it leaves that one (its default here is to set nothing)."""
    for child in sub.choices.values():
        for option in options:
            child.add_argument(
                *option.option_strings,
                dest=option.dest,
                metavar=option.metavar,
                default=argparse.SUPPRESS,
                help=option.help,
            )
        for action in child._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_after(action, options)


def _read_only(args: argparse.Namespace) -> bool:
    """Commands that only read: they can skip SQLAlchemy (see learning_bot.app.build_read_app)."""
    if args.command in ("status", "help"):
        return True
    return args.command == "phase" and not args.words and not args.confirm


def _text(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    from adapters.terminal.commands import local_sender, remote_sender, run_chat_command

    confirm = bool(getattr(args, "confirm", False))
    conversation = getattr(args, "conversation", "")
    as_json = bool(getattr(args, "json", False))
    text = _text([args.command, *args.words, *(["confirm"] if confirm else [])])
    if args.url:
        return run_chat_command(
            remote_sender(args.url, args.learner, conversation),
            text,
            confirm=confirm,
            as_json=as_json,
        )
    if _read_only(args):
        from learning_bot.app import build_read_app

        lite = build_read_app(settings)
        if lite is not None:
            try:
                return run_chat_command(local_sender(lite.bus), text, as_json=as_json)
            finally:
                lite.close()
    from learning_bot.app import build_app

    app = build_app(settings)
    try:
        _check_learner(app, args)
        return run_chat_command(
            local_sender(app.bus, conversation), text, confirm=confirm, as_json=as_json
        )
    finally:
        app.close()


def _check_learner(app: App, args: argparse.Namespace) -> None:
    """A --learner that names no learner in a database that has some is a typo, not a new
    learner: say so, with the closest name."""
    if not args.learner:
        return
    names = app.store.learner_names()  # type: ignore[attr-defined]
    if not names or args.learner in names:
        return
    close = _close(args.learner, names)
    raise CliError(
        f"unknown learner {args.learner!r}",
        EXIT_USAGE,
        hint=f"did you mean --learner {close}?" if close else f"learners: {', '.join(names)}",
    )


# Why --url cannot apply to a command (the rest take it).
NO_URL = {
    "export": "it reads the database directly",
    "simulate": "it writes synthetic runs into the database directly",
    "db": "it maintains the database directly",
    "serve": "it is the server",
    "slack": "it is a server",
    "discord": "it runs or registers the Discord bot itself",
}


def _run(args: argparse.Namespace) -> int:
    from learning_bot.settings import load_settings

    settings = load_settings(
        database_url=args.database_url, learner=args.learner, config_path=args.config
    )
    command = args.command
    if command in CHAT_COMMANDS:
        return _chat(args, settings)
    if command == "dashboard":
        print(_dashboard_url(args.url, settings))
        return EXIT_OK
    if command == "console" and args.url:
        from adapters.terminal import remote_sender, run_console

        return run_console(remote_sender(args.url, args.learner, "console"))
    if args.url:
        raise CliError(
            f"--url does not apply to `{command}`: {NO_URL.get(command, 'it works locally')}",
            EXIT_USAGE,
            hint="drop --url, or give --database-url to point at the server's database",
        )
    if command == "db":
        return _db(args.action, settings.database_url)
    if command == "mcp":
        return _mcp_stdio(settings)
    if command == "serve":
        return _serve(settings, args.host, args.port, args.workers)
    if command == "slack":
        return _slack(settings, args.host, args.port)
    if command == "discord":
        return _discord(args, settings)
    from learning_bot.app import build_app

    app = build_app(settings)
    try:
        if command == "learner":
            return _learner_create(app, args.name)
        if command == "export":
            _check_learner(app, args)
            return _export(app, args)
        if command == "console":
            from adapters.terminal import local_sender, run_console

            _check_learner(app, args)
            return run_console(local_sender(app.bus, "console", surface="console"))
        if command == "simulate":
            return _simulate(app, args.traces, args.arms, args.seed, args.force)
    finally:
        app.close()
    raise CliError(f"unknown command {command}", EXIT_USAGE)


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


def _export(app: App, args: argparse.Namespace) -> int:
    from bot.export import export_csv, export_json, export_jsonl

    service = app.service()
    if args.format == "csv":
        if args.table is None:
            raise CliError(
                "--format csv writes one table", EXIT_USAGE, hint="add --table traces or posteriors"
            )
        chunks = export_csv(service, args.table)
    elif args.format == "jsonl":
        chunks = export_jsonl(service)
    else:
        if args.no_traces and args.no_posteriors:
            raise CliError("nothing to export: --no-traces and --no-posteriors", EXIT_USAGE)
        chunks = export_json(
            service,
            traces=not args.no_traces,
            posteriors=not args.no_posteriors,
            indent=not args.compact,
        )
    for chunk in chunks:
        sys.stdout.write(chunk)
    sys.stdout.flush()
    return EXIT_OK


def _simulate(app: App, traces: int, arms: int, seed: int, force: bool) -> int:
    from learning_bot.simulate import progress_bar, simulate

    service = app.service(create=True)
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
    print(
        f"Simulated {result.traces:,} runs of a {result.arms}-arm agent (seed {seed}) into "
        f"learner '{service.learner}': {result.baseline_runs:,} baseline, "
        f"{result.selected_runs:,} selected."
    )
    for line in result.report_lines():
        print(line)
    print("Next: `learning-bot status` to see the posteriors, `learning-bot console` to chat.")
    return EXIT_OK


def _dashboard_url(url: str | None, settings: Settings) -> str:
    """The dashboard of the server --url names (once it answers), else that of the public URL
    the settings give; never a guess."""
    from adapters.terminal.commands import api_base

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
            "could reset posteriors",
            EXIT_USAGE,
            hint="set a token, or bind to 127.0.0.1",
        )
    if workers == 1:
        return _serve_one(settings, host, port, None, surfaces=True)

    def worker(index: int, sock: object) -> None:
        code = _serve_one(settings, host, port, sock, surfaces=index == 0, quiet=index > 0)
        if code:
            raise SystemExit(code)

    return serve_workers(worker, host=host, port=port, workers=workers)


def _serve_one(
    settings: Settings,
    host: str,
    port: int,
    sock: object,
    *,
    surfaces: bool,
    quiet: bool = False,
) -> int:
    from adapters.http.server import SurfaceFailed, serve
    from learning_bot.app import build_app
    from learning_bot.surfaces import configured_surfaces

    app = build_app(settings, serving=True)
    try:
        live, notes = configured_surfaces(app, first_worker=surfaces)
        for note in notes if not quiet else ():
            print(f"learning-bot: {note}", flush=True)
        announce = (lambda _line: None) if quiet else _say
        _announce_public(settings, announce)
        run = serve(app.bus, host=host, port=port, surfaces=live, announce=announce, sock=sock)  # type: ignore[arg-type]
        try:
            _run_loop(run)
        except SurfaceFailed as exc:
            print(f"learning-bot: {exc}", file=sys.stderr, flush=True)
            return EXIT_ERROR
        return EXIT_OK
    finally:
        app.close()


def _mcp_stdio(settings: Settings) -> int:
    """MCP over stdin/stdout until stdin closes or SIGTERM; stdout carries only JSON-RPC."""
    import anyio

    from adapters.mcp.server import build_server
    from adapters.mcp.surface import serve_stdio
    from learning_bot.app import build_app
    from learning_bot.surfaces import mcp_tools

    app = build_app(settings, serving=True)
    try:
        anyio.run(serve_stdio, build_server(mcp_tools(app)), app.close)
    finally:
        app.close()
    return EXIT_OK


def _announce_public(settings: Settings, announce: Callable[[str], None]) -> None:
    if settings.public_url:
        announce(
            f"learning-bot: public address {settings.public_url}; status replies link the "
            f"dashboard at {settings.dashboard_url}"
        )


def _say(line: str) -> None:
    print(line, flush=True)


def _run_loop(main: object) -> None:
    import asyncio

    try:  # uvloop's event loop when it is installed (it is on Linux and macOS)
        import uvloop

        uvloop.run(main)  # type: ignore[arg-type]
    except ImportError:
        asyncio.run(main)  # type: ignore[arg-type]


def _slack(settings: Settings, host: str, port: int) -> int:
    """Slack on its own: Socket Mode when SLACK_APP_TOKEN is set (no port is opened), else HTTP
    on --host/--port with Slack posting to /slack/events."""
    from adapters.http.server import SurfaceFailed, http_settings, serve
    from adapters.slack.service import slack_service
    from learning_bot.app import build_app

    if not 1 <= port <= 65535:
        raise CliError(f"--port must be from 1 to 65535, got {port}", EXIT_USAGE)
    app = build_app(settings, serving=True)
    try:
        surface = slack_service(app.bus, installation_engine=app.engine)
        _announce_public(settings, _say)
        if surface.settings.socket_mode:
            _run_loop(_socket_mode_only(surface))
            return EXIT_OK
        run = serve(
            app.bus,
            host=host,
            port=port,
            settings=http_settings(),
            surfaces=[surface],
            announce=_say,
        )
        try:
            _run_loop(run)
        except SurfaceFailed as exc:
            print(f"learning-bot: {exc}", file=sys.stderr, flush=True)
            return EXIT_ERROR
        return EXIT_OK
    finally:
        app.close()


async def _socket_mode_only(surface: object) -> None:
    """Run one surface until SIGINT/SIGTERM, then stop it."""
    import asyncio
    import contextlib
    import signal

    from bot.surface import Surface

    assert isinstance(surface, Surface)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
    _say(f"learning-bot: {surface.name} connected out; stop with Ctrl-C")
    task = asyncio.create_task(surface.run())
    waiter = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        await asyncio.wait_for(surface.stop(), 10)
        waiter.cancel()
        if task.done() and task.exception() is not None:
            raise CliError(f"the {surface.name} surface failed: {task.exception()}")
        task.cancel()
    _say("learning-bot: stopped")


def _discord(args: argparse.Namespace, settings: Settings) -> int:
    from adapters.discord.cli import run_command
    from adapters.discord.settings import load_discord_settings
    from learning_bot.app import build_app

    discord_settings = load_discord_settings()
    app = build_app(settings, serving=True)
    try:
        return run_command(args, app.bus, discord_settings)
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
        for name in store.learner_names():
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
    from storage.spool import dead_letters, default_spool_root

    root = default_spool_root(target)
    dead = dead_letters(root)
    if dead:
        print(
            f"spool: {len(dead)} run(s) the database refused on replay are kept in "
            f"{root / 'dead-letter.jsonl'} (latest reason: {dead[-1].get('reason', '?')})"
        )
    return EXIT_ERROR if failed else EXIT_OK


def _error(message: str, hint: str | None = None) -> None:
    """`learning-bot: <what is wrong>` on one line, then at most one hint line (a "did you
    mean" folded into the message becomes the hint)."""
    from adapters.terminal.style import Style

    head, sep, close = message.partition("; did you mean ")
    if sep and hint is None:
        message, hint = head, f"did you mean {close}"
    style = Style.for_stream(sys.stderr)
    print(f"learning-bot: {style.error(message)}", file=sys.stderr)
    if hint:
        print(style.dim(hint), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return _run(args)
    except BaseException as exc:
        return failed(exc)


def failed(exc: BaseException) -> int:
    """The exit code of a command that raised `exc`, after its one-line message on stderr;
    anything but an error (SystemExit from --help) goes on up, and with LEARNING_BOT_DEBUG
    set, so does an unexpected error."""
    from bot.errors import error_kind
    from engine.errors import LearningError

    if isinstance(exc, CliError):
        _error(str(exc), exc.hint)
        return exc.code
    if isinstance(exc, LearningError):
        _error(str(exc))
        return error_kind(exc).exit_code
    if isinstance(exc, KeyboardInterrupt):
        print("learning-bot: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, BrokenPipeError):
        return EXIT_OK
    if not isinstance(exc, Exception) or os.environ.get("LEARNING_BOT_DEBUG"):
        raise exc
    print(
        f"learning-bot: unexpected error: {type(exc).__name__}: {exc}",
        file=sys.stderr,
    )
    print("set LEARNING_BOT_DEBUG=1 for the details", file=sys.stderr)
    return EXIT_ERROR
