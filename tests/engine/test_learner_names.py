"""A learner name is checked with a message a client can act on: a missing one is required,
a value of another type says its type, a bad name is quoted."""

from __future__ import annotations

import pytest

from learning_bot.engine.bounds import check_learner_name
from learning_bot.engine.errors import InvalidInput


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "a learner name is required"),
        (42, "learner name of type int is not valid: use 1-64 letters"),
        ("two words", "learner name 'two words' is not valid"),
        ("", "learner name '' is not valid"),
    ],
)
def test_a_bad_learner_name_says_what_is_wrong(value: object, said: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_learner_name(value)
    assert str(refused.value).startswith(said)


def test_a_good_name_is_returned() -> None:
    assert check_learner_name("team-a:prod_1.0") == "team-a:prod_1.0"
