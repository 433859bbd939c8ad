"""LearningService over a real SqlStore: every behaviour runs on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from learning_bot.bot.export import (
    POSTERIOR_CSV_HEADER,
    TRACE_CSV_HEADER,
    export_csv,
    export_json,
)
from learning_bot.bot.shapes import summary_json
from learning_bot.engine import (
    Ambiguous,
    Arm,
    Conflict,
    InvalidArmId,
    InvalidInput,
    LearningConfig,
    NotFound,
    Phase,
    ReportedArm,
    RunReport,
    ToolCall,
    Usage,
)
from learning_bot.engine.observation import MAX_ARMS_PER_RUN, MAX_TEXT_CHARS
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

from .helpers import ARMS, report


def snapshot(svc: LearningService) -> dict[str, tuple[float, float, int]]:
    return {
        v.arm_id: (v.posterior.alpha, v.posterior.beta, v.posterior.pulls) for v in svc.posteriors()
    }


def test_observe_updates_included_arms_and_records_trace(active: LearningService) -> None:
    result = active.observe(
        report(
            "t1",
            calls=["Read", "Bash"],
            text="I used the coding approach",
            excluded=["tool:web:WebSearch"],
        )
    )
    assert result.recorded
    assert not result.duplicate
    assert result.skipped is None
    post = snapshot(active)
    assert post["tool:fs:Read"] == (4.0, 1.0, 1)
    assert post["tool:exec:Bash"] == (4.0, 1.0, 1)
    assert post["skill:coding:main"] == (4.0, 1.0, 1)
    assert post["file:workspace:README.md"] == (1.0, 2.0, 1)  # file prior Beta(1,1), not used
    assert post["tool:web:WebSearch"] == (3.0, 1.0, 0)  # excluded: untouched
    assert post["section:system:instructions"] == (4.0, 1.0, 1)
    traces, total = active.traces()
    assert total == 1
    arms = {a.arm_id: a for a in traces[0].arms}
    assert arms["tool:web:WebSearch"].included is False
    assert arms["tool:fs:Read"].referenced is True
    assert active.verify().ok


def test_duplicate_trace_changes_nothing_and_says_so(active: LearningService) -> None:
    active.observe(report("dup"))
    before = snapshot(active)
    again = active.observe(report("dup", calls=["Bash"]))
    assert again.duplicate
    assert not again.recorded
    assert "already recorded" in again.message
    assert snapshot(active) == before
    assert active.traces()[1] == 1
    assert active.verify().ok


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"calls": ["message"]}, "conversational"),
        ({"calls": []}, "conversational"),
        ({"aborted": True}, "aborted"),
        ({"error": "boom"}, "error"),
    ],
)
def test_guard_records_trace_without_updating(
    active: LearningService, kwargs: dict[str, object], reason: str
) -> None:
    before = snapshot(active)
    result = active.observe(report("g", **kwargs))  # type: ignore[arg-type]
    assert result.recorded
    assert result.skipped is not None
    assert result.skipped.value == reason
    after = snapshot(active)
    assert {k: v for k, v in after.items() if k in before} == before
    assert all(v[2] == 0 for v in after.values())
    assert active.status().summary.trace_count == 1


def test_passive_phase_records_traces_and_bootstrap_folds_them(passive: LearningService) -> None:
    for i in range(10):
        passive.observe(report(f"p{i}", calls=["Read"]))
    passive.observe(report("conv", calls=["message"]))
    assert all(v[2] == 0 for v in snapshot(passive).values())
    change = passive.set_phase("active", actor="ops")
    assert change.changed
    assert change.previous is Phase.PASSIVE
    assert change.phase is Phase.ACTIVE
    assert change.warning is not None
    assert "11 trace" in change.warning
    assert change.bootstrapped_traces == 10
    assert change.bootstrapped_observations == 10 * len(ARMS)
    post = snapshot(passive)
    assert post["tool:fs:Read"] == (13.0, 1.0, 10)
    assert post["tool:exec:Bash"] == (3.0, 11.0, 10)
    assert passive.verify().ok
    # a second switch does not fold the same traces again
    passive.set_phase("passive", actor="ops")
    passive.set_phase("active", actor="ops")
    assert snapshot(passive)["tool:fs:Read"] == (13.0, 1.0, 10)
    assert passive.verify().ok


def test_the_bootstrap_counts_only_the_runs_it_folds(passive: LearningService) -> None:
    """Runs recorded before a full reset give the reset arms nothing: the switch says it folded
    none of them (it said it had bootstrapped them while the posteriors stayed at the prior)."""
    for i in range(2):
        passive.observe(report(f"before-{i}", calls=["Read"]))
    passive.reset(actor="ops")
    change = passive.set_phase("active", actor="ops")
    assert (change.bootstrapped_traces, change.bootstrapped_observations) == (0, 0)
    assert all(v == (1.0, 1.0, 0) for v in snapshot(passive).values())
    passive.set_phase("passive", actor="ops")
    passive.observe(report("after", calls=["Read"]))
    change = passive.set_phase("active", actor="ops")
    assert (change.bootstrapped_traces, change.bootstrapped_observations) == (1, len(ARMS))
    assert snapshot(passive)["tool:fs:Read"] == (2.0, 1.0, 1)
    assert passive.verify().ok


def test_a_passive_learner_s_saving_says_it_is_measured_once_active(
    passive: LearningService,
) -> None:
    from dataclasses import replace

    from learning_bot.engine.reports import PASSIVE_ONLY

    for i in range(3):
        passive.observe(replace(report(f"p{i}", calls=["Read"]), session_key="channel-1"))
    savings = passive.status().summary.prompt_cost_savings
    assert savings is not None and savings.reason == PASSIVE_ONLY
    assert "no run names a session" not in PASSIVE_ONLY


def test_set_phase_without_bootstrap_and_same_phase(passive: LearningService) -> None:
    passive.observe(report("p1"))
    change = passive.set_phase(Phase.ACTIVE, actor="ops", bootstrap=False)
    assert change.bootstrapped_traces == 0
    assert all(v[2] == 0 for v in snapshot(passive).values())
    same = passive.set_phase("active", actor="ops")
    assert not same.changed
    assert passive.phase() is Phase.ACTIVE


def test_unknown_phase_is_refused(passive: LearningService) -> None:
    with pytest.raises(InvalidInput, match="unknown phase 'turbo'"):
        passive.set_phase("turbo")
    assert passive.phase() is Phase.PASSIVE


def test_phase_persists_across_services(store: SqlStore) -> None:
    first = LearningService(store, LearningConfig.for_policy("seed"), cache_ttl=0)
    first.set_phase("active", actor="ops")
    second = LearningService(store, LearningConfig.for_policy("seed"), cache_ttl=0)
    assert second.phase() is Phase.ACTIVE
    assert second.config.phase is Phase.ACTIVE


def test_reset_then_undo_restores_exactly(active: LearningService) -> None:
    for i in range(25):
        active.observe(report(f"t{i}", calls=["Read"] if i % 3 else ["Bash"]))
    before = snapshot(active)
    result = active.reset(actor="ops")
    assert result.all_arms
    assert result.reset_count == len(ARMS)
    status = active.status()
    assert status.summary.trace_count == 0
    assert status.empty
    assert {round(v.mean, 3) for v in active.posteriors()} == {0.5}
    assert all(v.posterior.pulls == 0 for v in active.posteriors())
    assert active.verify().ok
    undone = active.undo_reset(actor="ops")
    assert undone.undone
    assert snapshot(active) == before
    assert active.status().summary.trace_count == 25
    assert active.verify().ok
    with pytest.raises(Conflict):
        active.undo_reset(actor="ops")


def test_undo_keeps_what_was_learnt_after_the_reset(active: LearningService) -> None:
    active.observe(report("a"))
    before = snapshot(active)
    active.reset(["tool:fs:Read"], actor="ops")
    assert snapshot(active)["tool:fs:Read"] == (1.0, 1.0, 0)
    assert snapshot(active)["tool:exec:Bash"] == before["tool:exec:Bash"]
    active.observe(report("b", calls=["Read"]))
    active.undo_reset(actor="ops")
    a, b, n = before["tool:fs:Read"]
    assert snapshot(active)["tool:fs:Read"] == (a + 1, b, n + 1)
    assert active.verify().ok


def test_reset_by_label_and_unknown_arm_changes_nothing(active: LearningService) -> None:
    active.observe(report("a"))
    before = snapshot(active)
    with pytest.raises(NotFound):
        active.reset(["tool:nope:Missing"], actor="ops")
    with pytest.raises(NotFound):
        active.reset(["foo:bar"], actor="ops")
    assert snapshot(active) == before
    result = active.reset(["WebSearch"], actor="ops")
    assert result.arm_ids == ("tool:web:WebSearch",)


def test_manual_reward_by_label_is_lagged_and_audited(active: LearningService) -> None:
    active.observe(report("a"))
    before = snapshot(active)["tool:web:WebSearch"]
    result = active.reward("WebSearch", "good", actor="alice", reason="found the docs")
    assert result.arm_ids == ("tool:web:WebSearch",)
    assert result.lagged
    after = snapshot(active)["tool:web:WebSearch"]
    assert after == (before[0] + 1, before[1], before[2] + 1)
    active.reward("tool:web:WebSearch", 0, actor="bob")
    assert snapshot(active)["tool:web:WebSearch"] == (after[0], after[1] + 1, after[2] + 1)
    assert active.verify().ok
    with active.store.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = conn.exec_driver_sql(
            "SELECT source, lagged, actor, reason FROM posterior_changes "
            "WHERE arm_id = 'tool:web:WebSearch' AND source = 'manual' ORDER BY created_at"
        ).all()
    assert [(r[0], bool(r[1]), r[2], r[3]) for r in rows] == [
        ("manual", True, "alice", "found the docs"),
        ("manual", True, "bob", None),
    ]


def test_reward_without_arm_credits_latest_run_in_conversation(active: LearningService) -> None:
    active.observe(report("old", calls=["Bash"], conversation="C9", timestamp=1_000))
    active.observe(
        report("new", calls=["Read"], text="see README.md", conversation="C9", timestamp=2_000)
    )
    active.observe(report("other", calls=["Bash"], conversation="C8", timestamp=3_000))
    before = snapshot(active)
    result = active.reward(None, 1, actor="alice", conversation="C9")
    assert result.trace_id == "new"
    assert set(result.arm_ids) == {
        "tool:fs:Read",
        "file:workspace:README.md",
        "section:system:instructions",
    }
    after = snapshot(active)
    for arm_id in result.arm_ids:
        assert after[arm_id][0] == before[arm_id][0] + 1
    assert after["tool:exec:Bash"] == before["tool:exec:Bash"]
    with pytest.raises(NotFound, match="no run"):
        active.reward(None, 1, actor="alice", conversation="C-empty")


@pytest.mark.parametrize("value", [2, -0.5, float("nan"), float("inf"), "great", "2"])
def test_bad_reward_values_change_nothing(active: LearningService, value: object) -> None:
    active.observe(report("a"))
    before = snapshot(active)
    with pytest.raises(InvalidInput):
        active.reward("Read", value, actor="x")  # type: ignore[arg-type]
    assert snapshot(active) == before


def test_ambiguous_and_unknown_labels(store: SqlStore) -> None:
    svc = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    arms = (Arm("tool:a:SearchWeb", 10), Arm("tool:b:SearchDocs", 10), Arm("tool:c:Read", 10))
    svc.observe(RunReport("x", tuple(ReportedArm(a) for a in arms), tool_calls=()))
    before = snapshot(svc)
    with pytest.raises(Ambiguous) as info:
        svc.reward("search", 1, actor="x")
    assert set(info.value.candidates) == {"tool:a:SearchWeb", "tool:b:SearchDocs"}
    assert "tool:a:SearchWeb" in str(info.value)
    with pytest.raises(NotFound, match="unknown arm"):
        svc.reward("Wirte", 1, actor="x")
    with pytest.raises(NotFound):
        svc.reward("tool:z:Nothing", 1, actor="x")
    assert snapshot(svc) == before
    assert svc.resolve_arm("searchweb") == "tool:a:SearchWeb"
    assert svc.resolve_arm("Read") == "tool:c:Read"


def test_bad_reports_are_refused_before_storage(active: LearningService) -> None:
    with pytest.raises(InvalidInput):
        RunReport("empty", ())
    with pytest.raises(InvalidInput):
        RunReport("", (ReportedArm(ARMS[0]),))
    with pytest.raises(InvalidInput):
        RunReport("big", (ReportedArm(ARMS[0]),), assistant_texts=("x" * (MAX_TEXT_CHARS + 1),))
    many = tuple(ReportedArm(Arm(f"tool:x:T{i}", 1)) for i in range(MAX_ARMS_PER_RUN + 1))
    with pytest.raises(InvalidInput):
        RunReport("many", many)
    with pytest.raises(InvalidArmId):
        Arm("tool:fs", 1)
    with pytest.raises(InvalidInput):
        active.observe("not a report")  # type: ignore[arg-type]
    assert active.traces()[1] == 0


def test_status_counts_savings_and_top_bottom(store: SqlStore) -> None:
    svc = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    arms = [Arm(f"tool:t:T{i}", 10) for i in range(8)]
    for i in range(12):
        used = [f"T{j}" for j in range(8) if j <= i % 8]
        svc.observe(
            RunReport(
                f"r{i}",
                tuple(ReportedArm(a) for a in arms),
                tool_calls=tuple(ToolCall(n) for n in used),
                is_baseline=i % 4 == 0,
                usage=Usage(input=1000 if i % 4 == 0 else 600, output=0),
                timestamp=1_700_000_000_000 + i,
            )
        )
    status = svc.status()
    s = status.summary
    assert s.trace_count == 12
    assert s.arm_count == 8
    assert s.baseline_runs == 3
    assert s.selected_runs == 9
    assert s.baseline_avg_tokens == 1000
    assert s.selected_avg_tokens == 600
    assert s.token_savings_percent == pytest.approx(40.0)
    assert s.min_timestamp == 1_700_000_000_000
    assert s.max_timestamp == 1_700_000_000_011
    assert len(status.top) == 5
    assert len(status.bottom) == 5
    assert status.top[0].mean >= status.top[-1].mean
    assert status.bottom[0].mean <= status.bottom[-1].mean
    assert status.top[0].arm_id == "tool:t:T0"
    summary = summary_json(s)
    assert summary["baseline"]["tokenSavingsPercent"] == pytest.approx(40.0)


def test_empty_status(passive: LearningService) -> None:
    status = passive.status()
    assert status.empty
    assert status.summary.token_savings_percent is None
    assert status.top == ()
    assert status.bottom == ()


def test_traces_pagination_and_limits(active: LearningService) -> None:
    for i in range(7):
        active.observe(report(f"t{i}", timestamp=1_000 + i))
    page, total = active.traces(limit=3, offset=0)
    assert total == 7
    assert [t.trace_id for t in page] == ["t6", "t5", "t4"]
    page, _ = active.traces(limit=3, offset=6)
    assert [t.trace_id for t in page] == ["t0"]
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": "5"}):
        with pytest.raises(InvalidInput):
            active.traces(**bad)  # type: ignore[arg-type]


def test_export_json_and_csv(active: LearningService) -> None:
    for i in range(3):
        active.observe(report(f"t{i}"))
    text = "".join(export_json(active))
    assert text.startswith("{\n  ") and text.count("\n") > 10, "indented by default"
    data = json.loads(text)
    assert {t["traceId"] for t in data["traces"]} == {"t0", "t1", "t2"}
    assert set(data["traces"][0]) >= {"traceId", "arms", "usage", "isBaseline", "durationMs"}
    assert set(data["posteriors"][0]) == {"armId", "alpha", "beta", "pulls", "lastUpdated"}
    compact = "".join(export_json(active, indent=False))
    assert compact.count("\n") == 1 and json.loads(compact) == data
    assert "traces" not in json.loads("".join(export_json(active, traces=False)))
    assert "posteriors" not in json.loads("".join(export_json(active, posteriors=False)))
    traces = "".join(export_csv(active, "traces"))
    assert traces.splitlines()[0] == TRACE_CSV_HEADER
    assert len(traces.splitlines()) == 4
    posteriors = "".join(export_csv(active, "posteriors"))
    assert posteriors.splitlines()[0] == POSTERIOR_CSV_HEADER
    rows = list(csv.reader(io.StringIO(posteriors)))[1:]
    assert all(len(r[1].split(".")[1]) == 4 for r in rows)
    with pytest.raises(InvalidInput):
        list(export_csv(active, "xml"))
    with pytest.raises(InvalidInput):
        list(export_json(active, traces=False, posteriors=False))


def test_timeseries(active: LearningService) -> None:
    from learning_bot.engine.posterior import now_ms

    now = now_ms()
    for i in range(4):
        active.observe(report(f"t{i}", timestamp=now - i * 3_600_000))
    tokens = active.timeseries("tokens", "1h")
    assert sum(b.count for b in tokens) == 4
    assert len(tokens) == 4
    assert all(b.t % 3_600_000 == 0 for b in tokens)
    conv = active.timeseries("convergence", "1d")
    assert conv
    assert all(0 < b.value < 1 and b.arm_id for b in conv)
    with pytest.raises(InvalidInput):
        active.timeseries("tokens", "1w")
    with pytest.raises(InvalidInput):
        active.timeseries("latency", "1h")


def test_select_uses_stored_posteriors(store: SqlStore) -> None:
    svc = LearningService(
        store,
        LearningConfig.for_policy(
            "seed", phase=Phase.ACTIVE, baseline_rate=0.0, min_pulls=0, token_budget=150
        ),
        rng=3,
        cache_ttl=0,
    )
    good, bad = Arm("tool:t:Good", 100), Arm("tool:t:Bad", 100)
    for i in range(60):
        svc.observe(
            RunReport(
                f"r{i}",
                (ReportedArm(good), ReportedArm(bad)),
                tool_calls=(ToolCall("Good"),),
            )
        )
    picks = [svc.select([good, bad]).selected for _ in range(50)]
    assert sum("tool:t:Good" in p for p in picks) >= 48
    passive = LearningService(
        store, LearningConfig.for_policy("seed"), learner="other", cache_ttl=0
    )
    everything = passive.select([good, bad])
    assert everything.selected == ("tool:t:Good", "tool:t:Bad")
    assert everything.fallback


def test_learners_are_isolated(store: SqlStore) -> None:
    a = LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), learner="team-a", cache_ttl=0
    )
    b = LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), learner="team-b", cache_ttl=0
    )
    a.observe(report("same-id"))
    assert b.observe(report("same-id")).recorded
    a.reset(actor="ops")
    assert b.status().summary.trace_count == 1
    assert math.isclose(snapshot(b)["tool:fs:Read"][0], 4.0)


def test_cache_sees_other_replicas_writes(store: SqlStore) -> None:
    clock = [0.0]
    one = LearningService(
        store,
        LearningConfig.for_policy("seed", phase=Phase.ACTIVE),
        cache_ttl=1.0,
        clock=lambda: clock[0],
    )
    two = LearningService(store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), cache_ttl=0)
    one.observe(report("a"))
    assert snapshot(one)["tool:fs:Read"][2] == 1
    two.observe(report("b"))
    assert snapshot(one)["tool:fs:Read"][2] == 1  # within the ttl: cached
    clock[0] += 2.0
    assert snapshot(one)["tool:fs:Read"][2] == 2  # after it: refreshed


def test_a_trace_given_twice_is_recorded_once_and_counted_once(active: LearningService) -> None:
    """De-duplication has one home, the store: the same trace twice in one call, or from
    concurrent callers, is inserted once and reads as a duplicate."""
    import threading

    first, second = active.observe_many([report("twice"), report("twice")])
    assert first.recorded and not first.duplicate
    assert second.duplicate and not second.recorded and second.rewards == {}
    assert active.traces()[1] == 1
    assert active.verify().ok
    results: list[bool] = []
    barrier = threading.Barrier(4)

    def go() -> None:
        barrier.wait()
        results.append(active.observe(report("concurrent")).recorded)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    assert active.traces()[1] == 2
    assert active.verify().ok
