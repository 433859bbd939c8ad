"""The Slack surface's settings, read once from SLACK_* environment variables and validated
with errors that name the variable."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from learning_bot.engine.errors import InvalidConfig

DEFAULT_API_URL = "https://slack.com/api/"
DEFAULT_COMMAND = "/learning"
DEFAULT_USER_CACHE_SECONDS = 300.0
DEFAULT_INLINE_SECONDS = 2.0
BOT_SCOPES = ("commands", "chat:write", "files:write", "users:read")
"""What the app needs: the slash command, posting replies, and telling admins and guests apart."""


@dataclass(frozen=True)
class SlackSettings:
    """How the Slack surface connects and behaves.

    One workspace: `bot_token` (+ `signing_secret` for HTTP mode). Several workspaces: `client_id`
    and `client_secret` turn on the OAuth install flow (installations live in our database).
    Socket Mode, for a quick start without a public URL, runs when `app_token` is set.
    """

    bot_token: str | None = None
    signing_secret: str | None = None
    app_token: str | None = None
    api_url: str = DEFAULT_API_URL
    """The Web API base URL (tests and private Slack deployments point it elsewhere)."""
    client_id: str | None = None
    client_secret: str | None = None
    redirect_uri: str | None = None
    """The OAuth redirect URL registered with Slack (else Slack uses the app's default)."""
    command: str = DEFAULT_COMMAND
    user_cache_seconds: float = DEFAULT_USER_CACHE_SECONDS
    """How long users.info answers (admin, owner, guest) are trusted."""
    inline_seconds: float = DEFAULT_INLINE_SECONDS
    """How long a read may take before its answer moves from the acknowledgement to
    response_url (Slack drops acknowledgements after 3 s)."""
    table_blocks: bool = True
    """Render the first table of a reply as Slack's `table` block (else monospace text)."""
    announce_channel: str | None = None
    """A channel id where confirmed resets and phase changes are announced (chat.postMessage)."""

    @property
    def socket_mode(self) -> bool:
        return bool(self.app_token)

    @property
    def oauth(self) -> bool:
        return bool(self.client_id and self.client_secret)

    def __post_init__(self) -> None:
        parts = urlsplit(self.api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidConfig("SLACK_API_URL", f"must be an http(s) URL, got {self.api_url!r}")
        if not self.api_url.endswith("/"):
            object.__setattr__(self, "api_url", self.api_url + "/")
        if not self.command.startswith("/") or len(self.command) < 2 or " " in self.command:
            raise InvalidConfig("SLACK_COMMAND", f"must look like /learning, got {self.command!r}")
        if bool(self.client_id) != bool(self.client_secret):
            raise InvalidConfig(
                "SLACK_CLIENT_ID" if not self.client_id else "SLACK_CLIENT_SECRET",
                "the OAuth install flow needs both SLACK_CLIENT_ID and SLACK_CLIENT_SECRET",
            )
        if not self.oauth and not self.bot_token:
            raise InvalidConfig(
                "SLACK_BOT_TOKEN",
                "is required (xoxb-...), unless SLACK_CLIENT_ID/SLACK_CLIENT_SECRET enable "
                "the multi-workspace install",
            )
        if self.bot_token and not self.bot_token.startswith("xox"):
            raise InvalidConfig("SLACK_BOT_TOKEN", "must be a bot token (xoxb-...)")
        if self.app_token and not self.app_token.startswith("xapp-"):
            raise InvalidConfig("SLACK_APP_TOKEN", "must be an app-level token (xapp-...)")
        if not self.socket_mode and not self.signing_secret:
            raise InvalidConfig(
                "SLACK_SIGNING_SECRET",
                "is required in HTTP mode (or set SLACK_APP_TOKEN for Socket Mode)",
            )
        if self.oauth and not self.signing_secret:
            raise InvalidConfig("SLACK_SIGNING_SECRET", "is required by the OAuth install flow")
        if not 0 < self.user_cache_seconds <= 86_400:
            raise InvalidConfig("SLACK_USER_CACHE_SECONDS", "must be in (0, 86400] seconds")
        if not 0 <= self.inline_seconds <= 2.5:
            raise InvalidConfig(
                "SLACK_INLINE_SECONDS", "must be in [0, 2.5] seconds (Slack waits 3 s at most)"
            )


def _flag(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise InvalidConfig(name, f"must be true or false, got {raw!r}")


def _seconds(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise InvalidConfig(name, f"must be a number of seconds, got {raw!r}") from None


def slack_settings_from_env(env: Mapping[str, str] | None = None) -> SlackSettings:
    """SlackSettings from SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN, SLACK_API_URL,
    SLACK_CLIENT_ID, SLACK_CLIENT_SECRET, SLACK_REDIRECT_URI, SLACK_COMMAND,
    SLACK_USER_CACHE_SECONDS, SLACK_INLINE_SECONDS, SLACK_TABLE_BLOCKS, SLACK_ANNOUNCE_CHANNEL."""
    env = os.environ if env is None else env

    def get(name: str) -> str | None:
        value = env.get(name, "").strip()
        return value or None

    cache = get("SLACK_USER_CACHE_SECONDS")
    inline = get("SLACK_INLINE_SECONDS")
    tables = get("SLACK_TABLE_BLOCKS")
    return SlackSettings(
        bot_token=get("SLACK_BOT_TOKEN"),
        signing_secret=get("SLACK_SIGNING_SECRET"),
        app_token=get("SLACK_APP_TOKEN"),
        api_url=get("SLACK_API_URL") or DEFAULT_API_URL,
        client_id=get("SLACK_CLIENT_ID"),
        client_secret=get("SLACK_CLIENT_SECRET"),
        redirect_uri=get("SLACK_REDIRECT_URI"),
        command=get("SLACK_COMMAND") or DEFAULT_COMMAND,
        user_cache_seconds=(
            _seconds("SLACK_USER_CACHE_SECONDS", cache)
            if cache is not None
            else DEFAULT_USER_CACHE_SECONDS
        ),
        inline_seconds=(
            _seconds("SLACK_INLINE_SECONDS", inline)
            if inline is not None
            else DEFAULT_INLINE_SECONDS
        ),
        table_blocks=_flag("SLACK_TABLE_BLOCKS", tables) if tables is not None else True,
        announce_channel=get("SLACK_ANNOUNCE_CHANNEL"),
    )
