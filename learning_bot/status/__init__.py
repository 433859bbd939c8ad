"""`learning-bot status` answered without the command bus, so that the command starts at once.

A plain SQLite file is read through storage.lite and the reply built as the bus builds it
(engine.service's status and resolve_arm, bot.handlers' replies: .reply); with --url, a running
server's /command route answers (.remote). Either reply is printed as the terminal surface
prints replies (adapters.terminal.commands and .render: .terminal). These modules import the
standard library, storage.lite (which imports no more) and engine.metrics for the estimated
recall's arithmetic (which imports only the engine's errors): the rest of the engine, the bus
and SQLAlchemy take about 100 ms to import, five times the interpreter's own start-up. With
--url, none of the local read is imported (.reply, storage.lite, sqlite3, engine.metrics).

What this path does not answer as it stands, `quick_status` (.command) leaves to the general
command line (learning_bot.command_line) by returning None: other commands and options, another
database, a file that does not exist yet or is at another schema revision, an unknown learner,
an arm query that names no single arm, a server that answers with anything but a reply.
Settings beyond the database and the learner are read by learning_bot.settings, as the general
path reads them. tests/terminal/test_quick_status.py holds the two paths to the same replies,
text and exit codes."""

from learning_bot.status.command import quick_status

__all__ = ["quick_status"]
