"""How fast are select and observe over HTTP, next to the same calls made in process?

Starts `learning-bot serve --workers N` (default: one per core) on a temporary SQLite file,
then measures:
- select round trips with 30 arms from one keep-alive client (median, p99), beside
  `LearningService.select` called in process;
- select and observe from 8 concurrent keep-alive clients (8 processes; requests/s, median,
  p99), beside in-process `observe` called from one thread. The clients encode every request
  before the clock starts and read back only the status line, Content-Length and body, so
  that little of the 2-core machine's CPU goes to them rather than to the server;
- when `wrk` is installed, the same observe load from wrk's 8 connections (a client that costs
  the 2-core machine far less CPU than Python clients do).

    .venv/bin/python bench/http.py [--quick]
"""

from __future__ import annotations

import sys

# bench/select.py would shadow the standard library's `select` module: drop this folder.
sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from engine import LearningConfig, Phase  # noqa: E402
from engine.records import report_to_json  # noqa: E402
from engine.service import LearningService  # noqa: E402
from engine.simulation import make_workload  # noqa: E402
from storage import SqlStore  # noqa: E402

BASE = "/__openclaw__/api/learning"
ARMS = 30
CLIENTS = 8


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def workload(n: int, tag: str) -> tuple[list[bytes], bytes, Any]:
    w = make_workload(ARMS, seed=11)
    rng = np.random.default_rng(abs(hash(tag)) % 2**32)
    ids = [a.id for a in w.arms]
    bodies = [
        json.dumps(
            report_to_json(w.report(f"{tag}-{i}", ids, w.draw_usage(i, rng)[1], False))
        ).encode()
        for i in range(n)
    ]
    arms = [
        {"armId": a.id, "tokenCost": a.token_cost, "label": a.label, "content": a.content}
        for a in w.arms
    ]
    return bodies, json.dumps({"arms": arms}).encode(), w


def encode(path: str, bodies: list[bytes]) -> list[bytes]:
    """Whole HTTP/1.1 requests, encoded before timing starts (as wrk does)."""
    head = (
        f"POST {BASE}{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    return [head + str(len(body)).encode() + b"\r\n\r\n" + body for body in bodies]


def post_all(port: int, path: str, bodies: list[bytes]) -> list[float]:
    """Send every request on one keep-alive connection, one at a time, and time each round
    trip. The client reads only the status line and Content-Length, so that on a 2-core box
    as little CPU as possible goes to the clients instead of the server."""
    return send_all(port, encode(path, bodies), path)


def send_all(port: int, requests: list[bytes], path: str) -> list[float]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    latencies = []
    try:
        for request in requests:
            t0 = time.perf_counter()
            sock.sendall(request)
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError(f"{path}: the server closed the connection")
                buffer += chunk
            head, _, body = buffer.partition(b"\r\n\r\n")
            status = int(head[9:12])
            match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            if match is None:
                raise RuntimeError(f"{path}: no Content-Length in the answer")
            length = int(match.group(1))
            while len(body) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError(f"{path}: the server closed the connection")
                body += chunk
            if status != 200:
                raise RuntimeError(f"{path} answered {status}: {body[:200]!r}")
            latencies.append(time.perf_counter() - t0)
    finally:
        sock.close()
    return latencies


def _client(port: int, path: str, n: int, tag: str, same: bool, go: Any, out: Any) -> None:
    bodies, select_body, _ = workload(n, tag)
    if same:
        bodies = [select_body] * n
    requests = encode(path, bodies)
    go.wait()
    out.put(send_all(port, requests, path))


def concurrent(port: int, path: str, per_client: int, same: bool) -> tuple[list[float], float]:
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_client, args=(port, path, per_client, f"c{k}-{time.time_ns()}", same, go, out)
        )
        for k in range(CLIENTS)
    ]
    for p in procs:
        p.start()
    time.sleep(4)  # let every client build its requests first
    t0 = time.perf_counter()
    go.set()
    latencies: list[float] = []
    for _ in procs:
        latencies.extend(out.get())
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    return latencies, wall


def wrk_observe(port: int, seconds: int) -> tuple[float, str] | None:
    if shutil.which("wrk") is None:
        return None
    _, _, w = workload(1, "wrk")
    ids = [a.id for a in w.arms]
    body = report_to_json(
        w.report("TRACE", ids, w.draw_usage(0, np.random.default_rng(1))[1], False)
    )
    body["runId"] = "wrk"
    before, after = json.dumps(body).split('"TRACE"')
    script = f"""
counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local id = string.format("w%d-%d-%d", os.time(), math.random(1, 1000000000), counter)
  local body = {json.dumps(before)} .. '"' .. id .. '"' .. {json.dumps(after)}
  return wrk.format(nil, "{BASE}/observe", nil, body)
end
"""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        done = subprocess.run(
            [
                "wrk",
                "-t2",
                f"-c{CLIENTS}",
                f"-d{seconds}s",
                "--latency",
                "-s",
                f.name,
                f"http://127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(f.name)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    p99 = re.search(r"99%\s+(\S+)", done.stdout)
    return rate, p99.group(1) if p99 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="server processes (default: cores)"
    )
    args = parser.parse_args()
    n_select = 500 if args.quick else 2000
    per_client = 150 if args.quick else 500
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite",
            "LEARNING_BOT_PHASE": "active",
            "LEARNING_BOT_SPOOL_DIR": f"{tmp}/spool",
        }
        env.pop("LEARNING_BOT_API_TOKEN", None)
        exe = str(Path(sys.executable).with_name("learning-bot"))
        server = subprocess.Popen(
            [exe, "serve", "--port", str(args.port), "--workers", str(args.workers)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", args.port, timeout=2)
                    c.request("GET", BASE + "/healthz")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not start")
                time.sleep(0.1)
            bodies, select_body, w = workload(300, "warm")
            post_all(args.port, "/observe", bodies)  # arms known, posteriors cached
            select_one = post_all(args.port, "/select", [select_body] * n_select)
            select_many, select_wall = concurrent(args.port, "/select", per_client, True)
            observe_many, observe_wall = concurrent(args.port, "/observe", per_client, False)
            wrk = wrk_observe(args.port, 5 if args.quick else 15)
        finally:
            server.terminate()
            server.wait(timeout=15)
        store = SqlStore(f"sqlite:///{tmp}/inproc.sqlite")
        service = LearningService(store, LearningConfig(phase=Phase.ACTIVE))
        ids = [a.id for a in w.arms]
        rng = np.random.default_rng(3)
        reports = [w.report(f"i{i}", ids, w.draw_usage(i, rng)[1], False) for i in range(1000)]
        t0 = time.perf_counter()
        for r in reports:
            service.observe(r)
        observe_rate = len(reports) / (time.perf_counter() - t0)
        times = []
        for _ in range(n_select):
            t = time.perf_counter()
            service.select(list(w.arms))
            times.append(time.perf_counter() - t)
        store.close()

    n = CLIENTS * per_client
    sel50, sel99 = statistics.median(select_one), pct(select_one, 0.99)
    obs_rate = n / observe_wall
    print(
        f"learning-bot HTTP benchmark: {ARMS} arms, SQLite, `serve --workers {args.workers}`, "
        "server and clients on one machine"
    )
    print()
    print("| measure | over HTTP | in process | ratio |")
    print("|---|---|---|---|")
    print(
        f"| select p50, 1 client | {ms(sel50)} | {ms(statistics.median(times))} | "
        f"{sel50 / statistics.median(times):.1f}x |"
    )
    print(
        f"| select p99, 1 client | {ms(sel99)} | {ms(pct(times, 0.99))} | "
        f"{sel99 / pct(times, 0.99):.1f}x |"
    )
    print(
        f"| select, {CLIENTS} client processes | {n / select_wall:,.0f} req/s "
        f"(p99 {ms(pct(select_many, 0.99))}) | | |"
    )
    print(
        f"| observe, {CLIENTS} client processes | {obs_rate:,.0f} req/s (p50 "
        f"{ms(statistics.median(observe_many))}, p99 {ms(pct(observe_many, 0.99))}) | "
        f"{observe_rate:,.0f} calls/s, 1 thread | {obs_rate / observe_rate:.2f}x |"
    )
    if wrk is not None:
        print(
            f"| observe, wrk with {CLIENTS} connections | {wrk[0]:,.0f} req/s (p99 {wrk[1]}) | "
            f"{observe_rate:,.0f} calls/s, 1 thread | {wrk[0] / observe_rate:.2f}x |"
        )
    best = max(obs_rate, wrk[0] if wrk else 0.0)
    print()
    print(
        "targets: select p50 <= 2 ms: "
        + ("met" if sel50 <= 0.002 else "NOT met")
        + "; select p99 <= 5 ms: "
        + ("met" if sel99 <= 0.005 else "NOT met")
        + "; observe >= 1,000 req/s with 8 clients: "
        + ("met" if best >= 1000 else "NOT met")
    )


if __name__ == "__main__":
    main()
