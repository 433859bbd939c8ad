"""How a message word feature is shown in explanations: the word as users write it.

A feature is stored as a hash (engine.context.feature_hash) and learned under the word's
matched form ("staging" is matched as "stag"), so neither can be shown as such. `DisplayWords`
keeps, per word feature, the forms it was written in (lower-cased, one word each, never a
message) with how often, and names the feature by the most common one. It is bounded: at most
`max_features` features, the least recently seen forgotten first, and MAX_FORMS forms each.

A learner's written forms are shared by its replicas where the store keeps them (the
ContextWords port): each process counts what its observes saw and adds those counts to the
stored ones now and then (`pending`), and an explanation reads the stored forms of the features
it names. Counts not yet added when a process stops are lost; they only ever name a word.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

MAX_DISPLAY_FEATURES = 100_000
"""Word features whose written forms are kept at most, in memory and in storage per learner."""
MAX_FORMS = 4
"""Written forms counted per feature at most (the rarer ones give way)."""
SHARE_EVERY = 32
"""Observes between two additions of a process's counts to the stored ones."""

WrittenForm = tuple[int, str]
"""A word feature and a form it was written in."""


class DisplayWords:
    """Per word feature, its written forms and how often each was seen (module docstring)."""

    def __init__(self, max_features: int = MAX_DISPLAY_FEATURES) -> None:
        if max_features < 1:
            raise ValueError(f"max_features must be >= 1, got {max_features!r}")
        self.max_features = max_features
        self._forms: dict[int, dict[str, int]] = {}
        self._pending: dict[WrittenForm, int] = {}
        self._notes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._forms)

    def note(self, seen: Iterable[WrittenForm], times: int = 1) -> None:
        """Count each (feature, written form) `times` more (and as not yet shared)."""
        with self._lock:
            self._notes += 1
            forms = self._forms
            for feature, form in seen:
                counts = forms.pop(feature, None)  # re-inserted last: dict order is recency
                if counts is None:
                    counts = {}
                if form in counts:
                    counts[form] += times
                elif len(counts) < MAX_FORMS:
                    counts[form] = times
                else:
                    rarest = min(counts, key=lambda f: (counts[f], f))
                    if counts[rarest] <= times:
                        del counts[rarest]
                        counts[form] = times
                forms[feature] = counts
                if len(self._pending) < self.max_features or (feature, form) in self._pending:
                    self._pending[(feature, form)] = self._pending.get((feature, form), 0) + times
            while len(forms) > self.max_features:
                del forms[next(iter(forms))]

    def form(self, feature: int) -> str | None:
        """The feature's most common written form (ties: the first in alphabetical order);
        None when it was never seen."""
        with self._lock:
            counts = self._forms.get(feature)
            return most_common(counts) if counts else None

    def forms(self, features: Sequence[int]) -> dict[int, str]:
        """`form` of each of the features seen."""
        out = {}
        for feature in features:
            word = self.form(feature)
            if word is not None:
                out[feature] = word
        return out

    def pending(self, every: int = SHARE_EVERY) -> dict[WrittenForm, int]:
        """The counts not yet shared, taken (the next call starts again from none), once
        `every` notes were made since the last time (0: now); else none."""
        with self._lock:
            if self._notes < every or not self._pending:
                return {}
            taken, self._pending, self._notes = self._pending, {}, 0
            return taken

    def unshared(self, counts: Mapping[WrittenForm, int]) -> None:
        """Counts taken by `pending` that could not be shared: kept for the next time."""
        with self._lock:
            for key, n in counts.items():
                if len(self._pending) < self.max_features or key in self._pending:
                    self._pending[key] = self._pending.get(key, 0) + n


def most_common(counts: Mapping[str, float]) -> str:
    """The form seen most often (ties: the first in alphabetical order)."""
    return min(counts, key=lambda f: (-counts[f], f))


def share(written: DisplayWords, store: object, learner_id: int, every: int = SHARE_EVERY) -> None:
    """Add this process's counts not yet shared to the stored ones, once every `every` notes,
    when the store keeps them (the ContextWords port); storage unavailable: the next time."""
    from learning_bot.engine.errors import Unavailable
    from learning_bot.engine.ports import ContextWords

    if not isinstance(store, ContextWords):
        return
    counts = written.pending(every)
    if not counts:
        return
    try:
        store.add_context_words(learner_id, counts, written.max_features)
    except Unavailable:
        written.unshared(counts)


def namer(
    written: DisplayWords, store: object, learner_id: int
) -> Callable[[Sequence[int]], Mapping[int, str]]:
    """The written forms of given features, for an explanation: the stored ones (every
    replica's counts, this process's added first) where the store keeps them, else this
    process's; a feature without a stored form, or storage unavailable, falls back to this
    process's."""
    from learning_bot.engine.errors import Unavailable
    from learning_bot.engine.ports import ContextWords

    def forms(features: Sequence[int]) -> Mapping[int, str]:
        local = written.forms(features)
        if not isinstance(store, ContextWords):
            return local
        try:
            share(written, store, learner_id, every=0)
            stored = store.context_words(learner_id, features)
        except Unavailable:
            return local
        return {**local, **stored}

    return forms
