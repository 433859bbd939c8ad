"""How a message word feature is shown in explanations: the word as users write it.

A feature is stored as a hash (engine.context.feature_hash) and learned under the word's
matched form ("staging" is matched as "stag"), so neither can be shown as such. `DisplayWords`
keeps, per word feature, the surface forms it was seen in (lower-cased, one word each, never a
message) with how often, and names the feature by the most common one. It is bounded: at most
`max_features` features, the least recently seen forgotten first, and a few forms each.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

MAX_DISPLAY_FEATURES = 100_000
"""Word features whose written form is kept at most (about 10 MB at the bound)."""
MAX_FORMS = 4
"""Written forms counted per feature at most (the rarer ones give way)."""


class DisplayWords:
    """Per word feature, its written forms and how often each was seen (module docstring)."""

    def __init__(self, max_features: int = MAX_DISPLAY_FEATURES) -> None:
        if max_features < 1:
            raise ValueError(f"max_features must be >= 1, got {max_features!r}")
        self.max_features = max_features
        self._forms: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._forms)

    def note(self, seen: Iterable[tuple[int, str]], times: int = 1) -> None:
        """Count each (feature, written form) `times` more."""
        with self._lock:
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
            while len(forms) > self.max_features:
                del forms[next(iter(forms))]

    def form(self, feature: int) -> str | None:
        """The feature's most common written form (ties: the first in alphabetical order);
        None when it was never seen."""
        with self._lock:
            counts = self._forms.get(feature)
            if not counts:
                return None
            return min(counts, key=lambda f: (-counts[f], f))

    def counts(self, feature: int) -> Mapping[str, int]:
        """The feature's written forms and how often each was seen."""
        with self._lock:
            return dict(self._forms.get(feature, {}))


WRITTEN = DisplayWords()
"""The process's written forms of message words (engine.context notes them as features are
made)."""
