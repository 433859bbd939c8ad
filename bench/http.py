"""How fast are select and observe over HTTP, next to `LearningService.select` in process?

Starts `learning-bot serve` with its defaults (one process on 127.0.0.1, as the README's
"serve" shows) on a temporary SQLite file in the active phase, warms it with observed runs of
a 30-arm and a 1,000-arm inventory, then measures in rounds in which the measures take turns:

- `POST select` with 30 and with 1,000 arms from wrk (1 thread) over 1 connection (median)
  and over 8 connections (median, p99); the body is the same every time, as an agent runtime
  sends its inventory before each model request;
- `POST observe` from wrk (1 thread, 8 connections), every request a new trace of 30 arms:
  requests per second, median and p99;
- in this process, `LearningService.select` over its own SQLite file warmed the same way, on
  a fresh arm list each call (`Arm` objects built from the same dicts the HTTP body carries,
  as a runtime that assembles its prompt components per request does), reading `.selected`;
  and, for reference, on the same `Arm` objects every call;
- the HTTP floor: wrk over 1 connection against a bare ASGI application on the same uvicorn
  protocol that reads the same body and answers `{}` (what any Python endpoint costs here).

Every figure is the median over the rounds of that round's figure (wrk's latency percentiles,
the in-process calls' median and p99). Start-up objects of both processes are frozen out of
the garbage collector's way (`serve` does it; this script does it before its own timing).

    .venv/bin/python -m bench.http [--quick] [--rounds N] [--seconds S] [--policy NAME]

Both sides run the default policy (`engine.config.DEFAULT_POLICY`) unless `--policy` names
another (`--policy seed`: the seed algorithm, whose selection is a bare Beta draw).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.table import print_table
from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.report_json import report_to_json
from learning_bot.engine.service import LearningService
from learning_bot.research.simulation import Workload, make_workload
from learning_bot.storage import SqlStore

BASE = "/__openclaw__/api/learning"
SIZES = (30, 1_000)
CONNECTIONS = 8
WARM_RUNS = {30: 300, 1_000: 40}
IN_PROCESS_CALLS = {30: 3000, 1_000: 300}
TARGET_P50 = {30: 2.0, 1_000: 1.5}
"""select p50 over one connection, at most this many times the in-process fresh-list p50."""
TARGET_P99_OVER_P50 = 3.0
TARGET_OBSERVE_P99 = 0.020


def inventory(size: int) -> tuple[Workload, list[dict[str, Any]]]:
    """A workload of `size` arms and its inventory as the select body carries it."""
    w = make_workload(size, seed=11)
    arms = [
        {"armId": a.id, "tokenCost": a.token_cost, "label": a.label, "content": a.content}
        for a in w.arms
    ]
    return w, arms


def reports(w: Workload, n: int, tag: str) -> list[dict[str, Any]]:
    rng = np.random.default_rng(abs(hash(tag)) % 2**32)
    ids = [a.id for a in w.arms]
    out = [
        report_to_json(w.report(f"{tag}-{i}", ids, w.draw_usage(i, rng)[1], False))
        for i in range(n)
    ]
    if len(ids) == CONTEXT_SIZE:  # runs that carried a request: per-feature evidence to read
        for i, r in enumerate(out):
            r["context"] = {"message": CONTEXT_MESSAGES[i % len(CONTEXT_MESSAGES)]}
    return out


CONTEXT_SIZE = 1_000
CONTEXT_MESSAGES = (
    "search the web for the latest release notes and summarise them",
    "read the deploy file and fix the failing test in the workspace",
    "send a message to the team channel about the memory leak",
    "compute the monthly totals from the spreadsheet and plot them",
)
"""The messages of the warm-up runs of the 1,000-arm inventory, and of the select with context
(the first one, with a channel and the tools called so far)."""


def context_body(dicts: list[dict[str, Any]]) -> str:
    """The 1,000-arm select body with a request context."""
    context = {
        "message": CONTEXT_MESSAGES[0],
        "channel": "bench",
        "tools_called": [dicts[3]["armId"].split(":")[-1]],
    }
    return json.dumps({"arms": dicts, "context": context})


# --- wrk ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrkResult:
    rate: float
    p50: float
    p99: float


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _seconds(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if match is None:
        raise RuntimeError(f"cannot read wrk's latency {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def wrk(
    url: str, script: Path, connections: int, seconds: float, cpu: int | None = None
) -> WrkResult:
    """One wrk run (1 thread); with `cpu`, wrk runs on that core only."""
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=pin,
    )
    out = done.stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests:\n{out}")
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    if rate is None or p50 is None or p99 is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    return WrkResult(float(rate.group(1)), _seconds(p50.group(1)), _seconds(p99.group(1)))


def select_script(folder: Path, size: int, body: str) -> Path:
    path = folder / f"select-{size}.lua"
    path.write_text(
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f"wrk.body = {json.dumps(body)}\n"
    )
    return path


def observe_script(folder: Path, report: dict[str, Any]) -> Path:
    """Every request a new trace id (the run id stays fixed)."""
    report = {**report, "traceId": "TRACE", "runId": "wrk"}
    before, after = json.dumps(report).split('"TRACE"')
    path = folder / "observe.lua"
    path.write_text(
        f"""counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local id = string.format("w%d-%d-%d", os.time(), math.random(1, 1000000000), counter)
  local body = {json.dumps(before)} .. '"' .. id .. '"' .. {json.dumps(after)}
  return wrk.format(nil, "{BASE}/observe", nil, body)
end
"""
    )
    return path


# --- server -------------------------------------------------------------------------------


def post(port: int, path: str, body: Any) -> Any:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", BASE + path, json.dumps(body), {"Content-Type": "application/json"})
    answer = c.getresponse()
    data = answer.read()
    c.close()
    if answer.status != 200:
        raise RuntimeError(f"{path} answered {answer.status}: {data[:200]!r}")
    return json.loads(data)


FLOOR_APP = """
import sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http="httptools",
            log_level="warning", access_log=False, lifespan="off")
"""


def start_floor(port: int) -> subprocess.Popen[bytes]:
    floor = subprocess.Popen(
        [sys.executable, "-c", FLOOR_APP, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return floor
        except OSError:
            if time.monotonic() > deadline or floor.poll() is not None:
                floor.kill()
                raise RuntimeError("the floor server did not start") from None
            time.sleep(0.05)


PLACEMENTS = {"one core": 0, "two cores": 1}
"""Where wrk runs during the 1-connection runs, while the servers' event loops run on core 0:
beside them, or on the other core (every round trip then wakes a process on the other core,
which costs far more in this virtual machine than the server's own work)."""


@contextmanager
def pinned(*pids: int) -> Iterator[None]:
    """The main threads (event loops) of `pids` on core 0, as long as the block runs."""
    before = {pid: os.sched_getaffinity(pid) for pid in pids}
    for pid in pids:
        os.sched_setaffinity(pid, {0})
    try:
        yield
    finally:
        for pid, cpus in before.items():
            os.sched_setaffinity(pid, cpus)


def start_server(tmp: str, port: int, policy: str | None) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **({"LEARNING_BOT_POLICY": policy} if policy else {}),
        "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp}/served.sqlite",
        "LEARNING_BOT_PHASE": "active",
        "LEARNING_BOT_SPOOL_DIR": f"{tmp}/spool",
    }
    if not policy:
        env.pop("LEARNING_BOT_POLICY", None)
    env.pop("LEARNING_BOT_HALF_LIFE", None)
    for name in ("LEARNING_BOT_API_TOKEN", "LEARNING_BOT_WORKERS", "LEARNING_BOT_CACHE_TTL"):
        env.pop(name, None)
    exe = str(Path(sys.executable).with_name("learning-bot"))
    server = subprocess.Popen(
        [exe, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", BASE + "/healthz")
            if c.getresponse().status == 200:
                return server
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise RuntimeError("the server did not start")
        time.sleep(0.1)


# --- in process ---------------------------------------------------------------------------


def timed(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(median, p99) seconds per call."""
    clock = time.perf_counter
    times = []
    for _ in range(calls):
        start = clock()
        fn()
        times.append(clock() - start)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]


def in_process_calls(
    service: LearningService, workloads: dict[int, tuple[Workload, list[dict[str, Any]]]]
) -> dict[str, Callable[[], object]]:
    fns: dict[str, Callable[[], object]] = {}
    for size, (w, dicts) in workloads.items():
        same = list(w.arms)

        def fresh(dicts: list[dict[str, Any]] = dicts) -> object:
            arms = [Arm(d["armId"], d["tokenCost"], d["label"], d["content"]) for d in dicts]
            return service.select(arms).selected

        def reused(same: list[Arm] = same) -> object:
            return service.select(same).selected

        fns[f"fresh {size}"] = fresh
        fns[f"same {size}"] = reused
    return fns


# --- report -------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2-second wrk runs")
    parser.add_argument("--rounds", type=int, help="rounds (default 5, quick 2)")
    parser.add_argument("--seconds", type=float, help="seconds per wrk run (default 5, quick 2)")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--policy", help="the policy of both sides (default: the default policy)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install -y wrk)")
    rounds = args.rounds or (2 if args.quick else 5)
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    started = time.perf_counter()
    workloads = {size: inventory(size) for size in SIZES}
    bodies = {size: json.dumps({"arms": dicts}) for size, (_, dicts) in workloads.items()}
    warm = {size: reports(w, WARM_RUNS[size], f"warm{size}") for size, (w, _) in workloads.items()}

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"http://127.0.0.1:{args.port}{BASE}"
        scripts = {size: select_script(folder, size, bodies[size]) for size in SIZES}
        with_context = select_script(
            folder, -CONTEXT_SIZE, context_body(workloads[CONTEXT_SIZE][1])
        )
        contextual: list[WrkResult] = []
        plain: list[WrkResult] = []
        observe = observe_script(folder, warm[30][0])

        store = SqlStore(f"sqlite:///{tmp}/in-process.sqlite")
        config = LearningConfig.for_policy(
            args.policy or LearningConfig().policy, phase=Phase.ACTIVE
        )
        service = LearningService(store, config)
        from learning_bot.engine.report_json import report_from_json

        for size in SIZES:
            service.observe_many([report_from_json(r) for r in warm[size]])
        local = in_process_calls(service, workloads)

        placements = PLACEMENTS if len(os.sched_getaffinity(0)) > 1 else {"one core": 0}
        server = start_server(tmp, args.port, args.policy)
        floor = start_floor(args.port + 1)
        floor_url = f"http://127.0.0.1:{args.port + 1}/"
        try:
            for size in SIZES:
                for k in range(0, len(warm[size]), 10):
                    post(args.port, "/observe", {"reports": warm[size][k : k + 10]})
                answer = post(args.port, "/select", {"arms": workloads[size][1]})
                if answer["isBaseline"] is None or not answer["selected"]:
                    raise RuntimeError(f"unexpected select answer: {answer}")
            # First sight of each inventory, connection set-up: not measured.
            for size in SIZES:
                wrk(f"{url}/select", scripts[size], CONNECTIONS, 1)
            wrk(f"{url}/observe", observe, CONNECTIONS, 1)
            for fn in local.values():
                timed(fn, 50)
            gc.collect()
            gc.freeze()

            keys = [(size, place) for size in SIZES for place in placements]
            floors: dict[tuple[int, str], list[WrkResult]] = {k: [] for k in keys}
            http1: dict[tuple[int, str], list[WrkResult]] = {k: [] for k in keys}
            http8: dict[int, list[WrkResult]] = {s: [] for s in SIZES}
            inproc: dict[str, list[tuple[float, float]]] = {name: [] for name in local}
            observed: list[WrkResult] = []
            for r in range(rounds):
                order = list(SIZES) if r % 2 == 0 else list(reversed(SIZES))
                for size in order:
                    for place, cpus in placements.items():
                        with pinned(server.pid, floor.pid):
                            floors[size, place].append(
                                wrk(floor_url, scripts[size], 1, seconds / 2, cpus)
                            )
                            http1[size, place].append(
                                wrk(f"{url}/select", scripts[size], 1, seconds, cpus)
                            )
                    for name in (f"fresh {size}", f"same {size}"):
                        inproc[name].append(timed(local[name], IN_PROCESS_CALLS[size]))
                    http8[size].append(wrk(f"{url}/select", scripts[size], CONNECTIONS, seconds))
                observed.append(wrk(f"{url}/observe", observe, CONNECTIONS, seconds))
                # select with and without a request context, in turn, on the first placement
                cpus = next(iter(placements.values()))
                pair = [(plain, scripts[CONTEXT_SIZE]), (contextual, with_context)]
                for into, script in pair if r % 2 == 0 else reversed(pair):
                    with pinned(server.pid, floor.pid):
                        into.append(wrk(f"{url}/select", script, 1, seconds, cpus))
        finally:
            server.terminate()
            floor.terminate()
            server.wait(timeout=15)
            floor.wait(timeout=15)
            store.close()

    print(
        f"learning-bot over HTTP: `learning-bot serve` (defaults: 1 process), SQLite, active "
        f"phase; wrk 1 thread on the same 2-core machine; Python {platform.python_version()}"
    )
    print(f"policy {config.policy} on both sides")
    print(f"{rounds} rounds of {seconds:g} s per wrk run; medians over the rounds")
    print()
    places = list(placements)
    header = ["arms", "in process, fresh arm list p50 (p99)", "in process, same Arm objects p50"]
    for p in places:
        header += [f"select p50, 1 connection, {p} (ratio)", f"HTTP floor p50, {p}"]
    header += ["select with 8 connections: req/s, p50, p99", "p99/p50"]
    rows = []
    verdicts = []
    for size in SIZES:
        fresh50 = med([x[0] for x in inproc[f"fresh {size}"]])
        fresh99 = med([x[1] for x in inproc[f"fresh {size}"]])
        same50 = med([x[0] for x in inproc[f"same {size}"]])
        cells = []
        ratios = {}
        for place in places:
            one = med([x.p50 for x in http1[size, place]])
            ratios[place] = one / fresh50
            floor50 = med([x.p50 for x in floors[size, place]])
            cells += [f"{ms(one)} ({ratios[place]:.2f}x)", ms(floor50)]
        rate8 = med([x.rate for x in http8[size]])
        p50_8 = med([x.p50 for x in http8[size]])
        p99_8 = med([x.p99 for x in http8[size]])
        spread = p99_8 / p50_8
        rows.append(
            [
                f"{size:,}",
                f"{ms(fresh50)} ({ms(fresh99)})",
                ms(same50),
                *cells,
                f"{rate8:,.0f}, {ms(p50_8)}, {ms(p99_8)}",
                f"{spread:.1f}x",
            ]
        )
        within = ", ".join(
            f"{p} {verdict(ratios[p] <= TARGET_P50[size])} ({ratios[p]:.2f}x)" for p in places
        )
        verdicts.append(
            f"select {size:,} arms: p50 within {TARGET_P50[size]:g}x of in process: {within}; "
            f"p99 within {TARGET_P99_OVER_P50:g}x of p50 with {CONNECTIONS} connections "
            f"{verdict(spread <= TARGET_P99_OVER_P50)} ({spread:.1f}x)"
        )
    print_table(header, rows)
    rate = med([x.rate for x in observed])
    p50 = med([x.p50 for x in observed])
    p99 = med([x.p99 for x in observed])
    print()
    print_table(
        [f"observe, {CONNECTIONS} connections", "requests/s", "p50", "p99"],
        [["30 arms, a new trace each", f"{rate:,.0f}", ms(p50), ms(p99)]],
    )
    verdicts.append(
        f"observe p99 <= {TARGET_OBSERVE_P99 * 1e3:g} ms with {CONNECTIONS} connections "
        f"{verdict(p99 <= TARGET_OBSERVE_P99)}"
    )
    without = med([x.p50 for x in plain])
    within_context = med([x.p50 for x in contextual])
    ratio = within_context / without
    print()
    print_table(
        ["select, 1,000 arms, 1 connection", "p50", "ratio"],
        [
            ["without context", ms(without), "1.00x"],
            ["with context (message, channel, tools called)", ms(within_context), f"{ratio:.2f}x"],
        ],
    )
    verdicts.append(
        f"select with context at 1,000 arms within 2x of without: {verdict(ratio <= 2.0)} "
        f"({ratio:.2f}x)"
    )
    print()
    print("targets:")
    for line in verdicts:
        print("  " + line)
    print()
    print("per round: select p50 over 1 connection / HTTP floor p50 for each placement, in process")
    print("fresh-list p50; observe p99")
    for r in range(rounds):
        parts = []
        for size in SIZES:
            placed = " ".join(
                f"{ms(http1[size, p][r].p50)}/{ms(floors[size, p][r].p50)}" for p in places
            )
            parts.append(f"{size:,}: {placed}, {ms(inproc[f'fresh {size}'][r][0])}")
        print(f"  round {r + 1}: " + "; ".join(parts) + f"; observe {ms(observed[r].p99)}")
    print(f"(run took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
