"""Finding an arm from what a person typed: a full id or a label, with a did-you-mean."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.errors import Ambiguous, InvalidArmId, NotFound

MAX_QUERY_CHARS = 512


def _shown(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def ambiguous(query: str, candidates: list[str]) -> Ambiguous:
    shown = ", ".join(candidates[:10]) + (
        f" and {len(candidates) - 10} more" if len(candidates) > 10 else ""
    )
    return Ambiguous(
        f"{_shown(query)!r} matches {len(candidates)} arms: {shown}; use the full arm id",
        tuple(candidates),
    )


def resolve_arm_query(query: str, labels: Mapping[str, str]) -> str:
    """The arm id `query` names among `labels` (arm id -> label): the exact id, then an exact
    last segment or label (case-sensitive, then not), then a unique case-insensitive
    substring. Several matches raise Ambiguous listing them; none raises NotFound with the
    closest names."""
    if query in labels:
        return query
    try:
        parse_arm_id(query)
        looks_like_id = True
    except InvalidArmId:
        looks_like_id = False
    exact = sorted(
        aid for aid, label in labels.items() if label == query or aid.rsplit(":", 1)[-1] == query
    )
    if not exact:
        q = query.casefold()
        exact = sorted(
            aid
            for aid, label in labels.items()
            if label.casefold() == q or aid.rsplit(":", 1)[-1].casefold() == q
        )
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        raise ambiguous(query, exact)
    q = query.casefold()
    partial = sorted(
        aid for aid, label in labels.items() if q in aid.casefold() or q in label.casefold()
    )
    if len(partial) == 1 and not looks_like_id:
        return partial[0]
    if len(partial) > 1:
        raise ambiguous(query, partial)
    names = {aid.rsplit(":", 1)[-1]: aid for aid in labels}
    close = difflib.get_close_matches(query, list(names) + list(labels), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(names.get(c, c) for c in close)}?" if close else ""
    raise NotFound(f"unknown arm {_shown(query)!r}{hint}")
