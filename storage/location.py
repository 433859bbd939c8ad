"""Where the database is: LEARNING_BOT_DATABASE_URL, else a SQLite file in the user's data
directory. Importable without SQLAlchemy."""

from __future__ import annotations

import os
from pathlib import Path

ENV_URL = "LEARNING_BOT_DATABASE_URL"


def default_database_url() -> str:
    """LEARNING_BOT_DATABASE_URL, else a SQLite file in the user's data directory."""
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        return url
    from platformdirs import user_data_dir

    folder = Path(user_data_dir("learning-bot", appauthor=False))
    return f"sqlite:///{folder / 'learning-bot.sqlite'}"
