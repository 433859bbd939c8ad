"""Request context at select (SPEC section 4a): its checks, lexical relevance, the per-feature
evidence and the context-aware draw, the deferred arms and the exploration bound."""

from __future__ import annotations

import numpy as np
import pytest

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.bm25 import BM25Index
from learning_bot.engine.context import (
    MAX_MESSAGE_CHARS,
    RequestContext,
    loaded_arms,
    stored_context,
    words,
)
from learning_bot.engine.context_policy import (
    ContextEvidence,
    ContextSettings,
    EvidenceCell,
    context_beta,
    relevance,
)
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.exploration import ExplorationBound, OwedTries
from learning_bot.engine.inventory import ArmSet, align_posteriors
from learning_bot.engine.selection import select_arms


def inventory() -> list[Arm]:
    return [
        Arm("tool:t:read_file", 100, description="Read the contents of a file on disk"),
        Arm("tool:t:get_weather", 100, description="The weather forecast for a city"),
        Arm("tool:t:send_email", 100, description="Send an email message to someone"),
        Arm("tool:t:calculator", 100, description="Evaluate a math expression"),
        *(Arm(f"tool:t:other{i}", 100) for i in range(8)),
    ]


def config(**options: object) -> LearningConfig:
    settings: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "token_budget": 300,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
    }
    return LearningConfig.for_policy("seed", **{**settings, **options})


def test_context_fields_are_checked_and_empty_context_is_none() -> None:
    assert RequestContext.of(None) is None
    assert RequestContext.of({"session_key": "s"}) is None
    ctx = RequestContext.of({"message": "hi there files", "toolsCalled": ["ls"], "channel": "c"})
    assert ctx is not None and ctx.tools_called == ("ls",)
    with pytest.raises(InvalidInput, match=r"context\.message"):
        RequestContext.of({"message": "x" * (MAX_MESSAGE_CHARS + 1)})
    with pytest.raises(InvalidInput, match="tools_called"):
        RequestContext.of({"tools_called": "ls"})
    with pytest.raises(InvalidInput, match=r"context\.channel"):
        RequestContext.of({"channel": 3})
    with pytest.raises(InvalidInput, match="loaded"):
        loaded_arms({"loaded": [1]})


def test_features_are_hashes_and_the_stored_context_drops_the_message() -> None:
    ctx = RequestContext.of({"message": "Move the files please", "tools_called": ["cd", "ls"]})
    assert ctx is not None
    feats = ctx.features()
    assert feats.dtype == np.int64 and len(feats) == 3  # move, file, previous tool
    assert words("Move the files please") == ["move", "file"]
    kept = stored_context({"message": "secret words", "channel": "c"})
    assert kept == {"channel": "c", "message_chars": 12}


def test_bm25_ranks_the_matching_document_first() -> None:
    index = BM25Index.of_texts(["read a file", "weather forecast today", "send email"])
    assert index.top(words("what is the weather"), 2) == [1]
    assert index.top(words("nothing matches"), 3) == []
    r = relevance(ArmSet.of(inventory()), "Will it rain? Check the weather forecast")
    assert r.argmax() == 1 and r.max() == 1.0


def test_a_request_without_context_selects_as_before() -> None:
    arms = ArmSet.of(inventory())
    post = align_posteriors(arms, None)
    before = select_arms(arms, post, config(), 11)
    # a draw passed explicitly as the default one, and no forced arm, change nothing
    from learning_bot.engine.draws import draw_scores

    same = select_arms(arms, post, config(), 11, draw=draw_scores, force=None)
    assert same == before


def test_lexical_relevance_moves_the_draw_toward_the_request() -> None:
    arms = ArmSet.of(inventory())
    post = align_posteriors(arms, None)
    ctx = RequestContext.of({"message": "send an email to my boss"})
    assert ctx is not None
    a, b = context_beta(arms, post, ctx, None, ContextSettings())
    mean = a / (a + b)
    assert mean.argmax() == 2
    hits = sum(
        "tool:t:send_email"
        in select_arms(
            arms,
            post,
            config(),
            seed,
            draw=lambda p, c, g: g.beta(a, b),
        ).selected
        for seed in range(40)
    )
    assert hits >= 36


def test_evidence_learns_per_feature_forgets_and_stays_bounded() -> None:
    arms = ArmSet.of(inventory())
    evidence = ContextEvidence(keep=1.0, max_cells=50)
    weather = RequestContext.of({"message": "rain tomorrow?"})
    files = RequestContext.of({"message": "open my notes"})
    assert weather is not None and files is not None
    for _ in range(20):
        evidence.record(weather.features(), {"tool:t:other3": 1.0, "tool:t:other4": 0.0})
        evidence.record(files.features(), {"tool:t:other3": 0.0, "tool:t:other4": 1.0})
    post = align_posteriors(arms, None)
    a, b = context_beta(arms, post, weather, evidence, ContextSettings(lexical_weight=0.0))
    mean = a / (a + b)
    assert mean[arms.index["tool:t:other3"]] > 0.8 > 0.2 > mean[arms.index["tool:t:other4"]]
    # the bound: rows of least recently updated features go first
    for i in range(40):
        evidence.record([10_000 + i], {f"tool:t:other{k}": 1.0 for k in range(3)})
    assert evidence.cells <= 50
    assert evidence.rate_with(int(weather.features()[0]), "tool:t:other3") is None
    # forgetting: a feature's evidence decays by keep at each run that carries it
    fading = ContextEvidence(keep=0.5)
    fading.record([7], {"tool:t:other1": 1.0})
    fading.record([8], {"tool:t:other1": 1.0})
    assert fading.rate_with(7, "tool:t:other1") == (1.0, 1.0)
    fading.record([7], {"tool:t:other2": 1.0})
    assert fading.rate_with(7, "tool:t:other1") == (0.5, 0.5)


def test_stored_cells_load_back_to_the_same_evidence() -> None:
    evidence = ContextEvidence(keep=0.9)
    evidence.record([1, 2], {"tool:t:a": 1.0, "tool:t:b": 0.0})
    evidence.record([2], {"tool:t:a": 0.0})
    evidence.record([3], {})
    cells = evidence.cells_of([1, 2], ["tool:t:a", "tool:t:b"])
    again = ContextEvidence(keep=0.9)
    again.load(cells, evidence.tick)
    for feature in (1, 2):
        for arm in ("tool:t:a", "tool:t:b"):
            assert again.rate_with(feature, arm) == pytest.approx(evidence.rate_with(feature, arm))


def test_cells_advanced_run_by_run_as_storage_does_match_the_evidence_in_memory() -> None:
    from learning_bot.engine.context_policy import advance_cells

    gen = np.random.default_rng(4)
    arms = [f"tool:t:a{i}" for i in range(6)]
    evidence = ContextEvidence(keep=0.8)
    stored: dict[tuple[int, str], EvidenceCell] = {}
    for _ in range(60):
        features = gen.choice(8, size=int(gen.integers(0, 4)), replace=False).tolist()
        chosen = gen.choice(arms, size=int(gen.integers(0, 4)), replace=False).tolist()
        rewards = {a: float(gen.integers(0, 2)) for a in chosen}
        evidence.record(features, rewards)
        # what one observe's write reads: the runs' features' rows of the rewarded arms
        read = [c for (f, a), c in stored.items() if f in features and (a in rewards or not a)]
        for cell in advance_cells(read, [(features, rewards)], 0.8):
            stored[(cell.feature, cell.arm_id)] = cell
    again = ContextEvidence(keep=0.8)
    again.load(stored.values(), evidence.tick)
    for feature in range(8):
        for arm in arms:
            got, want = again.rate_with(feature, arm), evidence.rate_with(feature, arm)
            assert (got is None) == (want is None)
            if want is not None:
                assert got == pytest.approx(want)


def test_deferred_lists_the_left_out_tools_only() -> None:
    arms = [*inventory()[:3], Arm("skill:s:writing", 100)]
    chosen = select_arms(arms, None, config(token_budget=100), 3)
    assert set(chosen.deferred) == {a for a in chosen.excluded if a.startswith("tool:")}
    assert "skill:s:writing" not in chosen.deferred


def test_an_arm_left_out_past_the_bound_is_owed_one_try() -> None:
    arms = ArmSet.of(inventory())
    owed = OwedTries(ExplorationBound(after_selections=5, per_select=1))
    never = arms.index["tool:t:calculator"]
    for _ in range(5):
        assert owed.mask(arms) is None
        mask = np.ones(len(arms), dtype=bool)
        mask[never] = False
        owed.included(arms, mask)
    forced = owed.mask(arms)
    assert forced is not None and np.flatnonzero(forced).tolist() == [never]
    post = align_posteriors(arms, None)
    chosen = select_arms(arms, post, config(token_budget=100), 5, force=forced)
    assert "tool:t:calculator" in chosen.selected
    owed.included(arms, chosen.mask)
    assert owed.mask(arms) is None  # its count starts again


def test_counts_read_from_storage_carry_on_in_the_process() -> None:
    arms = ArmSet.of(inventory())
    owed = OwedTries(ExplorationBound(after_selections=5, per_select=1))
    first, second = arms.ids[0], arms.ids[1]
    owed.sync({first: 4, second: 1})  # left out of the learner's last 4 runs, and 1
    assert owed.mask(arms) is None
    owed.included(arms, np.zeros(len(arms), dtype=bool))
    forced = owed.mask(arms)
    assert forced is not None and np.flatnonzero(forced).tolist() == [0]
    owed.included(arms, forced)
    # storage has not seen the run that included it yet: the process's smaller count holds
    owed.sync({first: 6, second: 4})
    assert owed.mask(arms) is None
    owed.included(arms, np.zeros(len(arms), dtype=bool))
    forced = owed.mask(arms)
    assert forced is not None and np.flatnonzero(forced).tolist() == [1]
