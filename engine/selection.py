"""Thompson Sampling selection of arms under a token budget (SPEC section 4)."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter, not_
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from engine.arms import Arm, ArmType, parse_arm_id
from engine.bounds import MAX_TOKEN_COST
from engine.config import LearningConfig, Phase
from engine.errors import InvalidArmId, InvalidInput
from engine.posterior import Posterior, prior_parameters
from engine.text import strip_controls

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MAX_GUIDANCE_NAME = 64

SMALL_INVENTORY = 128
"""Below this many arms `select_arms` ranks and packs in plain Python after the one numpy
draw: on a few dozen elements each numpy call costs more in overhead than the work it does.
Measured crossover (bench/select.py --crossover); both paths consume the same random draws and
make the same selection."""

_ID = attrgetter("id")
_COST = attrgetter("token_cost")
_TYPE = attrgetter("type")
_ALPHA = attrgetter("alpha")
_BETA = attrgetter("beta")
_PULLS = attrgetter("pulls")


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a numpy Generator, an int seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InvalidInput(f"rng must be a numpy Generator or an int seed, got {type(rng).__name__}")


class RepeatedArmIds(InvalidInput):
    """An inventory names an arm twice."""


class ArmSet:
    """An arm inventory compiled once into arrays, so repeated selections stay vectorised.

    Building one reads each arm's id and token cost and checks the ids are unique; everything
    else (the id -> position index, priors, per-token weights, guidance names) is computed on
    first use, so a set built for one request costs little more than reading the list.
    `ArmSet.of` and `ArmSet.from_json` find the set of an inventory seen lately instead of
    building it again (`ArmSetCache`).
    """

    __slots__ = (
        "__dict__",
        "__weakref__",
        "_aligned_once",
        "_alignment",
        "_id_set",
        "_names",
        "_seeds",
        "_sentences",
        "arms",
        "costs",
        "ids",
    )

    def __init__(self, arms: Iterable[Arm]) -> None:
        self.arms: tuple[Arm, ...] = tuple(arms)
        for kind in set(map(type, self.arms)):
            if not issubclass(kind, Arm):
                raise InvalidInput(f"expected Arm objects, got {kind.__name__}")
        n = len(self.arms)
        self.ids: tuple[str, ...] = tuple(map(_ID, self.arms))
        self._id_set = frozenset(self.ids)
        if len(self._id_set) != n:
            dupes = sorted(arm_id for arm_id, k in Counter(self.ids).items() if k > 1)
            raise RepeatedArmIds(f"arm ids must be unique; repeated: {', '.join(dupes[:5])}")
        self.costs: IntArray = np.fromiter(map(_COST, self.arms), dtype=np.int64, count=n)
        self._seeds: dict[tuple[str, ...], _Seeds] = {}
        self._names: dict[int, str | None] = {}
        self._sentences: dict[tuple[int, ...], str | None] = {}
        self._alignment: _Alignment | None = None
        self._aligned_once = False

    @classmethod
    def of(cls, arms: Sequence[Arm] | ArmSet) -> ArmSet:
        """The ArmSet of `arms`: the one built for the same inventory lately, else a new one."""
        return arms if isinstance(arms, ArmSet) else ARM_SETS.for_arms(arms)

    @classmethod
    def from_json(cls, data: Any, name: str = "arms") -> ArmSet:
        """The ArmSet of a select body's `arms` array ([{armId, tokenCost, label?,
        content?}, ...], as `engine.records.arms_from_json` reads it, with its checks and
        messages), found again without reading each arm when the same array comes back.
        `data` is what JSON decoding gives (dicts, lists, strings, numbers, booleans, None)."""
        return ARM_SETS.for_json(data, name)

    def __len__(self) -> int:
        return len(self.arms)

    @cached_property
    def index(self) -> dict[str, int]:
        """Position of each arm id."""
        return dict(zip(self.ids, range(len(self.ids)), strict=True))

    @cached_property
    def id_array(self) -> npt.NDArray[np.object_]:
        return np.array(self.ids, dtype=object)

    @cached_property
    def cost_list(self) -> list[int]:
        """The token costs as Python ints, for the small-inventory path."""
        out: list[int] = self.costs.tolist()
        return out

    @cached_property
    def cheapest(self) -> int:
        """The lowest token cost of any arm (0 for an empty set)."""
        return int(self.costs.min()) if len(self.costs) else 0

    @cached_property
    def total_cost(self) -> int:
        return int(self.costs.sum())

    @cached_property
    def type_codes(self) -> npt.NDArray[np.int8]:
        """Each arm's type as its position in `ArmType` (read-only)."""
        codes = np.fromiter(
            map(_TYPE_CODE.__getitem__, map(_TYPE, self.arms)), dtype=np.int8, count=len(self)
        )
        codes.flags.writeable = False
        return codes

    @cached_property
    def _priors(self) -> tuple[FloatArray, FloatArray]:
        codes = self.type_codes
        alpha, beta = _PRIOR_ALPHA[codes], _PRIOR_BETA[codes]
        alpha.flags.writeable = beta.flags.writeable = False
        return alpha, beta

    @property
    def prior_alpha(self) -> FloatArray:
        """alpha of each arm's initial prior (read-only)."""
        return self._priors[0]

    @property
    def prior_beta(self) -> FloatArray:
        """beta of each arm's initial prior (read-only)."""
        return self._priors[1]

    @cached_property
    def per_token(self) -> FloatArray:
        """1 / token cost of each arm (infinity for a free arm), for packing by score per token."""
        out = np.full(len(self.arms), np.inf)
        np.divide(1.0, self.costs, out=out, where=self.costs > 0)
        return out

    @cached_property
    def has_free_arm(self) -> bool:
        """Whether an arm costs 0 tokens (its score per token is infinite, or NaN for 0)."""
        return bool((self.costs == 0).any())

    @cached_property
    def tool_mask(self) -> BoolArray:
        """Which arms are tools (the only arms the guidance sentence names)."""
        mask: BoolArray = self.type_codes == _TYPE_CODE[ArmType.TOOL]
        mask.flags.writeable = False
        return mask

    @cached_property
    def tool_positions(self) -> tuple[int, ...]:
        """Where the tools are, in inventory order."""
        return tuple(np.flatnonzero(self.tool_mask).tolist())

    def guidance_name(self, position: int) -> str | None:
        """The name the guidance sentence shows for the arm at `position` (control
        characters stripped, at most MAX_GUIDANCE_NAME characters); None for an arm that is
        not a tool or whose name is empty once cleaned. Worked out on first use per arm."""
        names = self._names
        if position in names:
            return names[position]
        arm = self.arms[position]
        name = _clean_name(arm.name) or None if arm.type is ArmType.TOOL else None
        names[position] = name
        return name

    def guidance_for(self, left_out: list[int]) -> str | None:
        """The guidance sentence for the tools at positions `left_out` (ascending), kept for
        the sets of excluded tools that come back."""
        key = tuple(left_out)
        sentences = self._sentences
        if key in sentences:
            return sentences[key]
        sentence = _guidance_sentence(map(self.guidance_name, left_out))
        if len(sentences) >= MAX_SENTENCES:
            sentences.clear()
        sentences[key] = sentence
        return sentence

    @property
    def guidance_names(self) -> tuple[str | None, ...]:
        """`guidance_name` of every arm."""
        return tuple(map(self.guidance_name, range(len(self.arms))))

    def _seed_info(self, seed_arm_ids: tuple[str, ...]) -> _Seeds:
        found = self._seeds.get(seed_arm_ids)
        if found is None:
            present = sorted({self._position(a) for a in seed_arm_ids if a in self._id_set})
            mask = np.zeros(len(self.arms), dtype=bool)
            mask[present] = True
            mask.flags.writeable = False
            found = _Seeds(mask, tuple(present), tuple(mask.tolist()))
            self._seeds[seed_arm_ids] = found
        return found

    def _position(self, arm_id: str) -> int:
        if "index" in self.__dict__ or len(self.ids) <= SMALL_INVENTORY:
            return self.index[arm_id]
        return self.ids.index(arm_id)  # a few seeds: cheaper than building the whole index

    def seed_mask(self, seed_arm_ids: tuple[str, ...]) -> BoolArray:
        """Which arms are seeds (read-only)."""
        return self._seed_info(seed_arm_ids).mask

    def align(self, posteriors: Mapping[str, PosteriorLike] | None) -> PosteriorArrays:
        """Posterior arrays in this set's order; arms without a posterior get their prior."""
        return align_posteriors(self, posteriors)


MAX_SENTENCES = 256
"""Guidance sentences an ArmSet keeps, by set of excluded tools."""

_TYPE_CODE = {kind: code for code, kind in enumerate(ArmType)}
_PRIOR_ALPHA = np.array([prior_parameters(kind)[0] for kind in ArmType], dtype=np.float64)
_PRIOR_BETA = np.array([prior_parameters(kind)[1] for kind in ArmType], dtype=np.float64)


MAX_ARM_SETS = 16
"""Inventories `ArmSetCache` keeps."""
MAX_CACHED_ARMS = 250_000
"""Arms `ArmSetCache` keeps over all its inventories (the newest inventory is always kept)."""


@dataclass(slots=True)
class _Known:
    """An inventory `ArmSetCache` keeps: its ArmSet, the Arm objects last seen for it (the
    identity check) and, for one read from JSON, a copy of the dicts it was read from."""

    arm_set: ArmSet
    arms: tuple[Arm, ...] | None
    source: list[dict[Any, Any]] | None = None
    cost_key: str | None = None
    has_included: bool = False
    zero_or_one: tuple[int, ...] = ()
    """Positions whose cost is 0 or 1 (which `false` and `true` equal)."""


class ArmSetCache:
    """The ArmSets of the last few inventories (an LRU), found again by a cheap fingerprint.

    A request repeats the inventory of the one before far more often than not, and building
    an ArmSet reads every arm in Python (about 20 ms at 100,000 arms). `for_arms` recognises
    the same Arm objects by identity, and other Arm objects by their ids and token costs, the
    only parts of an arm that selection reads; the set it returns keeps the arms it was built
    from in `arms`. `for_json` recognises a select body's `arms` array equal to one it read
    before (with its numbers of the same kinds, since JSON equality takes `true` for 1);
    anything else goes through `engine.records.arms_from_json`, with its checks and messages.
    Safe to share between threads: entries are replaced, never changed in place.
    """

    def __init__(self, size: int = MAX_ARM_SETS, max_arms: int = MAX_CACHED_ARMS) -> None:
        self._size = size
        self._max_arms = max_arms
        self._lock = threading.Lock()
        self._known: tuple[_Known, ...] = ()

    def clear(self) -> None:
        with self._lock:
            self._known = ()

    def for_arms(self, arms: Sequence[Arm]) -> ArmSet:
        """The ArmSet of a list of Arm, reused while the same ids and costs come back."""
        given = arms if type(arms) is tuple else tuple(arms)
        n = len(given)
        if n == 0:
            return ArmSet(given)
        known = [k for k in self._known if k.source is None and len(k.arm_set) == n]
        if not known:
            return self._add(_Known(ArmSet(given), given))
        for k in known:
            seen = k.arms
            if seen is not None and given[0] is seen[0] and given == seen:
                self._touch(k)
                return k.arm_set
        for kind in set(map(type, given)):
            if not issubclass(kind, Arm):
                raise InvalidInput(f"expected Arm objects, got {kind.__name__}")
        ids = tuple(map(_ID, given))
        costs: list[int] | None = None
        for k in known:
            arm_set = k.arm_set
            if ids == arm_set.ids:
                if costs is None:
                    costs = list(map(_COST, given))
                if costs == arm_set.cost_list:
                    self._replace(k, _Known(arm_set, given))
                    return arm_set
        return self._add(_Known(ArmSet(given), given))

    def for_json(self, data: Any, name: str = "arms") -> ArmSet:
        """The ArmSet of a select body's `arms` array (see `ArmSet.from_json`)."""
        if type(data) is list and data:
            n = len(data)
            for k in self._known:
                source = k.source
                if source is not None and len(source) == n and data == source:
                    if self._same_kinds(k, data):
                        self._touch(k)
                        return k.arm_set
                    break
        from engine.records import arms_from_json

        arms = arms_from_json(data, name)
        arm_set = self.for_arms(arms)
        if arms and type(data) is list:
            source = [dict(item) for item in data]
            shape = source[0].keys()
            if all(item.keys() == shape for item in source):
                key = next((c for c in ("tokenCost", "token_cost") if c in shape), None)
                costs = [] if key is None else [item[key] for item in source]
                suspects = tuple(i for i, cost in enumerate(costs) if cost in (0, 1))
                self._add(_Known(arm_set, None, source, key, "included" in shape, suspects))
        return arm_set

    @staticmethod
    def _same_kinds(known: _Known, data: list[Any]) -> bool:
        """Whether the values of `data` (equal to `known.source`) read as the source's did.
        Among the values JSON gives, only booleans compare equal to numbers (true == 1), and
        the arm checks refuse a boolean cost and a numeric `included`: so the costs where the
        source has 0 or 1 are looked at, and `included` when the arrays carry it."""
        key = known.cost_key
        if key is not None and any(type(data[i][key]) is bool for i in known.zero_or_one):
            return False
        return not known.has_included or set(map(type, map(_INCLUDED, data))) == {bool}

    def _touch(self, known: _Known) -> None:
        with self._lock:
            entries = self._known
            if entries and entries[0] is known:
                return
            self._known = (known, *(k for k in entries if k is not known))

    def _replace(self, old: _Known, new: _Known) -> None:
        with self._lock:
            self._known = (new, *(k for k in self._known if k is not old))

    def _add(self, new: _Known) -> ArmSet:
        with self._lock:
            kept = [new]
            total = len(new.arm_set)
            for k in self._known:
                size = len(k.arm_set)
                if len(kept) >= self._size or total + size > self._max_arms:
                    continue
                kept.append(k)
                total += size
            self._known = tuple(kept)
        return new.arm_set


_INCLUDED = itemgetter("included")

ARM_SETS = ArmSetCache()
"""The ArmSets of the inventories this process selected from lately."""


@dataclass(frozen=True, slots=True)
class _Seeds:
    mask: BoolArray
    positions: tuple[int, ...]
    flags: tuple[bool, ...]


class PosteriorLike(Protocol):
    """Anything with a posterior's alpha, beta and pulls (Posterior, a service's cache entry)."""

    @property
    def alpha(self) -> float: ...

    @property
    def beta(self) -> float: ...

    @property
    def pulls(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PosteriorArrays:
    """alpha, beta and pulls of every arm of an ArmSet, position for position."""

    alpha: FloatArray
    beta: FloatArray
    pulls: IntArray


_NAN = math.nan
_MISSING_TUPLE = (_NAN, _NAN, -1)
_MISSING_POSTERIOR = Posterior.trusted(_NAN, _NAN, -1, None)
_NUMBER_TYPES = frozenset({float, int, bool})

AnyPosteriors = Mapping[str, PosteriorLike] | Mapping[str, tuple[float, float, int]]


def align_posteriors(arm_set: ArmSet, posteriors: AnyPosteriors | None) -> PosteriorArrays:
    """PosteriorArrays for `arm_set` from a mapping arm id -> posterior, without a Python
    loop over the arms (one lookup per arm through `map`, arrays filled by `np.fromiter`).

    The values are either `(alpha, beta, pulls)` tuples or objects with `alpha`, `beta` and
    `pulls` attributes (a `Posterior`, a cache entry), all of one kind. Arms missing from the
    mapping get their type's prior and 0 pulls; keys that are not arms of the set are ignored.
    Tuples are checked (positive finite alpha and beta, whole pulls >= 0; InvalidInput
    otherwise); objects are trusted, as `Posterior` checks itself when it is made. The arrays
    are new: the caller may update them in place.

    When a set is aligned again to a mapping of immutable values (`Posterior` objects or
    tuples of numbers) with the same keys, only the values that are not the very objects
    of the last alignment are read: the same dict, unchanged or with a few posteriors
    replaced, costs a pass over its keys and values instead of a lookup per arm.
    """
    n = len(arm_set)
    if not posteriors or n == 0:
        return PosteriorArrays(
            arm_set.prior_alpha.copy(), arm_set.prior_beta.copy(), np.zeros(n, dtype=np.int64)
        )
    memo = arm_set._alignment
    if memo is not None:
        again = memo.realign(arm_set, posteriors)
        if again is not None:
            return again
    tuples = isinstance(next(iter(posteriors.values())), tuple)
    missing = _MISSING_TUPLE if tuples else _MISSING_POSTERIOR
    found = list(map(posteriors.get, arm_set.ids, repeat(missing)))
    alpha, beta, pulls = _read_posteriors(found, tuples, arm_set)
    arrays = PosteriorArrays(alpha, beta, pulls)
    if arm_set._aligned_once:
        arm_set._alignment = _Alignment.remember(arm_set, posteriors, tuples, arrays)
    arm_set._aligned_once = True
    return arrays


def _read_posteriors(
    found: Sequence[Any], tuples: bool, arm_set: ArmSet, at: IntArray | None = None
) -> tuple[FloatArray, FloatArray, IntArray]:
    """alpha, beta and pulls of `found` (tuples, or objects; the missing marker where an arm
    has none, which gets its prior), checked as `align_posteriors` describes. `found` holds
    the arms of `arm_set` at positions `at` (every arm when None)."""
    m = len(found)
    try:
        if tuples:
            rows = cast(Sequence[tuple[float, float, int]], found)
            table = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=3 * m)
            table = table.reshape(m, 3)
            alpha, beta = table[:, 0].copy(), table[:, 1].copy()
            raw_pulls = table[:, 2]
            pulls = raw_pulls.astype(np.int64)
            if not np.array_equal(pulls, raw_pulls):
                raise InvalidInput("pulls must be whole numbers")
        else:
            alpha = np.fromiter(map(_ALPHA, found), dtype=np.float64, count=m)
            beta = np.fromiter(map(_BETA, found), dtype=np.float64, count=m)
            pulls = np.fromiter(map(_PULLS, found), dtype=np.int64, count=m)
    except (TypeError, ValueError, AttributeError, OverflowError):
        raise InvalidInput(
            "posteriors must map arm ids to (alpha, beta, pulls) or to objects with alpha, "
            "beta and pulls, all of one kind"
        ) from None
    missing = pulls == -1
    missing &= np.isnan(alpha)
    if missing.any():  # the priors are worked out only now: most alignments miss no arm
        prior_alpha, prior_beta = arm_set.prior_alpha, arm_set.prior_beta
        if at is not None:
            prior_alpha, prior_beta = prior_alpha[at], prior_beta[at]
        alpha[missing] = prior_alpha[missing]
        beta[missing] = prior_beta[missing]
        pulls[missing] = 0
    if tuples and not (
        (alpha > 0.0).all()
        and (beta > 0.0).all()
        and np.isfinite(alpha).all()
        and np.isfinite(beta).all()
        and (pulls >= 0).all()
    ):  # objects were checked when they were made (Posterior) or come from storage
        raise InvalidInput("every posterior needs positive finite alpha and beta and pulls >= 0")
    return alpha, beta, pulls


def _immutable(values: Iterable[Any], tuples: bool) -> bool:
    """Whether every value is a `Posterior` (tuples False) or a tuple of plain numbers: a
    value that is the same object as before then still holds the same posterior."""
    if not tuples:
        return all(type(v) is Posterior for v in values)
    rows = list(values)
    return (
        all(type(v) is tuple for v in rows)
        and set(map(type, chain.from_iterable(rows))) <= _NUMBER_TYPES
    )


@dataclass(frozen=True, slots=True)
class _Alignment:
    """The last alignment of an ArmSet to a mapping of immutable values: its keys, its values
    (kept, so that their identities stay unique), where each key sits in the set (-1: not an
    arm of it) and the arrays read from them. Replaced, never changed in place."""

    keys: list[str]
    values: list[Any]
    value_ids: npt.NDArray[np.intp]
    positions: npt.NDArray[np.intp]
    tuples: bool
    arrays: PosteriorArrays

    @classmethod
    def remember(
        cls, arm_set: ArmSet, posteriors: AnyPosteriors, tuples: bool, arrays: PosteriorArrays
    ) -> _Alignment | None:
        values = list(posteriors.values())
        if not _immutable(values, tuples):
            return None
        keys = list(posteriors)
        index = arm_set.index
        positions = np.fromiter(map(index.get, keys, repeat(-1)), dtype=np.intp, count=len(keys))
        ids = np.fromiter(map(id, values), dtype=np.intp, count=len(values))
        kept = PosteriorArrays(arrays.alpha.copy(), arrays.beta.copy(), arrays.pulls.copy())
        return cls(keys, values, ids, positions, tuples, kept)

    def realign(self, arm_set: ArmSet, posteriors: AnyPosteriors) -> PosteriorArrays | None:
        """New arrays for `posteriors` from this alignment, or None when it does not apply
        (other keys, another kind of value, mutable values, or most values replaced)."""
        keys = self.keys
        if len(posteriors) != len(keys) or list(posteriors) != keys:
            return None
        values = list(posteriors.values())
        arrays = self.arrays
        if values != self.values:  # the same objects compare by identity, at C speed
            ids = np.fromiter(map(id, values), dtype=np.intp, count=len(values))
            changed = np.flatnonzero(ids != self.value_ids)
            if changed.size > len(values) // 4 or isinstance(values[0], tuple) != self.tuples:
                return None
            replaced = [values[k] for k in changed.tolist()]
            if not _immutable(replaced, self.tuples):
                return None
            where = self.positions[changed]
            inside = where >= 0
            alpha, beta, pulls = arrays.alpha.copy(), arrays.beta.copy(), arrays.pulls.copy()
            if inside.any():
                at = where[inside]
                rows = list(compress(replaced, inside.tolist()))
                a, b, p = _read_posteriors(rows, self.tuples, arm_set, at)
                alpha[at], beta[at], pulls[at] = a, b, p
            arrays = PosteriorArrays(alpha, beta, pulls)
            arm_set._alignment = _Alignment(keys, values, ids, self.positions, self.tuples, arrays)
        return PosteriorArrays(arrays.alpha.copy(), arrays.beta.copy(), arrays.pulls.copy())


class Selection:
    """Which arms go into the next prompt, and what that costs.

    `selected` and `excluded` list arm ids in inventory order; `is_baseline`, `token_budget`,
    `used_tokens`, `over_budget`, `fallback` and `guidance` are plain attributes. A selection
    made by `select_arms` keeps which arms it chose (a mask, or a list of flags on the
    small-inventory path) and builds the id tuples and the guidance on first use, so large
    inventories do not pay for lists nobody reads.
    """

    __slots__ = (
        "_arm_set",
        "_excluded",
        "_flags",
        "_guidance",
        "_mask",
        "_selected",
        "fallback",
        "is_baseline",
        "over_budget",
        "token_budget",
        "used_tokens",
    )

    def __init__(
        self,
        selected: Sequence[str],
        excluded: Sequence[str],
        is_baseline: bool,
        token_budget: int,
        used_tokens: int,
        over_budget: bool,
        fallback: str | None = None,
    ) -> None:
        self._selected: tuple[str, ...] | None = tuple(selected)
        self._excluded: tuple[str, ...] | None = tuple(excluded)
        self._arm_set: ArmSet | None = None
        self._mask: BoolArray | None = None
        self._flags: list[bool] | None = None
        self._guidance: str | None = ""  # "": not built yet (a sentence is never empty)
        self.is_baseline = is_baseline
        self.token_budget = token_budget
        self.used_tokens = used_tokens
        self.over_budget = over_budget
        self.fallback = fallback
        """Why every arm was included without selecting (passive, disabled, storage down...)."""

    @classmethod
    def _chosen(
        cls,
        arm_set: ArmSet,
        mask: BoolArray | None,
        flags: list[bool] | None,
        is_baseline: bool,
        token_budget: int,
        used_tokens: int,
        fallback: str | None,
    ) -> Selection:
        """A selection over `arm_set` given by a mask or by flags (one of the two)."""
        self = object.__new__(cls)
        self._selected = self._excluded = None
        self._arm_set = arm_set
        self._mask = mask
        self._flags = flags
        self._guidance = ""
        self.is_baseline = is_baseline
        self.token_budget = token_budget
        self.used_tokens = used_tokens
        self.over_budget = used_tokens > token_budget
        self.fallback = fallback
        return self

    @property
    def selected(self) -> tuple[str, ...]:
        if self._selected is None:
            arm_set = self._source()
            if self._flags is not None:
                self._selected = tuple(compress(arm_set.ids, self._flags))
            else:
                assert self._mask is not None
                self._selected = tuple(arm_set.id_array[self._mask].tolist())
        return self._selected

    @property
    def excluded(self) -> tuple[str, ...]:
        if self._excluded is None:
            arm_set = self._source()
            if self._flags is not None:
                self._excluded = tuple(compress(arm_set.ids, map(not_, self._flags)))
            else:
                assert self._mask is not None
                self._excluded = tuple(arm_set.id_array[~self._mask].tolist())
        return self._excluded

    @property
    def mask(self) -> BoolArray:
        """Which arms are selected, as booleans in inventory order (read-only).

        Only selections made by `select_arms` or `include_everything` carry it.
        """
        if self._mask is None:
            if self._flags is None:
                raise RuntimeError("this selection was built from id lists and has no arm mask")
            self._mask = np.array(self._flags, dtype=bool)
        view = self._mask.view()
        view.flags.writeable = False
        return view

    def _source(self) -> ArmSet:
        if self._arm_set is None:
            raise RuntimeError("selection has neither id tuples nor an arm set")
        return self._arm_set

    @property
    def guidance(self) -> str | None:
        """The system-prompt sentence naming excluded tools, or None."""
        if self._guidance == "":
            arm_set = self._arm_set
            if arm_set is None:
                self._guidance = excluded_tools_guidance(self.excluded)
            else:
                if self._flags is not None:
                    flags = self._flags
                    left_out = [i for i in arm_set.tool_positions if not flags[i]]
                else:
                    assert self._mask is not None
                    left_out = np.flatnonzero(arm_set.tool_mask & ~self._mask).tolist()
                self._guidance = arm_set.guidance_for(left_out)
        return self._guidance

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[Any, ...]:
        return (
            self.selected,
            self.excluded,
            self.is_baseline,
            self.token_budget,
            self.used_tokens,
            self.over_budget,
            self.fallback,
        )

    def __repr__(self) -> str:
        return (
            f"Selection(selected={len(self.selected)} arms, excluded={len(self.excluded)} arms, "
            f"is_baseline={self.is_baseline}, token_budget={self.token_budget}, "
            f"used_tokens={self.used_tokens}, over_budget={self.over_budget}, "
            f"fallback={self.fallback!r})"
        )


Taken = list[IntArray | list[int]]
"""Index arrays (or lists) of the arms a packing pass took."""

PACK_IN_PYTHON_BELOW = 48
"""`_pack` finishes in a plain loop once this few candidates are left."""


def _pack(order: IntArray, costs: IntArray, room: int) -> tuple[Taken, int]:
    """Greedy packing in `order`: take each arm that still fits, skip the ones that do not.

    Vectorised: take the longest prefix that fits, skip the first arm that does not, and drop
    every later arm dearer than what is left (it can never fit again: room only shrinks); the
    last few candidates go through a plain loop. Returns the chosen indices and their tokens.
    """
    taken: Taken = []
    used = 0
    cand = order
    left = costs[cand]
    while cand.size and room >= 0:
        if cand.size < PACK_IN_PYTHON_BELOW:
            picked = []
            for i, cost in zip(cand.tolist(), left.tolist(), strict=True):
                if cost <= room:
                    picked.append(i)
                    room -= cost
                    used += cost
            taken.append(picked)
            break
        csum = left.cumsum()
        fit = int(csum.searchsorted(room, "right"))
        if fit:
            taken.append(cand[:fit])
            spent = int(csum[fit - 1])
            room -= spent
            used += spent
        if fit + 1 >= cand.size:
            break
        keep = left[fit + 1 :] <= room
        cand = cand[fit + 1 :][keep]
        left = left[fit + 1 :][keep]
    return taken, used


def _ascending(key: FloatArray) -> IntArray:
    """argsort of `key` with ties in index order. numpy's stable sort of floats costs several
    times its default sort, and Thompson draws rarely tie: sort fast, and sort again stably
    only when two neighbours are equal."""
    order = key.argsort()
    ranked = key[order]
    if (ranked[1:] == ranked[:-1]).any():
        order = np.argsort(key, kind="stable")
    return order


BUCKETED_FROM = 256
"""From this many candidates on, `_pack_ranked` sorts them into rank buckets instead of
sorting them (measured: bench/select.py)."""

BUCKET_OCTAVES = 32
"""Rank buckets cover this many halvings below the best rank; lower ranks share the last."""

_LOWEST_BUCKETED_TOP = 2.0**-512
"""`_pack_ranked` buckets only when the best rank is at least this (and finite)."""

BUCKETED_UP_TO = 2**53 // MAX_TOKEN_COST
"""The most candidates `_pack_ranked` buckets: the tokens per bucket are summed in float64,
exact while the sum of every candidate's cost stays below 2**53."""

SORT_IN_PYTHON_BELOW = 48
"""`_greedy` sorts and packs in plain Python below this many arms."""


def _greedy(
    cand: IntArray, rank: FloatArray, cand_costs: IntArray, costs: IntArray, room: int, taken: Taken
) -> int:
    """The greedy pass over `cand` in descending `rank` (ties in position order): appends the
    arms taken to `taken` and returns their tokens. `rank` and `cand_costs` are per
    candidate, `costs` per arm."""
    if cand.size >= SORT_IN_PYTHON_BELOW:
        more, used = _pack(cand[_ascending(-rank)], costs, room)
        taken.extend(more)
        return used
    ids = cand.tolist()
    tokens = cand_costs.tolist()
    ranks = rank.tolist()
    picked = []
    used = 0
    cheapest = min(tokens, default=0)
    # sorted(reverse=True) keeps equal keys in their original order
    for k in sorted(range(len(ids)), key=ranks.__getitem__, reverse=True):
        cost = tokens[k]
        if cost <= room:
            picked.append(ids[k])
            room -= cost
            used += cost
            if room < cheapest:
                break
    taken.append(picked)
    return used


def _rank_buckets(rank: FloatArray, best: np.float64, first: int = 0) -> tuple[IntArray, int]:
    """Each rank's bucket (see `_pack_ranked`), counted from `first` for `best` (the highest
    rank, finite and at least _LOWEST_BUCKETED_TOP), and the number of the last bucket."""
    fine = min(max(rank.size.bit_length() - 7, 0), 9)
    shift = 52 - fine
    last = (BUCKET_OCTAVES << fine) + first
    # unsigned: a negative rank's bits wrap to a difference beyond the last bucket
    bucket = np.subtract(int(best.view(np.uint64)) + (first << shift), rank.view(np.uint64))
    bucket >>= shift
    np.minimum(bucket, last, out=bucket)
    return bucket.view(np.int64), last


def _pack_ranked(
    candidates: IntArray,
    rank: FloatArray,
    costs: IntArray,
    room: int,
    candidate_costs: IntArray | None = None,
) -> tuple[Taken, int]:
    """`_pack` over `candidates` in descending `rank` (ties in index order), without sorting
    them. `candidate_costs`, when given, is `costs[candidates]`.

    The greedy pass takes every arm of a run of best arms that fits the room together, in
    whatever order they come; only where the room runs out does the order matter. So the
    ranks go into buckets of constant ratio below the best one: a non-negative float's bit
    pattern, read as an integer, grows with the float and its top bits are its binary
    logarithm, so `(bits(best) - bits(rank)) >> shift` is the bucket (0 holds the best
    rank, 2**fine buckets per halving, everything BUCKET_OCTAVES halvings down, zero and
    negative ranks included, in the last). A better rank never lands in a later bucket.
    The tokens per bucket, summed in order, show the first bucket that does not fit whole:
    every arm before it is taken, that bucket is packed exactly (sorted), and after it only
    the arms of later buckets no dearer than the room left can still go in; they are packed
    the same way. A best rank that is infinite, NaN, zero or negative (a free arm ranked by
    score per token) falls back to sorting."""
    taken: Taken = []
    used = 0
    cand = candidates
    rk = rank[cand]
    cc = costs[cand] if candidate_costs is None else candidate_costs
    while BUCKETED_FROM <= cand.size <= BUCKETED_UP_TO and room >= 0:
        best = rk.max()
        if not _LOWEST_BUCKETED_TOP <= best < math.inf:
            break
        bucket, last = _rank_buckets(rk, best)
        through = np.bincount(bucket, cc, last + 1).cumsum()
        if through[-1] <= room:  # everything fits
            taken.append(cand)
            return taken, used + int(through[-1])
        first = int(through.searchsorted(room, "right"))
        if first:
            spent = int(through[first - 1])
            taken.append(cand[bucket < first])
            used += spent
            room -= spent
        at = (bucket == first).nonzero()[0]
        spent = _greedy(cand[at], rk[at], cc[at], costs, room, taken)
        used += spent
        room -= spent
        fits = cc <= room
        fits &= bucket > first
        later = fits.nonzero()[0]
        cand, rk, cc = cand[later], rk[later], cc[later]
    if cand.size and room >= 0:
        used += _greedy(cand, rk, cc, costs, room, taken)
    return taken, used


def _pack_inventory(
    rank: FloatArray, forced: BoolArray, costs: IntArray, budget: int
) -> tuple[BoolArray, int] | None:
    """`_select_vectorised`'s packing in one pass over the whole inventory: the forced arms
    go into a bucket of their own ahead of every rank bucket, so they are taken first
    whatever their rank and the rest are packed as `_pack_ranked` packs them, without
    gathering the candidates first. Returns the mask of the arms taken and their tokens, or
    None when the ranks cannot be bucketed."""
    if not BUCKETED_FROM <= rank.size <= BUCKETED_UP_TO:
        return None
    best = rank.max()
    if not _LOWEST_BUCKETED_TOP <= best < math.inf:
        return None
    bucket, last = _rank_buckets(rank, best, first=1)
    bucket[forced] = 0
    through = np.bincount(bucket, costs, last + 1).cumsum()
    if through[-1] <= budget:  # everything fits
        return np.ones(rank.size, dtype=bool), int(through[-1])
    first = int(through.searchsorted(budget, "right"))
    if not first:  # the forced arms alone are over budget: nothing else fits
        return forced.copy(), int(through[0])
    mask = bucket < first
    used = int(through[first - 1])
    room = budget - used
    taken: Taken = []
    at = (bucket == first).nonzero()[0]
    spent = _greedy(at, rank[at], costs[at], costs, room, taken)
    used += spent
    room -= spent
    fits = costs <= room
    fits &= bucket > first
    later = fits.nonzero()[0]
    if later.size:
        more, extra = _pack_ranked(later, rank, costs, room)
        taken.extend(more)
        used += extra
    for chosen in taken:
        mask[chosen] = True
    return mask, used


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


def discounted(
    posteriors: PosteriorArrays,
    prior_alpha: FloatArray,
    prior_beta: FloatArray,
    elapsed: float | FloatArray | IntArray,
    half_life: float,
) -> PosteriorArrays:
    """Posteriors after `elapsed` observations of forgetting: evidence halves every `half_life`.

    Each arm keeps its posterior mean while the weight of what it learned beyond its prior,
    (alpha + beta) - (prior_alpha + prior_beta), is scaled by 0.5 ** (elapsed / half_life):
    the posterior widens, so Thompson draws try the arm again and new observations outweigh
    old ones, but an arm the learner has seen to be rarely used is not pushed back up to its
    (optimistic) prior mean. A posterior no stronger than its prior is left as it is. `pulls`
    still counts observations (confidence and `min_pulls` read it) and is returned unchanged.
    Applying it for k observations and then m equals applying it once for k + m. `elapsed`
    may be one number for every arm or an array with one per arm (each arm's observations
    since its posterior was last brought up to date).
    """
    if isinstance(half_life, bool) or not half_life > 0 or not np.isfinite(half_life):
        raise InvalidInput(f"half_life must be a positive number, got {half_life!r}")
    if isinstance(elapsed, bool):
        raise InvalidInput(f"elapsed must be a number >= 0, got {elapsed!r}")
    steps = np.asarray(elapsed, dtype=np.float64)
    if not (np.isfinite(steps).all() and (steps >= 0).all()):
        raise InvalidInput(f"elapsed must be a number >= 0 (or one per arm), got {elapsed!r}")
    keep = 0.5 ** (steps / float(half_life))
    total = posteriors.alpha + posteriors.beta
    floor = prior_alpha + prior_beta
    weight = np.where(total > floor, floor + (total - floor) * keep, total)
    mean = posteriors.alpha / total
    return PosteriorArrays(mean * weight, (1.0 - mean) * weight, posteriors.pulls.copy())


def include_everything(
    arms: Sequence[Arm] | ArmSet, config: LearningConfig, reason: str
) -> Selection:
    """Every arm in, nothing excluded; `reason` says why no selection took place."""
    arm_set = ArmSet.of(arms)
    mask = np.ones(len(arm_set), dtype=bool)
    return Selection._chosen(
        arm_set, mask, None, False, config.token_budget, arm_set.total_cost, reason
    )


def select_arms(
    arms: Sequence[Arm] | ArmSet,
    posteriors: Mapping[str, Posterior] | PosteriorArrays | None,
    config: LearningConfig,
    rng: np.random.Generator | int | None = None,
) -> Selection:
    """Choose the arms of the next prompt (SPEC section 4).

    Passive phase or disabled learning: everything is included. Otherwise a `baseline_rate`
    coin flip makes a baseline run (seeds, then every other arm in a random order from `rng`,
    greedy up to the budget); else each arm's score is drawn from its posterior in one
    vectorised draw, seeds and under-explored arms are always included, and the rest are
    packed greedily by score, highest first (ties in inventory order). Seeds are never
    excluded, not even in a baseline run.

    Four options of `config` change the Thompson runs only: `exploration` below 1 narrows
    the draw around each posterior mean, `pooled_prior` draws each score under a prior fitted
    to all arms' evidence (`_pooled_scores`) instead of the arm's own posterior alone,
    `packing="score_per_token"` ranks the rest by score / token cost instead of score, and
    `min_score` leaves out every arm of the rest whose score falls below it, however much
    budget is left. Their defaults are the SPEC behaviour.

    Inventories below SMALL_INVENTORY arms are ranked and packed in plain Python, larger ones
    with array operations; both take the same draws from `rng` in the same order and make the
    same selection.
    """
    arm_set = ArmSet.of(arms)
    if not config.enabled:
        return include_everything(arm_set, config, "learning is disabled")
    if config.phase is not Phase.ACTIVE:
        return include_everything(arm_set, config, "passive phase")
    gen = as_generator(rng)
    n = len(arm_set)
    if isinstance(posteriors, PosteriorArrays):
        post = posteriors
        if post.alpha.shape != (n,):
            raise InvalidInput(f"posterior arrays hold {post.alpha.shape[0]} arms, expected {n}")
    else:
        post = align_posteriors(arm_set, posteriors)
    if n == 0:
        return Selection._chosen(arm_set, None, [], False, config.token_budget, 0, None)
    if n < SMALL_INVENTORY:
        return _select_small(arm_set, post, config, gen)
    return _select_vectorised(arm_set, post, config, gen)


def _draw(post: PosteriorArrays, config: LearningConfig, gen: np.random.Generator) -> FloatArray:
    if config.pooled_prior:
        return _pooled_scores(post, config.exploration, gen)
    return _scores(post, config.exploration, gen)


def _select_vectorised(
    arm_set: ArmSet, post: PosteriorArrays, config: LearningConfig, gen: np.random.Generator
) -> Selection:
    """select_arms with array operations, for large inventories."""
    costs = arm_set.costs
    seeds = arm_set._seed_info(config.seed_arm_ids)
    budget = config.token_budget
    if gen.random() < config.baseline_rate:
        forced = seeds.mask
        rest = (~forced).nonzero()[0]
        rest = rest[gen.permutation(rest.size)]
        forced_cost = int(costs[forced].sum()) if seeds.positions else 0
        taken, packed = _pack(rest, costs, budget - forced_cost)
        return _masked(arm_set, forced, taken, True, budget, forced_cost + packed)
    scores = _draw(post, config, gen)
    forced = post.pulls < config.min_pulls
    if seeds.positions:
        forced |= seeds.mask
    rank = scores if config.packing == "score" else scores * arm_set.per_token
    if config.min_score <= 0.0:
        whole = _pack_inventory(rank, forced, costs, budget)
        if whole is not None:
            return Selection._chosen(arm_set, whole[0], None, False, budget, whole[1], None)
    eligible = ~forced
    if config.min_score > 0.0:
        eligible &= scores >= config.min_score
        rest = eligible.nonzero()[0]
        rest_costs = costs[rest]
        forced_cost = int(costs[forced].sum())
    else:
        rest = eligible.nonzero()[0]
        rest_costs = costs[rest]
        forced_cost = arm_set.total_cost - int(rest_costs.sum())
    taken, packed = _pack_ranked(rest, rank, costs, budget - forced_cost, rest_costs)
    return _masked(arm_set, forced, taken, False, budget, forced_cost + packed)


def _masked(
    arm_set: ArmSet, forced: BoolArray, taken: Taken, is_baseline: bool, budget: int, used: int
) -> Selection:
    mask = forced.copy()
    for chosen in taken:
        mask[chosen] = True
    return Selection._chosen(arm_set, mask, None, is_baseline, budget, used, None)


def _select_small(
    arm_set: ArmSet, post: PosteriorArrays, config: LearningConfig, gen: np.random.Generator
) -> Selection:
    """select_arms for a small inventory: the same draws as `_select_vectorised`, then
    ranking and greedy packing over Python lists (a stable sort: ties in inventory order)."""
    n = len(arm_set.ids)
    costs = arm_set.cost_list
    seeds = arm_set._seed_info(config.seed_arm_ids)
    budget = config.token_budget
    flags = [False] * n
    room = budget
    for i in seeds.positions:
        flags[i] = True
        room -= costs[i]
    is_baseline = bool(gen.random() < config.baseline_rate)
    if is_baseline:
        rest = list(compress(range(n), map(not_, flags)))
        rest = [rest[j] for j in gen.permutation(len(rest)).tolist()]
    else:
        scores = _draw(post, config, gen)
        if config.packing == "score":
            rank: list[float] = scores.tolist()
        else:
            weighted = scores * arm_set.per_token
            if arm_set.has_free_arm:
                # a free arm scored 0 ranks NaN (0 * inf): last, where numpy's sort puts it
                weighted = np.where(np.isnan(weighted), -np.inf, weighted)
            rank = weighted.tolist()
        min_pulls = config.min_pulls
        if min_pulls > 0:
            for i, pulls in enumerate(post.pulls.tolist()):
                if pulls < min_pulls and not flags[i]:
                    flags[i] = True
                    room -= costs[i]
        rest = list(compress(range(n), map(not_, flags)))
        if config.min_score > 0.0:
            below = (scores < config.min_score).tolist()
            rest = [i for i in rest if not below[i]]
        rest.sort(key=rank.__getitem__, reverse=True)
    cheapest = arm_set.cheapest
    if room >= cheapest:
        for i in rest:
            cost = costs[i]
            if cost <= room:
                flags[i] = True
                room -= cost
                if room < cheapest:
                    break
    return Selection._chosen(arm_set, None, flags, is_baseline, budget, budget - room, None)


def _clean_name(name: str) -> str:
    return strip_controls(name, "").strip()[:MAX_GUIDANCE_NAME]


@lru_cache(maxsize=16384)
def _excluded_tool_name(arm_id: str) -> str | None:
    """The name the guidance shows for an excluded id, or None when it is not a tool's."""
    try:
        parsed = parse_arm_id(strip_controls(arm_id, ""))
    except InvalidArmId:
        return None
    if parsed.type is not ArmType.TOOL:
        return None
    return _clean_name(parsed.name) or None


def _guidance_sentence(names: Iterable[str | None]) -> str | None:
    shown = [name for name in dict.fromkeys(names) if name]
    if not shown:
        return None
    listed = ", ".join(shown)
    return (
        f"The following tools are not available for this request: {listed}. "
        "If the user asks for something that needs one of them, explain that the capability "
        "is temporarily unavailable and suggest an alternative."
    )


def excluded_tools_guidance(excluded_ids: Iterable[str]) -> str | None:
    """A sentence for the system prompt naming unavailable tools, or None when none is excluded."""
    return _guidance_sentence(
        _excluded_tool_name(arm_id) for arm_id in excluded_ids if isinstance(arm_id, str)
    )
