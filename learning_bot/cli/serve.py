"""`learning-bot serve`: the HTTP API, the dashboard and every configured surface, in one or
several worker processes."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    import socket

    from learning_bot.engine.posterior import WallClock
    from learning_bot.settings import Settings

log = logging.getLogger("learning_bot.serve")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; another needs LEARNING_BOT_API_TOKEN)",
    )
    parser.add_argument("--port", type=int, default=8787, help="port to listen on (default 8787)")
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=int(os.environ.get("LEARNING_BOT_WORKERS", "1") or 1),
        help="processes serving every HTTP route, 1-64 (default LEARNING_BOT_WORKERS or 1; "
        "one per core; a worker that dies is restarted; chat connections run in the first; "
        "refused with Slack over HTTP)",
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return _serve(settings, args.host, args.port, args.workers)


COMMAND = Command(
    name="serve",
    help="run the HTTP API, the dashboard and the chat surfaces",
    description=(
        "Serve the learning API and the dashboard, plus Slack and Discord when their "
        "settings are present. Runs until SIGINT or SIGTERM."
    ),
    arguments=_arguments,
    run=_run,
    no_url="it is the server",
)


def _serve(settings: Settings, host: str, port: int, workers: int = 1) -> int:
    from learning_bot.adapters.http.server import is_loopback
    from learning_bot.adapters.http.settings import http_settings

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
        check_port_free(host, port)
        return _serve_one(settings, host, port, None, surfaces=True)
    refusal = workers_refusal(os.environ)
    if refusal is not None:
        raise CliError(refusal, EXIT_USAGE, hint=WORKERS_HINT)

    def worker(index: int, sock: object) -> None:
        code = _serve_one(settings, host, port, sock, surfaces=index == 0, quiet=index > 0)
        if code:
            raise SystemExit(code)

    return supervise_workers(worker, host=host, port=port, workers=workers)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` as the server binds it (SO_REUSEADDR: a port left in
    TIME_WAIT is free), not yet listening; CliError when the port is taken or the address is
    not this machine's."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        import errno

        if exc.errno == errno.EADDRINUSE:
            raise CliError(
                f"port {port} on {host} is already in use",
                EXIT_ERROR,
                hint="stop what listens there, or give another --port",
            ) from None
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def check_port_free(host: str, port: int) -> None:
    """CliError, before the application is built, when the server could not bind its port."""
    listening_socket(host, port).close()


WORKERS_HINT = (
    "use Slack's Socket Mode (SLACK_APP_TOKEN), or run several `serve --workers 1` replicas "
    "behind a load balancer"
)


def workers_refusal(env: Mapping[str, str]) -> str | None:
    """Why `serve --workers N` (N > 1) cannot serve this configuration, or None. Slack over
    HTTP (POST /slack/events, and the OAuth install pages) is served by the process holding
    the Slack app, the first worker: the kernel would hand a share of Slack's requests to the
    others, which answer 404. Socket Mode without the OAuth install has no HTTP route, and the
    API, dashboard, MCP and /v1 routes are served by every worker."""
    from learning_bot.adapters.slack.settings import slack_settings_from_env
    from learning_bot.adapters.slack.surface import slack_configured

    if not slack_configured(env):
        return None
    slack = slack_settings_from_env(env)
    if not slack.socket_mode:
        return (
            "--workers: Slack over HTTP (POST /slack/events) runs in one worker only, so the "
            "others would answer a share of Slack's requests with 404"
        )
    if slack.oauth:
        return (
            "--workers: Slack's OAuth install pages run in one worker only, so the others "
            "would answer a share of installs with 404"
        )
    return None


RESTART_FIRST_SECONDS = 0.5
RESTART_MAX_SECONDS = 30.0
HEALTHY_SECONDS = 60.0
"""A worker that served this long before dying is restarted at once again (back-off reset)."""


def supervise_workers(
    run_worker: Callable[[int, socket.socket], None],
    *,
    host: str,
    port: int,
    workers: int,
    announce: Callable[[str], None] = print,
) -> int:
    """Bind once and fork `workers` processes serving the same socket. A worker that dies is
    forked again (after 0.5 s, doubling to at most 30 s while it keeps dying young) while
    the others keep serving; the parent returns only after SIGINT or SIGTERM, once every
    worker has stopped."""
    from learning_bot.adapters.http.server import fork_worker

    sock = listening_socket(host, port)
    sock.listen(2048)
    sock.set_inheritable(True)
    children: dict[int, tuple[int, float]] = {}  # pid -> (index, started)
    delays = [RESTART_FIRST_SECONDS] * workers
    due: dict[int, float] = {}  # index -> when to fork it again
    stopping: list[int] = []

    def start(index: int) -> None:
        children[fork_worker(run_worker, index, sock)] = (index, time.monotonic())

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)
        for child in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    for index in range(workers):
        start(index)
    announce(f"learning-bot: {workers} worker processes serve port {port}")
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while children or (due and not stopping):
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid, status = 0, 0
        if pid:
            index, started = children.pop(pid)
            if not stopping:
                code = os.waitstatus_to_exitcode(status)
                lived = time.monotonic() - started
                if lived >= HEALTHY_SECONDS:
                    delays[index] = RESTART_FIRST_SECONDS
                delay = delays[index]
                delays[index] = min(delay * 2, RESTART_MAX_SECONDS)
                log.error("worker %d exited with %d; restarting it in %.1f s", index, code, delay)
                print(
                    f"learning-bot: worker {index} exited ({code}); restarting it in {delay:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                due[index] = time.monotonic() + delay
            continue
        now = time.monotonic()
        for index, when in list(due.items()):
            if stopping:
                due.clear()
            elif when <= now:
                del due[index]
                start(index)
        time.sleep(0.05)
    sock.close()
    return EXIT_OK


def _serve_one(
    settings: Settings,
    host: str,
    port: int,
    sock: object,
    *,
    surfaces: bool,
    quiet: bool = False,
) -> int:
    from learning_bot.adapters.http.server import serve
    from learning_bot.app import build_app
    from learning_bot.surfaces import configured_surfaces

    app = build_app(settings, serving=True)
    stop_purge = start_purging(app.bus.commands, clock=app.clock)
    try:
        live, notes = configured_surfaces(app, first_worker=surfaces)
        for note in notes if not quiet else ():
            print(f"learning-bot: {note}", flush=True)
        announce = (lambda _line: None) if quiet else say
        announce_public(settings, announce)
        run = serve(app.bus, host=host, port=port, surfaces=live, announce=announce, sock=sock)  # type: ignore[arg-type]
        return serve_until_stopped(run)
    finally:
        stop_purge.set()
        app.close()


PURGE_EVERY_SECONDS = 600.0
"""How often a serving process forgets old idempotency keys and spent confirmations."""
KEEP_COMMANDS_MS = 24 * 60 * 60 * 1000
"""Idempotency keys are kept a day (surfaces retry within minutes); confirmations until a day
past their expiry."""


def start_purging(
    commands: object, every: float = PURGE_EVERY_SECONDS, *, clock: WallClock | None = None
) -> threading.Event:
    """Purge the command log now and every `every` seconds on a daemon thread, until the
    returned event is set. Replicas purging at once is harmless (the deletes are idempotent);
    a failure (storage down) is logged and tried again next time."""
    stop = threading.Event()
    purge = getattr(commands, "purge", None)
    if purge is None:
        return stop

    from learning_bot.engine.posterior import now_ms

    read_clock = clock or now_ms

    def loop() -> None:
        while not stop.is_set():
            try:
                purge(read_clock() - KEEP_COMMANDS_MS)
            except Exception:
                log.warning("command log purge failed; retrying later", exc_info=True)
            stop.wait(every)

    threading.Thread(target=loop, name="command-log-purge", daemon=True).start()
    return stop


def announce_public(settings: Settings, announce: Callable[[str], None]) -> None:
    if settings.public_url:
        announce(
            f"learning-bot: public address {settings.public_url}; status replies link the "
            f"dashboard at {settings.dashboard_url}"
        )


def say(line: str) -> None:
    print(line, flush=True)


def serve_until_stopped(run: object) -> int:
    """Run a server coroutine to its end: exit 0, or 1 with one line when a surface failed."""
    from learning_bot.adapters.http.server import SurfaceFailed

    try:
        run_loop(run)
    except SurfaceFailed as exc:
        print(f"learning-bot: {exc}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    return EXIT_OK


def run_loop(main: object) -> None:
    import asyncio

    try:  # uvloop's event loop when it is installed (it is on Linux and macOS)
        import uvloop

        uvloop.run(main)  # type: ignore[arg-type]
    except ImportError:
        asyncio.run(main)  # type: ignore[arg-type]
