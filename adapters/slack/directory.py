"""Who is typing: Slack's users.info (admin, owner, guest, display name), cached for a few
minutes so that a burst of commands costs one Web API call per person."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger("learning_bot.slack")

LOOKUP_TIMEOUT = 10.0
MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class SlackUser:
    id: str
    name: str
    is_admin: bool
    """A workspace admin, owner or primary owner."""
    is_guest: bool
    """A multi-channel (restricted) or single-channel (ultra-restricted) guest."""


class UserLookupFailed(Exception):
    """users.info did not answer; the message says why (e.g. missing_scope)."""


def user_from_info(data: dict[str, Any]) -> SlackUser:
    """A SlackUser from the `user` object of a users.info answer."""
    profile = data.get("profile") or {}
    name = (
        profile.get("display_name")
        or profile.get("real_name")
        or data.get("real_name")
        or data.get("name")
        or data.get("id")
        or ""
    )
    return SlackUser(
        id=str(data.get("id") or ""),
        name=str(name),
        is_admin=bool(data.get("is_admin") or data.get("is_owner") or data.get("is_primary_owner")),
        is_guest=bool(data.get("is_restricted") or data.get("is_ultra_restricted")),
    )


class SlackDirectory:
    """users.info answers per (team, user), trusted for `ttl` seconds; concurrent lookups of
    the same person share one call."""

    def __init__(
        self,
        ttl: float = 300.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._max = max_entries
        self._cache: OrderedDict[tuple[str, str], tuple[float, SlackUser]] = OrderedDict()
        self._pending: dict[tuple[str, str], asyncio.Future[SlackUser]] = {}

    def forget(self, team_id: str, user_id: str) -> None:
        self._cache.pop((team_id, user_id), None)

    async def user(self, client: AsyncWebClient, team_id: str, user_id: str) -> SlackUser:
        key = (team_id, user_id)
        now = self._clock()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            self._cache.move_to_end(key)
            return hit[1]
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[SlackUser] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            user = await self._fetch(client, user_id)
        except UserLookupFailed as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so an unawaited failure is not logged
            raise
        except BaseException:
            future.cancel()  # this lookup was cancelled: so are the ones waiting on it
            raise
        finally:
            self._pending.pop(key, None)
        future.set_result(user)
        self._cache[key] = (self._clock() + self.ttl, user)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return user

    @staticmethod
    async def _fetch(client: AsyncWebClient, user_id: str) -> SlackUser:
        try:
            response = await asyncio.wait_for(client.users_info(user=user_id), LOOKUP_TIMEOUT)
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            raise UserLookupFailed(str(error or exc)) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise UserLookupFailed(type(exc).__name__) from None
        data = response.get("user")
        if not isinstance(data, dict) or not data.get("id"):
            raise UserLookupFailed("users.info answered without a user")
        return user_from_info(data)
