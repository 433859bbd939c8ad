"""DiscordInteractions: an interaction in, a bus Invocation through, a Discord message out.

Every bus call runs in a worker thread (a blocked event loop would also stall the gateway
heartbeat). A reply that is ready within `defer_after` seconds is the interaction's first
response; a slower one is deferred first and sent as a follow-up, so Discord's 3-second window
is never missed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from learning_bot.adapters.discord.render import (
    DEFAULT_MORE_HINT,
    NO_MENTIONS,
    DiscordMessage,
    Interaction,
    render_notice,
    render_reply,
)
from learning_bot.adapters.discord.settings import DiscordSettings
from learning_bot.bot.bus import Actor, CommandBus, Invocation
from learning_bot.bot.commands import (
    ArmNamesQuery,
    CancelCommand,
    Command,
    ConfirmCommand,
    clean_input,
)
from learning_bot.bot.errors import FORBIDDEN
from learning_bot.bot.replies import Reply, ReplyKind
from learning_bot.engine.errors import LearningError
from learning_bot.engine.text import strip_controls

if TYPE_CHECKING:
    from learning_bot.adapters.discord.views import ConfirmView

log = logging.getLogger("learning_bot.discord")

SURFACE = "discord"
AUTOCOMPLETE_LIMIT = 25
CHOICE_LIMIT = 100
ADMIN_HINT = (
    "On Discord, admins are members with the Manage Server permission, a role listed in "
    "DISCORD_ADMIN_ROLE_IDS, or a user listed in DISCORD_ADMIN_USER_IDS."
)
BUTTON_ID = re.compile(r"learning:(confirm|cancel):([A-Za-z0-9_-]{1,64})")
_GONE = (40060, 10062)
"""Discord error codes: interaction already acknowledged; unknown (expired) interaction."""
_PENDING_THINKING = "learning_bot.pending_thinking"


class InvalidOption(app_commands.AppCommandError):
    """An option value we refuse (Discord and discord.py do not check them for us)."""


class Refused(app_commands.CheckFailure):
    """The user may not do this here."""


def acknowledged_elsewhere(exc: discord.HTTPException) -> bool:
    """The interaction was already answered (delivered twice) or has expired."""
    return exc.code in _GONE


@contextlib.contextmanager
def answered_once(what: str, interaction: Interaction) -> Iterator[None]:
    """Passes over Discord's refusal of an answer to an interaction already answered (delivered
    twice) or expired, with a line in the log; any other error goes on."""
    try:
        yield
    except discord.HTTPException as exc:
        if not acknowledged_elsewhere(exc):
            raise
        log.info("%s %s was already answered (delivered twice?)", what, interaction.id)


# -- option validation -------------------------------------------------------------------------


def option_text(name: str, value: object, limit: int, *, required: bool = False) -> str | None:
    """A free-text option: text, control characters removed, at most `limit` characters."""
    if value is None:
        if required:
            raise InvalidOption(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise InvalidOption(f"{name} must be text")
    text = clean_input(value).strip()
    if len(text) > limit:
        raise InvalidOption(f"{name} is {len(text)} characters long; at most {limit}")
    if not text and required:
        raise InvalidOption(f"{name} is required")
    return text or None


def option_choice(name: str, value: object, choices: Sequence[str]) -> str | None:
    """One of `choices` (case-insensitive), or None when the option was left out."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    shown = repr(value)[:40]
    raise InvalidOption(f"{name} must be one of {', '.join(choices)}; got {shown}")


def option_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        shown = repr(value)[:40]
        raise InvalidOption(f"{name} must be a whole number from {low} to {high}; got {shown}")
    return value


def option_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidOption(f"{name} must be true or false")
    return value


# -- autocomplete ------------------------------------------------------------------------------


def _choice_name(arm_id: str, label: str) -> str:
    last = arm_id.rsplit(":", 1)[-1]
    name = arm_id if label in ("", last) else f"{label} — {arm_id}"
    name = strip_controls(name).strip()
    return name if len(name) <= CHOICE_LIMIT else name[: CHOICE_LIMIT - 3] + "..."


def arm_suggestions(
    arms: Sequence[tuple[str, str]], current: str, *, several: bool = False
) -> list[app_commands.Choice[str]]:
    """At most 25 choices for what the user typed so far: exact label, label prefix, id
    prefix, then substring matches, each group in the given (best mean first) order. With
    `several`, only the last space-separated word is completed and the earlier ones kept."""
    typed = current if isinstance(current, str) else ""
    prefix = ""
    if several:
        head, sep, _ = typed.rpartition(" ")
        prefix = head + sep if sep else ""
        typed = typed[len(prefix) :]
    query = typed.strip().casefold()
    taken = {w.casefold() for w in prefix.split()}
    labels = [label.casefold() for _, label in arms]
    ranked: list[tuple[int, int, str, str]] = []
    for i, (arm_id, label) in enumerate(arms):
        if arm_id.casefold() in taken:
            continue
        folded_id, folded_label = arm_id.casefold(), label.casefold()
        last = folded_id.rsplit(":", 1)[-1]
        if not query or query in (folded_label, last, folded_id):
            rank = 0
        elif folded_label.startswith(query) or last.startswith(query):
            rank = 1
        elif folded_id.startswith(query):
            rank = 2
        elif query in folded_label or query in folded_id:
            rank = 3
        else:
            continue
        ranked.append((rank, i, arm_id, label))
    ranked.sort()
    choices: list[app_commands.Choice[str]] = []
    if several and not prefix:
        choices.extend(
            app_commands.Choice(name=f"{word} — {what}", value=word)
            for word, what in (("all", "every arm"), ("undo", "undo the last reset"))
            if word.startswith(query)
        )
    for _, _, arm_id, label in ranked:
        if len(choices) >= AUTOCOMPLETE_LIMIT:
            break
        value = prefix + arm_id
        if len(value) > CHOICE_LIMIT:
            # Too long for a choice value: offer the label when it names this arm alone.
            if labels.count(label.casefold()) != 1 or len(prefix + label) > CHOICE_LIMIT:
                continue
            value = prefix + label
        choices.append(app_commands.Choice(name=_choice_name(arm_id, label), value=value))
    return choices[:AUTOCOMPLETE_LIMIT]


# -- the interactions --------------------------------------------------------------------------


class DiscordInteractions:
    """Translates interactions into bus invocations and replies into Discord messages."""

    def __init__(self, bus: CommandBus, settings: DiscordSettings) -> None:
        self.bus = bus
        self.settings = settings
        self._claimed_clicks: OrderedDict[int, None] = OrderedDict()
        self._expired: OrderedDict[str, None] = OrderedDict()

    # -- who and where ---------------------------------------------------------------------

    def is_discord_admin(self, interaction: Interaction) -> bool:
        """Manage Server (or Administrator) in this channel, or on a configured allow-list."""
        if interaction.user.id in self.settings.admin_user_ids:
            return True
        if interaction.guild_id is None:
            return False
        permissions = interaction.permissions
        if permissions.manage_guild or permissions.administrator:
            return True
        return bool(self.settings.admin_role_ids.intersection(_role_ids(interaction.user)))

    def actor(self, interaction: Interaction) -> Actor:
        user = interaction.user
        name = clean_input(user.display_name).strip()[:80]
        return Actor(
            str(user.id), name or str(user.id), is_admin=self.is_discord_admin(interaction)
        )

    def invocation(self, interaction: Interaction, command: Command) -> Invocation:
        """Guild -> scope (and so the learner), channel or thread -> conversation, interaction
        id -> idempotency key."""
        return Invocation(
            surface=SURFACE,
            actor=self.actor(interaction),
            command=command,
            scope=str(interaction.guild_id or ""),
            conversation=str(interaction.channel_id or ""),
            idempotency_key=str(interaction.id),
        )

    @property
    def more_hint(self) -> str:
        url = self.bus.settings.dashboard_url
        return f"every row: {url}" if url else DEFAULT_MORE_HINT

    # -- slash commands ----------------------------------------------------------------------

    async def run(self, interaction: Interaction, command: Command, *, public: bool) -> None:
        """Run one /learning subcommand and answer it."""
        invocation = self.invocation(interaction, command)
        outcome = await self._dispatch(interaction, invocation, thinking_ephemeral=not public)
        if outcome is None:
            return
        reply, deferred = outcome
        if reply.error_code == FORBIDDEN.code:
            raise Refused(f"{reply.summary} {ADMIN_HINT}")
        message = render_reply(reply, more_hint=self.more_hint)
        view = self._confirm_view(interaction, reply, command)
        shown = view if view is not None else message.link_view()  # the Dashboard button
        try:
            if not deferred:
                await interaction.response.send_message(
                    content=message.content,
                    embeds=list(message.embeds),
                    ephemeral=message.ephemeral,
                    allowed_mentions=NO_MENTIONS,
                    view=shown if shown is not None else discord.utils.MISSING,
                )
                if view is not None:
                    view.attach(interaction.edit_original_response)
                return
            sent = await self._follow_up(interaction, message, shown, public_thinking=public)
            if view is not None and sent is not None:
                view.attach(sent.edit)
        except discord.HTTPException as exc:
            if view is not None:
                view.stop()
            if not acknowledged_elsewhere(exc):
                raise
            log.info("interaction %s was already answered (delivered twice?)", interaction.id)

    def _confirm_view(
        self, interaction: Interaction, reply: Reply, command: Command
    ) -> ConfirmView | None:
        if reply.kind is not ReplyKind.CONFIRM or not reply.actions:
            return None
        from learning_bot.adapters.discord.views import ConfirmView

        return ConfirmView(
            self,
            invoker_id=interaction.user.id,
            invoker_name=self.actor(interaction).display,
            command=command,
            actions=reply.actions,
            timeout=self.settings.confirm_timeout,
        )

    async def _follow_up(
        self,
        interaction: Interaction,
        message: DiscordMessage,
        view: discord.ui.View | None,
        *,
        public_thinking: bool,
    ) -> discord.WebhookMessage | None:
        """Answer a deferred command. Its first follow-up replaces the "thinking..." message
        and keeps its visibility, so a private answer to a public defer replaces nothing."""
        if message.ephemeral and public_thinking:
            await interaction.delete_original_response()
        sent = await interaction.followup.send(
            content=message.content or discord.utils.MISSING,
            embeds=list(message.embeds),
            ephemeral=message.ephemeral,
            allowed_mentions=NO_MENTIONS,
            wait=True,
            view=view if view is not None else discord.utils.MISSING,
        )
        interaction.extras.pop(_PENDING_THINKING, None)
        return sent

    async def _dispatch(
        self,
        interaction: Interaction,
        invocation: Invocation,
        *,
        thinking_ephemeral: bool = True,
    ) -> tuple[Reply, bool] | None:
        """(reply, deferred?): the bus runs in a thread; if it is not done within
        `defer_after`, the interaction is deferred meanwhile. None: already answered."""
        task = asyncio.ensure_future(asyncio.to_thread(self.bus.dispatch, invocation))
        done, _ = await asyncio.wait({task}, timeout=self.settings.defer_after)
        if done:
            return task.result(), False
        try:
            if interaction.type is discord.InteractionType.component:
                await interaction.response.defer()
            else:
                await interaction.response.defer(ephemeral=thinking_ephemeral, thinking=True)
                interaction.extras[_PENDING_THINKING] = not thinking_ephemeral
        except discord.HTTPException as exc:
            await asyncio.wait({task})
            if acknowledged_elsewhere(exc):
                log.info("interaction %s was already answered (delivered twice?)", interaction.id)
                return None
            raise
        return await task, True

    # -- confirm / cancel buttons ------------------------------------------------------------

    def claim_click(self, interaction: Interaction) -> None:
        """A live ConfirmView takes this click (called before its first await)."""
        _remember(self._claimed_clicks, interaction.id)

    async def expire(self, token: str) -> bool:
        """The buttons of `token` timed out: True if it is still pending (so the prompt may
        say it expired), False if it was used meanwhile (say, through another replica)."""
        _remember(self._expired, token)
        try:
            pending = await asyncio.to_thread(self.bus.commands.get_confirmation, token)
        except LearningError as exc:
            log.warning("could not look up confirmation %s...: %s", token[:6], exc)
            return False
        return pending is not None and pending.get("used_at") is None

    async def resolve(
        self,
        interaction: Interaction,
        command: ConfirmCommand | CancelCommand,
        *,
        pending: Command | None = None,
        view: ConfirmView | None = None,
    ) -> None:
        """A click on confirm or cancel. The bus spends the confirmation exactly once (across
        replicas too); the clicker's admin rights are checked again here and in the bus."""
        outcome = await self._dispatch(interaction, self.invocation(interaction, command))
        if outcome is None:
            return
        reply, deferred = outcome
        if reply.error_code == FORBIDDEN.code:
            await self.notice(interaction, f"{reply.summary} {ADMIN_HINT}")
            return
        if not reply.replaces_prompt:
            message = render_reply(reply, more_hint=self.more_hint)
            await self._send_private(interaction, message, deferred=deferred)
            return
        finished = view if view is not None else _disabled_copy(interaction.message)
        if finished is not None:
            for item in finished.children:
                if isinstance(item, discord.ui.Button):
                    item.disabled = True
            finished.stop()
        message = render_reply(reply, more_hint=self.more_hint)
        edit: dict[str, Any] = {
            "content": None,
            "embeds": list(message.embeds),
            "allowed_mentions": NO_MENTIONS,
            "view": finished,
        }
        with answered_once("click", interaction):
            if deferred:
                await interaction.edit_original_response(**edit)
            else:
                await interaction.response.edit_message(**edit)

    async def route_orphan_click(self, interaction: Interaction) -> None:
        """A confirm/cancel click that no live view in this process took (the prompt came
        from before a restart, or from another replica): the bus still decides it."""
        if interaction.type is not discord.InteractionType.component:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        match = BUTTON_ID.fullmatch(str(data.get("custom_id", "")))
        if match is None or interaction.id in self._claimed_clicks:
            return
        action, token = match.groups()
        if token in self._expired:
            await self.notice(interaction, "This confirmation expired; run the command again.")
            return
        command: ConfirmCommand | CancelCommand = (
            ConfirmCommand(token) if action == "confirm" else CancelCommand(token)
        )
        try:
            await self.resolve(interaction, command)
        except Exception as exc:
            await self.report_failure(interaction, exc)

    # -- autocomplete ------------------------------------------------------------------------

    def _arm_names(self, invocation: Invocation) -> list[tuple[str, str]]:
        reply = self.bus.dispatch(invocation)
        return list(reply.arm_names or ())

    async def arm_choices(
        self, interaction: Interaction, current: str, *, several: bool = False
    ) -> list[app_commands.Choice[str]]:
        """Suggestions from this guild's learner; none (never an error) when it is slow."""
        if interaction.guild_id is None:
            return []
        invocation = self.invocation(interaction, ArmNamesQuery())
        try:
            arms = await asyncio.wait_for(
                asyncio.to_thread(self._arm_names, invocation),
                timeout=self.settings.autocomplete_budget,
            )
        except (TimeoutError, LearningError) as exc:
            log.warning("no arm suggestions for guild %s: %s", interaction.guild_id, exc)
            return []
        return arm_suggestions(arms, current, several=several)

    # -- output ------------------------------------------------------------------------------

    async def _send_private(
        self, interaction: Interaction, message: DiscordMessage, *, deferred: bool
    ) -> None:
        kwargs: dict[str, Any] = {
            "embeds": list(message.embeds),
            "ephemeral": True,
            "allowed_mentions": NO_MENTIONS,
        }
        if message.content:
            kwargs["content"] = message.content
        with answered_once("interaction", interaction):
            if interaction.response.is_done() or deferred:
                if interaction.extras.pop(_PENDING_THINKING, False):
                    await interaction.delete_original_response()
                await interaction.followup.send(**kwargs)
            else:
                await interaction.response.send_message(**kwargs)

    async def notice(self, interaction: Interaction, text: str) -> None:
        """A one-line message only the user sees, whether or not the interaction was
        answered already. Never raises: it is the last resort."""
        try:
            await self._send_private(interaction, render_notice(text), deferred=False)
        except discord.HTTPException as exc:
            log.warning("could not tell the user about %r: %s", text[:200], exc)

    async def report_failure(self, interaction: Interaction, error: Exception) -> None:
        """Any error from the command tree or a view: a log entry and a one-line ephemeral
        message, never silence ("The application did not respond")."""
        text, expected = describe_error(error)
        where = _describe(interaction)
        if expected:
            log.info("refused %s: %s", where, text)
        else:
            log.error("failed %s", where, exc_info=error)
        if interaction.type is discord.InteractionType.autocomplete:
            if not interaction.response.is_done():
                try:
                    await interaction.response.autocomplete([])
                except discord.HTTPException as exc:
                    log.warning("could not answer autocomplete %s: %s", interaction.id, exc)
            return
        await self.notice(interaction, text)


def describe_error(error: BaseException) -> tuple[str, bool]:
    """(one line for the user, expected?): expected errors are the user's, not ours."""
    if isinstance(error, app_commands.CommandInvokeError):
        error = error.original
    if isinstance(error, InvalidOption | Refused):
        return str(error), True
    if isinstance(error, app_commands.NoPrivateMessage):
        return "Use /learning in a server channel; it does not work in direct messages.", True
    if isinstance(error, app_commands.TransformerError):
        return f"The value {str(error.value)[:40]!r} is not valid for this option.", True
    if isinstance(error, app_commands.CommandSignatureMismatch | app_commands.CommandNotFound):
        return (
            "This command is out of date; an admin needs to run: learning-bot discord sync",
            True,
        )
    if isinstance(error, app_commands.CheckFailure):
        return str(error) or "You cannot use this command here.", True
    if isinstance(error, LearningError):
        return str(error), True
    return "Something went wrong on our side; the error was logged.", False


def _describe(interaction: Interaction) -> str:
    data: dict[str, Any] = dict(interaction.data or {})
    name = data.get("name") or data.get("custom_id") or interaction.type.name
    return (
        f"{name!s} (interaction {interaction.id}, guild {interaction.guild_id}, "
        f"user {interaction.user.id})"
    )


def _remember(seen: OrderedDict[Any, None], key: object, limit: int = 4096) -> None:
    seen[key] = None
    seen.move_to_end(key)
    while len(seen) > limit:
        seen.popitem(last=False)


def _role_ids(user: discord.User | discord.Member) -> list[int]:
    """The role ids the interaction payload lists for the member. `Member.roles` resolves
    them through the guild's role cache, which stays empty without the guilds intent."""
    return list(getattr(user, "_roles", ()))


def _disabled_copy(message: discord.Message | None) -> discord.ui.View | None:
    if message is None or not message.components:
        return None
    view = discord.ui.View.from_message(message, timeout=None)
    return view if isinstance(view, discord.ui.View) else None
