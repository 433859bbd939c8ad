"""The workspaces a chat surface was installed in, kept in the project's database.

Slack's multi-workspace install (OAuth) keeps each workspace's installation, its bot and the
install flow's OAuth states in slack_sdk's own SQLAlchemy stores, in tables of their own
(`slack_installations`, `slack_bots`, `slack_oauth_states`) outside the project's migrations:
each store creates its tables when they are missing (CREATE TABLE IF NOT EXISTS). This is the
`bot.surface.WorkspaceInstallations` port over the project's engine, so the surface is handed
the stores and never the engine. slack_sdk is imported when a store is first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
    from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
    from sqlalchemy import Engine


class SqlWorkspaceInstallations:
    """slack_sdk's SQLAlchemy installation and OAuth-state stores over `engine`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def installation_store(self, client_id: str) -> SQLAlchemyInstallationStore:
        from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore

        store = SQLAlchemyInstallationStore(client_id=client_id, engine=self._engine)
        store.metadata.create_all(self._engine)
        return store

    def oauth_state_store(self, expiration_seconds: int) -> SQLAlchemyOAuthStateStore:
        from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore

        store = SQLAlchemyOAuthStateStore(
            expiration_seconds=expiration_seconds, engine=self._engine
        )
        store.metadata.create_all(self._engine)
        return store
