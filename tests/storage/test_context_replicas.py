"""The context-aware policy's state is the learner's, not a process's (SQLite and PostgreSQL):
replicas on one database add up their evidence and see each other's within the cache bound, a
reset clears it and its undo puts it back, deferral counts and the exploration bound's count
survive another replica and a restart."""

from __future__ import annotations

import threading

import pytest

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.context import feature_hash
from learning_bot.engine.exploration import ExplorationBound
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

TOOLS = [Arm(f"tool:t:Tool{i:02d}", 100) for i in range(12)]
EVERY = {a.id for a in TOOLS}
RAIN = feature_hash("w", "rain")


def config(**options: object) -> LearningConfig:
    settings: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "token_budget": 100,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
        "half_life": 20.0,
    }
    return LearningConfig.for_policy("seed", **{**settings, **options})


def run(trace: str, message: str, called: list[str], included: set[str] = EVERY) -> RunReport:
    return RunReport(
        trace_id=trace,
        arms=tuple(ReportedArm(a, a.id in included) for a in TOOLS),
        tool_calls=tuple(ToolCall(c) for c in called),
        context={"message": message, "channel": "ops"},
    )


RUNS = [
    run(f"r{i}", ["will it rain in Oslo", "sort the rows", "rain or sun"][i % 3], [f"Tool0{i % 4}"])
    for i in range(30)
]


def stored(store: SqlStore, learner_id: int) -> dict[tuple[int, str], tuple[float, float]]:
    """Each stored cell as of its feature's run count (what ContextEvidence.load reads)."""
    from learning_bot.engine.forgetting import keep_factor

    keep = keep_factor(20.0)
    cells, _ = store.context_evidence(learner_id)
    top: dict[int, int] = {}
    for c in cells:
        top[c.feature] = max(top.get(c.feature, 0), c.tick)
    return {
        (c.feature, c.arm_id): (
            c.rewards * keep ** (top[c.feature] - c.tick),
            c.runs * keep ** (top[c.feature] - c.tick),
        )
        for c in cells
        if c.arm_id  # a feature's own row: its run count
    }


def same(
    a: dict[tuple[int, str], tuple[float, float]], b: dict[tuple[int, str], tuple[float, float]]
) -> None:
    assert a.keys() == b.keys()
    for key, (s, n) in a.items():
        assert b[key] == (pytest.approx(s, rel=1e-9, abs=1e-12), pytest.approx(n, rel=1e-9))


def test_two_replicas_add_up_to_what_one_service_holds(database_url: str) -> None:
    first, second = SqlStore(database_url), SqlStore(database_url)
    try:
        a = LearningService(first, config(), rng=1, cache_ttl=0)
        b = LearningService(second, config(), rng=2, cache_ttl=0)
        alone = LearningService(first, config(), rng=3, cache_ttl=0, learner="alone")
        for i, report in enumerate(RUNS):
            (a if i % 2 == 0 else b).observe(report)
            alone.observe(report)
        assert first.context_evidence(a.learner_id)[1] == len(RUNS)
        same(stored(first, alone.learner_id), stored(first, a.learner_id))
        # each replica's memory holds both's runs once it reads again
        full = 0
        load = second.context_evidence

        def counted(learner_id: int) -> tuple[list[object], int]:
            nonlocal full
            full += 1
            return load(learner_id)  # type: ignore[return-value]

        second.context_evidence = counted  # type: ignore[method-assign]
        reference = alone.context_evidence()
        for service in (a, b):
            held = service.context_evidence()
            assert held.tick == len(RUNS)
            for feature, arm in stored(first, alone.learner_id):
                want = reference.rate_with(feature, arm)
                assert want is not None
                assert held.rate_with(feature, arm) == pytest.approx(want)
        assert full == 0  # b read the features a changed, never the whole evidence again
    finally:
        first.close()
        second.close()


def test_concurrent_replicas_lose_no_run(database_url: str) -> None:
    stores = [SqlStore(database_url) for _ in range(2)]
    try:
        services = [
            LearningService(s, config(half_life=0.0), rng=i, cache_ttl=0)
            for i, s in enumerate(stores)
        ]
        errors: list[BaseException] = []

        def observe(service: LearningService, name: str) -> None:
            try:
                for i in range(20):
                    service.observe(run(f"{name}{i}", "rain again", ["Tool01"]))
            except BaseException as exc:  # pragma: no cover - shown by the assert
                errors.append(exc)

        threads = [
            threading.Thread(target=observe, args=(s, n))
            for s, n in zip(services, "xy", strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        lid = services[0].learner_id
        assert stores[0].context_evidence(lid)[1] == 40
        cells = {(c.feature, c.arm_id): c for c in stores[0].context_evidence(lid)[0]}
        assert cells[(RAIN, "tool:t:Tool01")].runs == 40
        assert cells[(RAIN, "tool:t:Tool01")].rewards == 40
        assert cells[(RAIN, "tool:t:Tool02")].rewards == 0
    finally:
        for s in stores:
            s.close()


def test_a_replica_selects_with_the_others_evidence_within_the_cache_bound(
    database_url: str,
) -> None:
    first, second = SqlStore(database_url), SqlStore(database_url)
    now = [0.0]
    try:
        a = LearningService(first, config(), rng=1, cache_ttl=0)
        b = LearningService(second, config(), rng=2, cache_ttl=5.0, clock=lambda: now[0])
        b.select(TOOLS, {"message": "rain in Bergen?"})  # b holds the (empty) evidence
        for i in range(15):
            a.observe(run(f"w{i}", "will it rain in Oslo", ["Tool07"]))
        assert b.context_evidence().rate_with(RAIN, "tool:t:Tool07") is None  # within the bound
        now[0] += 5.0
        picks = [b.select(TOOLS, {"message": "rain in Bergen?"}).selected for _ in range(10)]
        assert sum("tool:t:Tool07" in p for p in picks) >= 9
        assert b.context_evidence().tick == 15
    finally:
        first.close()
        second.close()


def test_a_reset_clears_the_evidence_and_its_undo_puts_it_back(database_url: str) -> None:
    first, second = SqlStore(database_url), SqlStore(database_url)
    try:
        a = LearningService(first, config(), rng=1, cache_ttl=0)
        b = LearningService(second, config(), rng=2, cache_ttl=0)
        for report in RUNS:
            a.observe(report)
        before = stored(first, a.learner_id)
        assert b.context_evidence().rate_with(RAIN, "tool:t:Tool00") is not None
        a.reset(["tool:t:Tool00"])
        after = stored(first, a.learner_id)
        assert not any(arm == "tool:t:Tool00" for _, arm in after)
        assert {k: v for k, v in before.items() if k[1] != "tool:t:Tool00"} == after
        for service in (a, b):  # both replicas forget it
            assert service.context_evidence().rate_with(RAIN, "tool:t:Tool00") is None
            assert service.context_evidence().rate_with(RAIN, "tool:t:Tool01") is not None
        a.undo_reset()
        same(before, stored(first, a.learner_id))
        assert b.context_evidence().rate_with(RAIN, "tool:t:Tool00") is not None
        # a full reset clears every cell, its undo brings them back and adds what came since
        b.reset(None)
        assert stored(first, a.learner_id) == {}
        assert a.context_evidence().cells == 0
        b.observe(run("after", "rain", ["Tool05"]))
        b.undo_reset()
        back = stored(first, a.learner_id)
        for arm, reward in (("tool:t:Tool05", 1.0), ("tool:t:Tool00", 0.0)):  # offered since
            s, n = before[(RAIN, arm)]
            assert back[(RAIN, arm)] == (pytest.approx(s + reward), pytest.approx(n + 1))
        assert a.verify().ok
    finally:
        first.close()
        second.close()


def deferring(trace: str, loaded: list[str]) -> RunReport:
    included = {a.id for a in TOOLS[:6]}
    return RunReport(
        trace_id=trace,
        arms=tuple(ReportedArm(a, a.id in included) for a in TOOLS),
        tool_calls=tuple(ToolCall(n) for n in loaded[:1]),
        context={"message": "hello", "loaded": loaded},
    )


def test_deferral_counts_are_the_learners(database_url: str) -> None:
    first, second = SqlStore(database_url), SqlStore(database_url)
    try:
        a = LearningService(first, config(), rng=1, cache_ttl=0)
        b = LearningService(second, config(), rng=2, cache_ttl=0)
        for i in range(6):
            (a if i % 2 else b).observe(deferring(f"d{i}", ["Tool09"] if i < 4 else []))
        expected = (6, 4)
        assert a.context_explanation("tool:t:Tool09")[1:] == expected
        assert b.context_explanation("tool:t:Tool09")[1:] == expected
        restarted = LearningService(SqlStore(database_url), config(), rng=3, cache_ttl=0)
        assert restarted.context_explanation("tool:t:Tool09")[1:] == expected
        assert restarted.context_explanation("tool:t:Tool08")[1:] == (6, 0)
        restarted.store.close()  # type: ignore[attr-defined]
        a.reset(["tool:t:Tool09"])
        assert b.context_explanation("tool:t:Tool09")[1:] == (0, 0)
        a.undo_reset()
        assert b.context_explanation("tool:t:Tool09")[1:] == expected
    finally:
        first.close()
        second.close()


def test_the_exploration_bound_counts_across_a_restart_and_replicas(database_url: str) -> None:
    bound = 25
    options = {"token_budget": 500}
    poisoned = "tool:t:Tool05"
    names = [a.name for a in TOOLS if a.id != poisoned]
    first = SqlStore(database_url)
    try:
        service = LearningService(
            first, config(**options), rng=6, cache_ttl=0,
            exploration_bound=ExplorationBound(after_selections=bound),
        )  # fmt: skip
        for i in range(30):  # a bug: every run reports Tool05 unused
            service.observe(run(f"p{i}", "", names))
        left_out = 15
        for k in range(left_out):
            chosen = service.select(TOOLS)
            assert poisoned not in chosen.selected
            service.observe(run(f"q{k}", "", names[:1], set(chosen.selected)))
        # a restart: the new process counts on from the stored runs
        restarted = LearningService(
            SqlStore(database_url), config(**options), rng=7, cache_ttl=0,
            exploration_bound=ExplorationBound(after_selections=bound),
        )  # fmt: skip
        seen_at = None
        for k in range(bound):
            chosen = restarted.select(TOOLS)
            if poisoned in chosen.selected:
                seen_at = k
                break
            restarted.observe(run(f"s{k}", "", names[:1], set(chosen.selected)))
        assert seen_at == bound - left_out
        restarted.store.close()  # type: ignore[attr-defined]
    finally:
        first.close()


def test_the_exploration_bound_counts_another_replicas_runs(database_url: str) -> None:
    bound = 20
    poisoned = "tool:t:Tool05"
    names = [a.name for a in TOOLS if a.id != poisoned]
    first, second = SqlStore(database_url), SqlStore(database_url)
    now = [0.0]

    def replica(store: SqlStore, seed: int) -> LearningService:
        return LearningService(
            store, config(token_budget=500), rng=seed, cache_ttl=0, clock=lambda: now[0],
            exploration_bound=ExplorationBound(after_selections=bound),
        )  # fmt: skip

    try:
        a, b = replica(first, 6), replica(second, 7)
        for i in range(30):
            a.observe(run(f"p{i}", "", names))
        seen_at = None
        for k in range(2 * bound):
            now[0] += 11.0  # past the exploration bound's sync interval
            service = (a, b)[k % 2]
            chosen = service.select(TOOLS)
            if poisoned in chosen.selected:
                seen_at = k
                break
            service.observe(run(f"s{k}", "", names[:1], set(chosen.selected)))
        assert seen_at is not None and seen_at <= bound
    finally:
        first.close()
        second.close()


def test_cells_stored_before_features_kept_their_count_advance_from_their_highest_tick(
    store: SqlStore,
) -> None:
    from sqlalchemy import insert

    from learning_bot.engine.forgetting import keep_factor
    from learning_bot.storage.database import write_transaction
    from learning_bot.storage.schema import context_evidence

    service = LearningService(store, config(), rng=1, cache_ttl=0)
    lid = service.learner_id
    old = [("tool:t:Tool00", 2.0, 3.0, 3), ("tool:t:Tool01", 1.0, 1.0, 5)]
    with write_transaction(store.engine) as conn:
        conn.execute(
            insert(context_evidence),
            [
                {
                    "learner_id": lid,
                    "feature": RAIN,
                    "arm_id": a,
                    "rewards": s,
                    "runs": n,
                    "tick": t,
                }
                for a, s, n, t in old
            ],
        )
    service.observe(run("legacy", "rain", ["Tool00"], {"tool:t:Tool00"}))
    cells = {(c.feature, c.arm_id): c for c in store.context_evidence(lid)[0]}
    k = keep_factor(20.0) ** 3
    got = cells[(RAIN, "tool:t:Tool00")]
    assert (got.rewards, got.runs, got.tick) == (
        pytest.approx(2 * k + 1),
        pytest.approx(3 * k + 1),
        6,
    )
    assert cells[(RAIN, "")].tick == 6
    assert cells[(RAIN, "tool:t:Tool01")].tick == 5


def test_evidence_of_runs_observed_in_an_outage_is_added_when_they_are_written(
    database_url: str, tmp_path: object
) -> None:
    """Runs observed while storage is down wait in the spool, and so does their per-feature
    evidence, behind them: once storage answers, the learner holds what it would have held
    without the outage."""
    from pathlib import Path
    from typing import Any

    from learning_bot.engine.errors import Unavailable
    from learning_bot.storage.spool import Spool, SpoolingStore

    from .test_spool import Outage

    class EvidenceOutage(Outage):
        def add_context_evidence(self, *args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise Unavailable("storage is unavailable: connection refused")
            return self.inner.add_context_evidence(*args, **kwargs)

    root = Path(str(tmp_path)) / "spool"
    sql = SqlStore(database_url)
    try:
        reference = LearningService(sql, config(), rng=1, cache_ttl=0, learner="reference")
        reference.observe_many(RUNS)
        outage = EvidenceOutage(sql)
        spooling = SpoolingStore(outage, Spool(root), retry_seconds=60)  # type: ignore[arg-type]
        svc = LearningService(
            outage,  # type: ignore[arg-type]
            config(),
            rng=1,
            cache_ttl=0,
            learner="through-outage",
            writer=spooling,
        )
        for report in RUNS[:10]:
            assert svc.observe(report).recorded
        outage.down = True
        for report in RUNS[10:25]:
            assert svc.observe(report).spooled
        outage.down = False
        for report in RUNS[25:]:  # behind the spooled ones: spooled too, in order
            svc.observe(report)
        spooling.replay_now()
        same(stored(sql, svc.learner_id), stored(sql, reference.learner_id))
        assert svc.traces()[1] == len(RUNS)
        assert svc.verify().ok
        spooling.close()
    finally:
        sql.close()
