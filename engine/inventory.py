"""An arm inventory compiled into arrays (`ArmSet`), the cache that finds the set of an
inventory seen lately (`ArmSetCache`), and the alignment of posteriors to a set's order
(`align_posteriors`, `PosteriorArrays`)."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from learning_bot.engine.arms import Arm, ArmType
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.guidance import clean_name, guidance_sentence
from learning_bot.engine.posterior import Posterior, prior_parameters

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

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
        self._seeds: dict[tuple[str, ...], Seeds] = {}
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
        content?}, ...], as `engine.report_json.arms_from_json` reads it, with its checks and
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
        name = clean_name(arm.name) or None if arm.type is ArmType.TOOL else None
        names[position] = name
        return name

    def guidance_for(self, left_out: list[int]) -> str | None:
        """The guidance sentence for the tools at positions `left_out` (ascending), kept for
        the sets of excluded tools that come back."""
        key = tuple(left_out)
        sentences = self._sentences
        if key in sentences:
            return sentences[key]
        sentence = guidance_sentence(map(self.guidance_name, left_out))
        if len(sentences) >= MAX_SENTENCES:
            sentences.clear()
        sentences[key] = sentence
        return sentence

    @property
    def guidance_names(self) -> tuple[str | None, ...]:
        """`guidance_name` of every arm."""
        return tuple(map(self.guidance_name, range(len(self.arms))))

    def seed_info(self, seed_arm_ids: tuple[str, ...]) -> Seeds:
        found = self._seeds.get(seed_arm_ids)
        if found is None:
            present = sorted({self._position(a) for a in seed_arm_ids if a in self._id_set})
            mask = np.zeros(len(self.arms), dtype=bool)
            mask[present] = True
            mask.flags.writeable = False
            found = Seeds(mask, tuple(present))
            self._seeds[seed_arm_ids] = found
        return found

    def _position(self, arm_id: str) -> int:
        if "index" in self.__dict__ or len(self.ids) <= SMALL_INVENTORY:
            return self.index[arm_id]
        return self.ids.index(arm_id)  # a few seeds: cheaper than building the whole index

    def seed_mask(self, seed_arm_ids: tuple[str, ...]) -> BoolArray:
        """Which arms are seeds (read-only)."""
        return self.seed_info(seed_arm_ids).mask

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
    anything else goes through `engine.report_json.arms_from_json`, with its checks and messages.
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
            if (
                seen is not None
                and given[0] is seen[0]
                and (all(map(is_, given, seen)) or (given == seen and _same_texts(given, seen)))
            ):
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
                if costs == arm_set.cost_list and _same_texts(given, arm_set.arms):
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
        from learning_bot.engine.report_json import arms_from_json

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


def _same_texts(given: Sequence[Arm], seen: Sequence[Arm]) -> bool:
    """Whether equal arms (id, cost, label) also carry the same description and content, which
    Arm equality leaves out: an inventory whose tool descriptions changed is another inventory
    for lexical relevance (engine.context_policy), not the one seen before. (The same Arm
    objects again, a runtime's inventory list kept between requests, are told apart before:
    one pass of `is`, without a Python frame per arm.)"""
    return all(
        a is b or (a.description == b.description and a.content == b.content)
        for a, b in zip(given, seen, strict=True)
    )


ARM_SETS = ArmSetCache()
"""The ArmSets of the inventories this process selected from lately."""


@dataclass(frozen=True, slots=True)
class Seeds:
    """An ArmSet's seed arms for one list of seed ids: as a mask, and their positions."""

    mask: BoolArray
    positions: tuple[int, ...]


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
