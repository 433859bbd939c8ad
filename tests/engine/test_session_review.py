"""The set a session's review weighs (engine.session_review.best_known_set) under a recall
target: the rule of a first draw, the arms below the calibrated threshold, once the
calibration has enough uses; the share of the means before."""

from __future__ import annotations

from learning_bot.engine.recall_target import RecallCalibration, SearchPricing
from learning_bot.engine.session_review import best_known_set

IDS = tuple(f"tool:t:tool{i}" for i in range(10))
COSTS = dict.fromkeys(IDS, 100)
USEFUL = IDS[:2]
SEED = IDS[9]
# the means' total is 2 x 0.9 + 8 x 0.2 = 3.4; a useful arm's level 3.4 x 100 / 0.9 = 378,
# another's 3.4 x 100 / 0.2 = 1,700 (engine.recall_target.arm_levels)
USEFUL_LEVEL = 3.4 * 100 / 0.9


class Means:
    """A learner that has observed every arm, its means as given."""

    def pulls(self, arm_id: str) -> int:
        return 10

    def mean(self, arm_id: str) -> float:
        return 0.9 if arm_id in USEFUL else 0.2

    def observations(self) -> int:
        return 100

    def mean_session_turns(self) -> float | None:
        return None


def calibrated(uses: int, own: float | None = None) -> RecallCalibration:
    """A calibration whose baseline sessions used only arms at a useful arm's level."""
    calibration = RecallCalibration()
    levels = [USEFUL_LEVEL] * uses
    calibration.record(levels, None if own is None else [own] * uses, session="baseline")
    return calibration


def best(
    calibration: RecallCalibration | None, seeds: tuple[str, ...] = (), budget: int = 10_000
) -> tuple[str, ...]:
    return best_known_set(IDS, COSTS, Means(), budget, seeds, False, 0.8, calibration)


def test_under_a_calibrated_target_the_review_keeps_the_arms_below_the_threshold() -> None:
    # by the share of the means, 0.8 of 3.4 takes both useful arms and five others
    assert len(best(None)) == 7
    # the calibration says the arms used sit at the useful arms' level: they are the set
    assert best(calibrated(9)) == USEFUL
    # seeds stay in, and the budget caps the set
    assert best(calibrated(9), seeds=(SEED,)) == (*USEFUL, SEED)
    assert best(calibrated(9), seeds=(SEED,), budget=200) == (USEFUL[0], SEED)


def test_too_few_uses_recorded_keep_the_share_of_the_means() -> None:
    # 0.8 needs at least 4 uses (n >= 1 / (1 - 0.8) - 1) before it has a threshold
    assert calibrated(3).threshold(0.8) is None
    assert best(calibrated(3)) == best(None)
    assert len(best(calibrated(3))) == 7


def test_a_priced_calibration_weighs_the_search_against_the_tokens_kept() -> None:
    """With tool search, the threshold is the one of least estimated cost for the offered
    arms: searches dearer than keeping every arm keep every arm."""
    calibration = calibrated(9, own=2 * USEFUL_LEVEL)  # each use was found by a search
    calibration.pricing = SearchPricing(keep=1.0, search=10_000.0)
    assert best(calibration) == IDS
    calibration.pricing = SearchPricing(keep=1.0, search=1.0)
    assert best(calibration) == USEFUL
