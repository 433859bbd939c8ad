"""The projection of a learner's own runs (engine.projection), read where the phase is decided:
`/learning phase` on every surface, `GET .../phase`, and the switch to active, which keeps the
projection it was shown so status can put what is achieved beside it.

Reads the learner's latest DEFAULT_RUNS runs (newest first from storage, replayed oldest
first), its settings, its price table and its last reset; writes nothing but the projection
kept at the switch. A projection of the same runs under the same settings is answered again
from memory (a phase shown, then confirmed, replays once)."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from learning_bot.engine.errors import Unavailable
from learning_bot.engine.posterior import now_ms

if TYPE_CHECKING:
    from learning_bot.engine.projection_report import Projection, SettingProjection
    from learning_bot.engine.records import RunRecord
    from learning_bot.engine.service import LearningService

PROJECTION_SECONDS = 120.0
"""How long a projection may take before it gives up (a reason instead of figures): about 5 s
of CPU for 2,000 runs of 200 arms (BENCHMARKS.md), more in wall time on a busy machine."""
MEMO_SIZE = 16
"""Projections kept in memory, per process."""

_memo: OrderedDict[tuple[Any, ...], Projection] = OrderedDict()
_memo_lock = threading.Lock()


def _latest_runs(service: LearningService, limit: int) -> list[RunRecord]:
    from learning_bot.engine.bounds import MAX_PAGE

    runs: list[RunRecord] = []
    while len(runs) < limit:
        pieces, total = service.trace_pieces(
            limit=min(MAX_PAGE, limit - len(runs)), offset=len(runs)
        )
        before = len(runs)
        runs.extend(run for piece in pieces for run in piece)
        if len(runs) == before or len(runs) >= total:
            break
    runs.sort(key=lambda r: r.timestamp)  # stable: storage's order within one millisecond
    return runs


def learner_projection(
    service: LearningService,
    *,
    limit: int | None = None,
    cancel: threading.Event | None = None,
    seconds: float = PROJECTION_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Projection:
    """The projection of the learner's latest `limit` runs under its settings and price
    table (`limit`: engine.projection_report.DEFAULT_RUNS when None); gives up after
    `seconds` or when `cancel` is set (a `reason` says so)."""
    from learning_bot.engine.projection import project
    from learning_bot.engine.projection_report import DEFAULT_RUNS

    if limit is None:
        limit = DEFAULT_RUNS

    config = service.config
    page, total = service.traces(limit=1)
    reset = service.last_reset()
    key = (
        id(service.store),
        service.learner,
        total,
        page[0].trace_id if page else "",
        json.dumps(config.to_dict(complete=True), sort_keys=True, default=str),
        (reset.reset_id, reset.undone) if reset is not None else None,
        limit,
    )
    with _memo_lock:
        found = _memo.get(key)
        if found is not None:
            _memo.move_to_end(key)
            return found
    projection = project(
        _latest_runs(service, limit),
        None,
        config,
        prices=service.prices,
        resets=(reset,) if reset is not None else (),
        limit=limit,
        cancel=cancel,
        deadline=clock() + seconds,
        clock=clock,
    )
    if projection.settings:
        with _memo_lock:
            _memo[key] = projection
            while len(_memo) > MEMO_SIZE:
                _memo.popitem(last=False)
    return projection


def keep_projection(service: LearningService, projection: Projection) -> bool:
    """Keep `projection` with the learner (at its switch to active); False when it holds no
    setting or storage cannot be reached (the switch stands either way)."""
    if not projection.settings:
        return False
    try:
        kept = json.dumps(projection.to_json())
        service.store.save_projection(service.learner_id, kept, at=now_ms())
    except Unavailable:
        return False
    return True


def kept_projection(service: LearningService) -> tuple[SettingProjection, int, int] | None:
    """The current setting of the projection kept at the switch to active, the runs it was
    made from, and when it was kept (ms); None when there is none."""
    try:
        found = service.store.saved_projection(service.learner_id)
    except Unavailable:
        return None
    if found is None:
        return None
    text, at = found
    data = json.loads(text)
    current = next((s for s in data.get("settings", ()) if s.get("current")), None)
    if current is None:
        return None
    from learning_bot.engine.projection_report import SettingProjection

    return SettingProjection.from_json(current), int(data.get("runs", 0)), at
