"""The `learning-bot` entry point: every command, `status` included, goes to
learning_bot.command_line (a status on a SQLite file reads it through the bus without
SQLAlchemy: learning_bot.app.build_read_app)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from learning_bot.command_line import main as run

    return run(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
