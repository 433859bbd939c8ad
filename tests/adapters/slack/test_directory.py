"""users.info answers: who is an admin or a guest, cached, one call for concurrent lookups."""

from __future__ import annotations

import asyncio

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from learning_bot.adapters.slack.directory import SlackDirectory, UserLookupFailed, user_from_info

from .conftest import USERS
from .fake_slack import FakeSlack


def test_roles_from_users_info() -> None:
    assert user_from_info(USERS["U-admin"]).is_admin
    assert user_from_info(USERS["U-owner"]).is_admin
    assert user_from_info({"id": "U1", "is_primary_owner": True}).is_admin
    member = user_from_info(USERS["U-member"])
    assert (member.is_admin, member.is_guest, member.name) == (False, False, "Max")
    assert user_from_info(USERS["U-guest"]).is_guest
    assert user_from_info({"id": "U2", "is_ultra_restricted": True}).is_guest
    assert user_from_info({"id": "U3", "name": "plain"}).name == "plain"


async def test_lookups_are_cached_and_shared(fake_slack: FakeSlack) -> None:
    now = [0.0]
    directory = SlackDirectory(ttl=300, clock=lambda: now[0])
    client = AsyncWebClient(token="xoxb-test", base_url=fake_slack.api_url)
    users = await asyncio.gather(*(directory.user(client, "T1", "U-admin") for _ in range(5)))
    assert {u.name for u in users} == {"Ada"}
    assert len(fake_slack.api("users.info")) == 1
    await directory.user(client, "T1", "U-admin")
    assert len(fake_slack.api("users.info")) == 1
    await directory.user(client, "T2", "U-admin")  # another workspace, another entry
    assert len(fake_slack.api("users.info")) == 2
    now[0] = 301.0
    fake_slack.users["U-admin"]["is_admin"] = False
    assert not (await directory.user(client, "T1", "U-admin")).is_admin
    assert len(fake_slack.api("users.info")) == 3


async def test_failures_are_not_cached(fake_slack: FakeSlack) -> None:
    directory = SlackDirectory()
    client = AsyncWebClient(token="xoxb-test", base_url=fake_slack.api_url)
    with pytest.raises(UserLookupFailed, match="user_not_found"):
        await directory.user(client, "T1", "U-nobody")
    fake_slack.users_info_error = "ratelimited"
    with pytest.raises(UserLookupFailed, match="ratelimited"):
        await directory.user(client, "T1", "U-admin")
    fake_slack.users_info_error = None
    assert (await directory.user(client, "T1", "U-admin")).is_admin
