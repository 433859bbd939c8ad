"""A task-type workload whose task words are written as users write technical words: `k8s`,
`s3`, `ec2`, `gpt4o`, `x86` (bench/learning.py --context).

`alphanumeric(arms, sessions)` rewrites a workload of research.context_simulation's
`task_type_workload`: each task type's own words (every word of the messages and tool
descriptions that is not one of the common words) becomes an alphanumeric word, the same word
everywhere it occurs, so the workload is the same but for how its task words are written. The
words come in the shapes such words have: letters around a digit (`k8s`), a letter and a digit
(`s3`, `v2`), a short prefix shared by several types and a digit (`ec2`, `gpt4o`).

Run as a script, it times the word splitter (engine.context.words) on a 48-word message, and
on one whose words were never seen (the split of each identifier is memoised).

    .venv/bin/python -m bench.context_words
"""

from __future__ import annotations

import timeit
from collections.abc import Sequence
from dataclasses import replace

from learning_bot.engine.arms import Arm
from learning_bot.research.context_simulation import ContextSession, ContextTurn
from learning_bot.research.task_types import GENERIC_WORDS

WELL_KNOWN = (
    "k8s",
    "s3",
    "ec2",
    "gpt4o",
    "v2",
    "x86",
    "i18n",
    "a11y",
    "oauth2",
    "http2",
    "sha256",
    "ipv6",
    "utf8",
    "mp4",
    "e2e",
    "h264",
)
PREFIXES = ("ec", "gpt", "db", "vm", "api", "sql")


def alphanumeric_words(count: int) -> list[str]:
    """`count` distinct alphanumeric words: the well-known ones, then words of the three
    shapes in turn."""
    out = list(dict.fromkeys(WELL_KNOWN))[:count]
    taken = set(out)
    k = 0
    while len(out) < count:
        if k > 100_000:
            raise ValueError(f"the shapes hold fewer than {count} words")
        shape = k % 3
        if shape == 0:
            word = f"{chr(97 + (k * 7) % 26)}{k % 9 + 1}{chr(97 + (k * 11 + 3) % 26)}"
        elif shape == 1:
            word = f"{chr(97 + (k * 5) % 26)}{k % 9 + 1}"
        else:
            word = f"{PREFIXES[(k // 3) % len(PREFIXES)]}{k // 18 % 9 + 1}"
            word += chr(97 + k % 26) if k % 2 else ""
        if word not in taken:
            taken.add(word)
            out.append(word)
        k += 1
    return out


def alphanumeric(
    arms: Sequence[Arm], sessions: Sequence[ContextSession]
) -> tuple[list[Arm], list[ContextSession]]:
    """The workload with every task word written as an alphanumeric word (module docstring)."""
    common = set(GENERIC_WORDS)
    texts = [a.description or "" for a in arms]
    texts += [t.message for s in sessions for t in s.turns]
    task = list(dict.fromkeys(w for text in texts for w in text.split() if w not in common))
    mapping = dict(zip(task, alphanumeric_words(len(task)), strict=True))

    def rewrite(text: str) -> str:
        return " ".join(mapping.get(w, w) for w in text.split())

    new_arms = [replace(a, description=rewrite(a.description or "")) for a in arms]
    new_sessions = [
        replace(s, turns=tuple(ContextTurn(rewrite(t.message), t.used) for t in s.turns))
        for s in sessions
    ]
    return new_arms, new_sessions


MESSAGE = (
    "Please deploy the k8s staging cluster on ec2 and copy the build logs to s3_upload before "
    "getWeather runs; version v2 on x86_64 with gpt4o "
) * 2


def main() -> int:
    from learning_bot.engine import context
    from learning_bot.engine.context import words

    n = 20_000
    best = min(timeit.repeat(lambda: words(MESSAGE), number=n, repeat=5)) / n
    size = len(MESSAGE.split())
    print(f"words() on a {size}-word message: {best * 1e6:.1f} us (best of 5)")
    cache = getattr(context, "_identifier_terms", None)
    if cache is not None:  # the words never seen before: each split again

        def cold() -> None:
            cache.cache_clear()
            words(MESSAGE)

        best = min(timeit.repeat(cold, number=n, repeat=5)) / n
        print(f"words() on a {size}-word message of words never seen: {best * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
