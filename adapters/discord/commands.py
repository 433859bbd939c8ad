"""The `/learning` slash command group, built from the command registry: each command that
declares a form (bot.commands.base.Form) becomes a subcommand whose options are its
declared options (typed, with choices, ranges and arm autocomplete). discord.py enforces
none of that at run time, so every value is checked again before it becomes a bus command."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Literal, Optional

import discord
from discord import app_commands

from learning_bot.adapters.discord.interactions import (
    DiscordInteractions,
    InvalidOption,
    option_bool,
    option_choice,
    option_int,
    option_text,
)
from learning_bot.adapters.discord.render import Interaction
from learning_bot.bot.commands.base import CommandSpec, Option
from learning_bot.bot.commands.registry import specs
from learning_bot.engine.errors import InvalidInput

GROUP_NAME = "learning"
DEFAULT_PERMISSIONS = discord.Permissions(send_messages=True)
"""Who sees /learning by default (server admins can change it under Integrations). Only a
hint: admin-only subcommands are checked by the bot on every call."""

Callback = Callable[..., Coroutine[Any, Any, None]]


def annotation(option: Option) -> Any:
    """The option's type as discord.py reads Discord's schema from it."""
    kind: Any
    choices = option.values()
    if choices:
        kind = Literal[choices]
    elif option.kind is bool:
        kind = bool
    elif option.low is not None and option.high is not None:
        kind = app_commands.Range[option.kind, option.low, option.high]
    else:
        kind = option.kind
    return kind if option.required or option.default is not None else Optional[kind]  # noqa: UP045


def option_value(option: Option, value: object) -> Any:
    """An option's value as the user sent it, checked against its declaration."""
    choices = option.values()
    if choices:
        word = option_choice(option.name, value, choices)
        return option.default if word is None else word
    if option.kind is bool:
        return option_bool(option.name, value)
    if option.kind is int:
        if value is None:
            return None
        low, high = option.low or 0, option.high if option.high is not None else 2**53
        return option_int(option.name, value, low, high)
    limit = option.limit or option.high or 4000
    return option_text(option.name, value, limit, required=option.required)


def subcommand(
    spec: CommandSpec[Any], interactions: DiscordInteractions
) -> app_commands.Command[Any, ..., None]:
    """One /learning subcommand for a command with a form."""
    form = spec.form
    assert form is not None
    options = {o.name: o for o in form.options}

    async def callback(interaction: Interaction, **raw: Any) -> None:
        values = {name: option_value(o, raw.get(name, o.default)) for name, o in options.items()}
        try:
            command = form.build(values) if form.build is not None else spec.type()
        except InvalidInput as exc:
            raise InvalidOption(str(exc)) from None
        await interactions.run(interaction, command, public=form.public(command))

    parameters = [inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for o in form.options:
        default = inspect.Parameter.empty if o.required else o.default
        parameters.append(
            inspect.Parameter(
                o.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=default,
                annotation=annotation(o),
            )
        )
    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    callback.__discord_app_commands_param_description__ = {  # type: ignore[attr-defined]
        o.name: o.description for o in form.options
    }
    command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name=spec.name, description=form.description, callback=callback
    )
    for o in form.options:
        if o.autocomplete:
            command.autocomplete(o.name)(
                _arm_choices(interactions, several=o.autocomplete == "arms")
            )
    return command


def _arm_choices(
    interactions: DiscordInteractions, *, several: bool
) -> Callable[[Interaction, str], Coroutine[Any, Any, list[app_commands.Choice[str]]]]:
    async def suggest(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        return await interactions.arm_choices(interaction, current, several=several)

    return suggest


class LearningCommands(app_commands.Group):
    """/learning and one subcommand per registered command with a form."""

    def __init__(self, interactions: DiscordInteractions) -> None:
        super().__init__(
            name=GROUP_NAME,
            description="The prompt learning layer: status, rewards, resets and phases",
            guild_only=True,
            allowed_contexts=app_commands.AppCommandContext(
                guild=True, dm_channel=False, private_channel=False
            ),
            allowed_installs=app_commands.AppInstallationType(guild=True, user=False),
            default_permissions=DEFAULT_PERMISSIONS,
        )
        self.interactions = interactions
        for spec in specs():
            if spec.form is not None:
                self.add_command(subcommand(spec, interactions))
