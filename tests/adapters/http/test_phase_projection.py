"""GET .../phase: the phase and the projection of going active, in the OpenAPI shape; a reason
instead when too few runs were recorded."""

from __future__ import annotations

from pathlib import Path

from learning_bot.engine import Phase
from learning_bot.simulate import simulate

from .conftest import start_server, stop_server
from .test_api import SPEC, conforms


def test_get_phase_answers_the_projection(tmp_path: Path) -> None:
    live = start_server(f"sqlite:///{tmp_path}/phase.sqlite", phase=Phase.PASSIVE)
    try:
        with live.client(None) as c:
            early = c.get("/phase")
            assert early.status_code == 200, early.text
            assert early.json()["phase"] == "passive" and "projection" not in early.json()
            assert "needs 100 runs in 20 sessions" in early.json()["reason"]
            conforms("PhaseView", early.json())
            service = live.app.service(create=True)
            simulate(service, traces=200, arms=24, seed=2, sessions=True, phase=Phase.PASSIVE)
            answer = c.get("/phase")
            assert answer.status_code == 200, answer.text
        data = answer.json()
        conforms("PhaseView", data)
        projection = data["projection"]
        assert projection["runs"] == 200 and projection["sessions"] >= 20
        current = [s for s in projection["settings"] if s.get("current")]
        # the test server's budget is 1,000 tokens
        assert [s["tokenBudget"] for s in current] == [1_000]
        assert 0 < current[0]["recall"] <= 1
        assert "get" in SPEC["paths"]["/__openclaw__/api/learning/phase"]
    finally:
        stop_server(live)
