"""The deployment bench/soak.py runs against: three `learning-bot serve` replicas on one
PostgreSQL behind a round-robin proxy, either as deploy/compose.yaml runs it (containers, with
deploy/soak.compose.yaml adding the third replica and the fake Slack's address) or built from
processes on this machine (the same shape where no container engine runs): a PostgreSQL cluster
of its own in a temporary directory (or the local cluster, `--postgres local`), three `serve`
processes on loopback ports, each with its own spool directory (as each container has its own
/data volume), and `python -m bench.soak_topology proxy ...`, a small proxy with nginx.conf's
rules (round-robin; a replica that refuses a connection is skipped for 10 s and the request
goes to the next; a request already sent is never sent again unless it is a GET).

Every process started here runs in its own process group and is ended by its pid."""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("learning-bot"))
API = "/__openclaw__/api/learning"
REPLICAS = 3
RESTART_DELAY = 5.0
"""Seconds between a replica's SIGKILL and its restart (a supervisor's restart policy)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rss_kib(pid: int | None) -> int:
    """Resident memory of a process (0 when it is gone)."""
    if not pid:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def healthy(url: str, timeout: float = 2.0) -> dict[str, object] | None:
    """The replica's /healthz answer when it is 200, else None."""
    try:
        with urllib.request.urlopen(url + API + "/healthz", timeout=timeout) as answer:
            if answer.status == 200:
                data = json.loads(answer.read())
                return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return None
    return None


def wait_healthy(url: str, seconds: float) -> float:
    """Seconds until `url` answers /healthz with 200; raises after `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if healthy(url) is not None:
            return time.monotonic() - start
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer /healthz within {seconds:.0f} s")


def _stop(
    proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, wait: float = 30
) -> None:
    """Signal a process started here (its group: it was started in a session of its own), then
    kill it if it outlives `wait`."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


class Topology(abc.ABC):
    """What the soak needs of a deployment (compose or processes implement it)."""

    name = ""
    proxy_url = ""
    database_url = ""
    """The database as this machine reaches it (for the checks and `db verify`)."""
    postgres = ""

    @abc.abstractmethod
    def start(self, settings: Mapping[str, str]) -> None: ...

    @abc.abstractmethod
    def replica_url(self, i: int) -> str: ...

    @abc.abstractmethod
    def replica_pid(self, i: int) -> int | None: ...

    @abc.abstractmethod
    def kill(self, i: int) -> None: ...

    @abc.abstractmethod
    def restart(self, i: int) -> None: ...

    @abc.abstractmethod
    def restart_postgres(self) -> None: ...

    def logs(self) -> str:
        return ""

    @abc.abstractmethod
    def close(self) -> None: ...


# -- processes on this machine ------------------------------------------------------------------


class PrivatePostgres:
    """A PostgreSQL cluster of the soak's own (Debian's binaries), on a free loopback port:
    restarting it disturbs nobody else's connections."""

    def __init__(self, root: Path) -> None:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if not versions:
            raise SystemExit("no PostgreSQL binaries under /usr/lib/postgresql")
        self.bin = versions[-1].parent
        self.data = root / "pgdata"
        self.port = free_port()
        self.as_owner: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as the postgres user
            self.as_owner = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [*self.as_owner, str(self.bin / argv[0]), *argv[1:]],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd="/tmp",
        )

    def start(self) -> str:
        self.data.mkdir(mode=0o700)
        if self.as_owner:
            shutil.chown(self.data, "postgres", "postgres")
            shutil.chown(self.data.parent, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.data}"
            " -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.data / "log"),
                  "-w", "start")  # fmt: skip
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def restart(self) -> None:
        """A fast restart, as `pg_ctlcluster ... restart` does: every session is cut."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


class LocalPostgres:
    """The machine's own cluster (LEARNING_BOT_TEST_DATABASE_URL), a fresh schema in it, and
    `pg_ctlcluster ... restart`: every other user of that server loses its connections too."""

    def __init__(self) -> None:
        self.base = os.environ.get(
            "LEARNING_BOT_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        )
        self.schema = f"soak_{uuid.uuid4().hex[:10]}"

    def start(self) -> str:
        import sqlalchemy as sa

        admin = sa.create_engine(self.base, poolclass=sa.pool.NullPool)
        with admin.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {self.schema}")
        admin.dispose()
        sep = "&" if "?" in self.base else "?"
        return f"{self.base}{sep}options=-csearch_path%3D{self.schema}"

    def restart(self) -> None:
        version = sorted(os.listdir("/etc/postgresql"))[-1]
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True
        )

    def stop(self) -> None:
        import sqlalchemy as sa

        admin = sa.create_engine(self.base, poolclass=sa.pool.NullPool)
        with contextlib.suppress(Exception), admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        admin.dispose()


class Processes(Topology):
    name = "processes"

    def __init__(self, root: Path, postgres: str) -> None:
        self.root = root
        self.db: PrivatePostgres | LocalPostgres = (
            PrivatePostgres(root) if postgres == "private" else LocalPostgres()
        )
        self.postgres = (
            "a cluster of its own (pg_ctl restart -m fast)"
            if postgres == "private"
            else "the local cluster (pg_ctlcluster restart)"
        )
        self.ports = [free_port() for _ in range(REPLICAS)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * REPLICAS
        self.proxy: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}

    def start(self, settings: Mapping[str, str]) -> None:
        self.database_url = self.db.start()
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("LEARNING_BOT_", "SLACK_"))
        }
        self.env.update(settings)
        self.env["LEARNING_BOT_DATABASE_URL"] = self.database_url
        self.env["PYTHONUNBUFFERED"] = "1"
        subprocess.run([EXE, "db", "upgrade"], env=self.env, check=True, capture_output=True)
        for i in range(REPLICAS):
            self._spawn(i)
        for i in range(REPLICAS):
            wait_healthy(self.replica_url(i), 120)
        port = free_port()
        upstreams = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        log = (self.root / "proxy.log").open("ab")
        self.proxy = subprocess.Popen(
            [sys.executable, __file__, "proxy", "--listen", str(port), "--upstreams", upstreams],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self.proxy_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.proxy_url + "/proxy-healthz", timeout=2).close()
                return
            time.sleep(0.2)
        raise RuntimeError("the proxy did not start")

    def _spawn(self, i: int) -> None:
        env = dict(self.env)
        spool = self.root / f"replica-{i + 1}" / "spool"
        spool.mkdir(parents=True, exist_ok=True)
        env["LEARNING_BOT_SPOOL_DIR"] = str(spool)
        env["HOME"] = str(spool.parent)
        log = (self.root / f"replica-{i + 1}.log").open("ab")
        self.procs[i] = subprocess.Popen(
            [EXE, "serve", "--host", "127.0.0.1", "--port", str(self.ports[i])],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()

    def replica_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def replica_pid(self, i: int) -> int | None:
        proc = self.procs[i]
        return proc.pid if proc is not None and proc.poll() is None else None

    def kill(self, i: int) -> None:
        _stop(self.procs[i], signal.SIGKILL)

    def restart(self, i: int) -> None:
        if self.replica_pid(i) is None:
            self._spawn(i)

    def restart_postgres(self) -> None:
        self.db.restart()

    def logs(self) -> str:
        out = []
        for path in sorted(self.root.glob("*.log")):
            text = path.read_text(errors="replace")
            out.append(f"--- {path.name} ---\n{text[-3000:]}")
        return "\n".join(out)

    def close(self) -> None:
        _stop(self.proxy)
        for proc in self.procs:
            _stop(proc)
        self.db.stop()


# -- deploy/compose.yaml ------------------------------------------------------------------------


def docker_ready() -> bool:
    return (
        shutil.which("docker") is not None
        and subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    )


def compose_command() -> list[str] | None:
    if docker_ready():
        if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
            return ["docker", "compose"]
        if shutil.which("docker-compose"):
            return ["docker-compose"]
    return None


class Compose(Topology):
    """deploy/compose.yaml with deploy/soak.compose.yaml on top, under a throwaway project (its
    volumes removed at the end). Needs the images of deploy/build-images.sh."""

    name = "compose"
    postgres = "the compose file's postgres service (docker restart)"

    def __init__(self, root: Path) -> None:
        command = compose_command()
        if command is None:
            raise SystemExit("no container engine with compose runs here")
        self.root = root
        self.project = os.environ.get("COMPOSE_PROJECT_NAME") or f"learning-bot-soak-{os.getpid()}"
        self.compose = [
            *command,
            "-p",
            self.project,
            "-f",
            str(REPO / "deploy" / "compose.yaml"),
            "-f",
            str(REPO / "deploy" / "soak.compose.yaml"),
        ]
        self.password = "soak-" + secrets.token_hex(16)
        self.env: dict[str, str] = {}
        self.ids: dict[str, str] = {}
        self.addresses: dict[str, str] = {}

    @staticmethod
    def slack_host() -> str:
        """This machine's address on Docker's default bridge, where the replicas reach the fake
        Slack (host.docker.internal in deploy/soak.compose.yaml)."""
        out = subprocess.run(
            ["docker", "network", "inspect", "bridge", "-f", "{{(index .IPAM.Config 0).Gateway}}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip() or "172.17.0.1"

    def _compose(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.compose, *args], env=self.env, capture_output=True, text=True, check=check
        )

    def _id(self, service: str) -> str:
        if service not in self.ids:
            out = self._compose("ps", "-q", service).stdout.strip()
            if not out:
                raise RuntimeError(f"no container for {service}")
            self.ids[service] = out.splitlines()[0]
        return self.ids[service]

    def _inspect(self, service: str, template: str) -> str:
        out = subprocess.run(
            ["docker", "inspect", "-f", template, self._id(service)],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout.strip()

    def start(self, settings: Mapping[str, str]) -> None:
        port = free_port()
        self.env = {**os.environ, **settings}
        self.env.update(
            {
                "COMPOSE_PROJECT_NAME": self.project,
                "POSTGRES_PASSWORD": self.password,
                "LEARNING_BOT_BIND": "127.0.0.1",
                "LEARNING_BOT_PORT": str(port),
            }
        )
        self._compose("down", "-v", "--remove-orphans", check=False)
        up = self._compose("up", "-d", check=False)
        if up.returncode != 0:
            raise RuntimeError(f"compose up failed:\n{up.stdout}\n{up.stderr}")
        self.proxy_url = f"http://127.0.0.1:{port}"
        for i in range(REPLICAS):
            service = f"app-{i + 1}"
            address = self._inspect(
                service, "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
            )
            self.addresses[service] = address
            wait_healthy(self.replica_url(i), 180)
        pg = self._inspect("postgres", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
        self.database_url = (
            f"postgresql+psycopg://learning_bot:{self.password}@{pg}:5432/learning_bot"
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.proxy_url + "/proxy-healthz", timeout=2).close()
                return
            time.sleep(0.5)
        raise RuntimeError("the proxy did not answer")

    def replica_url(self, i: int) -> str:
        return f"http://{self.addresses[f'app-{i + 1}']}:8787"

    def replica_pid(self, i: int) -> int | None:
        running = self._inspect(f"app-{i + 1}", "{{.State.Running}} {{.State.Pid}}").split()
        if len(running) == 2 and running[0] == "true" and running[1] != "0":
            return int(running[1])
        return None

    def kill(self, i: int) -> None:
        subprocess.run(
            ["docker", "kill", "-s", "KILL", self._id(f"app-{i + 1}")],
            capture_output=True,
            check=False,
        )

    def restart(self, i: int) -> None:
        # The restart policy may have started it again already; `docker start` is then a no-op.
        subprocess.run(
            ["docker", "start", self._id(f"app-{i + 1}")], capture_output=True, check=False
        )
        service = f"app-{i + 1}"
        self.addresses[service] = self._inspect(
            service, "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
        )

    def restart_postgres(self) -> None:
        subprocess.run(
            ["docker", "restart", "-t", "30", self._id("postgres")], capture_output=True, check=True
        )

    def logs(self) -> str:
        return self._compose("logs", "--no-color", "--tail=40", check=False).stdout

    def close(self) -> None:
        if self.env:
            self._compose("down", "-v", "--remove-orphans", "-t", "20", check=False)


def make(kind: str, root: Path, postgres: str) -> Topology:
    if kind == "compose":
        return Compose(root)
    return Processes(root, postgres)


def temporary_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="learning-bot-soak-"))


# -- the proxy (a subprocess of its own, so its work does not share the clients' loop) ---------


HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
}


async def run_proxy(listen: int, upstreams: list[str], seconds: float) -> None:
    import aiohttp
    from aiohttp import web

    down_until = dict.fromkeys(upstreams, 0.0)
    fails: dict[str, list[float]] = {u: [] for u in upstreams}
    turn = itertools.count()
    timeout = aiohttp.ClientTimeout(total=60, connect=5)
    session = aiohttp.ClientSession(
        timeout=timeout,
        auto_decompress=False,
        connector=aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30),
    )

    def failed(upstream: str) -> None:
        now = time.monotonic()
        recent = [t for t in fails[upstream] if now - t < 10] + [now]
        fails[upstream] = recent
        if len(recent) >= 2:  # max_fails=2 fail_timeout=10s
            down_until[upstream] = now + 10

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/proxy-healthz":
            return web.Response(text="ok\n")
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        headers["X-Forwarded-For"] = request.remote or ""
        start = next(turn)
        ordered = [upstreams[(start + k) % len(upstreams)] for k in range(len(upstreams))]
        now = time.monotonic()
        order = [u for u in ordered if down_until[u] <= now] or ordered
        rereadable = request.method in ("GET", "HEAD", "OPTIONS")
        for k, upstream in enumerate(order):
            last = k == len(order) - 1
            try:
                async with session.request(
                    request.method,
                    f"http://{upstream}{request.path_qs}",
                    data=body,
                    headers=headers,
                    allow_redirects=False,
                ) as answer:
                    payload = await answer.read()
                    if answer.status in (502, 503) and rereadable and not last:
                        failed(upstream)
                        continue
                    out = {k: v for k, v in answer.headers.items() if k.lower() not in HOP}
                    out["X-Upstream"] = upstream
                    return web.Response(status=answer.status, body=payload, headers=out)
            except aiohttp.ClientConnectorError:
                failed(upstream)  # nothing was sent: the next replica may take it
                continue
            except (aiohttp.ClientError, TimeoutError):
                failed(upstream)
                if rereadable and not last:
                    continue
                break
        return web.Response(status=502, text="bad gateway\n", headers={"X-Upstream": "-"})

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", listen).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)  # bounded: it never outlives its soak
    await runner.cleanup()
    await session.close()


def main() -> int:
    parser = argparse.ArgumentParser(description="the soak's round-robin proxy")
    parser.add_argument("mode", choices=["proxy"])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--upstreams", required=True, help="host:port,host:port,...")
    parser.add_argument("--seconds", type=float, default=6 * 3600)
    args = parser.parse_args()
    asyncio.run(run_proxy(args.listen, args.upstreams.split(","), args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
