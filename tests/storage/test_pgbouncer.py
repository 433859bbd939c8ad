"""PostgreSQL through a real pgbouncer in transaction mode (Debian's package, started here with a
generated configuration): connections behind it are found and prepare nothing, and the write
path of a `learning-bot serve` takes 1,000 observes over HTTP through it without one failure."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from learning_bot.storage.database import make_engine
from learning_bot.storage.pooling import PoolSettings
from tests.conftest import _require_postgres
from tests.e2e.launch import environment, free_port, served
from tests.processes import inherited

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


@dataclass(frozen=True)
class Bounced:
    """A database of its own, reachable directly and through pgbouncer."""

    direct: str
    bounced: str
    name: str


def _require_pgbouncer() -> str:
    if not os.access(PGBOUNCER, os.X_OK):
        message = "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
        if os.environ.get("LEARNING_BOT_REQUIRE_TESTS"):
            pytest.fail(message)
        pytest.skip(message)
    return PGBOUNCER


@contextlib.contextmanager
def running_pgbouncer(
    target: str, *, pool_size: int = 4, mode: str = "transaction"
) -> Iterator[str]:
    """pgbouncer in front of the database of the SQLAlchemy URL `target`, on a free loopback
    port, in `mode` with `pool_size` server connections; yields the URL through it. Its files
    live in a folder of their own that the unprivileged user it runs as (when started as root,
    which it refuses to run as) can read."""
    binary = _require_pgbouncer()
    url = make_url(target)
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    folder.chmod(0o755)
    user = url.username or "postgres"
    password = url.password or ""
    server = f"host={url.host or '127.0.0.1'} port={url.port or 5432} dbname={url.database}"
    if password:
        server += f" password={password}"
    (folder / "users.txt").write_text(f'"{user}" "{password}"\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"{url.database} = {server}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = {mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
        "ignore_startup_parameters = extra_float_digits\n"
        # FIFO: consecutive transactions of one client land on different server connections
        "server_round_robin = 1\n"
    )
    for path in folder.iterdir():
        path.chmod(0o644)
    argv = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        argv[1:1] = ["-u", "nobody"]
    log = (folder / "log.txt").open("wb")
    proc = subprocess.Popen(argv, env=inherited(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"pgbouncer did not start: {(folder / 'log.txt').read_text()[-2000:]}"
                )
            time.sleep(0.05)
        yield url.set(port=port, host="127.0.0.1").render_as_string(hide_password=False)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def own_database(base: str, prefix: str = "pool") -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of `base` (dropped afterwards): pgbouncer
    passes no search_path option, so the tests' schema-per-test isolation does not reach
    through it."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


@pytest.fixture
def bounced() -> Iterator[Bounced]:
    base = _require_postgres()
    with own_database(base) as direct, running_pgbouncer(direct) as through:
        yield Bounced(direct, through, make_url(direct).database or "")


def _prepares(url: str, pooler: str) -> bool:
    engine = make_engine(url, pool=PoolSettings(pooler=pooler))  # type: ignore[arg-type]
    try:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            return raw.prepare_threshold is not None  # type: ignore[attr-defined]
    finally:
        engine.dispose()


def test_connections_behind_a_pooler_are_found_and_prepare_nothing(bounced: Bounced) -> None:
    assert not _prepares(bounced.bounced, "auto")
    assert _prepares(bounced.direct, "auto")
    assert not _prepares(bounced.direct, "transaction")
    assert _prepares(bounced.bounced, "session")


def test_a_thousand_observes_through_pgbouncer_over_http(bounced: Bounced, tmp_path: Path) -> None:
    """`learning-bot serve` on a pgbouncer URL with no pooler setting (auto), agents at the
    same time each selecting (reads on several connections at once, so pgbouncer hands each
    transaction another server connection) then observing: every observe is stored at once
    (none spooled, none failed), each once; manual rewards through it answer 200."""
    env = environment(
        tmp_path,
        {
            "LEARNING_BOT_DATABASE_URL": bounced.bounced,
            "LEARNING_BOT_PHASE": "active",
            "LEARNING_BOT_SPOOL_DIR": str(tmp_path / "spool"),
            "LEARNING_BOT_CACHE_TTL": "0",
        },
    )
    arms = [{"armId": f"tool:t:T{i}", "tokenCost": 50} for i in range(8)]
    outcomes: list[tuple[int, bool, bool]] = []
    lock = threading.Lock()
    with served(env, stdout=subprocess.DEVNULL) as server:

        def client(worker: int) -> None:
            with httpx.Client(base_url=server.base, timeout=30) as http:
                for i in range(125):
                    if i % 4 == 0:
                        chosen = http.post("/select", json={"arms": arms})
                        assert chosen.status_code == 200, chosen.text
                    body = {
                        "traceId": f"w{worker}-{i}",
                        "arms": arms,
                        "toolCalls": [{"name": f"T{(worker + i) % 8}"}],
                    }
                    answer = http.post("/observe", json=body)
                    data = answer.json() if answer.status_code == 200 else {}
                    with lock:
                        outcomes.append(
                            (
                                answer.status_code,
                                bool(data.get("recorded")),
                                bool(data.get("spooled")),
                            )
                        )

        threads = [threading.Thread(target=client, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with httpx.Client(base_url=server.base, timeout=30) as http:  # manual rewards too
            rewarded = [http.post("/reward", json={"arm_id": "tool:t:T0"}) for _ in range(8)]
        assert [r.status_code for r in rewarded] == [200] * 8, rewarded[-1].text
    assert len(outcomes) == 1000
    failed = [o for o in outcomes if o != (200, True, False)]
    assert not failed, f"{len(failed)} of 1000 observes not stored at once: {failed[:5]}"
    engine = create_engine(bounced.direct, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            traces = conn.execute(text("SELECT count(*), count(DISTINCT trace_id) FROM traces"))
            assert tuple(traces.one()) == (1000, 1000)
            pulls = conn.execute(text("SELECT sum(pulls) FROM posteriors")).scalar()
            assert pulls == 8000 + 8
    finally:
        engine.dispose()
    assert not list((tmp_path / "spool").glob("p*/*.jsonl"))
    assert urlsplit(bounced.bounced).port != urlsplit(bounced.direct).port


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEARNING_BOT_DB_POOLER", "txn"),
        ("LEARNING_BOT_DB_POOL_SIZE", "0"),
        ("LEARNING_BOT_DB_POOL_SIZE", "eight"),
        ("LEARNING_BOT_DB_MAX_OVERFLOW", "-1"),
        ("LEARNING_BOT_SPOOL_ADOPT_SECONDS", "soon"),
    ],
)
def test_pool_settings_are_checked_at_start_up(variable: str, value: str) -> None:
    from learning_bot.engine.errors import InvalidConfig
    from learning_bot.settings import load_settings

    with pytest.raises(InvalidConfig, match=variable):
        load_settings({variable: value})


def test_pool_settings_bound_the_connections_of_a_process() -> None:
    from learning_bot.settings import load_settings

    settings = load_settings(
        {
            "LEARNING_BOT_DB_POOLER": "Transaction",
            "LEARNING_BOT_DB_POOL_SIZE": "3",
            "LEARNING_BOT_DB_MAX_OVERFLOW": "1",
        }
    )
    assert settings.pool == PoolSettings(pooler="transaction", size=3, overflow=1)
    assert settings.pool.max_connections == 8
    assert load_settings({}).pool.max_connections == 32


def test_a_lost_prepared_statement_is_spooled_and_its_connection_replaced(
    postgres_url: str, tmp_path: Path
) -> None:
    """What a transaction pooler does to a connection that prepares (the setting wrong), made
    on purpose on a direct one: its prepared statements dropped behind psycopg's back. The
    observe is spooled (not a 500), the connection is replaced rather than failing forever,
    and the run is written by the replay."""
    from learning_bot.engine import LearningConfig, Phase
    from learning_bot.engine.service import LearningService
    from learning_bot.storage import SqlStore
    from learning_bot.storage.spool import Spool
    from learning_bot.storage.spooling_store import SpoolingStore

    from .helpers import report
    from .test_spool import wait_until

    sql = SqlStore(postgres_url, pool=PoolSettings(pooler="none", size=1, overflow=0))
    spooling = SpoolingStore(sql, Spool(tmp_path / "spool"), retry_seconds=0.05)
    svc = LearningService(sql, LearningConfig(phase=Phase.ACTIVE), cache_ttl=0, writer=spooling)
    assert svc.observe(report("first")).recorded
    assert svc.observe(report("prepared")).recorded  # the statement is prepared by now
    proxy = sql._direct_engine().raw_connection()
    # through libpq itself: psycopg would see the command and forget its statements too
    proxy.driver_connection.pgconn.exec_(b"DEALLOCATE ALL")  # type: ignore[union-attr]
    proxy.close()
    lost = svc.observe(report("lost"))
    assert lost.spooled and not lost.recorded
    wait_until(lambda: not spooling.spool.pending())
    assert svc.observe(report("after")).recorded
    assert svc.traces()[1] == 4
    assert svc.verify().ok
    spooling.close()
