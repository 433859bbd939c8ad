"""`learning-bot simulate --recall-target` on a fresh database: the report gives the target,
the recall status estimates beside the simulator's true recall over the same runs, and the
prompt cost status measures beside the simulator's figure, each within 2 points of the
simulator's truth; status then shows the same target."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_cli import run


@pytest.mark.parametrize("seed", [0, 2])
def test_simulate_reports_the_target_and_the_recall_achieved(tmp_path: Path, seed: int) -> None:
    db = f"sqlite:///{tmp_path}/target.sqlite"
    sim = run(db, "simulate", "--recall-target", "0.97", "--traces", "600", "--seed", str(seed))
    assert sim.returncode == 0, sim.stderr
    inventory = re.search(
        r"Inventory: 40 arms, ([\d,]+) tokens; token budget ([\d,]+) \(a cap\); "
        r"recall target 97%\.",
        sim.stdout,
    )
    assert inventory is not None, sim.stdout
    # the budget is lifted to the whole inventory: the target alone decides the sets
    assert inventory[1] == inventory[2]
    kept = re.search(
        r"Kept about (\d+\.\d)% of the components the model used \(estimated; the "
        r"simulator's true recall is (\d+\.\d)%\), against a recall target of 97%\.",
        sim.stdout,
    )
    assert kept is not None, sim.stdout
    estimated, true = float(kept[1]), float(kept[2])
    assert abs(estimated - true) <= 2.0
    assert abs(true - 97.0) <= 2.0
    cost = re.search(r"status measures (-?\d+\.\d)% \(simulator: (-?\d+\.\d)%", sim.stdout)
    assert cost is not None, sim.stdout
    assert abs(float(cost[1]) - float(cost[2])) <= 2.0
    assert float(cost[2]) > 0.0  # it saves at the target

    status = run(db, "status")
    assert status.returncode == 0, status.stderr
    assert "(recall target 97%)" in status.stdout
    shown = r"Recall target +97% \(estimated \d+% kept; token budget a cap\)"
    assert re.search(shown, status.stdout), status.stdout
