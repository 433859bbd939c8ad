"""Bad input anywhere in the engine raises one error type, InvalidInput, naming the problem."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import learning_bot.engine as engine
from learning_bot.engine import (
    MAX_TEXT_CHARS,
    Arm,
    InvalidInput,
    LearningConfig,
    LearningError,
    Posterior,
    ReportedArm,
    RunReport,
    build_arm_id,
    estimate_tokens,
    initial_prior,
    parse_arm_id,
    select_arms,
)

READ = Arm("tool:fs:Read", 1)

CASES: list[tuple[str, Callable[[], object], str]] = [
    ("malformed id", lambda: parse_arm_id("tool-fs-Read"), "tool-fs-Read"),
    ("missing name", lambda: parse_arm_id("tool:fs"), "tool:fs"),
    ("empty category", lambda: build_arm_id("tool", "", "Read"), "category"),
    ("unknown arm type", lambda: parse_arm_id("gadget:fs:Read"), "gadget"),
    ("unknown arm type in an Arm", lambda: Arm("gadget:fs:Read", 1), "gadget"),
    ("unknown type for a prior", lambda: initial_prior("gadget"), "gadget"),
    ("negative token cost", lambda: Arm("tool:fs:Read", -3), "token_cost"),
    ("NaN reward", lambda: Posterior(3, 1).updated(float("nan")), "reward"),
    ("reward 2", lambda: Posterior(3, 1).updated(2), "reward"),
    ("reward -0.1", lambda: Posterior(3, 1).updated(-0.1), "reward"),
    ("infinite reward", lambda: Posterior(3, 1).updated(float("inf")), "reward"),
    ("negative alpha", lambda: Posterior(-1, 1), "alpha"),
    ("token_budget < 0", lambda: LearningConfig(token_budget=-1), "token_budget"),
    ("tokenBudget < 0", lambda: LearningConfig.from_dict({"tokenBudget": -1}), "tokenBudget"),
    ("baseline_rate > 1", lambda: LearningConfig(baseline_rate=1.5), "baseline_rate"),
    ("baseline_rate NaN", lambda: LearningConfig(baseline_rate=float("nan")), "baseline_rate"),
    ("min_pulls < 0", lambda: LearningConfig(min_pulls=-1), "min_pulls"),
    ("unknown config key", lambda: LearningConfig.from_dict({"budget": 5}), "budget"),
    (
        "duplicate arm ids in a report",
        lambda: RunReport(trace_id="t", arms=(ReportedArm(READ), ReportedArm(READ, False))),
        "tool:fs:Read",
    ),
    ("empty report arms", lambda: RunReport(trace_id="t", arms=()), "arms"),
    (
        "oversized text",
        lambda: RunReport(
            trace_id="t", arms=(ReportedArm(READ),), assistant_texts=("x" * (MAX_TEXT_CHARS + 1),)
        ),
        "assistant_texts",
    ),
    ("duplicate arms to select", lambda: select_arms([READ, READ], {}, LearningConfig()), "Read"),
    ("content of the wrong type", lambda: estimate_tokens(3.5), "content"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("problem", "call", "named"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_raises_invalid_input_naming_the_problem(
    problem: str, call: Callable[[], object], named: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        call()
    assert named in str(info.value), f"{problem}: {info.value}"
    # one family: a ValueError for plain Python callers, a LearningError for the surfaces
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, LearningError)


def test_error_hierarchy() -> None:
    assert issubclass(engine.InvalidArmId, InvalidInput)
    assert issubclass(engine.InvalidConfig, InvalidInput)
    assert issubclass(engine.Ambiguous, InvalidInput)
    assert issubclass(engine.NotFound, LearningError)
    assert issubclass(engine.NotFound, LookupError)
    for cls in (engine.Forbidden, engine.Conflict, engine.Unavailable):
        assert issubclass(cls, LearningError)
    amb = engine.Ambiguous("label 'x' matches 2 arms", ("tool:a:x", "tool:b:x"))
    assert amb.candidates == ("tool:a:x", "tool:b:x")
    cfg = engine.InvalidConfig("minPulls", "must be >= 0")
    assert (cfg.field, cfg.detail, str(cfg)) == (
        "minPulls",
        "must be >= 0",
        "minPulls: must be >= 0",
    )
