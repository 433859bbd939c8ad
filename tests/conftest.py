"""Shared fixtures: a fresh database per test, on SQLite and (when configured) PostgreSQL."""

from __future__ import annotations

import os
import select
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.processes import FAKED_DATE

PG_ENV = "LEARNING_BOT_TEST_DATABASE_URL"
LOCAL_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
_probe: list[str | None] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under faketime, only the date may be faked: with the monotonic clock faked too,
    libfaketime makes every timed wait (Event.wait, Thread.join with a timeout) never end.
    And the run's temporary directories are a new directory of their own: pytest removes the
    numbered ones (/tmp/pytest-of-USER/pytest-N) whose lock is 3 days older than the date it
    reads, which under a date days ahead would be those of every other run going on."""
    if not FAKED_DATE:
        return
    if os.environ.get("FAKETIME_DONT_FAKE_MONOTONIC") != "1":
        raise pytest.UsageError(
            "under faketime, set FAKETIME_DONT_FAKE_MONOTONIC=1 (make test does): with the "
            "monotonic clock faked, timed waits never end"
        )
    if config.option.basetemp is None:  # set for pytest-xdist's workers by their controller
        config.option.basetemp = tempfile.mkdtemp(prefix="pytest-faketime-")


def _select_sleep(seconds: float) -> None:
    """time.sleep through select(): with the monotonic clock left alone, libfaketime (0.9.10)
    fails the clock_nanosleep that time.sleep makes (EINVAL)."""
    deadline = time.monotonic() + seconds
    select.select([], [], [], max(seconds, 0.0))
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


if FAKED_DATE:
    time.sleep = _select_sleep


def _local_default_answers() -> bool:
    """Whether a PostgreSQL server answers at the local default (asked once per run)."""
    try:
        import psycopg
    except ImportError:
        return False
    try:
        psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", connect_timeout=2).close()
    except Exception:
        return False
    return True


def postgres_base_url() -> str | None:
    """LEARNING_BOT_TEST_DATABASE_URL, else the local default when a server answers there."""
    configured = os.environ.get(PG_ENV)
    if configured:
        return configured
    if not _probe:
        _probe.append(LOCAL_DEFAULT if _local_default_answers() else None)
    return _probe[0]


def _require_postgres() -> str:
    url = postgres_base_url()
    if url is None:
        if os.environ.get("LEARNING_BOT_REQUIRE_TESTS"):
            pytest.fail(f"{PG_ENV} must be set when LEARNING_BOT_REQUIRE_TESTS is")
        pytest.skip(
            f"no PostgreSQL answers at {LOCAL_DEFAULT} and {PG_ENV} is not set "
            "(e.g. postgresql+psycopg://user@host:5432/db)"
        )
    return url


def postgres_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a new, empty schema (dropped afterwards)."""
    base = _require_postgres()
    import sqlalchemy as sa

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield postgres_schema_url(base, schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/learning.sqlite"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    """Each test using this runs once on a SQLite file and once on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/learning.sqlite"
        return
    yield request.getfixturevalue("postgres_url")
