"""The service's recall target where the provider has tool search: a baseline session's uses
are recorded at the thresholds above which the session's own searches, replayed on its turns'
messages, would have offered them, and the search is priced from what the runs report; without
tool search, or on a turn without a message, a use is recorded at its own level as before."""

from __future__ import annotations

import math
from pathlib import Path

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.cost import ANTHROPIC
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.recall_target import (
    SEARCH_CALL_TOKENS,
    SEARCH_RESULT_TOKENS,
    SEARCH_TOP,
    RecordedUse,
    SearchPricing,
)
from learning_bot.engine.service import LearningService
from learning_bot.engine.usage import Usage
from learning_bot.storage import SqlStore

FILLERS = [
    Arm(f"tool:t:{name}", 100, description=words)
    for name, words in (
        ("read_file", "open a file from disk"),
        ("write_file", "save a file to disk"),
        ("list_dir", "show folder entries"),
        ("run_shell", "execute a command line"),
        ("fetch_url", "download a web page"),
        ("send_mail", "deliver an email message"),
    )
]
TRANSLATE = Arm("tool:t:translate", 2_000, description="translate text into french")
CURRENCY = Arm("tool:t:currency", 1_500, description="currency exchange rate")
ARMS = [*FILLERS, TRANSLATE, CURRENCY]
BASELINE_PROMPT = 50_000
"""What a baseline session's request reads (every tool): not what a search re-reads."""


def service(tmp_path: Path, provider: str) -> LearningService:
    config = LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=0,
        baseline_rate=1.0,
        token_budget=sum(a.token_cost for a in ARMS),
        recall_target=0.9,
        provider=provider,
    )
    store = SqlStore(f"sqlite:///{tmp_path}/{provider}.sqlite")
    return LearningService(store, config, rng=3, cache_ttl=60, learner="target")


def turn(
    learner: LearningService, key: str, n: int, used: Arm, message: str | None, prompt: int
) -> None:
    learner.observe(
        RunReport(
            trace_id=f"{key}-{n}",
            session_key=key,
            arms=tuple(ReportedArm(a, True) for a in ARMS),
            tool_calls=(ToolCall(used.name),),
            context={} if message is None else {"message": message},
            usage=Usage(input=prompt),
        )
    )


def baseline_session(
    learner: LearningService, runtime: dict[str, str] | None = None
) -> list[RecordedUse]:
    """A baseline session whose first turn asks for a translation and a rate and uses the
    translation tool, whose second uses the rate tool without naming it, and whose third,
    without a message, uses the translation tool again: the uses it recorded. `runtime`: the
    provider and model the select names."""
    first = "please translate this note and look up the currency exchange rate"
    context = {"session_key": "s", "message": first, **(runtime or {})}
    chosen = learner.select(ArmSet.of(ARMS), context)
    assert chosen.is_baseline and len(chosen.selected) == len(ARMS)
    turn(learner, "s", 1, TRANSLATE, first, BASELINE_PROMPT)
    turn(learner, "s", 2, CURRENCY, "thanks, now the other one", BASELINE_PROMPT)
    turn(learner, "s", 3, TRANSLATE, None, BASELINE_PROMPT)
    return learner._selector.target_levels.calibration.recorded()


def test_with_tool_search_a_use_is_recorded_where_the_sessions_searches_offer_it(
    tmp_path: Path,
) -> None:
    # without tool search: each use at its own level, the search not priced
    for provider in ("openai", "bedrock"):
        learner = service(tmp_path, provider)
        uses = baseline_session(learner)
        own, other = uses[0].level, uses[1].level
        # the translation tool costs most: it ranks last, above the rate tool
        assert 0.0 < other < own < math.inf
        assert uses == [
            RecordedUse(own, own, "s"),
            RecordedUse(other, other, "s"),
            RecordedUse(own, own, "s"),
        ]
        assert learner._selector.target_levels.calibration.pricing is None

    learner = service(tmp_path, "anthropic")
    assert baseline_session(learner) == [
        # below its own level the translation tool is deferred: the turn searches for it (a
        # search charged at that level) and finds it, whatever the threshold
        RecordedUse(0.0, own, "s"),
        # the first turn's search loaded the rate tool too wherever it was deferred: the
        # second turn has it at every threshold and searches for nothing
        RecordedUse(0.0, 0.0, "s"),
        # a run without a message: the tool's own level, as without tool search
        RecordedUse(own, own, "s"),
    ]
    assert learner._selector.target_levels.calibration.pricing is not None


def test_with_tool_search_the_search_is_priced_from_the_runs_reported(tmp_path: Path) -> None:
    learner = service(tmp_path, "anthropic")
    baseline_session(learner)
    # a selected session's run: its request read 5,000 tokens
    turn(learner, "selected", 1, TRANSLATE, "translate", 5_000)
    learner.select(ArmSet.of(ARMS), {"session_key": "next", "message": "hello"})
    pricing = learner._selector.target_levels.calibration.pricing
    mean_cost = sum(a.token_cost for a in ARMS) / len(ARMS)
    # two sessions of 3 and 1 turns; a search re-reads the selected session's prompt, not the
    # baseline session's (every tool)
    assert pricing == SearchPricing.of(
        ANTHROPIC, 2.0, 5_000.0, SEARCH_RESULT_TOKENS + SEARCH_TOP * mean_cost, SEARCH_CALL_TOKENS
    )


ANTHROPIC_RUNTIME = {"provider": "anthropic", "model": "claude-sonnet-4-5"}


def test_the_provider_a_request_names_decides_whether_the_search_is_replayed_and_priced(
    tmp_path: Path,
) -> None:
    """A learner set up without a provider, whose runtime names Anthropic on each select (as
    OpenClaw's gateway and a select's context do): its calibration replays and prices the
    search as a learner set up for Anthropic does; a select naming a provider without tool
    search prices none, whatever the learner's."""
    reference = baseline_session(service(tmp_path, "anthropic"))
    learner = service(tmp_path, "")
    assert baseline_session(learner, ANTHROPIC_RUNTIME) == reference
    calibration = learner._selector.target_levels.calibration
    assert calibration.pricing is not None
    learner.select(ArmSet.of(ARMS), {"message": "hello", "provider": "openai", "model": "gpt-4.1"})
    assert calibration.pricing is None
    learner.select(ArmSet.of(ARMS), {"message": "hello", **ANTHROPIC_RUNTIME})
    assert calibration.pricing is not None

    gateway = service(tmp_path / "gateway", "")
    first = "please translate this note and look up the currency exchange rate"
    selection, _ = gateway.select_run(
        ARMS, {"message": first}, session_key="g", **ANTHROPIC_RUNTIME
    )
    assert selection.is_baseline
    assert gateway._selector.target_levels.calibration.pricing is not None


def test_before_a_selected_run_reports_its_prompt_a_search_is_priced_from_the_baseline_runs(
    tmp_path: Path,
) -> None:
    """Before any selected session reports its usage, a search re-reads what a baseline
    session's request read beside the tools it offered (its reported prompt less every tool's
    tokens: the system prompt and the conversation), not nothing."""
    learner = service(tmp_path, "anthropic")
    baseline_session(learner)
    learner.select(ArmSet.of(ARMS), {"session_key": "next", "message": "hello"})
    pricing = learner._selector.target_levels.calibration.pricing
    mean_cost = sum(a.token_cost for a in ARMS) / len(ARMS)
    rest = BASELINE_PROMPT - sum(a.token_cost for a in ARMS)
    # one session of 3 turns; no selected set yet: the rest of the request alone
    assert pricing == SearchPricing.of(
        ANTHROPIC, 3.0, float(rest), SEARCH_RESULT_TOKENS + SEARCH_TOP * mean_cost,
        SEARCH_CALL_TOKENS,
    )  # fmt: skip
