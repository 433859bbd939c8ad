"""Which arm a tool call credits (docs/context.md, "Which arm a tool call credits"): a call that
names its arm credits that arm only; a name given as a full arm id or `category:name` is read
the same way; a bare name shared by several of the run's arms credits none and is reported as
ambiguous. And an arm loaded through tool search counts as in the prompt for the reward."""

from __future__ import annotations

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.arms import Arm
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import (
    ReportedArm,
    RunReport,
    ToolCall,
    referenced_arms,
    rewards_for_run,
)
from learning_bot.engine.records import record_from_report
from learning_bot.engine.report_json import report_from_json, report_to_json

BILLING = Arm("tool:billing:calculate", 10)
TRAVEL = Arm("tool:travel:calculate", 10)
READ = Arm("tool:fs:Read", 10)
SEARCH = Arm("tool:web:Search", 10)
ACTIVE = LearningConfig(phase=Phase.ACTIVE)


def report(*calls: ToolCall | str, arms: tuple[ReportedArm, ...] | None = None) -> RunReport:
    arms = arms or (ReportedArm(BILLING), ReportedArm(TRAVEL), ReportedArm(READ))
    made = tuple(ToolCall(c) if isinstance(c, str) else c for c in calls)
    return RunReport("t-1", arms, tool_calls=made)


def test_a_call_naming_its_arm_credits_that_arm_only() -> None:
    run = report(ToolCall("calculate", arm="tool:billing:calculate"))
    assert referenced_arms(run) == {BILLING.id: True, TRAVEL.id: False, READ.id: False}
    outcome = rewards_for_run(run, ACTIVE)
    assert outcome.rewards == {BILLING.id: 1.0, TRAVEL.id: 0.0, READ.id: 0.0}
    assert outcome.ambiguous == {}


@pytest.mark.parametrize("name", ["tool:travel:calculate", "travel:calculate"])
def test_a_name_given_as_the_arm_id_or_category_and_name(name: str) -> None:
    run = report(name)
    assert run.tool_calls[0].name == "calculate"
    assert run.tool_calls[0].arm == TRAVEL.id
    assert referenced_arms(run) == {BILLING.id: False, TRAVEL.id: True, READ.id: False}


def test_a_bare_name_several_arms_share_credits_none_and_says_so() -> None:
    outcome = rewards_for_run(report("calculate", "Read"), ACTIVE)
    # which one was called cannot be told: neither is rewarded, nor taught it was unused
    assert outcome.rewards == {READ.id: 1.0}
    assert outcome.referenced == {BILLING.id: False, TRAVEL.id: False, READ.id: True}
    assert outcome.ambiguous == {"calculate": (BILLING.id, TRAVEL.id)}
    # another call that names one of them credits it all the same
    named = ToolCall("calculate", arm=TRAVEL.id)
    outcome = rewards_for_run(report("calculate", named), ACTIVE)
    assert outcome.rewards == {TRAVEL.id: 1.0, READ.id: 0.0}


def test_a_bare_name_one_included_arm_has_credits_it() -> None:
    # the travel tool was left out of the prompt: only the billing one could have been called
    arms = (ReportedArm(BILLING), ReportedArm(TRAVEL, included=False), ReportedArm(READ))
    outcome = rewards_for_run(report("calculate", arms=arms), ACTIVE)
    assert outcome.rewards == {BILLING.id: 1.0, READ.id: 0.0}
    assert outcome.ambiguous == {}


def test_a_call_naming_an_arm_left_out_credits_nothing() -> None:
    arms = (ReportedArm(BILLING), ReportedArm(TRAVEL, included=False))
    outcome = rewards_for_run(report(ToolCall("calculate", arm=TRAVEL.id), arms=arms), ACTIVE)
    assert outcome.rewards == {BILLING.id: 0.0}


def test_a_name_with_a_colon_that_names_no_arm_stays_a_tool_name() -> None:
    server = Arm("tool:mcp:server:search", 1)
    run = report("server:search", arms=(ReportedArm(server),))
    assert run.tool_calls[0].arm is None
    assert referenced_arms(run) == {server.id: True}


def test_an_arm_loaded_through_tool_search_counts_as_in_the_prompt() -> None:
    arms = (
        ReportedArm(READ),
        ReportedArm(SEARCH, included=False, loaded=True),
        ReportedArm(BILLING, included=False, loaded=True),
        ReportedArm(TRAVEL, included=False),
    )
    run = report("Search", "Read", arms=arms)
    assert run.loaded_arms == (SEARCH, BILLING)
    assert run.included_arms == (READ,)
    outcome = rewards_for_run(run, ACTIVE)
    assert outcome.rewards == {READ.id: 1.0, SEARCH.id: 1.0, BILLING.id: 0.0}
    record = record_from_report(run, outcome, Phase.ACTIVE, None)
    assert {a.arm_id: (a.included, a.referenced, a.reward) for a in record.arms} == {
        READ.id: (True, True, 1.0),
        SEARCH.id: (True, True, 1.0),
        BILLING.id: (True, False, 0.0),
        TRAVEL.id: (False, False, None),
    }


def test_the_wire_carries_loaded_and_the_called_arm() -> None:
    body = {
        "traceId": "t-9",
        "arms": [
            {"armId": READ.id, "tokenCost": 10},
            {"armId": SEARCH.id, "tokenCost": 10, "included": False, "loaded": True},
        ],
        "toolCalls": [{"name": "Search", "arm": SEARCH.id}],
    }
    run = report_from_json(body)
    assert [(i.included, i.loaded) for i in run.arms] == [(True, False), (False, True)]
    assert run.tool_calls == (ToolCall("Search", None, SEARCH.id),)
    again = report_to_json(run)
    assert again["arms"][1]["loaded"] is True and "loaded" not in again["arms"][0]
    assert again["toolCalls"] == [{"name": "Search", "meta": None, "arm": SEARCH.id}]
    assert report_from_json(again) == run


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"arms": [{"armId": READ.id, "loaded": "yes"}]}, "arms[0].loaded"),
        ({"toolCalls": [{"name": "Read", "arm": 5}]}, "toolCalls[0].arm"),
        ({"toolCalls": [{"name": "Read", "arm": "skill:go:main"}]}, "toolCalls[0]"),
        ({"toolCalls": [{"name": "Read", "arm": "tool:fs"}]}, "toolCalls[0]"),
    ],
)
def test_bad_values_name_their_field(change: dict[str, object], field: str) -> None:
    body = {"traceId": "t-1", "arms": [{"armId": READ.id}], **change}
    with pytest.raises(InvalidInput) as refused:
        report_from_json(body)
    assert str(refused.value).startswith(field), refused.value
