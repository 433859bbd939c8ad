"""Alerts and changes as Discord channel messages through the REST API: POST
/channels/{id}/messages for a card (a reply to it for a follow-up: `message_reference`),
PATCH to change it in place. The card is a Reply rendered like every reply
(adapters.discord.render: escaped embeds) and sent with no mention allowed."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from learning_bot.adapters.discord.render import render_reply
from learning_bot.bot.alerting import ChannelGone
from learning_bot.bot.replies import Reply

SURFACE = "discord"
DEFAULT_API_URL = "https://discord.com/api/v10"

GONE_CODES = frozenset({10003, 50001, 50013, 50083})
"""Unknown Channel, Missing Access, Missing Permissions, thread archived: posting keeps
failing until someone acts."""


def message_payload(card: Reply, reply_to: str | None = None) -> dict[str, Any]:
    """The JSON body of a channel message carrying the card."""
    message = render_reply(card)
    body: dict[str, Any] = {
        "embeds": [embed.to_dict() for embed in message.embeds],
        "allowed_mentions": {"parse": []},
    }
    if message.content:
        body["content"] = message.content
    if reply_to is not None:
        body["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
    return body


class DiscordAlertSender:
    """The scheduler's sender for Discord channels."""

    surface = SURFACE

    def __init__(self, token: str, api_url: str | None = None) -> None:
        self.token = token
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    async def _request(
        self, method: str, path: str, body: dict[str, Any], file: tuple[str, bytes] | None = None
    ) -> dict[str, Any]:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bot {self.token}", "User-Agent": "learning-bot"}
            )
        payload: dict[str, Any] = {"json": body}
        if file is not None:  # an attachment: multipart with the JSON as payload_json
            form = aiohttp.FormData()
            form.add_field("payload_json", json.dumps(body), content_type="application/json")
            form.add_field("files[0]", file[1], filename=file[0], content_type="image/png")
            payload = {"data": form}
        async with self._session.request(method, self.api_url + path, **payload) as response:
            data: Any = await response.json(content_type=None)
            if response.status in (403, 404):
                code = data.get("code") if isinstance(data, dict) else None
                if code in GONE_CODES or response.status == 404:
                    raise ChannelGone(str((data or {}).get("message") or response.status))
            if response.status >= 400:
                raise RuntimeError(f"Discord answered {response.status}: {str(data)[:200]}")
            return data if isinstance(data, dict) else {}

    async def post(self, channel: str, card: Reply, thread: str | None = None) -> str:
        data = await self._request(
            "POST", f"/channels/{channel}/messages", message_payload(card, thread)
        )
        return str(data["id"])

    async def update(self, channel: str, ref: str, card: Reply) -> None:
        body = message_payload(card)
        await self._request("PATCH", f"/channels/{channel}/messages/{ref}", body)

    async def upload(
        self, channel: str, filename: str, data: bytes, title: str, thread: str | None
    ) -> None:
        """The file as an attachment of a reply to the card."""
        body: dict[str, Any] = {
            "content": "",
            "allowed_mentions": {"parse": []},
            "attachments": [{"id": 0, "filename": filename, "description": title[:1024]}],
        }
        if thread is not None:
            body["message_reference"] = {"message_id": thread, "fail_if_not_exists": False}
        await self._request("POST", f"/channels/{channel}/messages", body, (filename, data))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
