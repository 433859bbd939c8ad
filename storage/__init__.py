"""SQLAlchemy persistence for the learning layer: SQLite by default, PostgreSQL at scale.

Names are imported on first use, so tools that only read status from a SQLite file (see
storage.lite) start without importing SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from learning_bot.engine.lazy import lazy_getattr
from learning_bot.storage.revision import HEAD_REVISION

_LAZY = {
    "ENV_URL": "learning_bot.storage.location",
    "SchemaError": "learning_bot.storage.database",
    "default_database_url": "learning_bot.storage.location",
    "ensure_schema": "learning_bot.storage.database",
    "make_engine": "learning_bot.storage.database",
    "upgrade": "learning_bot.storage.database",
    "SqlStore": "learning_bot.storage.store",
}

if TYPE_CHECKING:
    from learning_bot.storage.database import SchemaError, ensure_schema, make_engine, upgrade
    from learning_bot.storage.location import ENV_URL, default_database_url
    from learning_bot.storage.store import SqlStore


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


__all__ = [
    "ENV_URL",
    "HEAD_REVISION",
    "SchemaError",
    "SqlStore",
    "default_database_url",
    "ensure_schema",
    "make_engine",
    "upgrade",
]
