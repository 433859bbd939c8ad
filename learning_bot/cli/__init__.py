"""The `learning-bot` command line, and its entry point `main`: every command, `status`
included, goes to the parser built from each command's registration (learning_bot.cli.general);
a status on a SQLite file reads it through the bus without SQLAlchemy
(learning_bot.app.build_read_app)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from learning_bot.cli.general import main as run

    return run(list(sys.argv[1:] if argv is None else argv))
