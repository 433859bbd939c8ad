"""The task-type workload of the request-context study (research.context_simulation): requests
of several task types, each using a few tools often and every tool rarely, with messages and
tool descriptions that hint at the type."""

from __future__ import annotations

import numpy as np

from learning_bot.engine.arms import Arm
from learning_bot.research.context_simulation import ContextSession, ContextTurn

GENERIC_WORDS = (
    "able",
    "account",
    "action",
    "answer",
    "area",
    "back",
    "base",
    "best",
    "body",
    "call",
    "case",
    "change",
    "check",
    "clear",
    "close",
    "come",
    "common",
    "data",
    "date",
    "day",
    "detail",
    "done",
    "early",
    "easy",
    "end",
    "entry",
    "fact",
    "field",
    "final",
    "find",
    "first",
    "follow",
    "form",
    "free",
    "full",
    "give",
    "good",
    "group",
    "hand",
    "help",
    "high",
    "hold",
    "idea",
    "item",
    "keep",
    "kind",
    "last",
    "late",
    "left",
    "level",
    "line",
    "list",
    "long",
    "look",
    "main",
    "make",
    "mark",
    "move",
    "name",
    "need",
    "next",
    "note",
    "number",
    "open",
    "order",
    "part",
    "place",
    "plan",
    "point",
    "put",
    "quick",
    "ready",
    "real",
    "record",
    "right",
    "run",
    "same",
    "save",
    "see",
    "set",
    "short",
    "show",
    "side",
    "small",
    "sort",
    "start",
    "state",
    "step",
    "still",
    "sure",
    "take",
    "tell",
    "thing",
    "time",
    "top",
    "turn",
    "use",
    "value",
    "view",
    "want",
    "way",
    "week",
    "well",
    "whole",
    "word",
    "work",
    "year",
)


def task_type_workload(
    *,
    tools: int = 60,
    types: int = 8,
    sessions: int = 1_000,
    mean_turns: float = 3.0,
    background: float = 0.02,
    message_words: int = 8,
    seed: int = 0,
) -> tuple[list[Arm], list[ContextSession]]:
    """A context-rich workload: requests of several task types, each type using 2-5 of the
    tools with high probability (0.5-0.9 a turn) and every tool at a small background rate.
    A type has its own 12 words; a message mixes some of them with common words, and a tool's
    description holds two words of the type it serves among common ones, so lexical relevance
    is a hint, not the answer. Each session is one type; `expected` holds its usage rates."""
    gen = np.random.default_rng(seed)
    size = len(GENERIC_WORDS)
    vocab = [
        [f"{chr(97 + t % 26)}{GENERIC_WORDS[(t * 12 + j) % size]}" for j in range(12)]
        for t in range(types)
    ]
    rates = np.full((types, tools), background)
    owner = np.full(tools, -1)
    for t in range(types):
        free = np.flatnonzero(owner < 0)
        core = gen.choice(free, size=int(gen.integers(2, 6)), replace=False)
        owner[core] = t
        rates[t, core] = gen.uniform(0.5, 0.9, size=core.size)
    arms = []
    for i in range(tools):
        common = gen.choice(GENERIC_WORDS, size=4, replace=False).tolist()
        own = gen.choice(vocab[owner[i]], size=2, replace=False).tolist() if owner[i] >= 0 else []
        cost = int(gen.integers(150, 600))
        arms.append(Arm(f"tool:task:tool{i:03d}", cost, description=" ".join([*own, *common])))
    out = []
    for s in range(sessions):
        t = int(gen.integers(types))
        turns = []
        for _ in range(max(1, int(gen.geometric(1.0 / mean_turns)))):
            used = np.flatnonzero(gen.random(tools) < rates[t])
            mine = gen.choice(vocab[t], size=message_words // 2, replace=False).tolist()
            rest = gen.choice(GENERIC_WORDS, size=message_words - len(mine), replace=False).tolist()
            words_ = [*mine, *rest]
            gen.shuffle(words_)
            turns.append(ContextTurn(" ".join(words_), tuple(used.tolist())))
        out.append(ContextSession(f"task-{s}", tuple(turns), group=f"type {t}", expected=rates[t]))
    return arms, out
