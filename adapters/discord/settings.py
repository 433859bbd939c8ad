"""The Discord surface's settings, read from DISCORD_* environment variables and validated once
at start-up with errors that name the variable."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from learning_bot.engine.errors import InvalidConfig

MAX_SNOWFLAKE = 2**64 - 1
DEFAULT_DEFER_AFTER = 0.2
"""Seconds to wait for a reply before deferring: well inside Discord's 3-second window, and
short enough that the first response always lands within a few hundred milliseconds."""
DEFAULT_AUTOCOMPLETE_BUDGET = 2.0
"""Seconds an autocomplete may take before it answers with no suggestions: it cannot defer,
and Discord drops an answer that comes after 3 seconds."""
DEFAULT_CONFIRM_TIMEOUT = 14 * 60.0
"""Confirm/cancel buttons stop working after this long: under the 15 minutes an interaction
token lives (the prompt can still be edited to show it expired) and under the bus's
confirmation lifetime."""


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    token: str | None = None
    """DISCORD_TOKEN: the bot token from the Developer Portal (Bot -> Reset Token)."""
    guild_ids: tuple[int, ...] = ()
    """DISCORD_GUILD_IDS: guilds that `discord sync` registers the commands in (testing)."""
    admin_role_ids: frozenset[int] = frozenset()
    """DISCORD_ADMIN_ROLE_IDS: members with any of these roles are admins."""
    admin_user_ids: frozenset[int] = frozenset()
    """DISCORD_ADMIN_USER_IDS: these users are admins in every guild."""
    defer_after: float = DEFAULT_DEFER_AFTER
    """DISCORD_DEFER_AFTER: seconds to wait for a reply before deferring it."""
    confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT
    autocomplete_budget: float = DEFAULT_AUTOCOMPLETE_BUDGET
    """Seconds an autocomplete lookup may take before it answers with no suggestions."""
    api_url: str | None = None
    """DISCORD_API_URL: another REST API base than Discord's (`http://127.0.0.1:8000/api/v10`):
    a local stand-in for tests, or a proxy. Not needed to talk to Discord itself."""
    gateway_url: str | None = None
    """DISCORD_GATEWAY_URL: another gateway WebSocket URL than Discord's (`ws://127.0.0.1:8001/`),
    for the same uses."""

    def require_token(self) -> str:
        if not self.token:
            raise InvalidConfig(
                "DISCORD_TOKEN",
                "is not set; copy the bot token from the Developer Portal (Bot -> Reset Token)",
            )
        return self.token


def parse_snowflakes(name: str, raw: str) -> tuple[int, ...]:
    """A comma-separated list of Discord ids (snowflakes), in order, without duplicates."""
    out: list[int] = []
    for part in raw.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isascii() or not part.isdigit() or not 0 < int(part) <= MAX_SNOWFLAKE:
            shown = part if len(part) <= 40 else part[:37] + "..."
            raise InvalidConfig(name, f"expected comma-separated Discord ids, got {shown!r}")
        value = int(part)
        if value not in out:
            out.append(value)
    return tuple(out)


def _seconds(name: str, raw: str, low: float, high: float, default: float) -> float:
    raw = raw.strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidConfig(name, f"must be a number of seconds, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise InvalidConfig(name, f"must be between {low:g} and {high:g} seconds, got {value:g}")
    return value


def _url(name: str, raw: str, schemes: tuple[str, ...]) -> str | None:
    raw = raw.strip()
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in schemes or not parts.netloc:
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        raise InvalidConfig(name, f"must be a {' or '.join(schemes)} URL, got {shown!r}")
    return raw


def use_endpoints(settings: DiscordSettings) -> None:
    """Point discord.py at `settings.api_url` and `settings.gateway_url` when they are set.
    discord.py keeps both as class attributes, so this holds for every client in the process."""
    import discord.gateway
    import discord.http
    import yarl

    if settings.api_url:
        discord.http.Route.BASE = settings.api_url.rstrip("/")
    if settings.gateway_url:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)


def load_discord_settings(env: Mapping[str, str] | None = None) -> DiscordSettings:
    """DISCORD_TOKEN, DISCORD_GUILD_IDS, DISCORD_ADMIN_ROLE_IDS, DISCORD_ADMIN_USER_IDS,
    DISCORD_DEFER_AFTER, DISCORD_API_URL and DISCORD_GATEWAY_URL from the environment (or
    `env`). The two URLs, when set, take effect here (`use_endpoints`): every command that
    talks to Discord loads these settings first."""
    env = os.environ if env is None else env
    settings = DiscordSettings(
        token=env.get("DISCORD_TOKEN", "").strip() or None,
        guild_ids=parse_snowflakes("DISCORD_GUILD_IDS", env.get("DISCORD_GUILD_IDS", "")),
        admin_role_ids=frozenset(
            parse_snowflakes("DISCORD_ADMIN_ROLE_IDS", env.get("DISCORD_ADMIN_ROLE_IDS", ""))
        ),
        admin_user_ids=frozenset(
            parse_snowflakes("DISCORD_ADMIN_USER_IDS", env.get("DISCORD_ADMIN_USER_IDS", ""))
        ),
        defer_after=_seconds(
            "DISCORD_DEFER_AFTER", env.get("DISCORD_DEFER_AFTER", ""), 0.0, 2.5, DEFAULT_DEFER_AFTER
        ),
        api_url=_url("DISCORD_API_URL", env.get("DISCORD_API_URL", ""), ("http", "https")),
        gateway_url=_url("DISCORD_GATEWAY_URL", env.get("DISCORD_GATEWAY_URL", ""), ("ws", "wss")),
    )
    use_endpoints(settings)
    return settings
