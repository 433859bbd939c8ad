"""The Slack surface: `/learning` and its confirm/cancel buttons through slack-bolt, over HTTP
(`slack_routes`, to mount at /slack/events) or Socket Mode (`start_socket_mode`).

Names are imported on first use, so a command line can declare `learning-bot slack`
(`adapters.slack.command`) without importing slack-bolt."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "SlackInteractions": "adapters.slack.app",
    "create_app": "adapters.slack.app",
    "create_app_and_interactions": "adapters.slack.app",
    "SlackMessage": "adapters.slack.blocks",
    "render_reply": "adapters.slack.blocks",
    "SlackDirectory": "adapters.slack.directory",
    "SlackUser": "adapters.slack.directory",
    "EVENTS_PATH": "adapters.slack.http",
    "create_asgi_app": "adapters.slack.http",
    "slack_routes": "adapters.slack.http",
    "SlackSurface": "adapters.slack.surface",
    "slack_configured": "adapters.slack.surface",
    "slack_surface": "adapters.slack.surface",
    "SlackSettings": "adapters.slack.settings",
    "slack_settings_from_env": "adapters.slack.settings",
    "run_socket_mode": "adapters.slack.socket_mode",
    "start_socket_mode": "adapters.slack.socket_mode",
}

if TYPE_CHECKING:
    from adapters.slack.app import SlackInteractions, create_app, create_app_and_interactions
    from adapters.slack.blocks import SlackMessage, render_reply
    from adapters.slack.directory import SlackDirectory, SlackUser
    from adapters.slack.http import EVENTS_PATH, create_asgi_app, slack_routes
    from adapters.slack.settings import SlackSettings, slack_settings_from_env
    from adapters.slack.socket_mode import run_socket_mode, start_socket_mode
    from adapters.slack.surface import SlackSurface, slack_configured, slack_surface


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'adapters.slack' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
