"""The one rule for characters that must not reach a prompt, a terminal or a chat message.

A *control character* here is any character of the Unicode categories

- ``Cc`` (C0/C1 controls: NUL, ESC, CR, LF, TAB, DEL...),
- ``Cf`` (format: zero-width joiners and spaces, bidirectional overrides, soft hyphen...),
- ``Cs`` (lone surrogates, which no encoder can write),
- ``Zl`` and ``Zp`` (line and paragraph separators),

that is, everything that can move a cursor, reorder or hide text, or break an encoder. Every
layer strips or refuses them through this module, so the set is the same everywhere.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""The Unicode general categories this module treats as control characters."""


@lru_cache(maxsize=4096)
def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in CONTROL_CATEGORIES


def has_controls(text: str, keep: str = "") -> bool:
    """Whether `text` holds a control character other than those in `keep`."""
    if text.isascii() and text.isprintable():
        return False
    return any(_is_control(ch) and ch not in keep for ch in text)


def strip_controls(text: str, replacement: str = " ", keep: str = "") -> str:
    """`text` with every control character (except those in `keep`) replaced by
    `replacement` ("" drops them). Plain printable ASCII is returned as it is, at once."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(replacement if _is_control(ch) and ch not in keep else ch for ch in text)
