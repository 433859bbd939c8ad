"""Engines, connection settings and schema migrations for SQLite and PostgreSQL."""

from __future__ import annotations

import fcntl
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    DBAPIError,
    NoSuchModuleError,
    OperationalError,
)

from learning_bot.engine.errors import InvalidInput, LearningError, Unavailable
from learning_bot.storage.pooling import Pooler, PoolSettings, configure_connection, pool_settings
from learning_bot.storage.revision import HEAD_REVISION

log = logging.getLogger("learning_bot.storage")

MIGRATIONS = Path(__file__).with_name("migrations")
_PG_LOCK_KEY = 727_011_001  # advisory lock serialising schema creation across processes

T = TypeVar("T")


class SchemaError(LearningError):
    """The database's schema is not the one this version expects."""


def sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def make_engine(url: str, *, pool: PoolSettings | None = None) -> Engine:
    """An Engine with the settings this project relies on.

    PostgreSQL: the pool sizes of `pool` (LEARNING_BOT_DB_POOL_SIZE and _MAX_OVERFLOW when
    not given), and no named prepared statements on a connection that goes through a
    transaction-mode pooler (storage.pooling).

    SQLite: WAL, synchronous=NORMAL (a crash of the process loses nothing committed), a busy
    timeout, foreign keys on, and write transactions that start with BEGIN IMMEDIATE so that
    concurrent writers queue instead of failing with "database is locked".
    """
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError) as exc:
        shown = url.split("@")[-1] if "@" in url else url
        raise InvalidInput(f"database URL {shown!r} is not valid: {exc}") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = sqlite_file(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30.0, "check_same_thread": False})
        if path is not None:
            _WRITE_LOCKS[id(engine)] = path.with_name(path.name + ".writer-lock")

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine
    try:
        if backend == "postgresql":
            settings = pool or pool_settings()
            pg = create_engine(
                url,
                pool_size=settings.size,
                max_overflow=settings.overflow,
                pool_pre_ping=True,
                connect_args={"connect_timeout": 10},
            )
            watch_pooler(pg, settings.pooler)
            return pg
        return create_engine(url)
    except ImportError as exc:
        raise InvalidInput(_missing_driver(parsed.drivername, exc)) from None


def watch_pooler(engine: Engine, pooler: Pooler) -> None:
    """Configure each new connection of a PostgreSQL engine for `pooler` (storage.pooling),
    and drop a connection whose session state was lost (lost_session_state) from the pool."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        configure_connection(dbapi_conn, pooler)

    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        if lost_session_state(context.original_exception):
            context.is_disconnect = True  # replaced, not reused with its stale statement cache


def lost_session_state(exc: BaseException) -> bool:
    """A prepared statement or cursor the connection believes in is missing on the server (or
    one of its name exists already): its driver's statement cache is wrong for good, so the
    connection is replaced."""
    orig = _driver_error(exc)
    return orig is not None and getattr(orig, "sqlstate", None) in _SESSION_STATE_LOST


def _missing_driver(drivername: str, exc: ImportError) -> str:
    """One line naming the driver a database URL needs and how to install it: PostgreSQL's
    (psycopg) comes with the `postgres` extra, which a plain install leaves out."""
    module = exc.name or str(exc)
    if not drivername.startswith("postgresql"):
        return f"the database driver {module} for {drivername}:// URLs is not installed"
    if module == "psycopg":
        return (
            "the PostgreSQL driver psycopg is not installed: pip install 'learning-bot[postgres]'"
        )
    return (
        f"the PostgreSQL driver {module} is not installed; learning-bot uses psycopg: "
        "pip install 'learning-bot[postgres]' and a postgresql+psycopg:// URL"
    )


def _driver_error(exc: BaseException) -> BaseException | None:
    """The database driver's own exception behind `exc`, or None when it is not one."""
    if isinstance(exc, DBAPIError):
        return exc.orig
    module = type(exc).__module__.split(".")[0]
    if module in ("sqlite3", "psycopg", "psycopg2"):
        return exc
    return None


def is_retryable(exc: BaseException) -> bool:
    """Deadlocks, serialisation failures and SQLite lock timeouts: the transaction can rerun."""
    orig = _driver_error(exc)
    if orig is None:
        return False
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code in ("40P01", "40001", "55P03", "23505"):
        # 23505: a concurrent writer stored the same trace id first; the rerun sees it.
        return True
    message = str(orig).lower()
    return "database is locked" in message or "database is busy" in message


_UNAVAILABLE = (
    "connection",
    "could not connect",
    "server closed",
    "terminating",
    "unable to open",
    "disk i/o",
    "readonly",
    "read-only",
    "no space",
    "database or disk is full",
    "the database system is",
)


_SESSION_STATE_LOST = ("26000", "42P05", "34000", "40003")
"""A prepared statement or cursor missing on the server connection, or one of the same name
already there: what a transaction-mode pooler in front of the server causes when the pooler
setting is wrong (storage.pooling); and 40003, a commit whose outcome the server could not
report. The statement may succeed on another connection (a rerun of a run is a duplicate)."""


def is_unavailable(exc: BaseException) -> bool:
    """Connection failures (08), a server shutting down (57P), out of resources (53), system
    and I/O errors (58), internal errors (XX), a full disk or a read-only file, or a pooler
    that lost the connection's session state: storage cannot take this write now. (Errors in
    what was sent, such as a constraint or a missing table, are not: they are the caller's.)"""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = _driver_error(exc)
    if orig is None or is_retryable(exc):
        return False
    code = str(getattr(orig, "sqlstate", "") or "")
    if code.startswith(("08", "57P", "53", "58", "XX")) or code in _SESSION_STATE_LOST:
        return True
    if not code and _is_postgres_operational(orig):
        return True  # raised by the driver itself: the server could not be reached at all
    message = str(orig).lower()
    return any(needle in message for needle in _UNAVAILABLE)


def _is_postgres_operational(orig: BaseException) -> bool:
    """A PostgreSQL driver's OperationalError: without a SQLSTATE it never came from the server
    (a host that does not resolve while its container restarts, a refused connection, a
    timeout), so the server is out of reach."""
    module = type(orig).__module__.split(".")[0]
    return module in ("psycopg", "psycopg2") and any(
        cls.__name__ == "OperationalError" for cls in type(orig).__mro__
    )


def is_database_error(exc: BaseException) -> bool:
    """Whether `exc` is the database driver's (behind SQLAlchemy's wrapper or not)."""
    return _driver_error(exc) is not None


def with_retries(fn: Callable[[], T], *, attempts: int = 8) -> T:
    """Run a transaction function, rerunning it on deadlocks and lock timeouts; connection
    and disk failures become Unavailable."""
    delay = 0.005
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if _driver_error(exc) is None:
                raise
            if is_retryable(exc) and attempt < attempts - 1:
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.5)
                continue
            if is_unavailable(exc):
                raise Unavailable(f"storage is unavailable: {_first_line(exc)}") from exc
            raise
    raise AssertionError("unreachable")


@contextmanager
def reading(engine: Engine, snapshot: bool = False) -> Iterator[Connection]:
    """A connection for reads; connection and disk failures (on connecting or mid-query)
    become Unavailable, like the write path's, so callers can answer "try again shortly".

    `snapshot`: on PostgreSQL every statement on the connection reads the same snapshot
    (REPEATABLE READ), so reads that are compared with each other never see a writer's
    commit land between them."""
    try:
        _ready(engine)
        check_identity(engine)
        with engine.connect() as conn:
            if snapshot and engine.dialect.name == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            yield conn
    except Exception as exc:
        if _driver_error(exc) is not None and is_unavailable(exc):
            raise Unavailable(f"storage is unavailable: {_first_line(exc)}") from exc
        raise


def dialect_insert(dialect: str) -> Any:
    """The INSERT construct of `dialect` (PostgreSQL's, else SQLite's): the one with ON
    CONFLICT clauses."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def _first_line(exc: BaseException) -> str:
    orig = _driver_error(exc) or exc
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__


_WRITE_LOCKS: dict[int, Path] = {}
"""Engine id -> the lock file that queues its SQLite writers (see write_transaction)."""
_lock_files = threading.local()


_IDENTITIES: weakref.WeakKeyDictionary[Engine, tuple[int, int]] = weakref.WeakKeyDictionary()
"""Engine -> (device, inode) of its SQLite file when the schema was checked."""


def _identity(path: Path) -> tuple[int, int]:
    """The (device, inode) of a file: the same path naming another file changes it."""
    info = path.stat()
    return info.st_dev, info.st_ino


def remember_identity(engine: Engine) -> None:
    """Note which file a SQLite engine serves, so a file removed or replaced later is seen."""
    path = sqlite_file(str(engine.url))
    if path is None:
        return
    try:
        _IDENTITIES[engine] = _identity(path)
    except OSError:
        return


def check_identity(engine: Engine) -> None:
    """Raise Unavailable when the SQLite file this engine opened is gone or is another file:
    its connections would go on writing into an unlinked file, acknowledging runs that no one
    can read back. One stat call."""
    known = _IDENTITIES.get(engine)
    if known is None:
        return
    path = sqlite_file(str(engine.url))
    if path is None:
        return
    try:
        identity = _identity(path)
    except FileNotFoundError:
        raise Unavailable(
            f"storage is unavailable: the database file {path} was removed while serving"
        ) from None
    except OSError as exc:
        raise Unavailable(f"storage is unavailable: {exc}") from None
    if identity != known:
        raise Unavailable(
            f"storage is unavailable: the database file {path} was replaced while serving "
            "(restart to use the new file)"
        )


@contextmanager
def _sqlite_writer_turn(engine: Engine) -> Iterator[None]:
    """Queue for SQLite's single write lock on a file lock instead of SQLite's busy handler.

    The busy handler sleeps in steps of up to 100 ms while another process writes, which makes
    several writer processes (`serve --workers`) slow and jittery; a blocking flock is handed
    over by the kernel the moment the holder lets go."""
    _ready(engine)
    path = _WRITE_LOCKS.get(id(engine))
    if path is None:
        yield
        return
    check_identity(engine)
    handles: dict[Path, Any] = getattr(_lock_files, "handles", None) or {}
    _lock_files.handles = handles
    handle = handles.get(path)
    if handle is None:
        handle = handles[path] = open(path, "a")  # noqa: SIM115 - kept for this thread
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


_MARK: ContextVar[tuple[Engine, Callable[[Connection], None]] | None] = ContextVar(
    "learning_bot_write_mark", default=None
)


@contextmanager
def marking_writes(engine: Engine, mark: Callable[[Connection], None] | None) -> Iterator[None]:
    """Within the block (this thread's context), every write transaction on `engine` also runs
    `mark` on its connection just before it commits: a change and the record that it was made
    commit together or not at all. `mark` None: no marking in the block."""
    token = _MARK.set(None if mark is None else (engine, mark))
    try:
        yield
    finally:
        _MARK.reset(token)


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A connection inside a write transaction (BEGIN IMMEDIATE on SQLite, taken in turn)."""
    with _sqlite_writer_turn(engine), engine.connect() as conn:
        conn.execution_options(write=True)
        with conn.begin():
            yield conn
            marked = _MARK.get()
            if marked is not None and marked[0] is engine:
                marked[1](conn)


@contextmanager
def sqlite_write_cursor(engine: Engine) -> Iterator[Any]:
    """A raw sqlite3 cursor inside BEGIN IMMEDIATE, taken in turn like `write_transaction`,
    committed on success and rolled back on error: the observe hot path, without the
    per-transaction events and bookkeeping of a SQLAlchemy Connection."""
    with _sqlite_writer_turn(engine):
        proxy = engine.raw_connection()
        try:
            cur = proxy.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur
                    cur.execute("COMMIT")
                except BaseException:
                    if (
                        proxy.driver_connection is not None
                        and proxy.driver_connection.in_transaction
                    ):
                        cur.execute("ROLLBACK")
                    raise
            finally:
                cur.close()
        finally:
            proxy.close()


def current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _alembic_config(conn: Connection | None, url: str | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if conn is not None:
        cfg.attributes["connection"] = conn
    return cfg


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the schema to the newest revision; returns (before, after)."""
    from alembic import command

    with write_transaction(engine) as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        before = current_revision(conn)
        if before != HEAD_REVISION:
            command.upgrade(_alembic_config(conn), "head")
    return before, HEAD_REVISION


_DEFERRED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()
"""Engines whose schema check waits for storage to answer (value: auto_create)."""
_deferred_lock = threading.RLock()


def ensure_schema_later(
    engine: Engine, *, auto_create: bool = True, upgrade_sqlite: bool = False
) -> None:
    """`ensure_schema` now, or, when storage is unavailable, before the engine's first use:
    a server starts while its database is down (reads say unavailable, runs are spooled)."""
    try:
        ensure_schema(engine, auto_create=auto_create, upgrade_sqlite=upgrade_sqlite)
    except Unavailable as exc:
        log.warning("%s; starting anyway, the schema is checked when it answers", exc)
        with _deferred_lock:
            _DEFERRED[engine] = auto_create


def schema_ready(engine: Engine) -> None:
    """Run the schema check a server started while its database was down deferred (once,
    other threads waiting for it): every path that writes or reads without `reading` or
    `write_transaction` (the PostgreSQL observe statement's own connections) calls it first."""
    _ready(engine)


_checking: dict[int, int] = {}
"""Engines (by id) whose deferred check runs now, and the thread running it."""


def _ready(engine: Engine) -> None:
    """Run a deferred schema check (once, other threads waiting for it). The engine stays
    deferred until its check is done, so another thread never takes the quick way out while
    the schema is still being made: it waits on the lock; the checking thread's own reads
    and writes (re-entering here) go on."""
    if not _DEFERRED:
        return
    with _deferred_lock:
        if _checking.get(id(engine)) == threading.get_ident():
            return  # the check's own statements
        auto_create = _DEFERRED.get(engine)
        if auto_create is None:
            return
        _checking[id(engine)] = threading.get_ident()
        try:
            ensure_schema(engine, auto_create=auto_create)
        finally:
            del _checking[id(engine)]
        _DEFERRED.pop(engine, None)
        log.warning("storage answers again; the schema is in place")


def backup_sqlite(engine: Engine, revision: str) -> Path | None:
    """Copy a SQLite database file beside itself (`<name>.rev<revision>.bak`), consistently
    (SQLite's online backup), before a migration changes it. None when it is no file."""
    import sqlite3

    path = sqlite_file(str(engine.url))
    if path is None:
        return None
    target = path.with_name(f"{path.name}.rev{revision}.bak")
    with sqlite3.connect(path) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    return target


def ensure_schema(
    engine: Engine, *, auto_create: bool = True, upgrade_sqlite: bool = False
) -> None:
    """Create the schema in an empty database; refuse to run on an outdated or newer one.
    With `upgrade_sqlite` (the serving commands), an outdated SQLite file is first copied
    beside itself, then upgraded: `make run` keeps working after an update, the data kept."""
    try:
        with engine.connect() as conn:
            revision = current_revision(conn)
            empty = revision is None and not inspect(conn).has_table("learners")
    except DBAPIError as exc:
        if is_unavailable(exc) or isinstance(exc, OperationalError):
            raise Unavailable(f"storage is unavailable: {_first_line(exc)}") from exc
        if engine.dialect.name == "sqlite" and isinstance(exc, DatabaseError):
            where = sqlite_file(str(engine.url)) or "the database"
            raise SchemaError(f"cannot read {where}: {_first_line(exc)}") from exc
        raise
    if revision == HEAD_REVISION:
        remember_identity(engine)
        return
    if empty and auto_create:
        upgrade(engine)
        remember_identity(engine)
        return
    if revision is None and empty:
        raise SchemaError(
            "the database is empty: it holds no learning-bot schema yet (`learning-bot db "
            "upgrade` creates it, as `serve` does)"
        )
    if revision is None:
        raise SchemaError(
            "the database holds tables but no schema revision; it was not created by learning-bot"
        )
    known = {p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*.py")}
    if revision in known and upgrade_sqlite and engine.dialect.name == "sqlite":
        backup = backup_sqlite(engine, revision)
        if backup is not None:
            before, after = upgrade(engine)
            log.warning(
                "upgraded the database schema from revision %s to %s; the database as it was "
                "is kept in %s",
                before,
                after,
                backup,
            )
            remember_identity(engine)
            return
    if revision in known:
        raise SchemaError(
            f"the database schema is at revision {revision}, this version needs "
            f"{HEAD_REVISION}: run `learning-bot db upgrade` (back up the database first)"
        )
    raise SchemaError(
        f"the database schema is at revision {revision}, which this version of "
        "learning-bot does not know; it was written by a newer version"
    )
