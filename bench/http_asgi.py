"""What does `POST select` cost inside the server, without the network and uvicorn?

Calls the ASGI application `create_app` returns (as `serve` configures it: loopback host names,
no token) directly, with a fixed 30-arm body (or 1,000 with --arms) and in-memory receive and
send, on uvloop, beside `LearningService.select` on a fresh arm list over the same learner (as
bench/http.py measures it in process). The two measures take turns in rounds; every figure is
the median over the rounds of that round's median. The machine's noise moves both alike, so
the ratio says more than either figure: compare code versions by running this file from each
checkout (interleaving the runs), or count instructions with
`valgrind --tool=callgrind ... --http-only N`, which repeats on a noisy machine.

    .venv/bin/python -m bench.http_asgi [--arms 30] [--rounds 7] [--calls 3000]
    .venv/bin/python -m bench.http_asgi --vary        # a new context in every body
    .venv/bin/python -m bench.http_asgi --profile     # cProfile of the ASGI calls
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from learning_bot.adapters.http.api import BASE
from learning_bot.adapters.http.app import create_app
from learning_bot.adapters.http.settings import LOOPBACK_NAMES, HttpSettings
from learning_bot.app import build_app
from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.report_json import report_from_json, report_to_json
from learning_bot.research.simulation import make_workload
from learning_bot.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, help="calls per measure and round (default 3000)")
    parser.add_argument("--vary", action="store_true", help="a new context in every body")
    parser.add_argument("--profile", action="store_true", help="cProfile the ASGI calls")
    parser.add_argument("--http-only", type=int, metavar="N", help="only N ASGI calls, no timing")
    args = parser.parse_args()
    calls = args.calls or (3000 if args.arms <= 100 else 300)

    w = make_workload(args.arms, seed=11)
    dicts = [
        {"armId": a.id, "tokenCost": a.token_cost, "label": a.label, "content": a.content}
        for a in w.arms
    ]
    rng = np.random.default_rng(1)
    ids = [a.id for a in w.arms]
    warm = [
        report_from_json(report_to_json(w.report(f"w{i}", ids, w.draw_usage(i, rng)[1], False)))
        for i in range(300 if args.arms <= 100 else 40)
    ]
    tmp = tempfile.mkdtemp()
    os.environ["LEARNING_BOT_SPOOL_DIR"] = f"{tmp}/spool"
    # A long cache lifetime keeps the background refresh out of the figures (and the counts).
    settings = Settings(
        database_url=f"sqlite:///{tmp}/asgi.sqlite",
        config=LearningConfig(phase=Phase.ACTIVE),
        cache_ttl=3600.0,
    )
    app = build_app(settings, serving=True)
    service = app.service(create=True)
    service.observe_many(warm)
    asgi = create_app(app.bus, HttpSettings(allowed_hosts=LOOPBACK_NAMES))

    if args.vary:
        bodies = [json.dumps({"arms": dicts, "context": {"n": i}}).encode() for i in range(5000)]
    else:
        bodies = [json.dumps({"arms": dicts}).encode()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8787),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": f"{BASE}/select",
        "raw_path": f"{BASE}/select".encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8787"), (b"content-type", b"application/json")],
    }
    turn = [0]
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        turn[0] += 1
        return {"type": "http.request", "body": bodies[turn[0] % len(bodies)]}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def over_http(n: int) -> list[float]:
        clock = time.perf_counter
        times = []
        for _ in range(n):
            start = clock()
            await asgi(dict(scope), receive, send)
            times.append(clock() - start)
        return times

    def in_process(n: int) -> list[float]:
        clock = time.perf_counter
        times = []
        for _ in range(n):
            start = clock()
            arms = [Arm(d["armId"], d["tokenCost"], d["label"], d["content"]) for d in dicts]
            _ = service.select(arms).selected
            times.append(clock() - start)
        return times

    loop = asyncio.new_event_loop()
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        pass
    run: Callable[[Any], Any] = loop.run_until_complete
    run(over_http(200))
    in_process(200)
    if set(statuses) != {200}:
        raise SystemExit(f"select answered {sorted(set(statuses))}")
    gc.collect()
    gc.freeze()

    if args.http_only:
        run(over_http(args.http_only))
        return
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        run(over_http(calls * 5))
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        return

    http: list[float] = []
    local: list[float] = []
    for _ in range(args.rounds):
        http.append(statistics.median(run(over_http(calls))))
        local.append(statistics.median(in_process(calls)))
    one, ref = statistics.median(http), statistics.median(local)
    print(
        f"{args.arms} arms{', a new context each body' if args.vary else ''}: ASGI select p50 "
        f"{one * 1e6:.1f} µs, in process fresh list p50 {ref * 1e6:.1f} µs, "
        f"ratio {one / ref:.2f}x ({args.rounds} rounds of {calls} calls)"
    )
    app.close()


if __name__ == "__main__":
    main()
