"""The HTTP surface: the learning API, select/observe for agent runtimes, and the dashboard."""

from learning_bot.adapters.http.api import BASE
from learning_bot.adapters.http.app import create_app, dashboard_html
from learning_bot.adapters.http.settings import HttpSettings

__all__ = ["BASE", "HttpSettings", "create_app", "dashboard_html"]
