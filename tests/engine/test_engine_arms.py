"""Arm ids, token estimates and the Arm value (SPEC section 2)."""

from __future__ import annotations

import json
import math
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

import learning_bot.engine as engine
from learning_bot.engine import (
    DEFAULT_SEED_ARM_IDS,
    MAX_ARM_ID_LENGTH,
    Arm,
    ArmId,
    ArmType,
    InvalidArmId,
    InvalidInput,
    build_arm_id,
    estimate_tokens,
    parse_arm_id,
)

TYPES = ("tool", "memory", "skill", "file", "section")

# Parts that parse: no control or separator characters, no surrounding whitespace.
_part_chars = st.characters(
    exclude_categories=["Cc", "Cf", "Cs", "Zl", "Zp"],
)
categories = st.text(
    alphabet=st.characters(
        exclude_categories=["Cc", "Cf", "Cs", "Zl", "Zp"], exclude_characters=":"
    ),
    min_size=1,
    max_size=40,
).filter(lambda s: s == s.strip())
names = st.text(alphabet=_part_chars, min_size=1, max_size=80).filter(lambda s: s == s.strip())
names_with_colons = st.lists(
    st.text(alphabet=string.ascii_letters + string.digits + "/._-", min_size=1, max_size=12),
    min_size=2,
    max_size=5,
).map(":".join)


# --- the five types ------------------------------------------------------------------------


def test_arm_type_is_a_str_enum_of_exactly_the_five_types() -> None:
    assert {t.value for t in ArmType} == set(TYPES)
    assert ArmType.TOOL.value == "tool"
    assert isinstance(ArmType.TOOL, str)
    assert ArmType("file") is ArmType.FILE


@pytest.mark.parametrize("arm_type", TYPES)
def test_each_type_parses(arm_type: str) -> None:
    parsed = parse_arm_id(f"{arm_type}:cat:thing")
    assert parsed.type is ArmType(arm_type)
    assert parsed.category == "cat"
    assert parsed.name == "thing"


def test_name_keeps_its_colons() -> None:
    parsed = parse_arm_id("file:workspace:C:/x")
    assert parsed.type is ArmType.FILE
    assert parsed.category == "workspace"
    assert parsed.name == "C:/x"
    assert str(parsed) == "file:workspace:C:/x"


def test_build_arm_id_accepts_enum_or_string() -> None:
    assert build_arm_id(ArmType.TOOL, "fs", "Read") == "tool:fs:Read"
    assert build_arm_id("skill", "go", "main") == "skill:go:main"
    assert build_arm_id(ArmType.FILE, "workspace", "C:/x") == "file:workspace:C:/x"


# --- properties ----------------------------------------------------------------------------


@given(st.sampled_from(list(ArmType)), categories, names)
def test_build_then_parse_round_trips(arm_type: ArmType, category: str, name: str) -> None:
    arm_id = build_arm_id(arm_type, category, name)
    assert arm_id == f"{arm_type.value}:{category}:{name}"
    parsed = parse_arm_id(arm_id)
    assert (parsed.type, parsed.category, parsed.name) == (arm_type, category, name)
    assert str(parsed) == arm_id
    assert build_arm_id(parsed.type, parsed.category, parsed.name) == arm_id


@given(st.sampled_from(TYPES), categories, names_with_colons)
def test_names_containing_colons_round_trip(arm_type: str, category: str, name: str) -> None:
    assert ":" in name
    parsed = parse_arm_id(build_arm_id(arm_type, category, name))
    assert parsed.name == name
    assert parsed.category == category


@given(
    st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=12).filter(
        lambda s: s not in TYPES
    ),
    categories,
    names,
)
def test_unknown_types_are_rejected_naming_the_type(
    bad_type: str, category: str, name: str
) -> None:
    with pytest.raises(InvalidArmId) as info:
        parse_arm_id(f"{bad_type}:{category}:{name}")
    assert repr(bad_type) in str(info.value)
    with pytest.raises(InvalidArmId):
        build_arm_id(bad_type, category, name)


def _parse_or_error(text: str) -> tuple[ArmId | None, InvalidArmId | None]:
    try:
        return parse_arm_id(text), None
    except InvalidArmId as exc:
        return None, exc


@given(st.text(max_size=30))
def test_parse_either_succeeds_with_a_known_type_or_raises_invalid_arm_id(text: str) -> None:
    parsed, error = _parse_or_error(text)
    if error is not None:
        assert str(error)
    else:
        assert parsed is not None
        assert parsed.type.value in TYPES
        assert str(parsed) == text


def test_invalid_arm_id_is_a_value_error_and_an_invalid_input() -> None:
    assert issubclass(InvalidArmId, ValueError)
    assert issubclass(InvalidArmId, engine.InvalidInput)
    with pytest.raises(ValueError, match="weapon"):
        parse_arm_id("weapon:fs:Read")
    with pytest.raises(engine.InvalidInput):
        parse_arm_id("weapon:fs:Read")


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("", "empty"),
        ("tool", "part"),
        ("tool:fs", "part"),
        ("Tool:fs:Read", "'Tool'"),
        ("tools:fs:Read", "'tools'"),
        (":fs:Read", "unknown arm type ''"),
        ("tool::Read", "category"),
        ("tool:fs:", "name"),
        ("tool: fs:Read", "category"),
        ("tool:fs:Read ", "whitespace"),
        (" tool:fs:Read", "whitespace"),
        ("tool:fs:Re\nad", "control"),
        ("tool:fs:Re\x00ad", "control"),
        ("tool:fs:" + "x" * MAX_ARM_ID_LENGTH, str(MAX_ARM_ID_LENGTH)),
    ],
)
def test_malformed_ids_raise_naming_the_problem(bad: str, fragment: str) -> None:
    with pytest.raises(InvalidArmId) as info:
        parse_arm_id(bad)
    assert fragment in str(info.value)


def test_non_string_id_is_rejected() -> None:
    with pytest.raises(InvalidArmId, match="string"):
        parse_arm_id(42)  # type: ignore[arg-type]


def test_build_rejects_a_colon_in_the_category() -> None:
    with pytest.raises(InvalidArmId, match="category"):
        build_arm_id("tool", "f:s", "Read")


# --- token estimate ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 8, 2), ("x" * 9, 3), ("é" * 4, 1)],
)
def test_estimate_tokens_is_ceil_len_over_four(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@given(st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])))
def test_estimate_tokens_property(text: str) -> None:
    assert estimate_tokens(text) == math.ceil(len(text) / 4)


def test_estimate_tokens_of_none_is_zero() -> None:
    assert estimate_tokens(None) == 0


def test_tool_schema_is_serialised_compactly_like_json_stringify() -> None:
    schema = {
        "name": "Read",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        "required": ["path"],
        "strict": True,
        "default": None,
    }
    compact = (
        '{"name":"Read","parameters":{"type":"object","properties":{"path":{"type":"string"}}},'
        '"required":["path"],"strict":true,"default":null}'
    )
    assert json.dumps(schema, separators=(",", ":")) == compact
    assert estimate_tokens(schema) == math.ceil(len(compact) / 4)
    # The spaced form would be dearer: the estimate must not be based on it.
    assert estimate_tokens(schema) < math.ceil(len(json.dumps(schema)) / 4)
    assert estimate_tokens(["a", 1]) == math.ceil(len('["a",1]') / 4)


def test_non_ascii_in_a_schema_is_not_escaped() -> None:
    # JSON.stringify keeps "é" as one character: {"d":"é"} is 9 characters, 3 tokens
    # (escaped as \u00e9 it would be 14 characters, 4 tokens).
    assert estimate_tokens({"d": "é"}) == 3


def test_estimate_tokens_rejects_other_types() -> None:
    with pytest.raises(InvalidInput):
        estimate_tokens(12)  # type: ignore[arg-type]


# --- Arm -----------------------------------------------------------------------------------


def test_arm_derives_its_parts_from_the_id() -> None:
    arm = Arm("file:workspace:C:/x/notes.md", 12)
    assert arm.type is ArmType.FILE
    assert arm.category == "workspace"
    assert arm.name == "C:/x/notes.md"
    assert arm.token_cost == 12
    assert arm.label == "C:/x/notes.md"
    assert arm.content is None


def test_arm_keeps_label_and_content() -> None:
    arm = Arm("memory:project:note-1", 3, label="Note one", content="remember the vault")
    assert arm.label == "Note one"
    assert arm.content == "remember the vault"


def test_arm_is_frozen() -> None:
    arm = Arm("tool:fs:Read", 1)
    with pytest.raises(AttributeError):
        arm.token_cost = 5  # type: ignore[misc]


@pytest.mark.parametrize("bad_id", ["tool:fs", "widget:fs:Read", ""])
def test_arm_rejects_bad_ids(bad_id: str) -> None:
    with pytest.raises(InvalidArmId):
        Arm(bad_id, 1)


@pytest.mark.parametrize("cost", [-1, -100])
def test_arm_rejects_negative_token_cost(cost: int) -> None:
    with pytest.raises(InvalidInput, match="token_cost") as info:
        Arm("tool:fs:Read", cost)
    assert "tool:fs:Read" in str(info.value)


@pytest.mark.parametrize("cost", [1.5, float("nan"), "12", True])
def test_arm_rejects_non_whole_token_cost(cost: object) -> None:
    with pytest.raises(InvalidInput, match="token_cost"):
        Arm("tool:fs:Read", cost)  # type: ignore[arg-type]


def test_default_seed_arms_are_the_six_tools() -> None:
    assert DEFAULT_SEED_ARM_IDS == (
        "tool:fs:Read",
        "tool:fs:Write",
        "tool:fs:Edit",
        "tool:exec:Bash",
        "tool:fs:Glob",
        "tool:fs:Grep",
    )
    assert all(parse_arm_id(a).type is ArmType.TOOL for a in DEFAULT_SEED_ARM_IDS)
