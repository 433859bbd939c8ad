"""What a run reports, which arms it used, and the rewards that follow (docs/learning.md)."""

from __future__ import annotations

import enum
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from learning_bot.engine.arms import Arm, ArmType, parse_arm_id
from learning_bot.engine.bounds import (
    check_json,
    check_text,
    check_timestamp,
)
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.posterior import now_ms, to_ms
from learning_bot.engine.text import has_controls
from learning_bot.engine.usage import Usage, check_usage_count

MAX_ARMS_PER_RUN = 10_000
"""Most arms one run report may carry."""
MAX_TEXT_CHARS = 1_000_000
"""Most characters of assistant text (all texts together) one run report may carry."""
MAX_TOOL_CALLS = 2_000
"""Most tool calls one run report may carry."""
MAX_META_CHARS = 65_536
"""Most characters of one tool call's metadata, serialised."""
MAX_ID_CHARS = 256
"""Longest trace, run, session and channel identifier."""
MAX_ERROR_CHARS = 10_000
"""Longest error text a run report may carry."""
MEMORY_MATCH_CHARS = 20
"""A memory counts as used when this many consecutive characters of it appear in the output."""

_WORD = re.compile(r"\w+")
_ANCHOR = MEMORY_MATCH_CHARS // 2


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of the model: its name and optional metadata (arguments, skill...).

    `arm` names the arm called (`tool:<category>:<name>`), and then that arm alone is
    credited: two tools of one name (`tool:billing:calculate`, `tool:travel:calculate`) are
    told apart. A name given as a full arm id is read as that arm, with its tool name as the
    name; a `category:name` is resolved against the run's arms (`RunReport`)."""

    name: str
    meta: Mapping[str, Any] | str | None = None
    arm: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidInput(f"tool call name must be a non-empty string, got {self.name!r}")
        check_text("tool call name", self.name, MAX_ID_CHARS)
        if self.arm is not None:
            if not isinstance(self.arm, str):
                raise InvalidInput(f"tool call arm must be an arm id string, got {self.arm!r:.80}")
            _check_tool_arm("tool call arm", self.arm)
        elif self.name.startswith("tool:") and _is_tool_arm(self.name):
            object.__setattr__(self, "arm", self.name)
            object.__setattr__(self, "name", self.name.split(":", 2)[2])
        if self.meta is not None and not isinstance(self.meta, (str, Mapping)):
            raise InvalidInput(f"tool call meta must be an object or a string, got {self.meta!r}")
        check_json("tool call meta", self.meta)
        if len(self.meta_text) > MAX_META_CHARS:
            raise InvalidInput(
                f"metadata of tool call {self.name[:64]!r} is longer than {MAX_META_CHARS} chars"
            )

    @property
    def meta_text(self) -> str:
        if self.meta is None:
            return ""
        if isinstance(self.meta, str):
            return self.meta
        return json.dumps(self.meta, ensure_ascii=False, default=str, separators=(",", ":"))


def _is_tool_arm(text: str) -> bool:
    try:
        return parse_arm_id(text).type is ArmType.TOOL
    except InvalidInput:
        return False


def _resolve_qualified(
    calls: tuple[ToolCall, ...], arms: Sequence[ReportedArm]
) -> tuple[ToolCall, ...]:
    """Calls named `category:name` after one of the run's tool arms: that arm, by its name."""
    tools = {
        (item.arm.category, item.arm.name): item.arm.id
        for item in arms
        if item.arm.type is ArmType.TOOL
    }
    out = []
    for call in calls:
        if call.arm is None and ":" in call.name:
            category, _, name = call.name.partition(":")
            arm_id = tools.get((category, name))
            if arm_id is not None:
                call = ToolCall(name, call.meta, arm_id)
        out.append(call)
    return tuple(out)


def _check_tool_arm(name: str, arm_id: str) -> None:
    """A tool's arm id (`tool:<category>:<name>`), or InvalidInput naming `name`."""
    try:
        parsed = parse_arm_id(arm_id)
    except InvalidInput as exc:
        raise InvalidInput(f"{name}: {exc}") from None
    if parsed.type is not ArmType.TOOL:
        raise InvalidInput(
            f"{name} must name a tool's arm (tool:<category>:<name>), got {arm_id!r:.80}"
        )


@dataclass(frozen=True, slots=True)
class ReportedArm:
    """An arm as a run saw it: in the prompt (`included`) or left out; `loaded`: left out of
    the prompt the run was sent with, then loaded by the model through tool search (a deferred
    tool). A loaded arm counts as in the prompt for the reward (used: referenced), and apart
    from the selected ones for the session's set (it was not in the cached prefix)."""

    arm: Arm
    included: bool = True
    loaded: bool = False

    @property
    def in_prompt(self) -> bool:
        """Included, or loaded through tool search: the model had it."""
        return self.included or self.loaded


def _check_identifier(name: str, value: Any, required: bool = False) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise InvalidInput(f"{name} is required and must not be empty")
    if has_controls(value):  # NUL and lone surrogates among them
        raise InvalidInput(f"{name} contains control characters")
    check_text(name, value, MAX_ID_CHARS)


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything the agent runtime reports after one model run."""

    trace_id: str
    arms: tuple[ReportedArm, ...]
    run_id: str = ""
    session_id: str = ""
    session_key: str = ""
    channel: str = ""
    timestamp: int = field(default_factory=now_ms)
    provider: str = ""
    model: str = ""
    is_baseline: bool = False
    assistant_texts: tuple[str, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    duration_ms: int = 0
    system_prompt_chars: int = 0
    aborted: bool = False
    error: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    conversation: str = ""
    """Channel or thread the run answered in; `reward` without an arm credits its latest run.
    Defaults to `session_key`, else `channel`."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        _check_identifier("trace_id", self.trace_id, required=True)
        for name in ("run_id", "session_id", "session_key", "channel", "provider", "model"):
            _check_identifier(name, getattr(self, name))
        if not self.run_id:
            set_(self, "run_id", self.trace_id)
        if not self.conversation:
            set_(self, "conversation", self.session_key or self.channel)
        _check_identifier("conversation", self.conversation)
        arms = tuple(self.arms)
        if not arms:
            raise InvalidInput("arms: a run report needs at least one arm")
        if len(arms) > MAX_ARMS_PER_RUN:
            raise InvalidInput(f"arms: {len(arms)} arms; at most {MAX_ARMS_PER_RUN} per run")
        for item in arms:
            if not isinstance(item, ReportedArm):
                raise InvalidInput(f"arms must hold ReportedArm objects, got {item!r:.80}")
            if item.loaded is not False and not isinstance(item.loaded, bool):
                raise InvalidInput(f"arms: loaded of {item.arm.id[:80]!r} must be true or false")
        counts = Counter(item.arm.id for item in arms)
        if len(counts) != len(arms):
            dupes = [arm_id for arm_id, n in counts.items() if n > 1]
            raise InvalidInput(f"arms: repeated arm id(s): {', '.join(dupes[:5])}")
        set_(self, "arms", arms)
        texts = tuple(self.assistant_texts)
        if any(not isinstance(t, str) for t in texts):
            raise InvalidInput("assistant_texts must be a list of strings")
        if sum(len(t) for t in texts) > MAX_TEXT_CHARS:
            raise InvalidInput(f"assistant_texts hold more than {MAX_TEXT_CHARS} characters")
        set_(self, "assistant_texts", texts)
        calls = tuple(self.tool_calls)
        if len(calls) > MAX_TOOL_CALLS:
            raise InvalidInput(f"tool_calls: {len(calls)} calls; at most {MAX_TOOL_CALLS}")
        if any(not isinstance(c, ToolCall) for c in calls):
            raise InvalidInput("tool_calls must hold ToolCall objects")
        if any(c.arm is None and ":" in c.name for c in calls):
            calls = _resolve_qualified(calls, arms)
        set_(self, "tool_calls", calls)
        set_(self, "timestamp", check_timestamp("timestamp", to_ms(self.timestamp)))
        for name in ("is_baseline", "aborted"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"{name} must be true or false")
        if not isinstance(self.usage, Usage):
            raise InvalidInput("usage must be a Usage")
        check_usage_count("duration_ms", self.duration_ms)
        check_usage_count("system_prompt_chars", self.system_prompt_chars)
        if self.error is not None:
            check_text("error", self.error, MAX_ERROR_CHARS)
        if not isinstance(self.context, Mapping):
            raise InvalidInput("context must be an object")
        check_json("context", self.context)

    @property
    def included_arms(self) -> tuple[Arm, ...]:
        return tuple(item.arm for item in self.arms if item.included)

    @property
    def loaded_arms(self) -> tuple[Arm, ...]:
        """The arms the model loaded through tool search (left out of the prompt it was sent)."""
        return tuple(item.arm for item in self.arms if item.loaded and not item.included)

    @property
    def errored(self) -> bool:
        return bool(self.error)


class SkipReason(enum.StrEnum):
    """Why a run leaves every posterior unchanged (the observation guard)."""

    DISABLED = "disabled"
    PASSIVE = "passive"
    ABORTED = "aborted"
    ERROR = "error"
    CONVERSATIONAL = "conversational"


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one run means for the posteriors.

    `referenced` covers every included (or loaded) arm (recorded in both phases); `rewards`
    holds 1.0 or 0.0 per such arm, or nothing when the run was `skipped` for the given reason.
    `ambiguous`: each bare tool-call name that several of the run's arms share, with their
    ids; such a call credits none of them, and they get no reward from the run (the one
    called cannot be told; name the arm in the call to credit it).
    """

    referenced: Mapping[str, bool]
    rewards: Mapping[str, float]
    skipped: SkipReason | None
    ambiguous: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_skipped(self) -> bool:
        return self.skipped is not None


class RunText:
    """The run's output, normalised once and shared by every arm's reference check."""

    def __init__(self, assistant_texts: Iterable[str], tool_calls: Iterable[ToolCall]) -> None:
        self.text = "\n".join(assistant_texts).casefold()
        calls = tuple(tool_calls)
        self.call_names = frozenset(call.name for call in calls)
        self.bare_names = frozenset(call.name for call in calls if call.arm is None)
        """The names of the calls that do not name their arm."""
        self.call_arms = frozenset(call.arm for call in calls if call.arm is not None)
        """The arms the calls name."""
        self.meta = "\n".join(call.meta_text for call in calls).casefold()

    @cached_property
    def words(self) -> frozenset[str]:
        return frozenset(_WORD.findall(self.text)) | frozenset(_WORD.findall(self.meta))

    @cached_property
    def folded(self) -> str:
        return " ".join(self.text.split())

    def uses_tool(self, name: str) -> bool:
        return name in self.call_names

    def calls_arm(self, arm: Arm) -> bool:
        """A call names this arm, or, naming no arm, has its tool's name."""
        return arm.id in self.call_arms or arm.name in self.bare_names

    def mentions_word(self, word: str) -> bool:
        w = word.casefold()
        if _WORD.fullmatch(w):
            return w in self.words
        if w not in self.text and w not in self.meta:
            return False
        pattern = _word_pattern(w)
        return bool(pattern.search(self.text) or pattern.search(self.meta))

    def mentions_path(self, path: str) -> bool:
        folded = path.casefold()
        if folded not in self.text:  # a plain substring scan rules most files out
            return False
        return bool(_path_pattern(folded).search(self.text))

    def contains_memory(self, content: str) -> bool:
        return bool(self.memories_used({"": content}))

    def memories_used(self, contents: Mapping[str, str]) -> set[str]:
        """The keys of `contents` whose memory shares MEMORY_MATCH_CHARS consecutive
        characters (whitespace folded, case-insensitive) with the output; a memory shorter
        than that must appear whole.

        Linear in the output and memory sizes, whatever the number of memories: the output
        is probed only at every _ANCHOR-th position, and only where that slice occurs in
        some memory are the stretches covering it looked up."""
        t = self.folded
        whole, by_window, grams = _memory_index(tuple(contents.items()))
        found = {key for key, folded in whole if folded in t}
        if not by_window:
            return found
        n = MEMORY_MATCH_CHARS
        size = len(t)
        checked: set[str] = set()
        for q in range(0, size - _ANCHOR + 1, _ANCHOR):
            if t[q : q + _ANCHOR] not in grams:
                continue
            for p in range(max(0, q - (n - _ANCHOR)), min(q, size - n) + 1):
                window = t[p : p + n]
                if window in checked:
                    continue
                checked.add(window)
                keys = by_window.get(window)
                if keys:
                    found.update(keys)
        return found


@lru_cache(maxsize=64)
def _memory_index(
    items: tuple[tuple[str, str], ...],
) -> tuple[list[tuple[str, str]], dict[str, list[str]], frozenset[str]]:
    """For a run's memories: the short ones (looked for whole), every window -> the memories
    holding it, and every anchor-sized slice; cached, as inventories repeat run after run."""
    whole: list[tuple[str, str]] = []
    by_window: dict[str, list[str]] = {}
    grams: set[str] = set()
    for key, content in items:
        prepared = _prepare_memory(content)
        if prepared is None:
            continue
        folded, windows, slices = prepared
        if not windows:
            whole.append((key, folded))
            continue
        grams |= slices
        for window in windows:
            by_window.setdefault(window, []).append(key)
    return whole, by_window, frozenset(grams)


@lru_cache(maxsize=4096)
def _prepare_memory(content: str) -> tuple[str, frozenset[str], frozenset[str]] | None:
    """(folded text, its MEMORY_MATCH_CHARS windows, its _ANCHOR slices), cached per content."""
    c = _fold(content)
    if not c:
        return None
    n = MEMORY_MATCH_CHARS
    if len(c) < n:
        return c, frozenset(), frozenset()
    windows = frozenset(c[i : i + n] for i in range(len(c) - n + 1))
    slices = frozenset(c[i : i + _ANCHOR] for i in range(len(c) - _ANCHOR + 1))
    return c, windows, slices


@lru_cache(maxsize=4096)
def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


@lru_cache(maxsize=4096)
def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")


@lru_cache(maxsize=4096)
def _path_pattern(path: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.\-])" + re.escape(path) + r"(?![\w/\\\-]|\.\w)")


@lru_cache(maxsize=4096)
def _base_name(path: str) -> str:
    return re.split(r"[/\\]", path)[-1].casefold()


def _file_base_counts(included: Iterable[Arm]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for arm in included:
        if arm.parsed.type is ArmType.FILE:
            base = _base_name(arm.parsed.name)
            counts[base] = counts.get(base, 0) + 1
    return counts


def _references(arm: Arm, text: RunText, base_counts: dict[str, int] | None) -> bool:
    arm_type = arm.type
    if arm_type is ArmType.TOOL:
        return text.calls_arm(arm)
    if arm_type is ArmType.SKILL:
        return text.mentions_word(arm.category)
    if arm_type is ArmType.SECTION:
        return True
    if arm_type is ArmType.MEMORY:
        return arm.content is not None and text.contains_memory(arm.content)
    if text.mentions_path(arm.name):
        return True
    base = _base_name(arm.name)
    if not base or base == arm.name.casefold():
        return False
    unambiguous = base_counts is None or base_counts.get(base, 0) <= 1
    return unambiguous and text.mentions_path(base)


def detect_reference(
    arm: Arm,
    assistant_texts: Sequence[str] | RunText,
    tool_calls: Sequence[ToolCall] = (),
    included: Sequence[Arm] | None = None,
) -> bool:
    """Whether the run used `arm` (docs/learning.md, "Observation and rewards").

    `included` lists the run's included arms; a file's base name counts only when no other
    included file shares it.
    """
    text = (
        assistant_texts
        if isinstance(assistant_texts, RunText)
        else RunText(assistant_texts, tool_calls)
    )
    counts = _file_base_counts(included) if included is not None else None
    return _references(arm, text, counts)


def observation_guard(
    report: RunReport, config: LearningConfig, *, ignore_phase: bool = False
) -> SkipReason | None:
    """The first reason this run must not update posteriors, or None when it may."""
    if not config.enabled:
        return SkipReason.DISABLED
    if not ignore_phase and not config.is_active:
        return SkipReason.PASSIVE
    if report.aborted:
        return SkipReason.ABORTED
    if report.errored:
        return SkipReason.ERROR
    meta_tools = config.meta_tools
    if not any(call.name not in meta_tools for call in report.tool_calls):
        return SkipReason.CONVERSATIONAL
    return None


def referenced_arms(report: RunReport) -> dict[str, bool]:
    """Referenced or not, for every included (or loaded) arm of the run."""
    return _referenced(report)[0]


def _referenced(report: RunReport) -> tuple[dict[str, bool], dict[str, tuple[str, ...]]]:
    """`referenced_arms`, and the ambiguous call names (see RunOutcome)."""
    text = RunText(report.assistant_texts, report.tool_calls)
    bare, named = text.bare_names, text.call_arms
    by_name: dict[str, list[str]] = {}
    out: dict[str, bool] = {}
    files: list[Arm] = []
    memories: dict[str, str] = {}
    tool, section, skill, memory = ArmType.TOOL, ArmType.SECTION, ArmType.SKILL, ArmType.MEMORY
    for item in report.arms:
        if not item.included and not item.loaded:
            continue
        arm = item.arm
        kind = arm.type
        if kind is tool:
            # the arm a call names; else the tool of a bare call name (ambiguity: below)
            if arm.name in bare:
                by_name.setdefault(arm.name, []).append(arm.id)
                out[arm.id] = True
            else:
                out[arm.id] = bool(named) and arm.id in named
        elif kind is section:
            out[arm.id] = True
        elif kind is skill:
            out[arm.id] = text.mentions_word(arm.category)
        elif kind is memory:
            out[arm.id] = False
            if arm.content is not None:
                memories[arm.id] = arm.content
        else:
            out[arm.id] = False
            files.append(arm)
    if memories:
        for arm_id in text.memories_used(memories):
            out[arm_id] = True
    if files:
        counts = _file_base_counts(files)
        for arm in files:
            out[arm.id] = _references(arm, text, counts)
    # A bare name several of the run's tools share credits none of them (a user reading the
    # run could not tell which was meant either); a call naming one still credits it.
    ambiguous: dict[str, tuple[str, ...]] = {}
    for name, ids in by_name.items():
        if len(ids) > 1:
            ambiguous[name] = tuple(ids)
            for arm_id in ids:
                out[arm_id] = arm_id in named
    return out, ambiguous


def rewards_for_run(report: RunReport, config: LearningConfig) -> RunOutcome:
    """Apply the observation guard, then reward 1.0 per referenced and 0.0 per unreferenced
    included arm; excluded arms get nothing, nor do the arms an ambiguous call name could
    mean (unless another call named them)."""
    referenced, ambiguous = _referenced(report)
    skipped = observation_guard(report, config)
    if skipped is not None:
        return RunOutcome(referenced, {}, skipped, ambiguous)
    rewards = {arm_id: 1.0 if hit else 0.0 for arm_id, hit in referenced.items()}
    for ids in ambiguous.values():  # which one was called cannot be told: neither learns
        for arm_id in ids:
            if not referenced[arm_id]:
                del rewards[arm_id]
    return RunOutcome(referenced, rewards, None, ambiguous)
