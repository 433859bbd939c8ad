"""Multi-turn sessions priced through a provider's prompt cache (README, "Sessions and cost").

A session is a conversation of several turns; each turn sends one prompt: the tool definitions
in the order chosen, the system prompt, the conversation so far and the new message
(Anthropic's order: tools, system, messages). The prompt cache (engine.prompt_cache) bills each
prompt as uncached input, cache reads and cache writes, and engine.cost prices them, so a
policy that changes the tool set between turns pays for the cache misses it causes.

Policies (`TurnPolicy`) choose each turn's tools and learn from what the turn used:
`EveryArm` (the full prompt), `OracleArms` (the knapsack of the true usage probabilities,
research.simulation.oracle_mask), `ThompsonArms` (select_arms on posterior arrays, a new draw and
baseline coin on every request) and `SessionStable` around any of them (the first turn's set
and order kept for the session, the baseline coin tossed once per session; an arm a turn
needed but lacked joins the tools at their end for the next turn, is loaded into the
conversation, or stays out: `Missing`). `ServiceTurns` asks a real LearningService, per
request or naming the session, and observes every turn. `run_sessions` drives one policy
through the sessions of `draw_sessions` and reports per-session cost, tokens and recall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from learning_bot.engine.arms import ArmType
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.cost import ANTHROPIC, TokenPrices, output_cost, prompt_cost
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.forgetting import keep_factor
from learning_bot.engine.inventory import ArmSet, BoolArray, FloatArray, IntArray, PosteriorArrays
from learning_bot.engine.observation import ToolCall
from learning_bot.engine.prompt_cache import Block, PromptCache
from learning_bot.engine.selection import select_arms
from learning_bot.engine.usage import Usage
from learning_bot.research.simulation import Workload, observe_arrays, oracle_mask

if TYPE_CHECKING:
    from learning_bot.engine.selection import Selection
    from learning_bot.engine.service import LearningService


@dataclass(frozen=True)
class Session:
    """One conversation: when each turn comes and what each turn would use."""

    key: str
    times: FloatArray
    """Seconds at which each turn's request is sent (the first is the session's start)."""
    conversational: BoolArray
    """conversational[turn]: the turn calls no tool and uses no arm."""
    used: BoolArray
    """used[turn, arm]: the arms the turn would use if they were offered."""

    @property
    def turns(self) -> int:
        return len(self.times)


@dataclass(frozen=True)
class SessionShape:
    """The parts of a prompt beside the tools, and how the sessions are drawn."""

    mean_turns: float = 8.0
    """Turns per session: geometric with this mean (at least one)."""
    history_tokens: int = 2_500
    """What each turn adds to the conversation: its message plus the reply and tool results."""
    message_tokens: int = 100
    """The new user message (part of history_tokens once answered)."""
    system_tokens: int = 1_200
    output_tokens: int = 300
    mean_gap_seconds: float = 60.0
    """Gaps between turns inside the cache window: exponential with this mean."""
    long_gap_rate: float = 0.1
    """Share of gaps of 5 to 60 minutes: the user came back after the cache expired."""
    session_gap_seconds: float = 3_600.0
    """Time between the end of a session and the start of the next."""

    def __post_init__(self) -> None:
        if not self.mean_turns >= 1:
            raise InvalidInput(f"mean_turns must be >= 1, got {self.mean_turns!r}")
        if not 0 <= self.message_tokens <= self.history_tokens:
            raise InvalidInput("message_tokens must be from 0 to history_tokens")
        if min(self.system_tokens, self.output_tokens) < 0 or self.mean_gap_seconds < 0:
            raise InvalidInput("token counts and gaps must be >= 0")
        if not 0 <= self.long_gap_rate <= 1:
            raise InvalidInput(f"long_gap_rate must be in [0, 1], got {self.long_gap_rate!r}")

    def blocks(
        self,
        tools: Sequence[Block],
        turn: int,
        loaded: Mapping[int, Sequence[Block]] | None = None,
        searched: Mapping[int, Sequence[Block]] | None = None,
    ) -> list[Block]:
        """The prompt of a session's turn: tools, system, earlier turns, the new message;
        `loaded[k]`: tool definitions loaded into the conversation after turn k's reply;
        `searched[k]`: a tool search turn k ran (its call, result and loaded definitions),
        which sits between turn k's message and its reply, where the runtime put it."""
        reply = self.history_tokens - self.message_tokens
        out = [*tools, Block("system", self.system_tokens)]
        for k in range(turn):
            out.append(Block(f"message:{k}", self.message_tokens))
            if searched and k in searched:
                out += searched[k]
            out.append(Block(f"reply:{k}", reply))
            if loaded and k in loaded:
                out += loaded[k]
        out.append(Block(f"message:{turn}", self.message_tokens))
        return out


def draw_sessions(
    workload: Workload,
    count: int,
    rng: np.random.Generator,
    shape: SessionShape | None = None,
    *,
    start: float = 0.0,
) -> list[Session]:
    """`count` sessions one after another, their usage drawn by `Workload.draw_run` (each turn
    independently, with the workload's conversational rate)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidInput(f"count must be a whole number >= 0, got {count!r}")
    shape = shape or SessionShape()
    sessions = []
    at = start
    for s in range(count):
        turns = int(rng.geometric(1.0 / shape.mean_turns))
        gaps = rng.exponential(shape.mean_gap_seconds, size=max(0, turns - 1))
        long = rng.random(len(gaps)) < shape.long_gap_rate
        gaps[long] = rng.uniform(300.0, 3_600.0, size=int(long.sum()))
        times = at + np.concatenate(([0.0], np.cumsum(gaps)))
        conversational, used = workload.draw_run(turns, rng)
        sessions.append(Session(f"session-{s}", times, conversational, used))
        at = float(times[-1]) + shape.session_gap_seconds
    return sessions


class TurnPolicy(Protocol):
    """Chooses each turn's arms and learns from what the turn used."""

    def choose(self, session: Session, turn: int) -> list[int]:
        """Positions of the arms of this turn's prompt, in prompt order."""
        ...

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        """The turn ran with `included`; `session.used[turn]` says what it used, `usage` what
        its prompt was billed for."""
        ...

    def is_baseline(self) -> bool:
        """Whether the last choice was a baseline run (every arm offered)."""
        ...

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        """Arms loaded into the session's conversation so far, by the turn after whose reply
        they were loaded (a runtime with tool search); most policies load none."""
        ...


class FixedArms:
    """The same arms on every turn, learning nothing: a policy to compare against."""

    def __init__(self, arms: Sequence[int]) -> None:
        self._set = list(arms)

    def choose(self, session: Session, turn: int) -> list[int]:
        return list(self._set)

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        return None

    def is_baseline(self) -> bool:
        return False

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        return {}


class EveryArm(FixedArms):
    """Every arm on every turn, in inventory order: the full prompt."""

    def __init__(self, arms: int) -> None:
        super().__init__(range(arms))


class OracleArms(FixedArms):
    """The set that maximises the expected used arms under the budget, knowing every arm's
    usage probability (seeds in, as for every policy); the same set on every turn."""

    def __init__(self, workload: Workload, config: LearningConfig) -> None:
        arm_set = ArmSet(workload.arms)
        forced = np.isin(np.array(arm_set.ids), np.array(config.seed_arm_ids))
        mask, _ = oracle_mask(workload.usefulness, workload.costs, config.token_budget, forced)
        super().__init__([int(i) for i in np.flatnonzero(mask)])


class ThompsonArms:
    """`select_arms` on posterior arrays, a new draw (and baseline coin) on every call, the
    arrays updated after every working turn as the service updates stored posteriors."""

    def __init__(
        self, workload: Workload, config: LearningConfig, rng: np.random.Generator
    ) -> None:
        self.arm_set = ArmSet(workload.arms)
        self.config = config
        self.rng = rng
        self.post = PosteriorArrays(
            np.array(self.arm_set.prior_alpha, dtype=np.float64),
            np.array(self.arm_set.prior_beta, dtype=np.float64),
            np.zeros(len(workload.arms), dtype=np.int64),
        )
        self.keep = keep_factor(config.half_life or None)
        self._target_alpha = self.post.alpha * (1.0 - self.keep)
        self._target_beta = self.post.beta * (1.0 - self.keep)
        self._baseline = False

    def choose(self, session: Session, turn: int) -> list[int]:
        selection = select_arms(self.arm_set, self.post, self.config, self.rng)
        self._baseline = selection.is_baseline
        return [int(i) for i in np.flatnonzero(selection.mask)]

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        if session.conversational[turn]:
            return
        mask = np.zeros(len(self.arm_set), dtype=bool)
        mask[list(included)] = True
        used = session.used[turn]
        observe_arrays(self.post, mask, used, self.keep, self._target_alpha, self._target_beta)

    def is_baseline(self) -> bool:
        return self._baseline

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        return {}


Missing = Literal["append", "load", "never"]
"""What happens to an arm a session's turn needed but lacked: "append" adds it to the end of
the tool definitions for the next turns (everything after the tools, the whole conversation
included, is then written to the cache again); "load" puts its definition into the
conversation after that turn's reply, as a runtime with tool search loads a deferred tool (only
the new definition is written); "never" leaves it out for the rest of the session."""


class SessionStable:
    """A policy asked once per session: its first choice, in its order, for every turn of the
    session (so the baseline coin is tossed once per session); an arm a turn needed but lacked
    is handled as `missing` says (the service appends it to the tools). Every turn is observed
    by the inner policy."""

    def __init__(self, inner: TurnPolicy, missing: Missing = "append") -> None:
        if missing not in ("append", "load", "never"):
            raise InvalidInput(f"missing must be append, load or never, got {missing!r}")
        self.inner = inner
        self.missing = missing
        self._key = ""
        self._order: list[int] = []
        self._loaded: dict[int, list[int]] = {}
        self._baseline = False

    def choose(self, session: Session, turn: int) -> list[int]:
        if session.key != self._key or turn == 0:
            self._key = session.key
            self._order = list(self.inner.choose(session, turn))
            self._loaded = {}
            self._baseline = self.inner.is_baseline()
        return list(self._order)

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        self.inner.observe(session, turn, included, usage)
        if session.conversational[turn] or self.missing == "never":
            return
        have = set(included)
        lacked = [int(i) for i in np.flatnonzero(session.used[turn]) if int(i) not in have]
        if self.missing == "append":
            self._order += lacked
        elif lacked:
            self._loaded[turn] = lacked

    def is_baseline(self) -> bool:
        return self._baseline

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        return self._loaded if session.key == self._key else {}


class SimulatedClock:
    """The time a simulation is at, in milliseconds since the epoch: a LearningService's
    `wall_clock`, so session idle windows are counted in the sessions' own time."""

    def __init__(self, ms: int = 0) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


class ServiceTurns:
    """A TurnPolicy backed by a LearningService: each turn is `service.select`, naming the
    session when `per_session` (the service keeps a session's set), and `service.observe` of
    the turn's run report with its prompt-cache usage and the session key. The simulated model
    asks for a used tool the prompt lacked (a tool call of its name), so the service can grow
    the session's set; with `load`, the runtime also loads such a tool into the conversation
    after the turn's reply, as a runtime with tool search does. Tools a select lists as `added`
    are sent the same way, as a mid-conversation addition. `clock` (the service's wall clock)
    follows the turns."""

    def __init__(
        self,
        service: LearningService,
        workload: Workload,
        clock: SimulatedClock,
        *,
        start_ms: int,
        per_session: bool,
        load: bool = False,
        provider: str = "anthropic",
        model: str = "claude",
        trace_prefix: str = "",
    ) -> None:
        self.service = service
        self.workload = workload
        self.arm_set = ArmSet(workload.arms)
        self.position = {arm.id: i for i, arm in enumerate(workload.arms)}
        self.clock = clock
        self.start_ms = start_ms
        self.per_session = per_session
        self.load = load
        self.provider = provider
        self.model = model
        self.trace_prefix = trace_prefix
        self.selection: Selection | None = None
        self._key = ""
        self._loaded: dict[int, list[int]] = {}

    def _at(self, session: Session, turn: int) -> int:
        return self.start_ms + int(session.times[turn] * 1000)

    def choose(self, session: Session, turn: int) -> list[int]:
        self.clock.ms = self._at(session, turn)
        if session.key != self._key:
            self._key = session.key
            self._loaded = {}
        context = {"session_key": session.key} if self.per_session else None
        self.selection = self.service.select(self.arm_set, context)
        if self.selection.added and turn > 0:
            # tools the session took on apart from its cached prefix are sent as a
            # mid-conversation addition: in the conversation, after the previous turn
            known = {i for arms in self._loaded.values() for i in arms}
            joining = [self.position[a] for a in self.selection.added]
            joining = [i for i in joining if i not in known]
            if joining:
                self._loaded.setdefault(turn - 1, []).extend(joining)
        return [self.position[arm_id] for arm_id in self.selection.selected]

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        arms = self.workload.arms
        have = set(included)
        lacked = (
            [int(i) for i in np.flatnonzero(session.used[turn]) if int(i) not in have]
            if not session.conversational[turn]
            else []
        )
        report = self.workload.report(
            f"{self.trace_prefix}{session.key}-{turn}",
            [arms[i].id for i in included],
            session.used[turn],
            bool(session.conversational[turn]),
            is_baseline=self.is_baseline(),
            conversation=session.key,
            timestamp=self._at(session, turn),
        )
        asked = tuple(ToolCall(arms[i].name) for i in lacked if arms[i].type is ArmType.TOOL)
        self.service.observe(
            replace(
                report,
                usage=usage,
                provider=self.provider,
                model=self.model,
                tool_calls=report.tool_calls + asked,
            )
        )
        if self.load and lacked:
            self._loaded[turn] = lacked

    def is_baseline(self) -> bool:
        return self.selection is not None and self.selection.is_baseline

    def loaded(self, session: Session) -> Mapping[int, Sequence[int]]:
        return self._loaded if session.key == self._key else {}


def true_saving(selected: SessionRun, full: SessionRun) -> float | None:
    """The simulator's own prompt-cost saving, in percent, of `selected`'s non-baseline
    sessions against the same sessions sent with every arm (`full`, e.g. EveryArm's run):
    what the measured saving (engine.savings) estimates. None without such sessions."""
    chosen = ~selected.baseline
    reference = float(full.prompt_cost[chosen].sum())
    if not reference:
        return None
    return 100.0 * (1.0 - float(selected.prompt_cost[chosen].sum()) / reference)


@dataclass(frozen=True)
class SessionRun:
    """Per-session figures of one policy over a list of sessions."""

    prompt_cost: FloatArray
    """Prompt cost in input-token units (engine.cost.prompt_cost), summed over the turns."""
    output_cost: FloatArray
    prompt_tokens: IntArray
    """Every prompt token sent (uncached, read and written), summed over the turns."""
    tool_tokens: IntArray
    """The tool definitions' share of prompt_tokens."""
    used: IntArray
    """Arms the working turns used (offered or not)."""
    kept: IntArray
    """Of those, the arms the turn's prompt had."""
    turns: IntArray
    baseline: BoolArray
    """Whether the session's first turn was a baseline run."""

    @property
    def recall(self) -> float:
        """Share of the arms the turns used that their prompts had (1.0 when none was used)."""
        used = int(self.used.sum())
        return float(self.kept.sum()) / used if used else 1.0


def run_sessions(
    workload: Workload,
    sessions: Sequence[Session],
    policy: TurnPolicy,
    *,
    shape: SessionShape | None = None,
    prices: TokenPrices = ANTHROPIC,
    ttl_seconds: float = 300.0,
    caching: bool = True,
) -> SessionRun:
    """Drive `policy` through the sessions turn by turn: choose, send the prompt through a
    prompt cache (`caching` False: every token uncached input), price it, observe. Sessions
    run in order, so the policy learns as it goes."""
    shape = shape or SessionShape()
    cache = PromptCache(ttl_seconds=ttl_seconds, enabled=caching)
    blocks = [Block(arm.id, arm.token_cost) for arm in workload.arms]
    costs = workload.costs
    n = len(sessions)
    out_prompt = np.zeros(n)
    out_output = np.zeros(n)
    tokens = np.zeros(n, dtype=np.int64)
    tool_tokens = np.zeros(n, dtype=np.int64)
    used_n = np.zeros(n, dtype=np.int64)
    kept_n = np.zeros(n, dtype=np.int64)
    turns = np.zeros(n, dtype=np.int64)
    baseline = np.zeros(n, dtype=bool)
    for s, session in enumerate(sessions):
        for turn in range(session.turns):
            head = policy.choose(session, turn)
            if turn == 0:
                baseline[s] = policy.is_baseline()
            loaded = {k: arms for k, arms in policy.loaded(session).items() if k < turn}
            order = head + [i for k in sorted(loaded) for i in loaded[k]]
            prompt = shape.blocks(
                [blocks[i] for i in head],
                turn,
                {k: [blocks[i] for i in arms] for k, arms in loaded.items()},
            )
            usage = cache.request(session.key, float(session.times[turn]), prompt)
            usage = Usage(
                input=usage.input,
                output=shape.output_tokens,
                cache_read=usage.cache_read,
                cache_write=usage.cache_write,
            )
            out_prompt[s] += prompt_cost(usage, prices)
            out_output[s] += output_cost(usage, prices)
            tokens[s] += usage.input + usage.cache_read + usage.cache_write
            tool_tokens[s] += int(costs[order].sum()) if order else 0
            if not session.conversational[turn]:
                used = session.used[turn]
                used_n[s] += int(used.sum())
                kept_n[s] += int(used[order].sum()) if order else 0
            policy.observe(session, turn, order, usage)
        cache.forget(session.key)
        turns[s] = session.turns
    return SessionRun(out_prompt, out_output, tokens, tool_tokens, used_n, kept_n, turns, baseline)
