"""The multi-turn sessions of the Berkeley Function Calling Leaderboard, read from bfcl-eval.

bfcl-eval (PyPI) ships its data inside the package: `data/BFCL_v4_multi_turn_<category>.json`
(one JSON object a line: `id`, `question` (per turn, the user messages), `involved_classes`,
`excluded_function`, and for miss_func `missed_function`: {turn: [functions]} held back until
that turn), `data/possible_answer/` (the same ids with `ground_truth`: per turn, the gold calls
as Python call strings) and `data/multi_turn_func_doc/<api>.json` (one function definition a
line, per API class). Only the data files are read: the package is found without importing it
(its dependencies are many and heavy), so `pip install --no-deps bfcl-eval` in any
environment is enough; point `--package-dir` at its `bfcl_eval` folder.

A session here is one entry: its turns (the user message, the gold calls' function names) and
its tools (every function of its API classes but the excluded ones; a missed function joins on
the turn it is given). A tool's cost is its definition's JSON, compactly serialised, in
characters / 4 rounded up: the usual rough rate for English and JSON with BPE tokenizers.

    .venv/bin/python -m bench.bfcl [--package-dir DIR]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
FUNC_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
"""The multi-turn API classes and the file of their function definitions (as bfcl-eval's
`constants.executable_backend_config.MULTI_TURN_FUNC_DOC_FILE_MAPPING` names them)."""
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Tool:
    """One function definition: `name` is `Class.function`."""

    name: str
    function: str
    api: str
    definition: Mapping[str, Any]
    tokens: int


@dataclass(frozen=True)
class Turn:
    message: str
    """The turn's user messages, joined (empty on a miss_func turn that only adds a tool)."""
    calls: tuple[str, ...]
    """The gold calls' tools (`Class.function`), in order, repeats kept."""
    added: tuple[str, ...] = ()
    """Tools given to the model from this turn on (miss_func)."""


@dataclass(frozen=True)
class Session:
    id: str
    category: str
    apis: tuple[str, ...]
    tools: tuple[str, ...]
    """The tools offered from the first turn (missed ones join later: `Turn.added`)."""
    turns: tuple[Turn, ...]


def package_dir(given: Path | None = None) -> Path:
    """The installed `bfcl_eval` package folder, found without importing it."""
    if given is not None:
        folder = Path(given)
    else:
        spec = importlib.util.find_spec("bfcl_eval")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(
                "bfcl-eval is not installed here: `pip install --no-deps bfcl-eval` in some "
                "environment and pass --package-dir .../site-packages/bfcl_eval"
            )
        folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "data" / "multi_turn_func_doc").is_dir():
        raise SystemExit(f"{folder} holds no data/multi_turn_func_doc: not a bfcl_eval package")
    return folder


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def token_estimate(definition: Mapping[str, Any]) -> int:
    """Tokens of a definition: its compact JSON's characters / CHARS_PER_TOKEN, rounded up."""
    text = json.dumps(definition, ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def load_tools(root: Path) -> dict[str, Tool]:
    """Every multi-turn API function, by `Class.function`."""
    tools: dict[str, Tool] = {}
    for api, filename in FUNC_DOCS.items():
        for definition in _lines(root / "data" / "multi_turn_func_doc" / filename):
            name = f"{api}.{definition['name']}"
            tools[name] = Tool(
                name, definition["name"], api, definition, token_estimate(definition)
            )
    return tools


def call_name(call: str) -> str:
    """The function a gold call string such as `mv(source='a', destination='b')` calls."""
    node = ast.parse(call.strip(), mode="eval").body
    if not isinstance(node, ast.Call):
        raise ValueError(f"not a call: {call[:80]!r}")
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    raise ValueError(f"unexpected callee in {call[:80]!r}")


def load_sessions(
    root: Path, tools: Mapping[str, Tool], categories: Sequence[str] = CATEGORIES
) -> list[Session]:
    """The sessions of the given categories with their gold calls."""
    sessions: list[Session] = []
    for category in categories:
        answers = {
            a["id"]: a["ground_truth"]
            for a in _lines(root / "data" / "possible_answer" / f"BFCL_v4_{category}.json")
        }
        for entry in _lines(root / "data" / f"BFCL_v4_{category}.json"):
            apis = tuple(entry["involved_classes"])
            owner = {t.function: t.name for t in tools.values() if t.api in apis}
            excluded = set(entry.get("excluded_function") or ())
            missed = {int(k): v for k, v in (entry.get("missed_function") or {}).items()}
            held_back = {f for fs in missed.values() for f in fs}
            offered = tuple(
                name for name, t in owner.items() if name not in excluded and name not in held_back
            )
            gold = answers[entry["id"]]
            if len(gold) != len(entry["question"]):
                raise ValueError(
                    f"{entry['id']}: {len(gold)} answers for {len(entry['question'])} turns"
                )
            turns = []
            for k, (messages, calls) in enumerate(zip(entry["question"], gold, strict=True)):
                text = "\n".join(m["content"] for m in messages if m.get("role") == "user")
                names = tuple(owner[call_name(c)] for c in calls)
                added = tuple(owner[f] for f in missed.get(k, ()))
                turns.append(Turn(text, names, added))
            sessions.append(
                Session(entry["id"], category, apis, tuple(owner[f] for f in offered), tuple(turns))
            )
    return sessions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", type=Path, help="the installed bfcl_eval folder")
    args = parser.parse_args(argv)
    root = package_dir(args.package_dir)
    tools = load_tools(root)
    sessions = load_sessions(root, tools)
    print(f"bfcl_eval at {root}")
    print(
        f"tools: {len(tools)} in {len(FUNC_DOCS)} API classes, "
        f"{sum(t.tokens for t in tools.values()):,} tokens (JSON chars / {CHARS_PER_TOKEN})"
    )
    for api in FUNC_DOCS:
        mine = [t for t in tools.values() if t.api == api]
        print(f"  {api:18s} {len(mine):3d} tools {sum(t.tokens for t in mine):6,} tokens")
    for category in CATEGORIES:
        mine = [s for s in sessions if s.category == category]
        turns = [t for s in mine for t in s.turns]
        offered = [sum(tools[n].tokens for n in s.tools) for s in mine]
        used = [len({c for t in s.turns for c in t.calls}) for s in mine]
        print(
            f"{category:24s} {len(mine)} sessions, {len(turns)} turns "
            f"({len(turns) / len(mine):.1f} per session), "
            f"{sum(len(t.calls) for t in turns)} gold calls; tools offered per session "
            f"{sum(len(s.tools) for s in mine) / len(mine):.1f} "
            f"({sum(offered) / len(offered):,.0f} tokens), distinct tools used per session "
            f"{sum(used) / len(used):.1f}"
        )
    turns = sum(len(s.turns) for s in sessions)
    print(f"all: {len(sessions)} sessions, {turns} turns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
