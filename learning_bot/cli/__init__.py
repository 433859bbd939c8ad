"""The `learning-bot` command line, and its entry point `main`.

`status` on a SQLite file or a running server is answered by learning_bot.status, which
imports little beyond the standard library, so that the command people type most starts at once;
every other command, and whatever that path leaves, goes to the parser built from each command's
registration (learning_bot.cli.general)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        from learning_bot.status import quick_status

        code = quick_status(args)
    except BaseException as exc:
        from learning_bot.cli.general import failed

        return failed(exc)
    if code is not None:
        return code
    from learning_bot.cli.general import main as run

    return run(args)
