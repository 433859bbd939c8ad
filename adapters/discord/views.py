"""Confirm/cancel buttons for destructive commands: only the user who asked can press them,
and the bus spends each confirmation exactly once, so a second press does nothing twice."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import discord

from learning_bot.adapters.discord.render import NO_MENTIONS, Interaction, clip
from learning_bot.bot.commands import CancelCommand, Command, ConfirmCommand
from learning_bot.bot.replies import Action

log = logging.getLogger("learning_bot.discord")

STYLES = {
    "danger": discord.ButtonStyle.danger,
    "primary": discord.ButtonStyle.primary,
    "default": discord.ButtonStyle.secondary,
}
EXPIRED_TEXT = "Expired: nothing changed. Run the command again if you still want it."

Edit = Callable[..., Awaitable[Any]]


class ClickHandler(Protocol):
    """What the buttons need from the surface that showed them."""

    async def resolve(
        self,
        interaction: Interaction,
        command: ConfirmCommand | CancelCommand,
        *,
        pending: Command | None = None,
        view: ConfirmView | None = None,
    ) -> None: ...

    def claim_click(self, interaction: Interaction) -> None: ...

    async def notice(self, interaction: Interaction, text: str) -> None: ...

    async def expire(self, token: str) -> bool: ...

    async def report_failure(self, interaction: Interaction, error: Exception) -> None: ...


def button_id(action: Action) -> str:
    """The custom id Discord echoes back on a click: `learning:<confirm|cancel>:<token>`."""
    return f"learning:{action.command}:{action.token}"


class ActionButton(discord.ui.Button["ConfirmView"]):
    def __init__(self, action: Action) -> None:
        super().__init__(
            label=clip(action.label, 80),
            style=STYLES.get(action.style, discord.ButtonStyle.secondary),
            custom_id=button_id(action),
        )
        self.action = action

    async def callback(self, interaction: Interaction) -> None:
        view = self.view
        assert view is not None
        command: ConfirmCommand | CancelCommand = (
            ConfirmCommand(self.action.token)
            if self.action.command == "confirm"
            else CancelCommand(self.action.token)
        )
        await view.surface.resolve(interaction, command, pending=view.command, view=view)


class ConfirmView(discord.ui.View):
    """The buttons under a confirmation prompt, for `timeout` seconds."""

    def __init__(
        self,
        surface: ClickHandler,
        *,
        invoker_id: int,
        invoker_name: str,
        command: Command,
        actions: tuple[Action, ...],
        timeout: float,
    ) -> None:
        super().__init__(timeout=timeout)
        self.surface = surface
        self.invoker_id = invoker_id
        self.invoker_name = invoker_name
        self.command = command
        self._edit: Edit | None = None
        self.token = actions[0].token
        for action in actions:
            self.add_item(ActionButton(action))

    def attach(self, edit: Edit) -> None:
        """How to edit the prompt later (when the buttons time out)."""
        self._edit = edit

    def disable(self) -> None:
        for item in self.children:
            if isinstance(item, discord.ui.Button):
                item.disabled = True

    async def interaction_check(self, interaction: Interaction) -> bool:
        # Claimed before the first await, so the orphan-click route leaves this click alone.
        self.surface.claim_click(interaction)
        if interaction.user.id != self.invoker_id:
            await self.surface.notice(
                interaction,
                f"Only {self.invoker_name}, who asked, can confirm or cancel this. "
                "Run the command yourself to get your own buttons.",
            )
            return False
        return True

    async def on_timeout(self) -> None:
        self.disable()
        if not await self.surface.expire(self.token) or self._edit is None:
            return
        try:
            await self._edit(content=EXPIRED_TEXT, view=self, allowed_mentions=NO_MENTIONS)
        except discord.HTTPException as exc:
            log.info("could not mark an expired confirmation: %s", exc)

    async def on_error(
        self, interaction: Interaction, error: Exception, item: discord.ui.Item[Any]
    ) -> None:
        await self.surface.report_failure(interaction, error)
