"""`learning-bot simulate --phase passive` records every component, and `learning-bot phase`
(text and --json) shows the projection of going active from those runs."""

from __future__ import annotations

import json
from pathlib import Path

from .test_cli import run


def test_passive_simulation_then_phase_shows_the_projection(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/phase.sqlite"
    sim = run(db, "simulate", "--phase", "passive", "--traces", "200", "--arms", "24")
    assert sim.returncode == 0, sim.stderr
    assert "Switched" not in sim.stdout and "in the passive phase" in sim.stdout
    text = run(db, "phase")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("Phase: PASSIVE")
    assert "Going active at budget 8,000 selection would have kept" in text.stdout
    assert "Switch with learning-bot phase active." in text.stdout
    answer = run(db, "phase", "--json")
    assert answer.returncode == 0, answer.stderr
    data = json.loads(answer.stdout)
    assert data["phase"] == "passive" and data["projection"]["runs"] == 200
    assert [s["tokenBudget"] for s in data["projection"]["settings"] if s.get("current")] == [8_000]
    # a passive simulation into an active learner is refused, naming the way out
    run(db, "phase", "active", "--confirm")
    refused = run(db, "simulate", "--phase", "passive", "--traces", "10")
    assert refused.returncode != 0 and "--learner demo" in refused.stderr
