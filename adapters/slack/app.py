"""Slack's interactions: `/learning` and its confirm/cancel buttons on an async slack-bolt app.

Each slash command or click becomes one bus Invocation (the workspace is the scope, the channel
or thread the conversation, the trigger id the idempotency key) and each Reply becomes Block
Kit. Slack drops an answer that is not acknowledged within 3 s, so reads and help are answered
in the acknowledgement when they finish in time (else "Working on it..." and response_url),
and everything that writes is acknowledged at once and answered through response_url. The bus
is synchronous and talks to the database: it always runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import html
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Coroutine
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from learning_bot.adapters.slack.blocks import (
    CANCEL_ACTION_ID,
    CONFIRM_ACTION_ID,
    DASHBOARD_ACTION_ID,
    SlackMessage,
    context,
    fallback_text,
    render_reply,
    section,
    working_message,
)
from learning_bot.adapters.slack.directory import SlackDirectory, UserLookupFailed
from learning_bot.adapters.slack.settings import SlackSettings
from learning_bot.bot.bus import Actor, CommandBus, Invocation
from learning_bot.bot.commands import (
    CancelCommand,
    Command,
    ConfirmCommand,
    PhaseCommand,
    ResetCommand,
    UsageError,
    is_mutating,
    parse_command,
)
from learning_bot.bot.replies import Reply, ReplyKind, error_reply
from learning_bot.bot.surface import WorkspaceInstallations
from learning_bot.engine.errors import InvalidConfig

log = logging.getLogger("learning_bot.slack")


class _ClientHoldsTheToken(logging.Filter):
    """slack-bolt reads SLACK_BOT_TOKEN itself and, as the app is handed a client, warns at
    every start that the token "will be unused". The client it is handed holds that token (or
    the OAuth flow's), so the warning says something untrue: it is dropped, and only it."""

    def filter(self, record: logging.LogRecord) -> bool:
        from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _quiet_token_note() -> None:
    from slack_bolt.logger import get_bolt_logger

    bolt = get_bolt_logger(AsyncApp)
    if not any(isinstance(f, _ClientHoldsTheToken) for f in bolt.filters):
        bolt.addFilter(_ClientHoldsTheToken())


SURFACE = "slack"
FAILED_TEXT = "Something went wrong on our side; the error was logged."
NOT_INSTALLED_TEXT = (
    "learning-bot is not installed in this workspace (or its installation was removed); "
    "ask a workspace admin to install it again."
)
_ANNOUNCED_KEYS = 1_000
FOLLOW_UP_TASK = "slack-follow-up"


class ActorUnknown(Exception):
    """users.info could not say who this is (and the allow-list does not vouch for them)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.summary)
        self.reply = reply


def conversation_of(channel: str, thread_ts: str | None = None) -> str:
    """A channel id, or `channel:thread_ts` inside a thread (what `reward` without an arm
    matches against the `conversation` an agent runtime reported with its run)."""
    return f"{channel}:{thread_ts}" if channel and thread_ts else channel


def command_text(raw: str) -> str:
    """Slack sends `&`, `<` and `>` in a command's text as entities; the parser wants them back."""
    return html.unescape(raw) if "&" in raw else raw


def answers_inline(command: Command | None) -> bool:
    """Reads, help and unparseable text are answered in the acknowledgement (when quick);
    anything that writes is acknowledged first and answered through response_url."""
    return command is None or not is_mutating(command)


class SlackInteractions:
    """Translates Slack commands and clicks into bus Invocations, and Replies into Block Kit
    (the listeners registered on the bolt app)."""

    def __init__(
        self,
        settings: SlackSettings,
        bus: CommandBus,
        directory: SlackDirectory | None = None,
    ) -> None:
        self.settings = settings
        self.bus = bus
        self.directory = directory or SlackDirectory(ttl=settings.user_cache_seconds)
        self._announced: OrderedDict[str, None] = OrderedDict()
        self._follow_ups: set[asyncio.Task[None]] = set()

    def register(self, app: AsyncApp) -> None:
        app.command(self.settings.command)(self.on_command)
        app.action(CONFIRM_ACTION_ID)(self.on_button)
        app.action(CANCEL_ACTION_ID)(self.on_button)
        app.action(DASHBOARD_ACTION_ID)(self.on_link)

    # -- listeners -----------------------------------------------------------------------------

    async def on_link(self, ack: AsyncAck) -> None:
        """The Dashboard link button: Slack opens the URL itself and still posts the click,
        which only needs acknowledging."""
        await ack()

    async def on_command(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        respond: AsyncRespond,
        client: AsyncWebClient,
    ) -> None:
        text = command_text(str(body.get("text") or ""))
        user_id = str(body.get("user_id") or "")
        user_name = str(body.get("user_name") or "")
        team_id = str(body.get("team_id") or body.get("enterprise_id") or "")
        conversation = conversation_of(str(body.get("channel_id") or ""))
        try:
            command: Command | None = parse_command(text)
        except UsageError:
            command = None  # the bus answers with the usage error, touching no storage

        if answers_inline(command):
            invocation = Invocation(
                SURFACE,
                Actor(user_id, user_name),
                command if command is not None else text,
                scope=team_id,
                conversation=conversation,
            )
            if self.settings.inline_seconds <= 0:
                await self._ack_working(ack)  # before the work starts: it competes for the GIL
                self._later(self._answer(respond, self._dispatch(invocation)))
                return
            task = asyncio.ensure_future(self._dispatch(invocation))
            done, _ = await asyncio.wait({task}, timeout=self.settings.inline_seconds)
            if task in done:
                await self._ack(ack, task.result())
                return
            await self._ack_working(ack)
            self._later(self._answer(respond, task))
            return

        assert command is not None
        await self._ack_working(ack)
        trigger = body.get("trigger_id")
        self._later(
            self._change(
                respond,
                client,
                command,
                team_id=team_id,
                user_id=user_id,
                user_name=user_name,
                conversation=conversation,
                key=f"command:{trigger}" if trigger else None,
                announce=isinstance(command, ResetCommand | PhaseCommand) and command.confirm,
            )
        )

    async def on_button(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        respond: AsyncRespond,
        client: AsyncWebClient,
    ) -> None:
        await ack()
        user = body.get("user") or {}
        container = body.get("container") or {}
        channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
        thread = container.get("thread_ts") or (body.get("message") or {}).get("thread_ts")
        token = str(action.get("value") or "")
        if not token:
            self._later(self._answer(respond, error_reply("This button carries no confirmation.")))
            return
        command: Command = (
            ConfirmCommand(token)
            if action.get("action_id") == CONFIRM_ACTION_ID
            else CancelCommand(token)
        )
        click = body.get("trigger_id") or action.get("action_ts")
        self._later(
            self._change(
                respond,
                client,
                command,
                team_id=str(
                    (body.get("team") or {}).get("id")
                    or user.get("team_id")
                    or (body.get("enterprise") or {}).get("id")
                    or ""
                ),
                user_id=str(user.get("id") or ""),
                user_name=str(user.get("username") or user.get("name") or ""),
                conversation=conversation_of(channel, str(thread) if thread else None),
                key=f"action:{click}" if click else None,
                announce=isinstance(command, ConfirmCommand),
            )
        )

    # -- after the acknowledgement ---------------------------------------------------------------

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` after the listener returns (and bolt sends the acknowledgement)."""
        task = asyncio.get_running_loop().create_task(work, name=FOLLOW_UP_TASK)
        self._follow_ups.add(task)
        task.add_done_callback(self._follow_ups.discard)

    async def wait_for_follow_ups(self, timeout: float | None = None) -> None:
        """Wait for the answers still being sent through response_url (on shutdown)."""
        if self._follow_ups:
            await asyncio.wait(set(self._follow_ups), timeout=timeout)

    async def _answer(self, respond: AsyncRespond, reply: Awaitable[Reply] | Reply) -> None:
        await self._respond(respond, reply if isinstance(reply, Reply) else await reply)

    async def _change(
        self,
        respond: AsyncRespond,
        client: AsyncWebClient,
        command: Command,
        *,
        team_id: str,
        user_id: str,
        user_name: str,
        conversation: str,
        key: str | None,
        announce: bool,
    ) -> None:
        """A command that writes, or a button click: check who it is, run it once per key,
        answer (a click's outcome replaces the prompt), announce a confirmed change."""
        try:
            actor = await self._actor(client, team_id, user_id, user_name)
        except ActorUnknown as exc:
            await self._respond(respond, exc.reply)
            return
        reply = await self._dispatch(
            Invocation(
                SURFACE,
                actor,
                command,
                scope=team_id,
                conversation=conversation,
                idempotency_key=key,
            )
        )
        replaces = reply.replaces_prompt
        if isinstance(command, ConfirmCommand | CancelCommand):
            await self._respond(respond, reply, replace_original=replaces)
        else:
            await self._respond(respond, reply)
        changed = reply.kind is ReplyKind.OK and not reply.cancelled
        if announce and changed and key:
            await self._announce(client, key, reply, actor)

    # -- pieces --------------------------------------------------------------------------------

    def render(self, reply: Reply) -> SlackMessage:
        return render_reply(
            reply,
            dashboard_url=self.bus.settings.dashboard_url,
            table_blocks=self.settings.table_blocks,
        )

    def allow_listed(self, user_id: str) -> bool:
        admins = self.bus.settings.admins
        return user_id in admins or f"{SURFACE}:{user_id}" in admins

    async def _actor(
        self, client: AsyncWebClient, team_id: str, user_id: str, fallback_name: str
    ) -> Actor:
        """The Actor with Slack's word on admin and guest; the allow-list vouches for its
        members when users.info cannot answer."""
        try:
            user = await self.directory.user(client, team_id, user_id)
        except UserLookupFailed as exc:
            log.warning("users.info failed for %s in %s: %s", user_id, team_id, exc)
            if self.allow_listed(user_id):
                return Actor(user_id, fallback_name)
            raise ActorUnknown(
                error_reply(
                    f"Could not check your Slack account (users.info: {exc}); "
                    "try again in a moment."
                )
            ) from None
        return Actor(
            user_id,
            user.name or fallback_name,
            is_admin=user.is_admin,
            is_guest=user.is_guest,
        )

    async def _dispatch(self, invocation: Invocation) -> Reply:
        try:
            return await asyncio.to_thread(self.bus.dispatch, invocation)
        except Exception:
            log.exception("the bus failed on %r", invocation.command)
            return error_reply(FAILED_TEXT)

    async def _ack(self, ack: AsyncAck, reply: Reply) -> None:
        message = self.render(reply)
        await ack(text=message.text, blocks=message.block_list, response_type=message.response_type)

    @staticmethod
    async def _ack_working(ack: AsyncAck) -> None:
        message = working_message()
        await ack(text=message.text, blocks=message.block_list, response_type="ephemeral")

    async def _respond(
        self, respond: AsyncRespond, reply: Reply, *, replace_original: bool = False
    ) -> None:
        message = self.render(reply)
        try:
            result = await respond(
                text=message.text,
                blocks=message.block_list,
                response_type=None if replace_original else message.response_type,
                replace_original=replace_original,
            )
        except Exception:
            log.exception("could not post to response_url")
            return
        if result.status_code != 200:
            log.warning("response_url answered %s: %s", result.status_code, result.body[:200])

    async def _announce(self, client: AsyncWebClient, key: str, reply: Reply, actor: Actor) -> None:
        """Tell the announcement channel (if any) about a confirmed reset or phase change."""
        channel = self.settings.announce_channel
        if not channel or key in self._announced:
            return
        self._announced[key] = None
        while len(self._announced) > _ANNOUNCED_KEYS:
            self._announced.popitem(last=False)
        try:
            await client.chat_postMessage(
                channel=channel,
                text=fallback_text(f"{actor.display}: {reply.summary}"),
                blocks=[section(reply.summary), context(f"By {actor.display}, from Slack.")],
            )
        except SlackApiError as exc:
            log.warning("could not announce in %s: %s", channel, exc.response.get("error"))


def create_app(
    settings: SlackSettings,
    bus: CommandBus,
    *,
    installations: WorkspaceInstallations | None = None,
    directory: SlackDirectory | None = None,
) -> AsyncApp:
    """The slack-bolt AsyncApp serving `settings.command` and the confirm/cancel buttons.

    One workspace: the bot token. Several: with SLACK_CLIENT_ID/SLACK_CLIENT_SECRET set, the
    OAuth install flow keeps installations in `installations` (the project's database).
    """
    return create_app_and_interactions(
        settings, bus, installations=installations, directory=directory
    )[0]


def create_app_and_interactions(
    settings: SlackSettings,
    bus: CommandBus,
    *,
    installations: WorkspaceInstallations | None = None,
    directory: SlackDirectory | None = None,
) -> tuple[AsyncApp, SlackInteractions]:
    """`create_app`, plus the SlackInteractions registered on it (to wait for its follow-ups)."""
    client = AsyncWebClient(
        token=None if settings.oauth else settings.bot_token, base_url=settings.api_url
    )
    oauth = None
    if settings.oauth:
        if installations is None:
            raise InvalidConfig(
                "SLACK_CLIENT_ID",
                "the multi-workspace install keeps installations in the project's database; "
                "pass its installation stores",
            )
        from learning_bot.adapters.slack.oauth import oauth_settings

        oauth = oauth_settings(settings, installations, client)
    _quiet_token_note()
    app = AsyncApp(
        name="learning-bot",
        client=client,
        signing_secret=settings.signing_secret or "",
        oauth_settings=oauth,
        # Listeners return right after ack() and leave slower work to their own tasks, so
        # bolt can answer as soon as the listener returns instead of polling every 10 ms.
        process_before_response=True,
        user_facing_authorize_error_message=NOT_INSTALLED_TEXT,
    )
    interactions = SlackInteractions(settings, bus, directory)
    interactions.register(app)
    return app, interactions
