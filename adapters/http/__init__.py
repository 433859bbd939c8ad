"""The HTTP surface: the learning API, select/observe for agent runtimes, and the dashboard."""

from adapters.http.api import BASE
from adapters.http.app import create_app, dashboard_html
from adapters.http.settings import HttpSettings

__all__ = ["BASE", "HttpSettings", "create_app", "dashboard_html"]
