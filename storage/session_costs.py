"""The usage of a learner's latest active runs, summed per session: what the measured
prompt-cost saving (engine.savings) is priced from (the SQL is storage.queries.SESSION_USAGE,
shared with the SQLite reader)."""

from __future__ import annotations

from learning_bot.engine.savings import COST_WINDOW, SessionUsage
from learning_bot.storage import queries
from learning_bot.storage.database import reading
from learning_bot.storage.store_base import StoreBase


class SessionCosts(StoreBase):
    """The usage the measured cost saving is priced from (a part of SqlStore)."""

    def session_usage(self, learner_id: int, window: int = COST_WINDOW) -> list[SessionUsage]:
        """Per session (and model), the usage of the learner's latest `window` active runs
        counted by status."""
        with reading(self.engine) as conn:
            rows = conn.exec_driver_sql(
                self._sql(queries.SESSION_USAGE), (learner_id, learner_id, window)
            ).all()
        return queries.session_usages(rows)

    def session_usage_since(self, learner_id: int, since: int) -> list[SessionUsage]:
        """Per session (and model), the usage of the learner's active runs counted by status
        and recorded since `since` (ms), each with its first run's time."""
        with reading(self.engine) as conn:
            rows = conn.exec_driver_sql(
                self._sql(queries.SESSION_USAGE_SINCE), (learner_id, since, learner_id)
            ).all()
        return queries.session_usages(rows)
