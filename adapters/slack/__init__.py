"""The Slack surface: `/learning` and its confirm/cancel buttons through slack-bolt, over HTTP
(`slack_routes`, to mount at /slack/events) or Socket Mode (`start_socket_mode`)."""

from adapters.slack.app import SlackSurface, create_app, create_surface
from adapters.slack.blocks import SlackMessage, render_reply
from adapters.slack.directory import SlackDirectory, SlackUser
from adapters.slack.http import EVENTS_PATH, create_asgi_app, slack_routes
from adapters.slack.service import SlackService, slack_configured, slack_service
from adapters.slack.settings import SlackSettings, slack_settings_from_env
from adapters.slack.socket_mode import run_socket_mode, start_socket_mode

__all__ = [
    "EVENTS_PATH",
    "SlackDirectory",
    "SlackMessage",
    "SlackService",
    "SlackSettings",
    "SlackSurface",
    "SlackUser",
    "create_app",
    "create_asgi_app",
    "create_surface",
    "render_reply",
    "run_socket_mode",
    "slack_configured",
    "slack_routes",
    "slack_service",
    "slack_settings_from_env",
    "start_socket_mode",
]
