"""The usage of a learner's latest active runs, summed per session: what the measured
prompt-cost saving (engine.savings) is priced from."""

from __future__ import annotations

from sqlalchemy import text

from engine.savings import COST_WINDOW, SessionUsage
from storage.database import reading
from storage.store_base import StoreBase

_SESSION_USAGE = """
SELECT t.session_key AS k,
       t.is_baseline, t.provider, t.model, COUNT(*) AS runs,
       SUM(t.usage_input) AS input, SUM(t.usage_cache_read) AS cache_read,
       SUM(t.usage_cache_write) AS cache_write
FROM (SELECT session_key, trace_id, is_baseline, provider, model,
             usage_input, usage_cache_read, usage_cache_write
      FROM traces
      WHERE learner_id = :learner AND phase = 'active' AND session_key <> ''
        AND stats_epoch >= (SELECT status_from_epoch FROM learners WHERE id = :learner)
      ORDER BY timestamp DESC, id DESC
      LIMIT :window) AS t
GROUP BY t.session_key, t.is_baseline, t.provider, t.model
"""


class SessionCosts(StoreBase):
    """The usage the measured cost saving is priced from (a part of SqlStore)."""

    def session_usage(self, learner_id: int, window: int = COST_WINDOW) -> list[SessionUsage]:
        """Per session (and model), the usage of the learner's latest `window` active runs
        counted by status."""
        with reading(self.engine) as conn:
            rows = conn.execute(
                text(_SESSION_USAGE), {"learner": learner_id, "window": window}
            ).all()
        return [
            SessionUsage(
                key=str(r.k),
                is_baseline=bool(r.is_baseline),
                provider=r.provider,
                model=r.model,
                runs=int(r.runs),
                input=int(r.input),
                cache_read=int(r.cache_read),
                cache_write=int(r.cache_write),
            )
            for r in rows
        ]
