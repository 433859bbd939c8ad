"""Consecutive `qortex_learning_select` calls over stdio with one `context.session_key` return
one set (docs/sessions.md), as OpenClaw's gateway calls them turn after turn; calls naming no
session draw anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import openclaw_calls as oc
from .conftest import stdio_params

pytestmark = pytest.mark.slow

ACTIVE = oc.ToolCall("learning_phase", {"phase": "active", "confirm": True, "learner": oc.LEARNER})


def _select(context: dict[str, object]) -> oc.ToolCall:
    call = oc.select(token_budget=500)
    return oc.ToolCall(call.name, {**call.arguments, "context": context, "seed_arms": []})


async def test_one_session_key_one_set_over_stdio(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'learning.sqlite'}"
    no_session = {k: v for k, v in oc.SELECT_CONTEXT.items() if k != "session_key"}
    steps: list[oc.Step] = [ACTIVE]
    steps += [_select(oc.SELECT_CONTEXT) for _ in range(6)]
    steps += [_select(no_session) for _ in range(30)]
    params = stdio_params(url, tmp_path / "home")
    # the seed algorithm's draws spread widely at the priors, so sets differ per request
    # no baseline session (every arm, 10% of sessions): the session set is a selection
    params.env = {
        **(params.env or {}),
        "LEARNING_BOT_POLICY": "seed",
        "LEARNING_BOT_BASELINE_RATE": "0",
    }
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with oc.stdio_session(params, errlog) as session:
            replies = await oc.run_steps(oc.session_caller(session), steps)
    for reply in replies:
        assert not reply.is_error, f"{reply.name}: {reply.text}"
    picks = [oc.arm_ids(r.result["selected_arms"]) for r in replies[1:]]
    in_session, per_request = picks[:6], picks[6:]
    assert all(p == in_session[0] for p in in_session)
    assert len(in_session[0]) < len(oc.CANDIDATES)
    assert len({tuple(p) for p in per_request}) > 1
