"""The HTTP surface: the learning API, select/observe for agent runtimes, and the dashboard."""

from adapters.http.api import BASE, HttpSettings
from adapters.http.app import create_app, dashboard_html

__all__ = ["BASE", "HttpSettings", "create_app", "dashboard_html"]
