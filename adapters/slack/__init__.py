"""The Slack surface: `/learning` and its confirm/cancel buttons through slack-bolt, over HTTP
(`slack_routes`, to mount at /slack/events) or Socket Mode (`start_socket_mode`).

Names are imported on first use, so a command line can declare `learning-bot slack`
(`adapters.slack.command`) without importing slack-bolt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from learning_bot.engine.lazy import lazy_getattr

_LAZY = {
    "SlackInteractions": "learning_bot.adapters.slack.app",
    "create_app": "learning_bot.adapters.slack.app",
    "create_app_and_interactions": "learning_bot.adapters.slack.app",
    "SlackMessage": "learning_bot.adapters.slack.blocks",
    "render_reply": "learning_bot.adapters.slack.blocks",
    "SlackDirectory": "learning_bot.adapters.slack.directory",
    "SlackUser": "learning_bot.adapters.slack.directory",
    "EVENTS_PATH": "learning_bot.adapters.slack.http",
    "create_asgi_app": "learning_bot.adapters.slack.http",
    "slack_routes": "learning_bot.adapters.slack.http",
    "SlackSurface": "learning_bot.adapters.slack.surface",
    "slack_configured": "learning_bot.adapters.slack.surface",
    "slack_surface": "learning_bot.adapters.slack.surface",
    "SlackSettings": "learning_bot.adapters.slack.settings",
    "slack_settings_from_env": "learning_bot.adapters.slack.settings",
    "run_socket_mode": "learning_bot.adapters.slack.socket_mode",
    "start_socket_mode": "learning_bot.adapters.slack.socket_mode",
}

if TYPE_CHECKING:
    from learning_bot.adapters.slack.app import (
        SlackInteractions,
        create_app,
        create_app_and_interactions,
    )
    from learning_bot.adapters.slack.blocks import SlackMessage, render_reply
    from learning_bot.adapters.slack.directory import SlackDirectory, SlackUser
    from learning_bot.adapters.slack.http import EVENTS_PATH, create_asgi_app, slack_routes
    from learning_bot.adapters.slack.settings import SlackSettings, slack_settings_from_env
    from learning_bot.adapters.slack.socket_mode import run_socket_mode, start_socket_mode
    from learning_bot.adapters.slack.surface import SlackSurface, slack_configured, slack_surface


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


__all__ = [
    "EVENTS_PATH",
    "SlackDirectory",
    "SlackInteractions",
    "SlackMessage",
    "SlackSettings",
    "SlackSurface",
    "SlackUser",
    "create_app",
    "create_app_and_interactions",
    "create_asgi_app",
    "render_reply",
    "run_socket_mode",
    "slack_configured",
    "slack_routes",
    "slack_settings_from_env",
    "slack_surface",
    "start_socket_mode",
]
