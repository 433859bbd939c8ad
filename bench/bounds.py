"""What does the body-wide bounds check cost (engine.bounds.check_json_text, run by every
request body's decoding in adapters/http/body.py)?

For observe bodies of 10, 50 and 500 arms, one with 100,000 characters of assistant text and
a select body of 50 arms, times in process, taking turns: `json.loads` of the body (the
reference) and the check of the decoded body against its text (a few C scans; the tree is
walked only when the text holds something suspect). Prints the median microseconds of each
and the check's share of the decoding.

    .venv/bin/python bench/bounds.py [--repeat 15] [--number 1000]
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import timeit  # noqa: E402

from learning_bot.engine.bounds import check_json_text  # noqa: E402


def observe_body(arms: int, text: str = "done") -> str:
    return json.dumps(
        {
            "traceId": "t-1",
            "sessionKey": "agent:main:slack:C1",
            "timestamp": 1765000000000,
            "arms": [
                {"armId": f"tool:x:T{i}", "tokenCost": 100 + i, "included": i % 3 != 0}
                for i in range(arms)
            ],
            "toolCalls": [{"name": "T1", "meta": {"path": "src/a.py"}}, {"name": "T2"}],
            "assistantTexts": [text],
            "usage": {"input": 3000, "output": 200, "cacheRead": 0, "total": 3200},
            "durationMs": 1800,
            "context": {"channel": "C1", "message": "deploy the k8s \u00e9t\u00e9 fix"},
        }
    )


def select_body(arms: int) -> str:
    body = {"arms": [{"armId": f"tool:x:T{i}", "tokenCost": 100 + i} for i in range(arms)]}
    return json.dumps({**body, "sessionKey": "s-1"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=1000)
    args = parser.parse_args()
    prose = ('Read the file,\n then "fix" it: ' * 3500)[:100_000]
    cases = [
        ("observe, 10 arms", observe_body(10)),
        ("observe, 50 arms", observe_body(50)),
        ("observe, 500 arms", observe_body(500)),
        ("observe, 100k text", observe_body(10, prose)),
        ("select, 50 arms", select_body(50)),
    ]
    print(f"{'body':<20} {'bytes':>8} {'decode us':>10} {'check us':>9} {'share':>6}")
    for name, text in cases:
        data = json.loads(text)
        number = max(10, args.number * 2000 // max(len(text), 2000))
        decode: list[float] = []
        check: list[float] = []
        for _ in range(args.repeat):
            decode.append(timeit.timeit(lambda t=text: json.loads(t), number=number) / number)
            check.append(
                timeit.timeit(lambda t=text, d=data: check_json_text(t, d), number=number) / number
            )
        d, c = statistics.median(decode) * 1e6, statistics.median(check) * 1e6
        print(f"{name:<20} {len(text):>8} {d:>10.1f} {c:>9.1f} {c / d:>6.2f}")


if __name__ == "__main__":
    main()
