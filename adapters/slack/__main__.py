"""`python -m adapters.slack`: serve /learning in Slack on its own.

Socket Mode when SLACK_APP_TOKEN is set (no public URL needed), else HTTP on --host/--port with
Slack posting to /slack/events. The learning layer's own settings come from LEARNING_BOT_*.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Sequence

from starlette.applications import Starlette

from adapters.slack.service import SlackService, slack_service
from engine.errors import LearningError


async def _socket_mode(service: SlackService) -> None:
    try:
        await service.run()
    finally:
        await service.stop()


def _http_app(service: SlackService) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await service.stop()  # let answers still on their way to response_url go out

    return Starlette(routes=service.routes, lifespan=lifespan)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m adapters.slack", description="Serve /learning in Slack."
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP mode: address to listen on")
    parser.add_argument("--port", type=int, default=3000, help="HTTP mode: port (default 3000)")
    parser.add_argument("--database-url", help="else LEARNING_BOT_DATABASE_URL, else SQLite")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")

    from bot.app import build_app
    from bot.settings import load_settings

    try:
        core = build_app(load_settings(database_url=args.database_url))
    except LearningError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        service = slack_service(core)
        if service.settings.socket_mode:
            asyncio.run(_socket_mode(service))
        else:
            import uvicorn

            uvicorn.run(_http_app(service), host=args.host, port=args.port)
    except LearningError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    finally:
        core.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
