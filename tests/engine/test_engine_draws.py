"""Thompson scores under the pooled prior (engine.draws): the exact grid draw, the Beta
matched to the fit on large inventories, and the fits kept between selections."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from learning_bot.engine import PosteriorArrays
from learning_bot.engine.draws import (
    _POOLED_FITS,
    GUIDE_FROM,
    POOLED_EXACT_MAX,
    POOLED_FLOOR,
    POOLED_GRID,
    _fit_pooled_prior,
    _pooled_scores,
)


def test_pooled_prior_on_a_large_inventory_draws_from_the_matched_beta() -> None:
    """Above POOLED_EXACT_MAX arms the pooled prior is fitted on a spread sample and matched
    by a Beta: arms keep the order their evidence gives, an arm with no evidence is drawn
    around how arms in general turned out, and the group means agree with the exact path."""

    def case(n: int) -> PosteriorArrays:
        used = np.arange(n) % 4 == 0  # a quarter of the arms are used 9 times in 10
        alpha = np.where(used, 37.0, 3.0)
        beta = np.where(used, 5.0, 39.0)
        alpha[1], beta[1] = 1.0, 1.0  # never observed
        return PosteriorArrays(alpha, beta, np.full(n, 40))

    large, exact = case(4 * POOLED_EXACT_MAX), case(POOLED_EXACT_MAX)
    a = _pooled_scores(large, 1.0, np.random.default_rng(0))
    b = _pooled_scores(large, 1.0, np.random.default_rng(0))
    assert np.array_equal(a, b)
    assert a.shape == (len(large.alpha),) and ((a > 0) & (a < 1)).all()
    e = _pooled_scores(exact, 1.0, np.random.default_rng(0))
    group = np.arange(len(large.alpha)) % 4 == 0
    small_group = np.arange(len(exact.alpha)) % 4 == 0
    assert a[group].mean() == pytest.approx(e[small_group].mean(), abs=0.05)
    assert a[~group].mean() == pytest.approx(e[~small_group].mean(), abs=0.05)
    # the never-observed arm, drawn many times, centres near the population's mean use
    fresh = PosteriorArrays(
        np.concatenate([large.alpha, np.ones(500)]),
        np.concatenate([large.beta, np.ones(500)]),
        np.zeros(len(large.alpha) + 500, dtype=np.int64),
    )
    drawn = _pooled_scores(fresh, 1.0, np.random.default_rng(1))[-500:]
    observed = large.alpha + large.beta > 2
    rate = float(
        ((large.alpha[observed] - 1) / (large.alpha[observed] + large.beta[observed] - 2)).mean()
    )
    expected = (1 - POOLED_FLOOR) * rate + POOLED_FLOOR * 0.5  # the fit, with its uniform share
    assert drawn.mean() == pytest.approx(expected, abs=0.05)
    means = _pooled_scores(large, 0.0, np.random.default_rng(0))
    assert (means[group] > 0.7).all() and (means[~group][1:] < 0.2).all()


def _pooled_reference(
    post: PosteriorArrays, exploration: float, seed: int
) -> npt.NDArray[np.float64]:
    """The pooled draw written out arm by arm: each arm's tempered grid posterior, a cell
    found by counting the cumulative weights below a uniform, a uniform point of the cell."""
    hits = np.maximum(post.alpha - 1.0, 0.0)
    misses = np.maximum(post.beta - 1.0, 0.0)
    loglik, prior = _fit_pooled_prior(hits, misses)
    gen = np.random.default_rng(seed)
    first, second = gen.random(len(hits)), gen.random(len(hits))
    scores = []
    for i in range(len(hits)):
        logw = (loglik[i] + np.log(prior)) / exploration
        weights = np.exp(logw - logw.max())
        cumulative = np.cumsum(weights / weights.sum())
        cell = min(int((cumulative < first[i]).sum()), POOLED_GRID - 1)
        scores.append((cell + second[i]) / POOLED_GRID)
    return np.array(scores)


@pytest.mark.parametrize("n", [7, 300])
def test_pooled_draws_repeat_the_arm_by_arm_draw_however_often_one_fit_is_drawn(n: int) -> None:
    """A pooled fit is kept for the next selection on the same posteriors, and from
    GUIDE_FROM arms on its later draws read a guide table: the first draw, the later ones and
    a draw after the fits were dropped all match the arm-by-arm reference. Posteriors changed
    in place are fitted again, never drawn from a stale fit."""
    rng = np.random.default_rng(n)
    hits = np.where(rng.random(n) < 0.3, rng.integers(0, 60, n), 0).astype(np.float64)
    misses = rng.integers(0, 300, n).astype(np.float64)
    post = PosteriorArrays(1.0 + hits, 1.0 + misses, (hits + misses).astype(np.int64))
    assert (n >= GUIDE_FROM) == (n == 300)
    _POOLED_FITS.clear()
    for seed in (1, 2, 3, 4, 1):
        drawn = _pooled_scores(post, 0.5, np.random.default_rng(seed))
        np.testing.assert_allclose(drawn, _pooled_reference(post, 0.5, seed), rtol=0, atol=1e-12)
    for values in (post.beta, post.alpha):
        values[: n // 2] += 5.0  # the same arrays, changed in place
        changed = _pooled_scores(post, 0.5, np.random.default_rng(9))
        np.testing.assert_allclose(changed, _pooled_reference(post, 0.5, 9), rtol=0, atol=1e-12)
    _POOLED_FITS.clear()
    assert np.array_equal(_pooled_scores(post, 0.5, np.random.default_rng(9)), changed)
