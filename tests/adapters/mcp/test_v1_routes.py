"""The `/v1` REST routes of a running `learning-bot serve` answer as the learning API under
/__openclaw__/api/learning does: an invalid learner name is a 400 naming the field, a read of
an unknown learner a 404 that creates nothing; and a posteriors read answers exactly the arms
asked for, however the client spells the list."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

from . import openclaw_calls as oc
from .conftest import TOKEN, Served

pytestmark = pytest.mark.slow

BASE = "/__openclaw__/api/learning"


async def test_learner_names_are_checked_and_unknown_learners_are_not_found(
    served: Served,
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=served.base, headers=headers) as client:
        for bad in ("two words", "x" * 65, "semi;colon"):
            for read in ("posteriors", "metrics"):
                answer = await client.get(f"/v1/learning/{quote(bad)}/{read}")
                assert answer.status_code == 400, (bad, read, answer.text)
                assert answer.json()["error"].startswith("learner"), answer.text
            for path, body in (
                ("/v1/learning/select", {"candidates": oc.CANDIDATES}),
                ("/v1/learning/observe", {"arm_id": "tool:fs:Read", "outcome": "accepted"}),
                ("/v1/learning/reset", {}),
                ("/v1/learning/sessions/start", {"session_name": "t-1"}),
            ):
                answer = await client.post(path, json={**body, "learner": bad})
                assert answer.status_code == 400, (bad, path, answer.text)
                assert answer.json()["error"].startswith("learner"), answer.text

        # An unknown learner: 404 on reads, as the learning API answers it, and nothing made.
        for read in ("posteriors", "metrics"):
            answer = await client.get(f"/v1/learning/nobody/{read}")
            assert answer.status_code == 404, answer.text
            assert "unknown learner 'nobody'" in answer.json()["error"]
        same = await client.get(f"{BASE}/posteriors", params={"learner": "nobody"})
        assert same.status_code == 404
        assert "nobody" not in (await client.get(f"{BASE}/learners")).json()["learners"]


async def test_posteriors_answer_only_the_arms_asked_for(served: Served) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=served.base, headers=headers) as client:
        phase = await client.post(
            f"{BASE}/phase",
            params={"learner": oc.LEARNER},
            json={"phase": "active", "confirm": True},
        )
        assert phase.status_code == 200, phase.text
        assert (await client.post("/v1/learning/select", json=oc.select().arguments)).is_success
        for arm in oc.CANDIDATE_IDS:
            call = oc.observe(arm, arm == "tool:fs:Read")
            assert (await client.post("/v1/learning/observe", json=call.arguments)).is_success
        path = f"/v1/learning/{oc.LEARNER}/posteriors"

        async def arms(params: list[tuple[str, str]] | None) -> set[str]:
            answer = await client.get(path, params=params)
            assert answer.status_code == 200, answer.text
            return set(answer.json()["posteriors"])

        two = {"tool:fs:Read", "skill:github:main"}
        assert await arms(None) == set(oc.CANDIDATE_IDS)
        assert await arms([("arm_ids", "tool:fs:Read")]) == {"tool:fs:Read"}
        assert await arms([("arm_ids", a) for a in sorted(two)]) == two
        assert await arms([("arm_ids", ",".join(sorted(two)))]) == two
        assert await arms([("arm_ids", "tool:fs:Read,tool:nope:Gone")]) == {"tool:fs:Read"}
        assert await arms([("arm_ids", "tool:nope:Gone")]) == set()
        # A name may hold a comma: a value whose parts are not all arm ids is one arm id.
        assert await arms([("arm_ids", "tool:fs:Read,Write")]) == set()
