"""The configuration's ways in hold values to engine.bounds as request bodies are: a
`LEARNING_BOT_*` variable or a config file value holding a lone surrogate (what a value that
is not UTF-8 becomes in Python) or NUL, or a count past the limits, is an error at start-up
naming the variable or the place in the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from learning_bot.engine.errors import InvalidConfig
from learning_bot.settings import load_settings

VARIABLES = [
    "LEARNING_BOT_PHASE",
    "LEARNING_BOT_POLICY",
    "LEARNING_BOT_SEED_ARM_IDS",
    "LEARNING_BOT_META_TOOLS",
    "LEARNING_BOT_TOKEN_BUDGET",
    "LEARNING_BOT_LEARNER",
    "LEARNING_BOT_LEARNERS",
    "LEARNING_BOT_ADMINS",
    "LEARNING_BOT_DASHBOARD_URL",
    "LEARNING_BOT_DATABASE_URL",
]
GOOD_FILE = {
    "learning": {
        "phase": "active",
        "tokenBudget": 4000,
        "seedArmIds": ["tool:fs:Read"],
        "metaTools": ["message"],
    }
}
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=6)
BAD_TEXT = st.one_of(
    st.tuples(TEXT, st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), TEXT).map("".join),
    st.tuples(TEXT, st.just("\x00"), TEXT).map("".join),
)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(VARIABLES), value=BAD_TEXT)
def test_a_variable_no_backend_stores_is_named_at_start(name: str, value: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        load_settings({name: value})
    assert refused.value.field == name
    assert "NUL" in str(refused.value) or "surrogate" in str(refused.value)


PLACES = [
    ("learning", "phase"),
    ("learning", "seedArmIds", 0),
    ("learning", "metaTools", 0),
    ("learning", "tokenBudget"),
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(place=st.sampled_from(PLACES), value=st.one_of(BAD_TEXT, st.integers(min_value=2**63)))
def test_a_config_file_value_no_backend_stores_is_named_at_start(
    tmp_path: Path, place: tuple[str | int, ...], value: object
) -> None:
    data = json.loads(json.dumps(GOOD_FILE))
    target = data
    for part in place[:-1]:
        target = target[part]
    target[place[-1]] = value
    path = tmp_path / "learning.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InvalidConfig) as refused:
        load_settings({"LEARNING_BOT_CONFIG": str(path)})
    where = ".".join(str(p) for p in place[:2]) + (f"[{place[2]}]" if len(place) > 2 else "")
    assert refused.value.field == "config file"
    assert where in str(refused.value), (where, str(refused.value))


def test_counts_stop_at_the_limit() -> None:
    assert load_settings({"LEARNING_BOT_TOKEN_BUDGET": str(10**12)}).config.token_budget == 10**12
    with pytest.raises(InvalidConfig, match=r"LEARNING_BOT_TOKEN_BUDGET.*at most"):
        load_settings({"LEARNING_BOT_TOKEN_BUDGET": str(10**12 + 1)})
    with pytest.raises(InvalidConfig, match=r"LEARNING_BOT_MIN_PULLS.*at most"):
        load_settings({"LEARNING_BOT_MIN_PULLS": "9" * 40})
