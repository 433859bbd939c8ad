"""The HTTP surface's settings, and how `serve` reads them from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from learning_bot.engine.errors import InvalidConfig

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class HttpSettings:
    api_token: str | None = None
    """Bearer token required on mutating routes; None leaves them open (loopback only)."""
    max_body_bytes: int = 4 * 1024 * 1024
    cors_origins: tuple[str, ...] = ()
    refresh_seconds: int = 30
    body_timeout_seconds: float = 30.0
    """A request body not fully received within this time is answered 408."""
    max_streams: int = 8
    """Long answers (GET traces) sent at once; beyond it they are answered 503 with
    Retry-After. Each holds about one piece of traces (storage.reads.PIECE_BYTES) in memory."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names mutating requests may be addressed to (empty: any). Without a token on
    loopback, `serve` sets the loopback names, so a DNS-rebound name cannot write."""


def serving_settings(settings: HttpSettings) -> HttpSettings:
    """`settings` as a listening server applies them: without a token, writes must be
    addressed to a loopback name (a DNS-rebound name cannot write)."""
    if settings.api_token is None and not settings.allowed_hosts:
        return replace(settings, allowed_hosts=LOOPBACK_NAMES)
    return settings


def http_settings(env: Mapping[str, str] | None = None) -> HttpSettings:
    """The settings `serve` runs with, from the environment (`serving_settings` applied)."""
    env = os.environ if env is None else env
    token = env.get("LEARNING_BOT_API_TOKEN", "").strip() or None
    if token is not None and len(token) < 16:
        raise InvalidConfig("LEARNING_BOT_API_TOKEN", "must be at least 16 characters")
    if token is not None and not (token.isascii() and token.isprintable()):
        # A client sends the header as bytes; only printable ASCII arrives as it was set.
        raise InvalidConfig(
            "LEARNING_BOT_API_TOKEN",
            "must be printable ASCII (no client can send other characters in a header)",
        )
    raw_max = env.get("LEARNING_BOT_MAX_BODY_BYTES", "").strip()
    try:
        max_body = int(raw_max) if raw_max else 4 * 1024 * 1024
    except ValueError:
        raise InvalidConfig(
            "LEARNING_BOT_MAX_BODY_BYTES", f"must be bytes, got {raw_max!r}"
        ) from None
    if not 1024 <= max_body <= 256 * 1024 * 1024:
        raise InvalidConfig("LEARNING_BOT_MAX_BODY_BYTES", "must be from 1 KiB to 256 MiB")
    raw_streams = env.get("LEARNING_BOT_MAX_STREAMS", "").strip()
    try:
        max_streams = int(raw_streams) if raw_streams else 8
    except ValueError:
        raise InvalidConfig(
            "LEARNING_BOT_MAX_STREAMS", f"must be a whole number, got {raw_streams!r}"
        ) from None
    if not 1 <= max_streams <= 1000:
        raise InvalidConfig("LEARNING_BOT_MAX_STREAMS", "must be from 1 to 1000")
    origins = tuple(
        o.strip() for o in env.get("LEARNING_BOT_CORS_ORIGINS", "").split(",") if o.strip()
    )
    return serving_settings(
        HttpSettings(
            api_token=token,
            max_body_bytes=max_body,
            cors_origins=origins,
            max_streams=max_streams,
        )
    )
