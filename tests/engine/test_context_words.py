"""Message words as users write them (SPEC section 4b, "Message features"): alphanumeric words
and identifiers kept whole, the inventory's words split the same way, a request whose features
carry no evidence drawn as one without context, and features named by their written form."""

from __future__ import annotations

import numpy as np
import pytest

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.context import RequestContext, feature_hash, terms, words, written_features
from learning_bot.engine.context_policy import (
    ContextEvidence,
    ContextSettings,
    context_scores,
    explain,
    relevance,
)
from learning_bot.engine.draws import draw_scores
from learning_bot.engine.feature_words import DisplayWords
from learning_bot.engine.inventory import ArmSet, FloatArray, PosteriorArrays, align_posteriors
from learning_bot.engine.selection import Draw, select_arms


def inventory() -> list[Arm]:
    return [
        Arm("tool:t:s3_upload", 100, description="Put a file in a bucket"),
        Arm("tool:t:ec2_start", 100, description="Start a virtual machine"),
        Arm("tool:t:kubectl", 100, description="Run a command against a k8s cluster"),
        Arm("tool:t:getWeather", 100, description="The forecast for a city"),
        *(Arm(f"tool:t:other{i}", 100, description=f"helper number {i}") for i in range(8)),
    ]


def config(policy: str = "seed", **options: object) -> LearningConfig:
    settings: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "token_budget": 400,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
    }
    return LearningConfig.for_policy(policy, **{**settings, **options})


def test_alphanumeric_words_are_features_whole() -> None:
    message = "deploy k8s and s3 on ec2 with gpt4o"
    assert words(message) == ["deploy", "k8s", "s3", "ec2", "gpt4o"]
    request = RequestContext.of({"message": message})
    assert request is not None
    expected = [feature_hash("w", w) for w in ("deploy", "k8s", "s3", "ec2", "gpt4o")]
    assert request.features().tolist() == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v2 on x86", ["v2", "x86"]),
        ("port 8080, retry 3 times", ["port", "8080", "retry", "time"]),
        ("call s3_upload now", ["call", "s3_upload", "s3", "upload"]),
        ("getWeather for Oslo", ["getweather", "get", "weather", "oslo"]),
        ("getS3Object", ["gets3object", "get", "s3", "object"]),
        ("HTTPServer logs", ["httpserver", "http", "server", "log"]),
        ("the GPT4o model and EC2", ["gpt4o", "model", "ec2"]),
        ("x86_64 builds", ["x86_64", "x86", "64", "build"]),
    ],
)
def test_identifiers_count_whole_and_by_their_parts(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_stemming_touches_letters_only_words_and_the_written_form_is_kept() -> None:
    # an ending is taken off a word of letters only; a word with digits is matched as written
    assert terms("staging files k8s gpt4os ec2s") == [
        ("stag", "staging"),
        ("file", "files"),
        ("k8s", "k8s"),
        ("gpt4os", "gpt4os"),
        ("ec2s", "ec2s"),
    ]
    assert words("a 7 b") == []  # one-character words, digits included, are no features


def test_the_inventorys_words_split_as_the_messages_do() -> None:
    arms = ArmSet.of(inventory())
    for message, tool in (
        ("copy the report to s3", "tool:t:s3_upload"),
        ("spin up an ec2 box", "tool:t:ec2_start"),
        ("scale the k8s deployment", "tool:t:kubectl"),
        ("what weather tomorrow", "tool:t:getWeather"),
    ):
        r = relevance(arms, message)
        assert arms.ids[int(r.argmax())] == tool, message


def posteriors(arms: ArmSet) -> PosteriorArrays:
    """Posteriors that have learned something: a draw from them is narrow for some arms."""
    post = align_posteriors(arms, None)
    gen = np.random.default_rng(7)
    pulls = gen.integers(0, 60, size=len(arms))
    hits = np.floor(pulls * gen.uniform(0.0, 1.0, size=len(arms)))
    return PosteriorArrays(post.alpha + hits, post.beta + pulls - hits, pulls.astype(np.int64))


@pytest.mark.parametrize("policy", ["seed", DEFAULT_POLICY])
def test_a_request_whose_features_carry_no_evidence_draws_as_one_without_context(
    policy: str,
) -> None:
    arms = ArmSet.of(inventory())
    post = posteriors(arms)
    settings = ContextSettings()
    evidence = ContextEvidence()
    rain = RequestContext.of({"message": "rain in Oslo"})
    assert rain is not None
    for _ in range(5):
        evidence.record(rain.features(), {"tool:t:getWeather": 1.0, "tool:t:other1": 0.0})
    unknown = RequestContext.of({"message": "deploy k8s on ec2", "channel": "ops"})
    assert unknown is not None
    cfg = config(policy)

    def draw_for(request: RequestContext) -> Draw:
        def draw(p: PosteriorArrays, c: LearningConfig, g: np.random.Generator) -> FloatArray:
            return context_scores(arms, p, request, evidence, settings, c, g)

        return draw

    for seed in range(20):
        without = select_arms(arms, post, cfg, seed)
        with_message = select_arms(arms, post, cfg, seed, draw=draw_for(unknown))
        assert with_message == without, seed
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        scores = context_scores(arms, post, unknown, evidence, settings, cfg, g1)
        assert np.array_equal(scores, draw_scores(post, cfg, g2))
        assert g1.random() == g2.random()  # the same draws taken, no more
    # once one of its words has evidence, the request draws from it (another draw)
    g1, g2 = np.random.default_rng(0), np.random.default_rng(0)
    known = RequestContext.of({"message": "deploy k8s in the rain"})
    assert known is not None
    scores = context_scores(arms, post, known, evidence, settings, cfg, g1)
    assert not np.array_equal(scores, draw_scores(post, cfg, g2))


def test_a_feature_is_named_by_its_most_common_written_form() -> None:
    shown = DisplayWords(max_features=3)
    stag = feature_hash("w", "stag")
    shown.note([(stag, "staging")], times=3)
    shown.note([(stag, "stage")], times=1)
    assert shown.form(stag) == "staging"
    shown.note([(stag, "stage")], times=3)
    assert shown.form(stag) == "stage"  # 4 against 3
    # bounded: the least recently seen feature goes first
    shown.note([(1, "one"), (2, "two"), (3, "three")])
    assert shown.form(stag) is None and len(shown) == 3
    shown.note([(1, "one"), (4, "four")])
    assert shown.form(2) is None and shown.form(1) == "one" and shown.form(4) == "four"


def test_explanations_name_message_words_as_users_wrote_them() -> None:
    arms = ArmSet.of(inventory())
    evidence = ContextEvidence()
    shown = DisplayWords()
    for i in range(12):
        staging = i % 2 == 0
        message = "roll out to staging" if staging else "x"
        request = RequestContext.of({"message": message})
        assert request is not None
        used = "tool:t:kubectl" if staging else "tool:t:other2"
        evidence.record(request.features(), {"tool:t:kubectl": float(staging), used: 1.0})
        shown.note(written_features(message))
    relevance(arms, "prime the inventory's words")
    names = [lift.feature for lift in explain(evidence, "tool:t:kubectl", 6.0, 12.0)]
    assert "the message mentions 'staging'" not in names  # nobody said how it was written
    lifts = explain(evidence, "tool:t:kubectl", 6.0, 12.0, written=shown.forms)
    names = [lift.feature for lift in lifts]
    assert "the message mentions 'staging'" in names, names
    assert all("'stag'" not in n for n in names)


def test_counts_not_yet_shared_are_taken_once_every_so_many_notes() -> None:
    shown = DisplayWords()
    stag = feature_hash("w", "stag")
    for _ in range(3):
        shown.note([(stag, "staging")])
    assert shown.pending(every=4) == {}
    shown.note([(stag, "staged")])
    taken = shown.pending(every=4)
    assert taken == {(stag, "staging"): 3, (stag, "staged"): 1}
    assert shown.pending(every=0) == {}  # taken once
    shown.unshared(taken)  # the store could not take them: they wait for the next time
    assert shown.pending(every=0) == taken
