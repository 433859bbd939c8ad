"""What does holding a request body to its route's fields cost (adapters/http/body.py)?

For observe bodies of 10, 50 and 500 arms and a select body of 50 arms, times in process,
taking turns: `decode_body(raw)` (the JSON decoding the routes did before: the reference)
and `decode_body(raw, route)` (decoding and the unknown-field check). Prints the median
microseconds of each and the ratio.

    .venv/bin/python bench/strict_fields.py [--repeat 15] [--number 2000]
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import timeit  # noqa: E402

from learning_bot.adapters.http.body import decode_body  # noqa: E402


def observe_body(arms: int) -> bytes:
    return json.dumps(
        {
            "traceId": "t-1",
            "sessionKey": "agent:main:slack:C1",
            "arms": [
                {"armId": f"tool:x:T{i}", "tokenCost": 100 + i, "included": i % 3 != 0}
                for i in range(arms)
            ],
            "toolCalls": [{"name": "T1"}, {"name": "T2"}],
            "assistantTexts": ["done"],
            "usage": {"input": 3000, "output": 200, "cacheRead": 0, "total": 3200},
            "durationMs": 1800,
            "context": {"channel": "C1"},
        }
    ).encode()


def select_body(arms: int) -> bytes:
    body = {"arms": [{"armId": f"tool:x:T{i}", "tokenCost": 100 + i} for i in range(arms)]}
    return json.dumps({**body, "sessionKey": "s-1"}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    cases = [
        ("observe, 10 arms", "observe", observe_body(10)),
        ("observe, 50 arms", "observe", observe_body(50)),
        ("observe, 500 arms", "observe", observe_body(500)),
        ("select, 50 arms", "select", select_body(50)),
    ]
    print(f"{'body':<20} {'decode us':>10} {'+ fields us':>12} {'ratio':>6}")
    for name, route, raw in cases:
        number = max(1, args.number * 10 // (len(raw) // 100 + 10))
        plain: list[float] = []
        strict: list[float] = []
        for _ in range(args.repeat):  # taking turns, so both see the same machine
            plain.append(timeit.timeit(lambda raw=raw: decode_body(raw), number=number))
            strict.append(
                timeit.timeit(lambda raw=raw, r=route: decode_body(raw, r), number=number)
            )
        a = statistics.median(plain) / number * 1e6
        b = statistics.median(strict) / number * 1e6
        print(f"{name:<20} {a:>10.1f} {b:>12.1f} {b / a:>6.2f}")


if __name__ == "__main__":
    main()
