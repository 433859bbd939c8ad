"""The alert scheduler as a surface of `learning-bot serve`: it runs beside Slack and Discord
(in the first worker; across replicas the database lease picks one sender) and posts through
the senders of the chat surfaces that are configured.

Settings: LEARNING_BOT_ALERT_INTERVAL (seconds between evaluations, default 60, 0.05-86400),
LEARNING_BOT_ALERTS_PER_HOUR (messages one channel gets per hour at most, default 10),
LEARNING_BOT_DIGEST_HOUR (local hour from which a digest is due, default 9),
LEARNING_BOT_SKIP_EMPTY_DIGESTS (default true: a period without runs sends nothing) and
LEARNING_BOT_ALERT_REMIND_HOURS (a "still firing" note in an alert's thread each time this many
hours pass while it fires, default 24, 0 for never)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from learning_bot.engine.errors import InvalidConfig

if TYPE_CHECKING:  # the scheduler (asyncio, time zones) is imported when alerts are served
    from learning_bot.app import App
    from learning_bot.bot.alerting import AlertScheduler, AlertSender, AlertSettings
    from learning_bot.bot.surface import WorkspaceInstallations


Number = TypeVar("Number", int, float)


def _whole(raw: str) -> int:
    if not raw.isdigit():
        raise ValueError(raw)
    return int(raw)


def _number(
    env: Mapping[str, str],
    name: str,
    default: Number,
    parse: Callable[[str], Number],
    fits: Callable[[Number], bool],
    must: str,
) -> Number:
    """The variable `name` read by `parse` (`default` when unset or blank); InvalidConfig
    saying what it `must` be when it does not parse or does not fit."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise InvalidConfig(name, f"{must}, got {raw!r}") from None
    if not fits(value):
        raise InvalidConfig(name, f"{must}, got {raw!r}")
    return value


def alert_settings(env: Mapping[str, str]) -> AlertSettings:
    interval = _number(
        env,
        "LEARNING_BOT_ALERT_INTERVAL",
        60.0,
        float,
        lambda v: 0.05 <= v <= 86400,
        "must be seconds from 0.05 to 86400",
    )
    per_hour = _number(
        env,
        "LEARNING_BOT_ALERTS_PER_HOUR",
        10,
        _whole,
        lambda v: 1 <= v <= 1000,
        "must be a whole number from 1 to 1000",
    )
    hour = _number(
        env,
        "LEARNING_BOT_DIGEST_HOUR",
        9,
        _whole,
        lambda v: 0 <= v <= 23,
        "must be an hour from 0 to 23",
    )
    raw = env.get("LEARNING_BOT_SKIP_EMPTY_DIGESTS", "").strip().lower()
    if raw not in ("", "true", "false", "1", "0", "yes", "no"):
        raise InvalidConfig(
            "LEARNING_BOT_SKIP_EMPTY_DIGESTS", f"must be true or false, got {raw!r}"
        )
    skip = raw not in ("false", "0", "no")
    remind = _number(
        env,
        "LEARNING_BOT_ALERT_REMIND_HOURS",
        24.0,
        float,
        lambda v: v == 0 or 0.01 <= v <= 24 * 365,
        "must be hours from 0.01 to 8760, or 0 for never",
    )
    from learning_bot.bot.alerting import AlertSettings

    return AlertSettings(
        interval=interval,
        per_channel_per_hour=per_hour,
        digest_hour=hour,
        skip_empty_digests=skip,
        remind_after=remind * 3600.0,
    )


def _slack_oauth(env: Mapping[str, str]) -> bool:
    return bool(
        env.get("SLACK_CLIENT_ID", "").strip() and env.get("SLACK_CLIENT_SECRET", "").strip()
    )


def alert_senders(
    env: Mapping[str, str], installations: WorkspaceInstallations | None = None
) -> list[AlertSender]:
    """A sender for each chat surface with a bot token; for Slack installed through OAuth
    (several workspaces), one that posts with each workspace's installation token."""
    senders: list[AlertSender] = []
    if env.get("SLACK_BOT_TOKEN", "").strip() or (_slack_oauth(env) and installations is not None):
        from learning_bot.adapters.slack.alerts import SlackAlertSender
        from learning_bot.adapters.slack.settings import slack_settings_from_env

        slack = slack_settings_from_env(env)
        tokens = None
        if slack.oauth and installations is not None:
            from learning_bot.adapters.slack.oauth import installed_bot_tokens

            assert slack.client_id is not None
            tokens = installed_bot_tokens(slack.client_id, installations)
        senders.append(SlackAlertSender(slack.bot_token, slack.api_url, bot_token_for=tokens))
    if env.get("DISCORD_TOKEN", "").strip():
        from learning_bot.adapters.discord.alerts import DiscordAlertSender
        from learning_bot.adapters.discord.settings import load_discord_settings

        discord = load_discord_settings(env)
        senders.append(DiscordAlertSender(discord.require_token(), discord.api_url))
    return senders


def wanted(env: Mapping[str, str]) -> bool:
    return bool(alert_senders_configured(env))


def alert_senders_configured(env: Mapping[str, str]) -> list[str]:
    return [
        name
        for name, variable in (("Slack", "SLACK_BOT_TOKEN"), ("Discord", "DISCORD_TOKEN"))
        if env.get(variable, "").strip() or (name == "Slack" and _slack_oauth(env))
    ]


class AlertSurface:
    """Runs the scheduler until stopped; no routes."""

    name = "alerts"

    def __init__(self, scheduler: AlertScheduler, channels: Sequence[str]) -> None:
        self.scheduler = scheduler
        self.channels = tuple(channels)

    @property
    def routes(self) -> Sequence[object]:
        return ()

    async def run(self) -> None:
        try:
            await self.scheduler.run()
        finally:
            for sender in self.scheduler.senders.values():
                close = getattr(sender, "close", None)
                if close is not None:
                    await close()

    async def stop(self) -> None:
        self.scheduler.stop()


def build(app: App, env: Mapping[str, str]) -> AlertSurface:
    if app.alerts is None:
        raise InvalidConfig("alerts", "need the database (subscriptions are stored there)")
    from learning_bot.bot.alerting import AlertScheduler

    scheduler = AlertScheduler(
        app.alerts,
        app.services,
        alert_senders(env, app.installations),
        alert_settings(env),
        dashboard_url=app.settings.dashboard_url,
        clock=app.clock,
    )
    return AlertSurface(scheduler, alert_senders_configured(env))


def describe(surface: object) -> str:
    assert isinstance(surface, AlertSurface)
    every = surface.scheduler.settings.interval
    return f"subscriptions in {', '.join(surface.channels)}, rules every {every:g} s"
