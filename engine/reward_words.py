"""The words a reward can be given in, wherever it is typed or sent: `/learning reward` in
chat and at the terminal, and LearningService.reward from the HTTP API and the client."""

from __future__ import annotations

REWARD_WORDS: dict[str, float] = {
    "1": 1.0,
    "0": 0.0,
    "good": 1.0,
    "bad": 0.0,
    "accepted": 1.0,
    "rejected": 0.0,
}
"""Each word (lower case) and the reward it stands for."""


def reward_of_word(word: str) -> float | None:
    """The reward a word stands for (any case, surrounding spaces ignored), or None."""
    return REWARD_WORDS.get(word.strip().lower())
