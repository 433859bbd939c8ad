"""Okapi BM25 over short documents (an arm's label, description and content; a tool's name and
description): the lexical relevance of each document to a request's message, as the providers'
tool search ranks deferred tools."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from learning_bot.engine.context import words

FloatArray = npt.NDArray[np.float64]

K1 = 1.2
B = 0.75


class BM25Index:
    """The inverted index of some documents, each a list of words (`engine.context.words`)."""

    __slots__ = ("_postings", "size")

    def __init__(self, documents: Sequence[Sequence[str]]) -> None:
        self.size = len(documents)
        lengths = np.array([len(d) for d in documents], dtype=np.float64)
        mean = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        counts: dict[str, dict[int, int]] = {}
        for i, doc in enumerate(documents):
            for w in doc:
                row = counts.setdefault(w, {})
                row[i] = row.get(i, 0) + 1
        norm = K1 * (1.0 - B + B * lengths / mean)
        self._postings: dict[str, tuple[npt.NDArray[np.intp], FloatArray]] = {}
        for w, row in counts.items():
            docs = np.fromiter(row.keys(), dtype=np.intp, count=len(row))
            tf = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            df = len(row)
            idf = math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))
            self._postings[w] = (docs, idf * tf * (K1 + 1.0) / (tf + norm[docs]))

    @classmethod
    def of_texts(cls, texts: Sequence[str]) -> BM25Index:
        return cls([words(t) for t in texts])

    def scores(self, query: Sequence[str]) -> FloatArray:
        """Each document's BM25 score for the query's words (a word given twice counts once)."""
        out = np.zeros(self.size)
        for w in set(query):
            hit = self._postings.get(w)
            if hit is not None:
                out[hit[0]] += hit[1]
        return out

    def top(
        self, query: Sequence[str], k: int, among: npt.NDArray[np.bool_] | None = None
    ) -> list[int]:
        """The k best-scoring documents with a score above 0 (of those `among` marks), best
        first, ties in document order."""
        s = self.scores(query)
        if among is not None:
            s = np.where(among, s, 0.0)
        hits = np.flatnonzero(s > 0.0)
        if not hits.size:
            return []
        order = hits[np.argsort(-s[hits], kind="stable")]
        best: list[int] = order[:k].tolist()
        return best


class IndexCache:
    """BM25 indexes of the inventories seen lately, found again by the identity of their id
    tuple (an ArmSet keeps one for as long as it lives)."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: list[tuple[object, BM25Index]] = []

    def get(self, key: object, texts: Sequence[str] | None = None) -> BM25Index | None:
        with self._lock:
            for k, index in self._entries:
                if k is key:
                    return index
        if texts is None:
            return None
        index = BM25Index.of_texts(texts)
        with self._lock:
            self._entries = [(key, index), *self._entries[: self._size - 1]]
        return index
