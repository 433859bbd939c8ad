"""The `/learning` slash command group. Each method's signature is its Discord schema (typed
options, choices, ranges); discord.py enforces none of it at run time, so every value is
validated again before it becomes a bus command."""

from __future__ import annotations

from typing import Literal

import discord
from discord import app_commands

from learning_bot.adapters.discord.interactions import (
    MAX_ARM_CHARS,
    DiscordInteractions,
    InvalidOption,
    option_bool,
    option_choice,
    option_int,
    option_text,
    reset_command,
)
from learning_bot.adapters.discord.render import Interaction
from learning_bot.bot.commands import (
    COMMAND_NAMES,
    MAX_TOP,
    ConfigCommand,
    HelpCommand,
    PhaseCommand,
    RewardCommand,
    StatusCommand,
    SubscribeCommand,
    SubscriptionsCommand,
    UnsubscribeCommand,
    setting_value,
)
from learning_bot.engine.alert_records import SUBSCRIPTION_KINDS
from learning_bot.engine.bounds import MAX_LEARNER_NAME, MAX_REASON_CHARS, check_learner_name
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import InvalidInput

GROUP_NAME = "learning"
DEFAULT_PERMISSIONS = discord.Permissions(send_messages=True)
"""Who sees /learning by default (server admins can change it under Integrations). Only a
hint: admin-only subcommands are checked by the bot on every call."""
REWARD_VALUES = {"good": 1.0, "bad": 0.0}


SubscriptionKind = Literal["alerts", "digest daily", "digest weekly", "changes"]


def option_learner(value: object) -> str | None:
    """A learner name option (None when left out), checked against the learner-name rule."""
    text = option_text("learner", value, MAX_LEARNER_NAME)
    if not text:
        return None
    try:
        return check_learner_name(text)
    except InvalidInput as exc:
        raise InvalidOption(str(exc)) from None


class LearningCommands(app_commands.Group):
    """/learning status | reward | reset | phase | config | subscribe | unsubscribe |
    subscriptions | help"""

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

    @app_commands.command(
        name="status", description="Phase, traces, token savings, the best and worst arms"
    )
    @app_commands.describe(
        top="Arms per list, 1-25 (leave out for the short status)",
        arm="Show one arm instead: its id or label",
        public="Post the answer to the channel (default: only you see it)",
    )
    async def status(
        self,
        interaction: Interaction,
        top: app_commands.Range[int, 1, MAX_TOP] | None = None,
        arm: str | None = None,
        public: bool = False,
    ) -> None:
        command = StatusCommand(
            top=None if top is None else option_int("top", top, 1, MAX_TOP),
            public=option_bool("public", public),
            arm=option_text("arm", arm, MAX_ARM_CHARS),
        )
        await self.interactions.run(interaction, command, public=command.public)

    @app_commands.command(
        name="reward",
        description="Manual feedback for an arm, or for the arms this channel's latest run used",
    )
    @app_commands.describe(
        arm="The arm's id or label (leave out to reward this channel's latest run)",
        value="good (1) or bad (0); default good",
        reason="Why, kept with the reward (at most 500 characters)",
        public="Post the answer to the channel (default: only you see it)",
    )
    async def reward(
        self,
        interaction: Interaction,
        arm: str | None = None,
        value: Literal["good", "bad"] = "good",
        reason: app_commands.Range[str, 1, MAX_REASON_CHARS] | None = None,
        public: bool = False,
    ) -> None:
        word = option_choice("value", value, tuple(REWARD_VALUES)) or "good"
        command = RewardCommand(
            arm=option_text("arm", arm, MAX_ARM_CHARS),
            value=REWARD_VALUES[word],
            reason=option_text("reason", reason, MAX_REASON_CHARS),
            public=option_bool("public", public),
        )
        await self.interactions.run(interaction, command, public=command.public)

    @app_commands.command(
        name="reset",
        description="Put arms back to Beta(1,1) with 0 pulls (admins; asks to confirm)",
    )
    @app_commands.describe(
        arms="all, undo (the last reset), or arm ids or labels separated by spaces",
    )
    async def reset(self, interaction: Interaction, arms: app_commands.Range[str, 1, 4000]) -> None:
        await self.interactions.run(interaction, reset_command(arms), public=False)

    @app_commands.command(
        name="phase", description="Show the phase, or set it (admins; asks to confirm)"
    )
    @app_commands.describe(
        phase="passive: include every arm, learn nothing; active: Thompson Sampling picks arms",
    )
    async def phase(
        self, interaction: Interaction, phase: Literal["passive", "active"] | None = None
    ) -> None:
        word = option_choice("phase", phase, ("passive", "active"))
        command = PhaseCommand(Phase(word) if word else None)
        await self.interactions.run(interaction, command, public=False)

    @app_commands.command(
        name="config", description="Show the learner's settings, or change one (admins)"
    )
    @app_commands.describe(
        key="the setting to change, e.g. halfLife or policy (leave out to show them)",
        value="its new value, e.g. 50 or seed (JSON, else text)",
    )
    async def config(
        self,
        interaction: Interaction,
        key: app_commands.Range[str, 1, 64] | None = None,
        value: app_commands.Range[str, 1, 1000] | None = None,
    ) -> None:
        name = option_text("key", key, 64)
        raw = option_text("value", value, 1000)
        if (name is None) != (raw is None):
            raise InvalidOption("give both key and value to change a setting, or neither to show")
        pairs = ((name, setting_value(raw)),) if name and raw else ()
        await self.interactions.run(interaction, ConfigCommand(pairs), public=False)

    @app_commands.command(
        name="subscribe",
        description="Post a learner's alerts, digests or changes in this channel (admins)",
    )
    @app_commands.describe(
        kind="alerts (default), digest daily, digest weekly, or changes (phase, resets)",
        learner="The learner (default: this server's)",
    )
    async def subscribe(
        self,
        interaction: Interaction,
        kind: SubscriptionKind = "alerts",
        learner: app_commands.Range[str, 1, MAX_LEARNER_NAME] | None = None,
    ) -> None:
        word = option_choice("kind", kind, SUBSCRIPTION_KINDS) or "alerts"
        command = SubscribeCommand(word, option_learner(learner))
        await self.interactions.run(interaction, command, public=False)

    @app_commands.command(
        name="unsubscribe", description="Stop one of this channel's subscriptions (admins)"
    )
    @app_commands.describe(
        kind="alerts (default), digest daily, digest weekly, changes, or all",
        learner="The learner (default: this server's)",
    )
    async def unsubscribe(
        self,
        interaction: Interaction,
        kind: Literal["alerts", "digest daily", "digest weekly", "changes", "all"] = "alerts",
        learner: app_commands.Range[str, 1, MAX_LEARNER_NAME] | None = None,
    ) -> None:
        word = option_choice("kind", kind, (*SUBSCRIPTION_KINDS, "all")) or "alerts"
        command = UnsubscribeCommand(None if word == "all" else word, option_learner(learner))
        await self.interactions.run(interaction, command, public=False)

    @app_commands.command(
        name="subscriptions", description="What this channel is subscribed to, and if paused"
    )
    async def subscriptions(self, interaction: Interaction) -> None:
        await self.interactions.run(interaction, SubscriptionsCommand(), public=False)

    @app_commands.command(name="help", description="What each /learning command does")
    @app_commands.describe(command="Explain one command")
    async def help(
        self,
        interaction: Interaction,
        command: Literal[
            "status",
            "reward",
            "reset",
            "phase",
            "config",
            "subscribe",
            "unsubscribe",
            "subscriptions",
            "help",
        ]
        | None = None,
    ) -> None:
        topic = option_choice("command", command, COMMAND_NAMES)
        await self.interactions.run(interaction, HelpCommand(topic), public=False)

    @status.autocomplete("arm")
    async def _status_arm(
        self, interaction: Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await self.interactions.arm_choices(interaction, current)

    @reward.autocomplete("arm")
    async def _reward_arm(
        self, interaction: Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await self.interactions.arm_choices(interaction, current)

    @reset.autocomplete("arms")
    async def _reset_arms(
        self, interaction: Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        return await self.interactions.arm_choices(interaction, current, several=True)
