"""Message words as users write them, through LearningService on a real SqlStore (SQLite and
PostgreSQL): a request whose words carry no evidence selects as one without context, and the
explanation names a word as written, on every replica, from a bounded table of single words."""

from __future__ import annotations

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.context import feature_hash
from learning_bot.engine.feature_words import SHARE_EVERY
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

TOOLS = [Arm("tool:t:kubectl", 100), *(Arm(f"tool:t:Tool{i:02d}", 100) for i in range(11))]
EVERY = {a.id for a in TOOLS}


def config(**options: object) -> LearningConfig:
    settings: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "token_budget": 300,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
    }
    return LearningConfig.for_policy(DEFAULT_POLICY, **{**settings, **options})


def run(trace: str, message: str, called: str) -> RunReport:
    return RunReport(
        trace_id=trace,
        arms=tuple(ReportedArm(a, True) for a in TOOLS),
        tool_calls=(ToolCall(called),),
        context={"message": message},
    )


def test_words_without_evidence_select_as_no_message_does(store: SqlStore) -> None:
    learners = []
    for name in ("with-message", "without-message"):
        service = LearningService(store, config(), rng=17, cache_ttl=0, learner=name)
        for i in range(12):  # the same runs on both: the posteriors and the bound agree
            service.observe(run(f"{name}-{i}", "", "kubectl" if i % 3 else "Tool04"))
        learners.append(service)
    with_message, without = learners
    for j in range(15):
        asked = with_message.select(TOOLS, {"message": f"deploy k8s v{j} to ec2 and s3"})
        plain = without.select(TOOLS)
        assert asked.selected == plain.selected, j
    # once a word of the request has evidence, the request's draw is the context-aware one
    for i in range(6):
        with_message.observe(run(f"k8s-{i}", "roll out k8s", "kubectl"))
    known = with_message.context_evidence().known_sums([feature_hash("w", "k8s")], ArmSet(TOOLS))
    assert known is not None


def test_every_replica_names_a_message_word_as_users_wrote_it(store: SqlStore) -> None:
    from learning_bot.bot.replies import context_fields

    learner = f"written-{store.dialect}"
    writer = LearningService(store, config(), rng=3, cache_ttl=0, learner=learner)
    for i in range(2 * SHARE_EVERY):
        staging = i % 2 == 0
        message = "deploy to staging now" if staging else "what is new"
        if i % 8 == 0:
            message = "staged for review"  # another written form of the same matched word
        writer.observe(run(f"s{i}", message, "kubectl" if staging else "Tool03"))
    # another replica: it saw none of the messages, and reads the written forms stored
    reader = LearningService(store, config(), rng=4, cache_ttl=0, learner=learner)
    lines = [v for k, v in context_fields(reader, "tool:t:kubectl") if k == "Depends on"]
    assert any("the message mentions 'staging'" in line for line in lines), lines
    assert not any("'stag'" in line for line in lines), lines
    stag = feature_hash("w", "stag")
    assert store.context_words(reader.learner_id, [stag]) == {stag: "staging"}
    # single words only: no row holds a message
    assert store.context_words_rows(reader.learner_id) >= 3
    assert (
        "deploy to staging now"
        not in store.context_words(
            reader.learner_id, [feature_hash("w", w) for w in ("deploy", "staging", "now", "stag")]
        ).values()
    )


def test_the_stored_words_are_bounded_the_rarest_going_first(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=5, cache_ttl=0, learner="bounded-words")
    lid = service.learner_id
    store.add_context_words(lid, {(1, "often"): 5, (2, "twice"): 2}, max_features=1)
    store.add_context_words(lid, {(3, "once"): 1, (4, "seldom"): 1}, max_features=1)
    assert store.context_words_rows(lid) == 4  # one feature: its MAX_FORMS (4) forms
    store.add_context_words(lid, {(1, "often"): 1, (5, "new"): 3}, max_features=1)
    assert store.context_words_rows(lid) == 4
    assert store.context_words(lid, [1, 2, 3, 4, 5]) == {
        1: "often",
        2: "twice",
        4: "seldom",
        5: "new",
    }
    # replicas add up: the counts of one form from two writers
    store.add_context_words(lid, {(2, "twice"): 1, (2, "two"): 2}, max_features=10)
    store.add_context_words(lid, {(2, "two"): 2}, max_features=10)
    assert store.context_words(lid, [2]) == {2: "two"}
