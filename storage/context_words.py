"""The forms a learner's message word features were written in (the ContextWords port,
engine.feature_words): the `context_words` table, one row per (feature, lower-cased word) with
how often it was seen, added to by every replica and bounded per learner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import delete, func, select, tuple_

from learning_bot.engine.feature_words import MAX_FORMS, most_common
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import context_words
from learning_bot.storage.store_base import StoreBase

CHUNK = 500
"""Keys per IN list."""
MAX_WORD_CHARS = 64
"""The column's width: a longer form is not kept (engine.context keeps no longer word)."""


class ContextWordsStore(StoreBase):
    """The ContextWords port (a part of SqlStore)."""

    def add_context_words(
        self, learner_id: int, counts: Mapping[tuple[int, str], int], max_features: int
    ) -> None:
        """Add the counts to the stored ones; past `max_features * MAX_FORMS` rows the least
        seen forms go first."""
        rows = [
            {"learner_id": learner_id, "feature": int(f), "word": w, "seen": int(n)}
            for (f, w), n in sorted(counts.items())
            if 0 < len(w) <= MAX_WORD_CHARS and n > 0
        ]
        if not rows:
            return
        c = context_words.c
        bound = max_features * MAX_FORMS

        def run() -> None:
            with write_transaction(self.engine) as conn:
                stmt = self._insert(context_words)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["learner_id", "feature", "word"],
                    set_={"seen": c.seen + stmt.excluded.seen},
                )
                conn.execute(stmt, rows)
                mine = c.learner_id == learner_id
                count = conn.execute(
                    select(func.count()).select_from(context_words).where(mine)
                ).scalar_one()
                excess = int(count) - bound
                if excess > 0:
                    rarest = (
                        select(c.feature, c.word)
                        .where(mine)
                        .order_by(c.seen, c.feature, c.word)
                        .limit(excess)
                    )
                    conn.execute(
                        delete(context_words).where(mine, tuple_(c.feature, c.word).in_(rarest))
                    )

        with_retries(run)

    def context_words(self, learner_id: int, features: Sequence[int]) -> dict[int, str]:
        """The most common written form of each of the features that has one."""
        c = context_words.c
        wanted = sorted({int(f) for f in features})
        seen: dict[int, dict[str, float]] = {}
        with reading(self.engine) as conn:
            for at in range(0, len(wanted), CHUNK):
                for f, w, n in conn.execute(
                    select(c.feature, c.word, c.seen).where(
                        c.learner_id == learner_id, c.feature.in_(wanted[at : at + CHUNK])
                    )
                ).all():
                    seen.setdefault(int(f), {})[str(w)] = float(n)
        return {f: most_common(forms) for f, forms in seen.items()}

    def context_words_rows(self, learner_id: int) -> int:
        """The learner's stored written forms."""
        c = context_words.c
        with reading(self.engine) as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(context_words)
                    .where(c.learner_id == learner_id)
                ).scalar_one()
            )
