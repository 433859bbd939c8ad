"""The JSON shapes every JSON-speaking surface sends (bot.shapes)."""

from __future__ import annotations

import json

from learning_bot.bot.replies import CompactList, CompactStatus, Heading, Reply, ReplyKind, Text
from learning_bot.bot.shapes import (
    arm_json,
    reply_data_json,
    reply_from_json,
    reply_json,
    selection_json,
)
from learning_bot.engine import Arm, LearningConfig, Phase, Posterior, select_arms
from learning_bot.engine.views import ArmView


def test_selection_json_uses_camel_case_and_carries_the_guidance() -> None:
    arms = [Arm("tool:x:Cheap", 5), Arm("tool:x:Huge", 5)]
    config = LearningConfig(
        phase=Phase.ACTIVE, token_budget=5, min_pulls=0, baseline_rate=0.0, seed_arm_ids=()
    )
    sel = select_arms(arms, {}, config, rng=0)
    d = selection_json(sel)
    assert d["tokenBudget"] == 5
    assert d["usedTokens"] == 5
    assert d["isBaseline"] is False
    assert d["overBudget"] is False
    assert len(d["selected"]) == 1
    assert len(d["excluded"]) == 1
    assert d["guidance"] == sel.guidance and d["guidance"]


def test_confidence_has_the_original_three_values_and_the_five_bands() -> None:
    def view(pulls: int) -> ArmView:
        return ArmView("tool:fs:Read", "Read", 1, Posterior(3, 1, pulls, 1), False, False)

    shown = {
        n: (arm_json(view(n))["confidence"], arm_json(view(n))["confidenceBand"])
        for n in (0, 1, 5, 20, 50)
    }
    assert shown == {
        0: ("low", "none"),
        1: ("low", "low"),
        5: ("medium", "medium"),
        20: ("high", "high"),
        50: ("high", "very high"),
    }


COMPACT = CompactStatus(
    (("Phase", "ACTIVE"), ("Traces", "12")),
    (CompactList("Best arms", (("Read", "0.91"),)),),
    "Full tables: /learning status top 10, or the dashboard.",
)


def test_a_replys_typed_fields_go_on_the_wire_after_its_data_under_their_names() -> None:
    status = Reply(
        ReplyKind.INFO,
        (Heading("Learning status — default", "ACTIVE"),),
        "status",
        data={"summary": {}, "phase": "active", "top": []},
        dashboard_url="https://x.example/dashboard",
        compact=COMPACT,
    )
    assert json.dumps(reply_data_json(status)) == json.dumps(
        {
            "summary": {},
            "phase": "active",
            "top": [],
            "dashboardUrl": "https://x.example/dashboard",
            "compact": {
                "headline": [["Phase", "ACTIVE"], ["Traces", "12"]],
                "lists": [{"title": "Best arms", "items": [["Read", "0.91"]]}],
                "more": "Full tables: /learning status top 10, or the dashboard.",
            },
        }
    )
    usage = Reply(
        ReplyKind.ERROR,
        (Text("no"),),
        "no",
        data={"error": "no", "errorCode": "usage"},
        usage=("a",),
    )
    assert list(reply_data_json(usage)) == ["error", "errorCode", "usage"]
    done = Reply(
        ReplyKind.OK,
        (),
        "done",
        data={"phase": "passive"},
        replaces_prompt=True,
        confirmed_by="Ada",
    )
    assert reply_data_json(done) == {"phase": "passive", "replacesPrompt": True, "by": "Ada"}
    assert list(reply_data_json(done)) == ["phase", "replacesPrompt", "by"]
    cancelled = Reply(ReplyKind.INFO, (), "c", cancelled=True, replaces_prompt=True)
    assert list(reply_data_json(cancelled)) == ["cancelled", "replacesPrompt"]
    names = Reply(ReplyKind.INFO, (), "1 arms", arm_names=(("tool:fs:Read", "Read"),))
    assert reply_data_json(names) == {"arms": [["tool:fs:Read", "Read"]]}
    for reply in (status, usage, done, cancelled, names):
        assert reply_from_json(json.loads(json.dumps(reply_json(reply)))) == reply


def test_details_not_of_their_typed_shape_stay_as_they_came() -> None:
    data = {
        "alreadyDone": True,
        "by": None,
        "compact": {"headline": "x"},
        "usage": 3,
        "dashboardUrl": ["u"],
        "cancelled": "yes",
        "arms": [],
    }
    wire = {"kind": "info", "summary": "s", "visibility": "private", "blocks": [], "data": data}
    reply = reply_from_json(wire)
    assert reply.data == data and reply.compact is None and reply.usage is None
    assert reply_json(reply) == wire
