"""engine.wire: what a declaration gives, namely the schema, the names a body may use, a client
value's JSON and back, and an answer written from an engine result."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from learning_bot.engine.wire.declare import (
    answer_encoder,
    arguments,
    body_names,
    decode,
    encode,
    nested_types,
    schema_of,
    wire,
    wire_type,
)
from learning_bot.engine.wire.runs import ArmSpec, RunReport, Selection, ToolCall, Usage


@wire_type("TestInner", documented=False)
@dataclass(frozen=True)
class Inner:
    name: str = wire(maxLength=8)


class Colour(enum.Enum):
    RED = "red"


@wire_type("TestOuter", documented=False, tolerated=("legacy",))
@dataclass(frozen=True)
class Outer:
    outer_id: str = wire("outerId", aliases=("outer_id",), doc="The id")
    inner: Inner | None = wire(default=None)
    items: tuple[Inner, ...] = wire(default=())
    note: str | None = wire(default=None, nullable=False)
    colour: str | None = wire(default=None, enum=["red"])
    why: str | None = wire(default=None, empty_is_null=True)
    extra: dict[str, Any] | None = wire(default=None, send="truthy")
    kept: int = wire(default=0, client=True)


def test_the_schema_comes_from_the_types_and_the_declared_keywords() -> None:
    schema = schema_of(Outer)
    props = schema["properties"]
    assert schema["required"] == ["outerId"]
    assert props["outerId"] == {"type": "string", "description": "The id"}
    # a nullable reference is written in place (OpenAPI 3.0 takes nothing beside a $ref)
    assert props["inner"] == {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8}},
        "required": ["name"],
        "nullable": True,
    }
    assert props["items"] == {"type": "array", "items": {"$ref": "#/components/schemas/TestInner"}}
    assert props["note"] == {"type": "string"}
    assert props["colour"] == {"type": "string", "enum": ["red", None], "nullable": True}
    assert "kept" not in props  # the client's own field is not on the wire


def test_a_body_may_use_each_json_name_and_alias() -> None:
    assert body_names(Outer) == (
        "outerId",
        "outer_id",
        "inner",
        "items",
        "note",
        "colour",
        "why",
        "extra",
    )
    assert nested_types(Outer) == {"inner": Inner, "items": Inner}
    assert arguments(Outer, {"outerId": "a", "note": "n"}) == {
        "outer_id": "a",
        "inner": None,
        "items": (),
        "note": "n",
        "colour": None,
        "why": None,
        "extra": None,
    }


def test_a_value_is_sent_as_its_send_rule_says_and_read_back() -> None:
    value = Outer("o", Inner("i"), (Inner("a"), Inner("b")), extra={})
    assert encode(value) == {
        "outerId": "o",
        "inner": {"name": "i"},
        "items": [{"name": "a"}, {"name": "b"}],
    }
    assert encode(value, always=frozenset({"note"}), skip=frozenset({"items"})) == {
        "outerId": "o",
        "inner": {"name": "i"},
        "note": None,
    }
    assert decode(Outer, encode(value), kept=3) == Outer(
        "o", Inner("i"), (Inner("a"), Inner("b")), kept=3
    )
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        decode(Outer, [])


def test_an_answer_is_written_from_any_object_with_the_same_attributes() -> None:
    source = SimpleNamespace(
        outer_id="o",
        inner=SimpleNamespace(name="i"),
        items=[SimpleNamespace(name="a")],
        note=None,
        colour=Colour.RED,
        why="",
        extra={"k": 1},
    )
    assert answer_encoder(Outer)(source) == {
        "outerId": "o",
        "inner": {"name": "i"},
        "items": [{"name": "a"}],
        "note": None,
        "colour": "red",
        "why": None,
        "extra": {"k": 1},
    }


@pytest.mark.parametrize(
    "value",
    [
        ArmSpec("tool:fs:Read", 12, "Read", "x", description="reads"),
        ToolCall("Read", {"path": "a"}, "tool:fs:Read"),
        Usage(1, 2, 3, 4, 10),
        Selection(("a",), ("b",), ("b",), True, 9, 3, False, None, "g", (), "kept", "why"),
        RunReport(
            "t",
            (ArmSpec("tool:fs:Read", 12),),
            run_id="r",
            timestamp=5,
            tool_calls=(ToolCall("Read"),),
            usage=Usage(1, 2),
            context={"message": "hi"},
        ),
    ],
    ids=lambda v: type(v).__name__,
)
def test_the_client_models_read_back_what_they_encode(value: Any) -> None:
    assert decode(type(value), encode(value, always=frozenset())) == value
