"""The optional multi-workspace install: slack_sdk's installation and OAuth-state stores, kept
in the project's database by the composition root (`bot.surface.WorkspaceInstallations`),
called from worker threads so that the event loop never waits on the database.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from logging import Logger
from typing import Any, TypeVar

from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.installation_store import InstallationStore
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.state_store import OAuthStateStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient

from learning_bot.adapters.slack.settings import BOT_SCOPES, SlackSettings
from learning_bot.bot.surface import WorkspaceInstallations

log = logging.getLogger("learning_bot.slack")

STATE_SECONDS = 600
LOOKUP_CACHE_SECONDS = 60.0
"""How long an installation found in the database is reused before it is read again (a
reinstall or uninstall handled by another replica shows up within this time)."""

T = TypeVar("T")


class ThreadedInstallationStore(AsyncInstallationStore):
    """An AsyncInstallationStore over a synchronous one (slack_sdk's SQLAlchemy store), each
    call in a thread, with
    lookups cached for LOOKUP_CACHE_SECONDS (every request looks its workspace up)."""

    def __init__(
        self,
        store: InstallationStore,
        *,
        cache_seconds: float = LOOKUP_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    @property
    def logger(self) -> Logger:
        return self.store.logger

    def _forget(self) -> None:
        with self._lock:
            self._cache.clear()

    async def _cached(self, find: Callable[..., T], **lookup: Any) -> T:
        """`find(**lookup)` on the store, in a thread, unless a recent answer is cached."""
        key = (find.__name__, *lookup.values())
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]  # type: ignore[no-any-return]
        value = await asyncio.to_thread(find, **lookup)
        if value is not None:
            with self._lock:
                self._cache[key] = (now + self._cache_seconds, value)
        return value

    async def async_save(self, installation: Installation) -> None:
        await asyncio.to_thread(self.store.save, installation)
        self._forget()

    async def async_save_bot(self, bot: Bot) -> None:
        await asyncio.to_thread(self.store.save_bot, bot)
        self._forget()

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        return await self._cached(
            self.store.find_bot,
            enterprise_id=enterprise_id,
            team_id=team_id,
            is_enterprise_install=is_enterprise_install,
        )

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        return await self._cached(
            self.store.find_installation,
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
            is_enterprise_install=is_enterprise_install,
        )

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await asyncio.to_thread(self.store.delete_bot, enterprise_id=enterprise_id, team_id=team_id)
        self._forget()

    async def async_delete_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
    ) -> None:
        await asyncio.to_thread(
            self.store.delete_installation,
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
        )
        self._forget()


class ThreadedOAuthStateStore(AsyncOAuthStateStore):
    """An AsyncOAuthStateStore over a synchronous one, each call in a thread."""

    def __init__(self, store: OAuthStateStore) -> None:
        self.store = store

    @property
    def logger(self) -> Logger:
        return self.store.logger

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        return await asyncio.to_thread(self.store.issue)

    async def async_consume(self, state: str) -> bool:
        return await asyncio.to_thread(self.store.consume, state)


def oauth_settings(
    settings: SlackSettings, installations: WorkspaceInstallations, client: AsyncWebClient
) -> AsyncOAuthSettings:
    """The install flow (GET /slack/install, GET /slack/oauth_redirect) with installations and
    OAuth states kept in `installations`."""
    assert settings.client_id is not None
    assert settings.client_secret is not None
    states = installations.oauth_state_store(STATE_SECONDS)
    store = ThreadedInstallationStore(installations.installation_store(settings.client_id))
    oauth = AsyncOAuthSettings(
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        scopes=list(BOT_SCOPES),
        user_scopes=[],
        redirect_uri=settings.redirect_uri,
        installation_store=store,
        state_store=ThreadedOAuthStateStore(states),
        state_expiration_seconds=STATE_SECONDS,
        logger=log,
    )
    # Authorisation runs before every listener, inside Slack's 3 s: cache auth.test per token.
    oauth.authorize = AsyncInstallationStoreAuthorize(
        logger=log,
        installation_store=store,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        token_rotation_expiration_minutes=oauth.token_rotation_expiration_minutes,
        cache_enabled=True,
        client=client,
    )
    return oauth


def installed_bot_tokens(
    client_id: str, workspaces: WorkspaceInstallations
) -> Callable[[str], Awaitable[str | None]]:
    """The bot token of each workspace (team id) the app was installed in through OAuth, read
    from its installation store (the alert senders post with it)."""
    installations = workspaces.installation_store(client_id)

    async def bot_token(team_id: str) -> str | None:
        def load() -> str | None:
            bot = installations.find_bot(enterprise_id=None, team_id=team_id)
            return None if bot is None or not bot.bot_token else str(bot.bot_token)

        return await asyncio.to_thread(load)

    return bot_token
