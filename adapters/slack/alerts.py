"""Alerts and changes as Slack messages: chat.postMessage for a card (in its thread for a
follow-up, `thread_ts`) and chat.update to change it in place. The card is a Reply rendered
like every reply (adapters.slack.blocks: escaped, so no label can mention anyone).
A digest's chart goes up with files.uploadV2. Needs the `chat:write` and `files:write`
scopes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from learning_bot.adapters.slack.blocks import render_reply
from learning_bot.bot.alerting import ChannelGone
from learning_bot.bot.replies import Reply

SURFACE = "slack"

GONE = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "restricted_action",
        "account_inactive",
        "invalid_auth",
        "token_revoked",
        "team_access_not_granted",
    }
)
"""Web API errors after which posting to the channel will keep failing until someone acts."""


BotTokenFor = Callable[[str], Awaitable[str | None]]
"""The bot token of a workspace (team id) the app was installed in through OAuth, or None."""


class SlackAlertSender:
    """The scheduler's sender for Slack channels: with the bot token of one workspace, or,
    installed in several through OAuth (`bot_token_for`), with the token of the workspace a
    subscription's channel belongs to (`for_scope`)."""

    surface = SURFACE

    def __init__(
        self,
        token: str | None,
        api_url: str,
        *,
        table_blocks: bool = True,
        bot_token_for: BotTokenFor | None = None,
    ) -> None:
        self.client = AsyncWebClient(token=token, base_url=api_url)
        self.token = token
        self.api_url = api_url
        self.table_blocks = table_blocks
        self.bot_token_for = bot_token_for
        self._workspaces: dict[str, SlackAlertSender] = {}

    async def for_scope(self, scope: str) -> SlackAlertSender:
        """The sender for workspace `scope`: its installation's bot token, else this one's;
        ChannelGone when the app is installed there no more and there is no single token."""
        if self.bot_token_for is None or not scope:
            return self
        token = await self.bot_token_for(scope)
        if token is None:
            if self.token:
                return self
            raise ChannelGone(f"learning-bot is not installed in the Slack workspace {scope}")
        if token == self.token:
            return self
        sender = self._workspaces.get(token)
        if sender is None:
            if len(self._workspaces) >= 1000:  # rotated tokens are not kept forever
                self._workspaces.clear()
            sender = SlackAlertSender(token, self.api_url, table_blocks=self.table_blocks)
            self._workspaces[token] = sender
        return sender

    async def post(self, channel: str, card: Reply, thread: str | None = None) -> str:
        message = render_reply(card, table_blocks=self.table_blocks)
        try:
            response = await self.client.chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.block_list,
                thread_ts=thread,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            raise _gone(exc) from None
        return str(response["ts"])

    async def update(self, channel: str, ref: str, card: Reply) -> None:
        message = render_reply(card, table_blocks=self.table_blocks)
        try:
            await self.client.chat_update(
                channel=channel, ts=ref, text=message.text, blocks=message.block_list
            )
        except SlackApiError as exc:
            raise _gone(exc) from None

    async def upload(
        self, channel: str, filename: str, data: bytes, title: str, thread: str | None
    ) -> None:
        """files.uploadV2 (needs the `files:write` scope), in the card's thread."""
        try:
            await self.client.files_upload_v2(
                channel=channel, file=data, filename=filename, title=title, thread_ts=thread
            )
        except SlackApiError as exc:
            raise _gone(exc) from None


def _gone(exc: SlackApiError) -> Exception:
    error = str(exc.response.get("error") or "")
    if error in GONE:
        return ChannelGone(error)
    return RuntimeError(f"Slack answered {error or exc.response.status_code}")
