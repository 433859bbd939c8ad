"""bench/bfcl.py reads bfcl-eval's multi-turn files into sessions and a tool inventory; here
on a small package folder laid out as bfcl-eval lays out its data."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def bfcl() -> ModuleType:
    return importlib.import_module("bench.bfcl")


def write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


MV = {"name": "mv", "description": "Move a file.", "parameters": {"type": "dict"}}
CD = {"name": "cd", "description": "Change directory.", "parameters": {"type": "dict"}}
SORT = {"name": "sort", "description": "Sort a file.", "parameters": {"type": "dict"}}
ADD = {"name": "add", "description": "Add two numbers.", "parameters": {"type": "dict"}}


@pytest.fixture
def package(tmp_path: Path, bfcl: ModuleType) -> Path:
    root = tmp_path / "bfcl_eval"
    docs = root / "data" / "multi_turn_func_doc"
    for filename in bfcl.FUNC_DOCS.values():
        write_lines(docs / filename, [])
    write_lines(docs / "gorilla_file_system.json", [MV, CD, SORT])
    write_lines(docs / "math_api.json", [ADD])
    write_lines(
        root / "data" / "BFCL_v4_multi_turn_miss_func.json",
        [
            {
                "id": "multi_turn_miss_func_0",
                "question": [
                    [{"role": "user", "content": "Move a.txt to tmp."}],
                    [{"role": "user", "content": "Sort it."}],
                    [],
                ],
                "involved_classes": ["GorillaFileSystem"],
                "excluded_function": ["mv"],
                "missed_function": {"2": ["sort"]},
            }
        ],
    )
    write_lines(
        root / "data" / "possible_answer" / "BFCL_v4_multi_turn_miss_func.json",
        [
            {
                "id": "multi_turn_miss_func_0",
                "ground_truth": [
                    ["cd(folder='docs')", "mv(source='a.txt', destination='tmp')"],
                    [],
                    ["sort('a.txt')"],
                ],
            }
        ],
    )
    return root


def test_tools_cost_their_json_length_over_four(bfcl: ModuleType, package: Path) -> None:
    tools = bfcl.load_tools(bfcl.package_dir(package))
    assert sorted(tools) == [
        "GorillaFileSystem.cd",
        "GorillaFileSystem.mv",
        "GorillaFileSystem.sort",
        "MathAPI.add",
    ]
    compact = json.dumps(MV, separators=(",", ":"))
    assert tools["GorillaFileSystem.mv"].tokens == -(-len(compact) // 4)
    assert tools["MathAPI.add"].api == "MathAPI"


def test_sessions_hold_turns_gold_tools_and_held_back_tools(
    bfcl: ModuleType, package: Path
) -> None:
    tools = bfcl.load_tools(package)
    (session,) = bfcl.load_sessions(package, tools, ("multi_turn_miss_func",))
    assert session.id == "multi_turn_miss_func_0"
    assert session.apis == ("GorillaFileSystem",)
    # mv is excluded from what is offered, sort is held back until turn 2
    assert session.tools == ("GorillaFileSystem.cd",)
    assert [t.message for t in session.turns] == ["Move a.txt to tmp.", "Sort it.", ""]
    assert [t.calls for t in session.turns] == [
        ("GorillaFileSystem.cd", "GorillaFileSystem.mv"),
        (),
        ("GorillaFileSystem.sort",),
    ]
    assert [t.added for t in session.turns] == [(), (), ("GorillaFileSystem.sort",)]


def test_call_names_and_a_missing_package(bfcl: ModuleType, tmp_path: Path) -> None:
    assert bfcl.call_name("diff(file_name1='a',file_name2='b')") == "diff"
    assert bfcl.call_name("api.get_stock_info(symbol='X')") == "get_stock_info"
    with pytest.raises(ValueError, match="not a call"):
        bfcl.call_name("x + 1")
    with pytest.raises(SystemExit, match="not a bfcl_eval package"):
        bfcl.package_dir(tmp_path)


def test_cost_sessions_mark_each_turns_gold_tools(bfcl: ModuleType, package: Path) -> None:
    cost = importlib.import_module("bench.bfcl_cost")
    workload, position = cost.inventory(package)
    assert [arm.id for arm in workload.arms] == [
        "tool:bfcl:GorillaFileSystem.mv",
        "tool:bfcl:GorillaFileSystem.cd",
        "tool:bfcl:GorillaFileSystem.sort",
        "tool:bfcl:MathAPI.add",
    ]
    tools = bfcl.load_tools(package)
    (session,) = cost.as_sessions(
        bfcl.load_sessions(package, tools, ("multi_turn_miss_func",)), position, 4
    )
    assert session.turns == 3 and list(session.times) == [0.0, 30.0, 60.0]
    assert session.used.tolist() == [
        [True, True, False, False],
        [False, False, False, False],
        [False, False, True, False],
    ]
    assert session.conversational.tolist() == [False, True, False]
    assert cost.usage_shares([session], 4).tolist() == [0.5, 0.5, 0.5, 0.0]
