"""Thompson scores drawn from the posteriors: one Beta draw per arm, or, with the pooled prior,
a draw under a prior fitted to every arm's evidence (the fit kept for the next selections)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt

from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.inventory import FloatArray, IntArray, PosteriorArrays


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a numpy Generator, an int seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InvalidInput(f"rng must be a numpy Generator or an int seed, got {type(rng).__name__}")


def draw_scores(
    post: PosteriorArrays, config: LearningConfig, gen: np.random.Generator
) -> FloatArray:
    """One Thompson score per arm, under the pooled prior when `config` asks for it."""
    if config.pooled_prior:
        return _pooled_scores(post, config.exploration, gen)
    return _scores(post, config.exploration, gen)


def _scores(post: PosteriorArrays, exploration: float, gen: np.random.Generator) -> FloatArray:
    """One Thompson score per arm: a Beta(alpha/e, beta/e) draw, or the mean when e is 0."""
    if exploration == 1.0:
        return gen.beta(post.alpha, post.beta)
    if exploration == 0.0:
        return post.alpha / (post.alpha + post.beta)
    return gen.beta(post.alpha / exploration, post.beta / exploration)


POOLED_GRID = 64
"""Points of the usage-probability grid of the pooled prior (cell midpoints of [0, 1])."""
POOLED_ITERATIONS = 20
"""EM steps fitting the pooled prior to the arms' evidence, per selection."""
POOLED_FLOOR = 0.3
"""Share of the pooled prior spread evenly over the grid, so that no usage probability is
ruled out by the fit and an arm whose first observations were unlucky is still drawn high."""

_GRID = (np.arange(POOLED_GRID, dtype=np.float64) + 0.5) / POOLED_GRID
_LOG_GRID = np.log(_GRID)
_LOG_1M_GRID = np.log1p(-_GRID)


POOLED_EXACT_MAX = 2048
"""Inventories up to this size get the exact grid posterior of every arm; larger ones fit the
pooled prior on this many arms spread evenly over the inventory and draw each arm from a Beta
matched to it (`_pooled_large`), so a selection costs about a Beta draw plus a fixed fit
instead of growing by 64 grid cells per arm."""


def _fit_pooled_prior(hits: FloatArray, misses: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(log-likelihood of each arm's evidence on the grid, max-shifted per arm; the fitted
    population distribution g mixed with POOLED_FLOOR of the uniform one)."""
    loglik = np.multiply.outer(hits, _LOG_GRID)
    loglik += np.multiply.outer(misses, _LOG_1M_GRID)
    loglik -= loglik.max(axis=1, keepdims=True)
    lik = np.exp(loglik)
    n = int(lik.shape[0])
    prior = np.full(POOLED_GRID, 1.0 / POOLED_GRID)
    # An EM step is g <- mean over arms of (lik * g) / (lik @ g), i.e.
    # g * (lik.T @ (1 / (lik @ g))) / n: two matrix-vector products instead of three passes
    # over the n x grid matrix. The step is the same for any multiple of g, and without the
    # division by n every step after the first returns n times the next iterate: divide once.
    lik_t = lik.T
    for _ in range(POOLED_ITERATIONS):
        prior = prior * (lik_t @ (1.0 / (lik @ prior)))
    prior = (1.0 - POOLED_FLOOR) * (prior / n) + POOLED_FLOOR / POOLED_GRID
    return loglik, prior


def _pooled_scores(
    post: PosteriorArrays, exploration: float, gen: np.random.Generator
) -> FloatArray:
    """One score per arm under a prior fitted to every arm's evidence (empirical Bayes).

    Each arm's posterior Beta(alpha, beta) is read as alpha - 1 uses and beta - 1 non-uses
    (its likelihood over a flat reference). Usage probabilities live on a grid of
    `POOLED_GRID` cells; the population distribution g over the grid is the maximum of the
    binomial marginal likelihood of all arms' evidence (EM, `POOLED_ITERATIONS` steps from
    uniform), then mixed with `POOLED_FLOOR` of the uniform distribution. Each arm's posterior
    on the grid is g times its likelihood, tempered by 1 / exploration (exploration < 1 narrows
    it as Beta(alpha/e, beta/e) does); a cell is drawn from it and the score is a uniform point
    of that cell. With exploration 0 the score is the posterior mean. Above
    `POOLED_EXACT_MAX` arms see `_pooled_large`.

    The fit depends on the posteriors and the exploration only, not on the draw: it is kept
    (`_PooledFits`) and the next selections on the same posteriors only draw, which costs
    about what a Beta draw of the same size costs. Posteriors that changed, even in place,
    are fitted again.
    """
    return _POOLED_FITS.get(post, exploration).draw(gen)


class _Means:
    """Exploration 0: the scores are the posterior means, the same at every selection."""

    __slots__ = ("means",)

    def __init__(self, means: FloatArray) -> None:
        means.flags.writeable = False
        self.means = means

    def draw(self, gen: np.random.Generator) -> FloatArray:
        return self.means


GUIDE_FROM = 256
"""From this many arms on, a pooled fit drawn from more than once gets a guide table
(`_GridDraw`), which makes its draws cost less than a Beta draw of the same size."""
GUIDE_BUCKETS = 128
"""Equal slices of [0, 1) in a guide table row."""


class _GridDraw:
    """Each arm's cumulative posterior over the grid cells, ready for an inverse-CDF draw.

    Row i is shifted up by 2i and the rows are laid end to end, so one `searchsorted` of
    u_i + 2i finds, for every arm at once, how many of its cumulative weights lie below its
    uniform u_i: the cell a per-row search finds (up to the rounding of the shift, under
    1e-12 of probability). The last weight of every row is exactly 1, which is the cap at
    the last cell a row whose weights sum to just under 1 needs.

    A fit drawn from again (the same posteriors selected from twice) over `GUIDE_FROM` arms
    or more also gets a guide table: for each arm and each of `GUIDE_BUCKETS` equal slices of
    [0, 1), the cell every u in that slice falls in, or -1 when a cumulative weight lies
    inside the slice. A draw then reads one entry per arm and searches only the few arms
    whose u fell in such a slice. The cells are the same as without the table."""

    __slots__ = ("_drawn", "_rows", "_slices", "_table", "cumulative", "n", "shifts", "starts")

    def __init__(self, weights: FloatArray) -> None:
        n, cells = weights.shape
        rows = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
        rows[:, -1] = 1.0
        self.shifts = 2.0 * np.arange(n, dtype=np.float64)
        self.cumulative = (rows + self.shifts[:, None]).ravel()
        self.starts = float(cells) * np.arange(n, dtype=np.float64)
        self.n = n
        self._rows: FloatArray | None = rows if n >= GUIDE_FROM else None
        self._table: npt.NDArray[np.int8] | None = None
        self._slices: IntArray | None = None  # where each arm's row of the table starts
        self._drawn = False

    def draw(self, gen: np.random.Generator) -> FloatArray:
        n = self.n
        u = cast(FloatArray, gen.random(n))
        table, slices = self._table, self._slices
        if table is None and self._rows is not None and self._drawn:
            slices = self._slices = np.arange(n, dtype=np.intp) * GUIDE_BUCKETS
            table = self._table = self._guide(self._rows)
            self._rows = None  # the table replaces it
        self._drawn = True
        cell: FloatArray
        if table is None or slices is None:
            cell = np.searchsorted(self.cumulative, u + self.shifts) - self.starts
        else:
            cell = table[(u * GUIDE_BUCKETS).astype(np.intp) + slices].astype(np.float64)
            unsure = (cell < 0).nonzero()[0]
            if unsure.size:
                found = np.searchsorted(self.cumulative, u[unsure] + self.shifts[unsure])
                cell[unsure] = found - self.starts[unsure]
        scores: FloatArray = (cell + gen.random(n)) / POOLED_GRID
        return scores

    @staticmethod
    def _guide(rows: FloatArray) -> npt.NDArray[np.int8]:
        """The guide table of `rows` (see the class), flattened row after row."""
        n, cells = rows.shape
        width = GUIDE_BUCKETS + 1  # a weight of exactly 1 falls in slice GUIDE_BUCKETS
        # u * GUIDE_BUCKETS and w * GUIDE_BUCKETS are exact (a power of two): u falls in
        # slice floor(u * B), and w lies inside that slice when floor(w * B) is the same
        slice_of = (rows * GUIDE_BUCKETS).astype(np.intp)
        slice_of += (np.arange(n, dtype=np.intp) * width)[:, None]
        inside = np.bincount(slice_of.ravel(), minlength=n * width).reshape(n, width)
        inside = inside[:, :GUIDE_BUCKETS]
        below = np.cumsum(inside, axis=1)
        below -= inside  # weights in earlier slices: below every u of this one
        table = np.where(inside > 0, -1, below).astype(np.int8).ravel()
        assert cells <= np.iinfo(np.int8).max
        return table


class _BetaDraw:
    """A large inventory's arms, each drawn from its Beta under the matched pooled prior."""

    __slots__ = ("alpha", "beta")

    def __init__(self, alpha: FloatArray, beta: FloatArray) -> None:
        self.alpha, self.beta = alpha, beta

    def draw(self, gen: np.random.Generator) -> FloatArray:
        drawn: FloatArray = gen.beta(self.alpha, self.beta)
        return drawn


_PooledDraw = _Means | _GridDraw | _BetaDraw
"""The part of a pooled draw that depends only on the posteriors and the exploration."""


def _fit_pooled_draw(post: PosteriorArrays, exploration: float) -> _PooledDraw:
    hits = np.maximum(post.alpha - 1.0, 0.0)
    misses = np.maximum(post.beta - 1.0, 0.0)
    if len(hits) > POOLED_EXACT_MAX:
        return _pooled_large(hits, misses, exploration)
    loglik, prior = _fit_pooled_prior(hits, misses)
    weights: FloatArray
    if exploration == 0.0:
        weights = np.exp(loglik) * prior
        return _Means((weights @ _GRID) / weights.sum(axis=1))
    if exploration != 1.0:
        # (lik * g) ** (1 / e), from the log-likelihood: no exp and log round trip
        logw = (loglik + np.log(prior)) / exploration
        logw -= logw.max(axis=1, keepdims=True)
        weights = np.exp(logw)
    else:
        weights = np.exp(loglik) * prior
    return _GridDraw(weights)


def _pooled_large(hits: FloatArray, misses: FloatArray, exploration: float) -> _PooledDraw:
    """The pooled draw for a large inventory: g is fitted on `POOLED_EXACT_MAX` arms spread
    evenly over the inventory, then replaced by the Beta(a0, b0) of the same mean and
    variance, so each arm's posterior is Beta(a0 + uses, b0 + non-uses), tempered as
    `_scores` tempers a posterior: one Beta draw for the whole inventory."""
    n = len(hits)
    sample = np.linspace(0, n - 1, POOLED_EXACT_MAX).astype(np.intp)
    _, prior = _fit_pooled_prior(hits[sample], misses[sample])
    mean = float(prior @ _GRID)
    var = float(prior @ (_GRID - mean) ** 2) + 1.0 / (12 * POOLED_GRID**2)
    strength = max(mean * (1.0 - mean) / var - 1.0, 1e-3)
    alpha = hits + mean * strength
    beta = misses + (1.0 - mean) * strength
    if exploration == 0.0:
        return _Means(alpha / (alpha + beta))
    if exploration != 1.0:
        alpha /= exploration
        beta /= exploration
    return _BetaDraw(alpha, beta)


class _PooledFits:
    """The last few pooled fits, each under the posteriors' bytes and the exploration it was
    made for. A lookup compares bytes (no hashing), so the same posteriors find their fit
    whichever object holds them, and arrays changed in place never find a stale one. The
    list is replaced, never changed in place, so concurrent selections need no lock."""

    KEEP = 8

    def __init__(self) -> None:
        self._fits: list[tuple[float, Any, bytes, bytes, _PooledDraw]] = []

    def get(self, post: PosteriorArrays, exploration: float) -> _PooledDraw:
        alpha, beta = post.alpha, post.beta
        dtype = alpha.dtype
        alpha_bytes, beta_bytes = alpha.tobytes(), beta.tobytes()
        fits = self._fits
        for e, kind, a, b, fit in fits:
            if a == alpha_bytes and b == beta_bytes and e == exploration and kind == dtype:
                return fit
        fit = _fit_pooled_draw(post, exploration)
        self._fits = [(exploration, dtype, alpha_bytes, beta_bytes, fit), *fits[: self.KEEP - 1]]
        return fit

    def clear(self) -> None:
        self._fits = []


_POOLED_FITS = _PooledFits()
