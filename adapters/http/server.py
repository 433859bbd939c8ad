"""`learning-bot serve`: uvicorn with the API and dashboard, plus the chat surfaces that are
configured, in one event loop; SIGINT/SIGTERM stop everything within a few seconds."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from learning_bot.adapters.http.api import BASE
from learning_bot.adapters.http.app import create_app
from learning_bot.adapters.http.logs import configure_logging, json_logs
from learning_bot.adapters.http.settings import HttpSettings, http_settings, serving_settings
from learning_bot.bot.bus import CommandBus
from learning_bot.bot.surface import Surface
from learning_bot.engine.errors import InvalidConfig

log = logging.getLogger("learning_bot.serve")
SHUTDOWN_SECONDS = 4.0


HEADER_SECONDS = 10.0
"""A connection that has not sent a whole request head within this time is closed."""
KEEP_ALIVE_SECONDS = 5


class CoalescingTransport:
    """A transport whose writes within one turn of the event loop leave as one: uvicorn
    writes a response's head and its body separately, and on a busy loopback each write is a
    system call and a wake-up of the client. Everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Sequence[bytes | bytearray | memoryview]) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeadDeadlines:
    """The connections of one event loop whose request head is arriving, and when each must
    be complete; one timer looks at them a few times a second and closes the late ones
    (instead of a timer armed and cancelled for every request)."""

    def __init__(self, seconds: float, loop: asyncio.AbstractEventLoop) -> None:
        self.seconds = seconds
        self._loop = loop
        self._every = min(1.0, seconds / 4)
        self._arriving: dict[asyncio.BaseProtocol, float] = {}
        self._timer: asyncio.TimerHandle | None = None

    def start(self, protocol: asyncio.BaseProtocol) -> None:
        if protocol not in self._arriving:
            self._arriving[protocol] = self._loop.time() + self.seconds
            if self._timer is None:
                self._timer = self._loop.call_later(self._every, self._sweep)

    def stop(self, protocol: asyncio.BaseProtocol) -> None:
        self._arriving.pop(protocol, None)

    def _sweep(self) -> None:
        now = self._loop.time()
        late = [p for p, deadline in self._arriving.items() if deadline <= now]
        for protocol in late:
            del self._arriving[protocol]
            transport = getattr(protocol, "transport", None)
            if transport is not None and not transport.is_closing():
                log.info("closing a connection whose request head took over %g s", self.seconds)
                transport.close()
        self._timer = self._loop.call_later(self._every, self._sweep) if self._arriving else None


def header_timeout_protocol(seconds: float = HEADER_SECONDS) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol (the C parser: a round trip costs a fraction of what the
    pure-Python h11 one does) with a deadline for the request head, and the writes of one turn
    of the event loop sent together (`CoalescingTransport`). uvicorn times out idle keep-alive
    connections but not a client that sends its headers a byte at a time, which would hold a
    connection (and its memory) for as long as it likes. The deadline runs from the
    connection's start and from the first byte of each request to the end of its head."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    deadlines: dict[asyncio.AbstractEventLoop, HeadDeadlines] = {}

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _heads: HeadDeadlines

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = cast(asyncio.Transport, CoalescingTransport(transport, self.loop))
            heads = deadlines.get(self.loop)
            if heads is None:
                heads = deadlines[self.loop] = HeadDeadlines(seconds, self.loop)
            self._heads = heads
            heads.start(self)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._heads.start(self)

        def on_headers_complete(self) -> None:
            self._heads.stop(self)
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._heads.stop(self)
            super().connection_lost(exc)

    return HeaderTimeoutProtocol


SETTLE_SECONDS = 5.0
"""After this long the surfaces have started (the MCP SDK loads in about half a second)."""


def freeze_startup() -> None:
    """Move what start-up built, which lives as long as the server, out of the garbage
    collector's sight: a full collection otherwise walks every module, class and table the
    process loaded (tens of milliseconds, with every request waiting). Called when the server
    is up and again once the surfaces have settled; cyclic garbage is collected first, so
    only live objects are frozen."""
    gc.collect()
    gc.freeze()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SurfaceFailed(Exception):
    """A surface's `run()` raised (or returned before it was asked to stop)."""

    def __init__(self, name: str, cause: BaseException | None) -> None:
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else "it stopped"
        super().__init__(f"the {name} surface failed: {detail}")
        self.surface = name


async def serve(
    bus: CommandBus,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    settings: HttpSettings | None = None,
    surfaces: Sequence[Surface] = (),
    announce: Callable[[str], None] = print,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Run until SIGINT/SIGTERM (or until the task is cancelled). With `sock`, serve on that
    already bound socket (one of several worker processes sharing it). A surface that fails
    stops everything and raises SurfaceFailed naming it."""
    import uvicorn

    settings = settings or http_settings()
    if settings.api_token is None and not is_loopback(host):
        raise InvalidConfig(
            "--host",
            f"refusing to listen on {host} without LEARNING_BOT_API_TOKEN: anyone could "
            "reset posteriors; set a token or bind to 127.0.0.1",
        )
    settings = serving_settings(settings)
    routes = [route for s in surfaces for route in s.routes]
    asgi = create_app(bus, settings, extra_routes=routes)
    log_level = os.environ.get("LEARNING_BOT_LOG_LEVEL", "warning").lower()
    configure_logging(log_level)
    config = uvicorn.Config(
        asgi,
        host=host,
        port=port,
        log_level=log_level,
        # JSON lines: uvicorn's own loggers go through the root handler too
        log_config=None if json_logs() else uvicorn.config.LOGGING_CONFIG,
        access_log=False,
        timeout_graceful_shutdown=int(SHUTDOWN_SECONDS),
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        http=header_timeout_protocol(),
        lifespan="off",
    )
    server = uvicorn.Server(config)
    import learning_bot.engine.selection  # noqa: F401  (numpy and the selection code, before the freeze)

    loop = asyncio.get_running_loop()
    stopping = stop if stop is not None else asyncio.Event()

    def request_stop(*_: Any) -> None:
        server.should_exit = True
        stopping.set()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, request_stop)
            installed.append(sig)

    url = f"http://{host}:{port}{BASE}/dashboard"
    announce(f"learning-bot: serving the learning API on http://{host}:{port}{BASE}/")
    announce(f"learning-bot: dashboard at {url}")
    if settings.api_token is None:
        announce(
            "learning-bot: no LEARNING_BOT_API_TOKEN set, so mutating routes are open and the "
            "server listens on loopback only"
        )
    live = ["http"] + [s.name for s in surfaces]
    http_task = asyncio.create_task(server.serve(sockets=[sock] if sock else None), name="http")
    tasks: dict[asyncio.Task[Any], str] = {http_task: "http"}
    for surface in surfaces:
        tasks[asyncio.create_task(surface.run(), name=surface.name)] = surface.name

    async def signal_ready() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        # announced once the socket listens, so a client reading this line can connect
        announce(f"learning-bot: live surfaces: {', '.join(live)}")
        freeze_startup()
        if ready is not None:
            ready.set()
        await asyncio.sleep(SETTLE_SECONDS)  # the surfaces load their libraries meanwhile
        freeze_startup()

    watcher = asyncio.create_task(signal_ready())
    stop_wait = asyncio.create_task(stopping.wait())
    failed: SurfaceFailed | None = None
    try:
        done, _ = await asyncio.wait([*tasks, stop_wait], return_when=asyncio.FIRST_COMPLETED)
        if not stopping.is_set():
            # Nothing asked us to stop, so a task that ended (returned or raised) failed.
            for task in done:
                if task in tasks:
                    cause = None if task.cancelled() else task.exception()
                    failed = SurfaceFailed(tasks[task], cause)
                    log.error("%s", failed)
                    break
    finally:
        request_stop()
        for surface in surfaces:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(surface.stop(), SHUTDOWN_SECONDS)
        pending = [t for t in tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=SHUTDOWN_SECONDS + 0.5)
            for task in still:
                task.cancel()
        stop_wait.cancel()
        watcher.cancel()
        for sig in installed:
            loop.remove_signal_handler(sig)
    if failed is not None:
        announce(f"learning-bot: stopped: {failed}")
        raise failed
    announce("learning-bot: stopped")


def fork_worker(
    run_worker: Callable[[int, socket.socket], None], index: int, sock: socket.socket
) -> int:
    """Fork one worker process running `run_worker(index, sock)`; its pid."""
    pid = os.fork()
    if pid == 0:  # the worker
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        code = 0
        try:
            run_worker(index, sock)
        except BaseException:
            log.exception("worker %d failed", index)
            code = 1
        finally:
            sys.stdout.flush()
            os._exit(code)
    return pid


def _die_with_parent() -> None:
    """Linux: have the kernel send SIGTERM to this worker when its parent dies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
