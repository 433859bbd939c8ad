"""Reference detection, the observation guard and rewards (SPEC section 5)."""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from learning_bot.engine import (
    MAX_ARMS_PER_RUN,
    MAX_TEXT_CHARS,
    Arm,
    InvalidInput,
    LearningConfig,
    Phase,
    ReportedArm,
    RunReport,
    RunText,
    SkipReason,
    ToolCall,
    Usage,
    detect_reference,
    observation_guard,
    referenced_arms,
    rewards_for_run,
)

MakeReport = Callable[..., RunReport]


def refs(
    arm: Arm,
    texts: Sequence[str] = (),
    calls: Sequence[ToolCall] = (),
    included: Sequence[Arm] | None = None,
) -> bool:
    return detect_reference(arm, list(texts), list(calls), included=included)


# --- tool ----------------------------------------------------------------------------------

READ = Arm("tool:fs:Read", 10)


def test_tool_referenced_by_a_call_with_its_exact_name() -> None:
    assert refs(READ, [], [ToolCall("Read")])
    assert refs(READ, ["done"], [ToolCall("message"), ToolCall("Read", {"path": "a"})])


@pytest.mark.parametrize("call", ["read", "READ", "ReadFile", "Rea", "fs:Read", " Read"])
def test_tool_not_referenced_by_other_call_names(call: str) -> None:
    assert not refs(READ, [], [ToolCall(call)])


def test_tool_not_referenced_by_text_or_metadata() -> None:
    text = ["I will Read the file with the Read tool: tool:fs:Read"]
    assert not refs(READ, text, [ToolCall("Bash", {"note": "Read"})])


def test_tool_name_is_the_id_part_not_the_category() -> None:
    assert not refs(READ, [], [ToolCall("fs")])
    assert refs(Arm("tool:mcp:server:search", 1), [], [ToolCall("server:search")])


# --- skill ---------------------------------------------------------------------------------

GO = Arm("skill:go:main", 10)


@pytest.mark.parametrize(
    "text",
    [
        "Let's go.",
        "GO is fine",
        "using Go here",
        "(go)",
        "go",
        "I wrote it in go, then tested it",
        "go-to",
    ],
)
def test_skill_whole_word_case_insensitive(text: str) -> None:
    assert refs(GO, [text])


@pytest.mark.parametrize(
    "text",
    ["going there", "I forgot", "golang", "ago", "cargo build", "go_lang", "go2", "main", "skill"],
)
def test_skill_not_referenced_inside_other_words(text: str) -> None:
    assert not refs(GO, [text])


def test_skill_name_is_the_category_part() -> None:
    # "main" is the id part of every skill; only the category names the skill.
    assert not refs(GO, ["see main"])
    assert refs(Arm("skill:code-review:main", 1), ["Ran a Code-Review pass."])
    assert not refs(Arm("skill:code-review:main", 1), ["a code review pass"])


def test_skill_name_with_capitals_matches_any_case() -> None:
    docker = Arm("skill:Docker:main", 1)
    assert refs(docker, ["run it in docker"])
    assert refs(docker, ["DOCKER compose"])
    assert refs(docker, [], [ToolCall("Skill", {"name": "docker"})])
    assert not refs(docker, ["dockerfile"])


def test_skill_in_tool_call_metadata() -> None:
    assert refs(GO, ["done"], [ToolCall("Skill", {"skill": "Go"})])
    assert refs(GO, [], [ToolCall("Bash", "go test ./...")])
    assert not refs(GO, [], [ToolCall("Bash", {"cmd": "going"})])


def test_skill_not_referenced_by_the_tool_call_name_alone() -> None:
    assert not refs(GO, [], [ToolCall("Skill")])


# --- file ----------------------------------------------------------------------------------

README = Arm("file:workspace:README.md", 10)
API = Arm("file:workspace:docs/api.md", 10)


@pytest.mark.parametrize(
    "text",
    [
        "See README.md for details.",
        "see readme.md",
        "README.MD",
        "(README.md)",
        "`README.md`",
        "edit ./README.md now",
        "README.md.",
        "README.md, then",
        "/home/me/project/README.md",
    ],
)
def test_file_by_path_case_insensitive(text: str) -> None:
    assert refs(README, [text])


@pytest.mark.parametrize(
    "text",
    [
        "README.mdx",
        "README.md5",
        "MY_README.md",
        "oldREADME.md",
        "README.md.bak",
        "README",
        "READ ME.md",
        "pre-README.md",
        "README.md/",
    ],
)
def test_file_whole_token_only(text: str) -> None:
    assert not refs(README, [text])


def test_file_by_nested_path_and_by_absolute_path_containing_it() -> None:
    assert refs(API, ["Read docs/api.md first"])
    assert refs(API, ["opened /srv/app/docs/api.md"])
    assert refs(API, ["opened C:\\work\\docs/api.md"])
    assert not refs(API, ["opened docs/api.mdx"])


def test_file_by_base_name_when_unambiguous() -> None:
    other = Arm("file:workspace:src/main.py", 10)
    assert refs(API, ["api.md explains it"], included=[API, other])
    assert refs(API, ["API.MD explains it"], included=[API, other])
    assert refs(API, ["api.md explains it"])  # no included list: nothing to be ambiguous with


def test_file_base_name_ambiguous_among_included_files() -> None:
    twin = Arm("file:workspace:v2/api.md", 10)
    assert not refs(API, ["api.md explains it"], included=[API, twin])
    assert not refs(twin, ["api.md explains it"], included=[API, twin])
    # the full path still counts
    assert refs(API, ["docs/api.md explains it"], included=[API, twin])
    assert not refs(twin, ["docs/api.md explains it"], included=[API, twin])


def test_file_base_name_ambiguity_ignores_non_file_arms() -> None:
    memory = Arm("memory:p:api.md", 10, content="x" * 30)
    assert refs(API, ["api.md"], included=[API, memory])


def test_file_base_name_must_be_a_whole_token() -> None:
    assert not refs(API, ["myapi.md"])
    assert not refs(API, ["api.mdx"])
    assert not refs(API, ["v2-api.md"])


def test_file_not_referenced_by_unrelated_text() -> None:
    assert not refs(API, ["the api docs"])
    assert not refs(API, ["docs"])


def test_file_with_a_colon_in_its_path() -> None:
    arm = Arm("file:workspace:C:/x/notes.md", 5)
    assert arm.name == "C:/x/notes.md"
    assert refs(arm, ["Open C:/x/notes.md"])
    assert refs(arm, ["see notes.md"])


def test_report_uses_included_files_for_ambiguity(make_report: MakeReport) -> None:
    twin = Arm("file:workspace:v2/api.md", 10)
    solo = Arm("file:workspace:docs/guide.md", 10)
    report = make_report(included=[API, twin, solo], texts=["api.md and guide.md"])
    assert referenced_arms(report) == {API.id: False, twin.id: False, solo.id: True}
    # an excluded file with the same base name does not make it ambiguous
    report = make_report(included=[API, solo], excluded=[twin], texts=["api.md"])
    assert referenced_arms(report) == {API.id: True, solo.id: False}


# --- memory --------------------------------------------------------------------------------

MEMORY_TEXT = "The staging vault token rotates every Tuesday at noon."


def memory(content: str | None) -> Arm:
    return Arm("memory:project:note", 10, content=content)


def test_memory_by_a_shared_twenty_character_stretch() -> None:
    stretch = MEMORY_TEXT[10:30]
    assert len(stretch) == 20
    assert refs(memory(MEMORY_TEXT), [f"As I recall, {stretch} ..."])


def test_memory_nineteen_shared_characters_are_not_enough() -> None:
    stretch = MEMORY_TEXT[10:29]
    assert len(stretch) == 19
    assert not refs(memory(MEMORY_TEXT), [f"As I recall, {stretch} ..."])
    assert not refs(memory(MEMORY_TEXT), [f"{MEMORY_TEXT[:19]}|{MEMORY_TEXT[19:38]}"])


def test_memory_case_insensitive() -> None:
    assert refs(memory(MEMORY_TEXT), ["THE STAGING VAULT TOKEN ROTATES"])


def test_memory_whitespace_folded() -> None:
    assert refs(memory(MEMORY_TEXT), ["staging   vault\n\ttoken  rotates"])
    spread = Arm("memory:p:n", 1, content="staging\n\nvault    token\trotates weekly")
    assert refs(spread, ["the staging vault token rotates"])


def test_memory_shorter_than_twenty_must_appear_whole() -> None:
    short = memory("Deploy on Fridays")  # 17 characters
    assert refs(short, ["never DEPLOY ON\nFRIDAYS!"])
    assert not refs(short, ["deploy on friday"])
    assert not refs(short, ["deploy on frida ys"])


def test_memory_without_content_or_blank_is_never_referenced() -> None:
    assert not refs(memory(None), ["anything at all, really, more than twenty"])
    assert not refs(memory("   \n "), ["   \n "])


def test_memory_not_referenced_by_tool_metadata_alone() -> None:
    assert not refs(memory(MEMORY_TEXT), [], [ToolCall("Bash", MEMORY_TEXT)])


def test_memory_stretch_across_two_assistant_texts_is_joined_by_whitespace() -> None:
    assert refs(memory(MEMORY_TEXT), ["the staging vault", "token rotates"])


ALPHABET = "ab \n\tA"
small_texts = st.text(alphabet=ALPHABET, max_size=80)


def fold(text: str) -> str:
    return " ".join(text.casefold().split())


def naive_contains_memory(content: str, texts: Sequence[str]) -> bool:
    """SPEC section 5 read literally: try every 20-character stretch of the content."""
    c = fold(content)
    t = fold("\n".join(texts))
    if not c:
        return False
    if len(c) < 20:
        return c in t
    return any(c[i : i + 20] in t for i in range(len(c) - 19))


@st.composite
def memory_cases(draw: st.DrawFn) -> tuple[str, list[str]]:
    content = draw(st.text(alphabet=ALPHABET, max_size=60))
    texts = draw(st.lists(small_texts, max_size=3))
    if content and draw(st.booleans()):
        # plant a piece of the content, sometimes re-cased or re-spaced
        start = draw(st.integers(0, len(content) - 1))
        end = draw(st.integers(start, min(len(content), start + 30)))
        piece = content[start:end]
        if draw(st.booleans()):
            piece = piece.swapcase()
        if draw(st.booleans()):
            piece = piece.replace(" ", "  \n")
        i = draw(st.integers(0, len(texts)))
        texts.insert(i, draw(small_texts) + piece + draw(small_texts))
    return content, texts


@settings(max_examples=400)
@given(memory_cases())
def test_fast_memory_detector_agrees_with_the_naive_one(case: tuple[str, list[str]]) -> None:
    content, texts = case
    expected = naive_contains_memory(content, texts)
    assert RunText(texts, []).contains_memory(content) == expected
    assert refs(memory(content), texts) == expected


@given(st.text(max_size=60), st.lists(st.text(max_size=80), max_size=3))
def test_fast_memory_detector_agrees_on_arbitrary_unicode(content: str, texts: list[str]) -> None:
    assert RunText(texts, []).contains_memory(content) == naive_contains_memory(content, texts)


def test_memory_match_found_at_every_alignment() -> None:
    # Distinct characters: the planted piece is the only stretch the text shares with the
    # content, wherever it sits (start, end, any offset) and whatever the text's length.
    content = string.ascii_lowercase + string.digits
    for start in range(len(content) - 19):
        piece = content[start : start + 20]
        for left in range(25):
            for right in range(12):
                hit = "#" * left + piece + "#" * right
                miss = "#" * left + piece[:19] + "#" * (right + 1)
                assert RunText([hit], []).contains_memory(content), (start, left, right)
                assert not RunText([miss], []).contains_memory(content), (start, left, right)


def test_memory_detection_on_long_texts() -> None:
    content = " ".join(f"word{i}" for i in range(2000))
    filler = "lorem ipsum dolor sit amet " * 20_000
    assert not RunText([filler], []).contains_memory(content)
    hit = filler + "|" + content[5000:5020] + "|" + filler
    assert RunText([hit], []).contains_memory(content)
    miss = filler + "|" + content[5000:5019] + "|" + filler
    assert not RunText([miss], []).contains_memory(content)


# --- section -------------------------------------------------------------------------------


def test_section_always_referenced_when_included() -> None:
    section = Arm("section:prompt:safety", 50)
    assert refs(section)
    assert refs(section, ["nothing related"], [ToolCall("Bash")])


# --- the observation guard -----------------------------------------------------------------


@pytest.fixture
def arms() -> dict[str, Arm]:
    return {
        "tool": Arm("tool:fs:Read", 10),
        "tool_unused": Arm("tool:fs:Write", 10),
        "skill": GO,
        "file": README,
        "memory": memory(MEMORY_TEXT),
        "section": Arm("section:prompt:style", 10),
        "excluded_tool": Arm("tool:web:WebSearch", 10),
        "excluded_skill": Arm("skill:rust:main", 10),
    }


@pytest.fixture
def working_report(make_report: MakeReport, arms: dict[str, Arm]) -> RunReport:
    included = [arms[k] for k in ("tool", "tool_unused", "skill", "file", "memory", "section")]
    return make_report(
        included=included,
        excluded=[arms["excluded_tool"], arms["excluded_skill"]],
        texts=["I read README.md."],
        calls=[ToolCall("message"), ToolCall("Read", {"path": "README.md"})],
    )


def test_referenced_gets_one_unreferenced_gets_zero_excluded_gets_nothing(
    working_report: RunReport, active_config: LearningConfig, arms: dict[str, Arm]
) -> None:
    outcome = rewards_for_run(working_report, active_config)
    assert outcome.skipped is None
    assert not outcome.is_skipped
    assert dict(outcome.rewards) == {
        arms["tool"].id: 1.0,
        arms["tool_unused"].id: 0.0,
        arms["skill"].id: 0.0,
        arms["file"].id: 1.0,
        arms["memory"].id: 0.0,
        arms["section"].id: 1.0,
    }
    assert arms["excluded_tool"].id not in outcome.rewards
    assert arms["excluded_tool"].id not in outcome.referenced
    assert observation_guard(working_report, active_config) is None


def test_excluded_arms_get_nothing_even_when_used(
    make_report: MakeReport, active_config: LearningConfig
) -> None:
    report = make_report(
        included=[Arm("tool:fs:Bash", 1)],
        excluded=[Arm("tool:web:WebSearch", 1), GO],
        texts=["let's go"],
        calls=["Bash", "WebSearch"],
    )
    outcome = rewards_for_run(report, active_config)
    assert dict(outcome.rewards) == {"tool:fs:Bash": 1.0}


def test_every_detection_type_rewarded_in_one_run(
    make_report: MakeReport, active_config: LearningConfig, arms: dict[str, Arm]
) -> None:
    report = make_report(
        included=[arms[k] for k in ("tool", "skill", "file", "memory", "section")],
        texts=[f"Let's go: see ./readme.md. Remember: {MEMORY_TEXT.upper()}"],
        calls=["Read"],
    )
    outcome = rewards_for_run(report, active_config)
    assert set(outcome.rewards.values()) == {1.0}
    assert len(outcome.rewards) == 5


@pytest.mark.parametrize(
    ("cfg", "reason"),
    [
        (LearningConfig(phase=Phase.ACTIVE, enabled=False), SkipReason.DISABLED),
        (LearningConfig(enabled=False), SkipReason.DISABLED),
        (LearningConfig(phase=Phase.PASSIVE), SkipReason.PASSIVE),
    ],
)
def test_disabled_or_passive_updates_nothing(
    working_report: RunReport, cfg: LearningConfig, reason: SkipReason
) -> None:
    outcome = rewards_for_run(working_report, cfg)
    assert outcome.skipped is reason
    assert outcome.is_skipped
    assert dict(outcome.rewards) == {}
    # the observation itself is still made, for the trace
    assert outcome.referenced["tool:fs:Read"] is True
    assert observation_guard(working_report, cfg) is reason


def test_passive_can_be_ignored_for_bootstrapping(working_report: RunReport) -> None:
    cfg = LearningConfig(phase=Phase.PASSIVE)
    assert observation_guard(working_report, cfg, ignore_phase=True) is None
    disabled = LearningConfig(enabled=False)
    assert observation_guard(working_report, disabled, ignore_phase=True) is SkipReason.DISABLED


def _copy(report: RunReport, **changes: object) -> RunReport:
    fields: dict[str, object] = {
        "trace_id": report.trace_id,
        "arms": report.arms,
        "assistant_texts": report.assistant_texts,
        "tool_calls": report.tool_calls,
    }
    fields.update(changes)
    return RunReport(**fields)  # type: ignore[arg-type]


def test_aborted_run_updates_nothing(
    working_report: RunReport, active_config: LearningConfig
) -> None:
    report = _copy(working_report, aborted=True)
    outcome = rewards_for_run(report, active_config)
    assert outcome.skipped is SkipReason.ABORTED
    assert dict(outcome.rewards) == {}


def test_errored_run_updates_nothing(
    working_report: RunReport, active_config: LearningConfig
) -> None:
    report = _copy(working_report, error="model timed out")
    assert report.errored
    outcome = rewards_for_run(report, active_config)
    assert outcome.skipped is SkipReason.ERROR
    assert dict(outcome.rewards) == {}
    assert not _copy(working_report, error="").errored


def test_guard_order(working_report: RunReport) -> None:
    both = _copy(working_report, aborted=True, error="boom", tool_calls=())
    assert observation_guard(both, LearningConfig(enabled=False)) is SkipReason.DISABLED
    assert observation_guard(both, LearningConfig()) is SkipReason.PASSIVE
    assert observation_guard(both, LearningConfig(phase=Phase.ACTIVE)) is SkipReason.ABORTED
    errored = _copy(working_report, error="boom", tool_calls=())
    assert observation_guard(errored, LearningConfig(phase=Phase.ACTIVE)) is SkipReason.ERROR


@pytest.mark.parametrize(
    "calls",
    [
        [],
        [ToolCall("message")],
        [ToolCall("message"), ToolCall("message", {"text": "hi"})],
    ],
)
def test_conversational_turn_updates_nothing(
    working_report: RunReport, active_config: LearningConfig, calls: list[ToolCall]
) -> None:
    report = _copy(working_report, tool_calls=tuple(calls), assistant_texts=("Let's go!",))
    outcome = rewards_for_run(report, active_config)
    assert outcome.skipped is SkipReason.CONVERSATIONAL
    assert dict(outcome.rewards) == {}
    assert outcome.referenced["skill:go:main"] is True


def test_meta_tools_are_configurable(working_report: RunReport) -> None:
    report = _copy(working_report, tool_calls=(ToolCall("message"), ToolCall("Think")))
    default = LearningConfig(phase=Phase.ACTIVE)
    assert observation_guard(report, default) is None
    thinking = LearningConfig(phase=Phase.ACTIVE, meta_tools=frozenset({"message", "Think"}))
    assert observation_guard(report, thinking) is SkipReason.CONVERSATIONAL


def test_one_real_tool_call_makes_a_working_turn(
    working_report: RunReport, active_config: LearningConfig
) -> None:
    report = _copy(working_report, tool_calls=(ToolCall("message"), ToolCall("Grep")))
    outcome = rewards_for_run(report, active_config)
    assert outcome.skipped is None
    assert outcome.rewards["tool:fs:Read"] == 0.0


def test_skip_reason_values() -> None:
    assert {r.value for r in SkipReason} == {
        "disabled",
        "passive",
        "aborted",
        "error",
        "conversational",
    }


# --- RunReport validation ------------------------------------------------------------------


def test_report_defaults(make_report: MakeReport) -> None:
    report = make_report(included=[READ], session_key="slack:C1", trace_id="t-9")
    assert report.run_id == "t-9"
    assert report.conversation == "slack:C1"
    assert report.timestamp > 0
    assert report.usage.total == 0
    assert report.included_arms == (READ,)
    assert Usage(input=3, output=4, cache_read=5).total == 12
    assert Usage(input=3, output=4, cache_read=5, cache_write=6).total == 18
    assert Usage(input=3, cache_write=6).to_dict() == {
        "input": 3,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 6,
        "total": 9,
    }


def test_report_needs_arms() -> None:
    with pytest.raises(InvalidInput, match="arms"):
        RunReport(trace_id="t", arms=())


def test_report_rejects_duplicate_arm_ids() -> None:
    arms = (ReportedArm(READ, True), ReportedArm(Arm("tool:fs:Read", 99), False))
    with pytest.raises(InvalidInput, match="tool:fs:Read"):
        RunReport(trace_id="t", arms=arms)


def test_report_rejects_too_many_arms() -> None:
    arms = tuple(ReportedArm(Arm(f"tool:x:t{i}", 1)) for i in range(MAX_ARMS_PER_RUN + 1))
    with pytest.raises(InvalidInput, match="arms"):
        RunReport(trace_id="t", arms=arms)


def test_report_rejects_oversized_text() -> None:
    half = "x" * (MAX_TEXT_CHARS // 2)
    RunReport(trace_id="t", arms=(ReportedArm(READ),), assistant_texts=(half, half))
    with pytest.raises(InvalidInput, match="assistant_texts"):
        RunReport(trace_id="t", arms=(ReportedArm(READ),), assistant_texts=(half, half + "x"))


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"trace_id": ""}, "trace_id"),
        ({"trace_id": "a\nb"}, "trace_id"),
        ({"channel": "x" * 300}, "channel"),
        ({"timestamp": -1}, "timestamp"),
        ({"duration_ms": -5}, "duration_ms"),
        ({"aborted": "yes"}, "aborted"),
        ({"assistant_texts": (1,)}, "assistant_texts"),
        ({"tool_calls": ("Read",)}, "tool_calls"),
        ({"error": 5}, "error"),
    ],
)
def test_report_rejects_bad_fields(changes: dict[str, object], fragment: str) -> None:
    fields: dict[str, object] = {"trace_id": "t", "arms": (ReportedArm(READ),)}
    fields.update(changes)
    with pytest.raises(InvalidInput, match=fragment):
        RunReport(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["input", "output", "cache_read", "cache_write"])
def test_usage_rejects_negative_counts(field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        Usage(**{field: -1})


@pytest.mark.parametrize("name", ["", None, 5])
def test_tool_call_needs_a_name(name: object) -> None:
    with pytest.raises(InvalidInput, match="name"):
        ToolCall(name)  # type: ignore[arg-type]


def test_tool_call_metadata_size_is_limited() -> None:
    with pytest.raises(InvalidInput, match="metadata"):
        ToolCall("Bash", "x" * 100_000)
